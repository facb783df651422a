"""Binary rolls from a discrete hidden Markov model: a known-truth source for binary sequence models.

A hidden state ``s_t`` in ``{0, ..., N-1}`` starts uniform and stays put with probability
``persistence``, else jumps to one of the other ``N - 1`` states uniformly. Each state has a
chord: a random set of about a third of the ``D`` keys (drawn once from ``source_seed``). Given
the state, the keys sound independently,

    p(x_{t,k} = 1 | s_t) = sigmoid(+sharpness)  if k is in the chord of s_t,
                           sigmoid(-sharpness)  otherwise,

so ``sharpness`` sets how clearly a step reveals its state. :class:`RollHMM` scores data exactly by
the forward algorithm (:func:`ppl_models.inference.hmm.forward_filter`): the truth a trained model's bound is
measured against, in nats per step.
"""

from __future__ import annotations

import torch

from ppl_models.inference.hmm import forward_filter
from ppl_models.inference.validation import check_positive_int, check_sequences

from ..data import ExperimentData, sample_splits

__all__ = ["RollHMM", "hmm_rolls"]

CHORD_DENSITY = 1 / 3


class RollHMM:
    """The source's parameters, sampler and exact filter.

    Args:
        num_states: ``N``; num_keys: ``D``, the width of a roll; persistence: probability in
        ``[0, 1]`` of staying in the same state; sharpness: ``> 0``, the emission logit's size;
        source_seed: seed of the chords.
    """

    def __init__(
        self,
        num_states: int = 4,
        num_keys: int = 8,
        persistence: float = 0.9,
        sharpness: float = 2.0,
        source_seed: int = 0,
    ):
        self.num_states = check_positive_int(num_states, name="num_states")
        self.num_keys = check_positive_int(num_keys, name="num_keys")
        if isinstance(persistence, bool) or not isinstance(persistence, (int, float)) or not 0 <= persistence <= 1:
            raise ValueError(f"persistence must be a number in [0, 1], got {persistence!r}")
        if isinstance(sharpness, bool) or not isinstance(sharpness, (int, float)) or not sharpness > 0:
            raise ValueError(f"sharpness must be a number > 0, got {sharpness!r}")
        self.persistence, self.sharpness = float(persistence), float(sharpness)
        generator = torch.Generator().manual_seed(source_seed)
        chords = torch.rand(num_states, num_keys, generator=generator, dtype=torch.float64) < CHORD_DENSITY
        #: ``[N, D]`` probability of each key sounding in each state
        self.key_probs = torch.sigmoid(sharpness * (2 * chords.double() - 1))
        eye = torch.eye(num_states, dtype=torch.float64)
        jump = (1 - eye) / (num_states - 1) if num_states > 1 else eye
        #: ``[N, N]`` row-stochastic transition matrix
        self.transition = self.persistence * eye + (1 - self.persistence) * jump
        self.initial = torch.full((num_states,), 1 / num_states, dtype=torch.float64)

    def to(self, device) -> RollHMM:
        """Self; the filter runs in double precision on the CPU."""
        return self

    def sample(self, num_sequences: int, num_steps: int, generator: torch.Generator) -> torch.Tensor:
        """``[num_sequences, num_steps, D]`` binary rolls (float32)."""
        states = torch.multinomial(self.initial, num_sequences, replacement=True, generator=generator)
        path = []
        for _ in range(num_steps):
            path.append(states)
            states = torch.multinomial(self.transition[states], 1, generator=generator).squeeze(-1)
        probs = self.key_probs[torch.stack(path, 1)]
        return (torch.rand(probs.shape, generator=generator, dtype=torch.float64) < probs).float()

    def log_emission(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, N]`` log ``p(x_t | s_t = j)`` of rolls ``x [B, T, D]``."""
        x = x.double()
        return x @ self.key_probs.log().T + (1 - x) @ (-self.key_probs).log1p().T

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x)`` per sequence ``[B]`` of rolls ``x [B, T, D]`` (forward algorithm)."""
        x, mask = check_sequences(x, mask)
        if x.shape[-1] != self.num_keys:
            raise ValueError(f"x must have {self.num_keys} keys (last dimension), got {x.shape[-1]}")
        log_steps, _ = forward_filter(self.log_emission(x), self.initial, self.transition, mask)
        return log_steps.sum(1).to(x.dtype)


def hmm_rolls(
    num_states: int = 4,
    num_keys: int = 8,
    persistence: float = 0.9,
    sharpness: float = 2.0,
    num_train: int = 200,
    num_valid: int = 50,
    num_test: int = 100,
    num_steps: int = 30,
    seed: int = 0,
) -> ExperimentData:
    """Binary rolls ``[n, num_steps, num_keys]`` of a :class:`RollHMM` whose chords come from ``seed``.

    The sequences are drawn with ``seed`` too; the validation and test sets of one ``seed`` are the
    same whatever ``num_train``.
    """
    for name, value in (
        ("num_train", num_train),
        ("num_valid", num_valid),
        ("num_test", num_test),
        ("num_steps", num_steps),
    ):
        check_positive_int(value, name=name)
    source = RollHMM(num_states, num_keys, persistence, sharpness, source_seed=seed)
    splits = sample_splits(source, (num_train, num_valid, num_test), num_steps, first_seed=1000 + 3 * seed)
    description = (
        f"HMM rolls: {num_states} states, {num_keys} keys, persistence {persistence}, "
        f"sharpness {sharpness} ({num_train} training sequences of {num_steps} steps)"
    )
    return ExperimentData(*splits, description=description, truth=source, binary=True)

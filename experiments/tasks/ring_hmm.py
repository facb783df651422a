"""A nonlinear source with a known predictive-state dimension: a hidden Markov chain on a ring.

The hidden state ``s_t`` walks on ``N`` points of a ring: it stays with probability ``stay``
and moves one step clockwise otherwise. Each step emits a 2-D point near its place,

    x_t = (cos(2 pi s_t / N), sin(2 pi s_t / N)) + noise * eps_t,   eps_t ~ N(0, I).

The belief over ``s_t`` (``N`` numbers summing to 1) is a sufficient statistic of the past,
so the predictive-state dimension is ``N``; the emission is a nonlinear function of the
state, so no linear-Gaussian model is exact. :class:`RingHMM` computes the exact
log-likelihood and the exact one-step predictive means by the forward algorithm: the oracle
every learned model is measured against.
"""

from __future__ import annotations

import math

import torch

from ppl_models.inference.hmm import forward_filter
from ppl_models.inference.validation import check_positive_int, check_sequences

from ..data import ExperimentData, sample_splits

__all__ = ["RingHMM", "ring_hmm"]


class RingHMM:
    """The ring chain's exact filter.

    Args:
        num_states: ``N``; stay: probability of staying put; noise: emission standard deviation.
    """

    def __init__(self, num_states: int = 4, stay: float = 0.3, noise: float = 0.3):
        self.num_states = check_positive_int(num_states, name="num_states")
        if not 0 <= stay < 1:
            raise ValueError(f"stay must be in [0, 1), got {stay!r}")
        if not noise > 0:
            raise ValueError(f"noise must be > 0, got {noise!r}")
        self.stay, self.noise = float(stay), float(noise)
        angles = 2 * math.pi * torch.arange(num_states, dtype=torch.float64) / num_states
        self.places = torch.stack([angles.cos(), angles.sin()], -1)  # [N, 2]
        eye = torch.eye(num_states, dtype=torch.float64)
        self.transition = stay * eye + (1 - stay) * eye.roll(1, dims=1)  # row i: from state i

    def to(self, device) -> RingHMM:
        """Self; the filter runs in double precision on the CPU."""
        return self

    def sample(self, num_sequences: int, num_steps: int, generator: torch.Generator) -> torch.Tensor:
        """``[num_sequences, num_steps, 2]`` draws, the first state uniform."""
        states = torch.randint(self.num_states, (num_sequences,), generator=generator)
        path = []
        for _ in range(num_steps):
            path.append(states)
            move = torch.rand(num_sequences, generator=generator, dtype=torch.float64) >= self.stay
            states = (states + move.long()) % self.num_states
        places = self.places[torch.stack(path, 1)]
        return (places + self.noise * torch.randn(places.shape, generator=generator, dtype=torch.float64)).float()

    def _filter(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-step ``log p(x_t | x_<t) [B, T]`` and predictive means ``E[x_t | x_<t] [B, T, 2]``."""
        squared = ((x.double().unsqueeze(-2) - self.places) ** 2).sum(-1)  # [B, T, N]
        log_emission = -squared / (2 * self.noise**2) - math.log(2 * math.pi * self.noise**2)
        initial = torch.full((self.num_states,), 1 / self.num_states, dtype=torch.float64)
        log_steps, beliefs = forward_filter(log_emission, initial, self.transition, mask)
        return log_steps, beliefs @ self.places

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x)`` per sequence ``[B]`` (forward algorithm) of ``x [B, T, 2]``."""
        x, mask = check_sequences(x, mask)
        return self._filter(x, mask)[0].sum(1).to(x.dtype)

    def predictive_mean(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The exact one-step predictive means ``E[x_t | x_<t]`` ``[B, T, 2]``."""
        x, mask = check_sequences(x, mask)
        return self._filter(x, mask)[1].to(x.dtype)


def ring_hmm(
    num_train: int = 100,
    num_valid: int = 20,
    num_test: int = 50,
    num_steps: int = 50,
    num_states: int = 4,
    stay: float = 0.3,
    noise: float = 0.3,
    seed: int = 0,
) -> ExperimentData:
    """Sequences ``[n, num_steps, 2]`` of the ring chain (:class:`RingHMM`), drawn with ``seed``; not standardised.

    The validation and test sets of one ``seed`` are the same whatever ``num_train``.
    """
    for name, value in (
        ("num_train", num_train),
        ("num_valid", num_valid),
        ("num_test", num_test),
        ("num_steps", num_steps),
    ):
        check_positive_int(value, name=name)
    source = RingHMM(num_states, stay, noise)
    splits = sample_splits(source, (num_train, num_valid, num_test), num_steps, first_seed=3 * seed)
    return ExperimentData(
        *splits,
        description=f"ring HMM, {num_states} states, stay {stay}, noise {noise} "
        f"({num_train} training sequences of {num_steps} steps)",
        truth=source,
    )

"""A switching linear-Gaussian source: real-valued data whose exact likelihood we compute by enumeration.

A regime ``r_t`` in ``{0, ..., M-1}`` (uniform at ``t = 2``, then staying with probability
``persistence``, else jumping uniformly to another) picks the transition of a linear-Gaussian
state-space model::

    z_1 ~ N(0, P_0),   z_t = A_{r_t} z_{t-1} + w_t,   x_t = C z_t + v_t,

with ``w_t ~ N(0, Q)``, ``v_t ~ N(0, R)`` shared by the regimes. Given a regime path the data are
linear-Gaussian, so ``log p(x) = logsumexp_paths [log p(path) + log p(x | path)]`` with each term
from the project's Kalman filter (:meth:`ppl_models.LinearGaussianSSM.kalman_filter` with per-step
transitions). The ``M^(T-1)`` paths are enumerated, so the source is for short sequences
(at most :data:`MAX_PATHS` paths).
"""

from __future__ import annotations

import itertools
import math

import torch

from ppl_models.inference.validation import check_positive_int, check_sequences

from ..data import ExperimentData, sample_splits

__all__ = ["SwitchingLGSSM", "switching_lg", "MAX_PATHS"]

#: the largest number of regime paths the exact likelihood enumerates
MAX_PATHS = 4096
_PATH_CHUNK = 256


class SwitchingLGSSM:
    """The source's parameters, sampler and exact likelihood.

    Args:
        transitions: ``[M, Dz, Dz]`` matrices ``A_m``.
        C, Q, R, init_cov: as :class:`ppl_models.LinearGaussianSSM` (shared by the regimes).
        persistence: probability in ``[0, 1]`` that the regime stays the same from one step to the next.
    """

    def __init__(
        self,
        transitions: torch.Tensor,
        C: torch.Tensor,
        Q: torch.Tensor,
        R: torch.Tensor,
        init_cov: torch.Tensor,
        persistence: float = 0.9,
    ):
        from ppl_models import LinearGaussianSSM

        if not isinstance(transitions, torch.Tensor) or transitions.dim() != 3:
            shape = tuple(transitions.shape) if isinstance(transitions, torch.Tensor) else type(transitions).__name__
            raise ValueError(f"transitions must be a [M, Dz, Dz] tensor, got {shape}")
        if isinstance(persistence, bool) or not isinstance(persistence, (int, float)) or not 0 <= persistence <= 1:
            raise ValueError(f"persistence must be a number in [0, 1], got {persistence!r}")
        self.num_regimes = transitions.shape[0]
        self.transitions = transitions.double()
        self.persistence = float(persistence)
        #: the regime-free part (``C, Q, R, P_0``) and its Kalman filter; its ``A`` is regime 0's
        self.lgssm = LinearGaussianSSM(
            self.transitions[0], C.double(), Q.double(), R.double(), init_cov.double()
        ).requires_grad_(False)
        m = self.num_regimes
        eye = torch.eye(m, dtype=torch.float64)
        jump = (1 - eye) / (m - 1) if m > 1 else eye
        self.regime_transition = self.persistence * eye + (1 - self.persistence) * jump

    @classmethod
    def random(
        cls,
        num_regimes: int = 2,
        latent_dim: int = 2,
        obs_dim: int = 2,
        *,
        persistence: float = 0.9,
        spectral_radius: float = 0.95,
        transition_noise: float = 0.3,
        observation_noise: float = 0.3,
        generator: torch.Generator | None = None,
    ) -> SwitchingLGSSM:
        """Random stable transitions (spectral radius ``spectral_radius``), a shared ``C``, isotropic noises."""
        from ppl_models import LinearGaussianSSM

        check_positive_int(num_regimes, name="num_regimes")
        models = [
            LinearGaussianSSM.random(
                latent_dim,
                obs_dim,
                spectral_radius=spectral_radius,
                transition_noise=transition_noise,
                observation_noise=observation_noise,
                generator=generator,
            )
            for _ in range(num_regimes)
        ]
        first = models[0]
        return cls(
            torch.stack([m.A.detach() for m in models]),
            first.C.detach(),
            first.Q.detach(),
            first.R.detach(),
            first.init_cov,
            persistence,
        )

    def to(self, device) -> SwitchingLGSSM:
        """Self; the likelihood runs in double precision on the CPU."""
        return self

    def sample(self, num_sequences: int, num_steps: int, generator: torch.Generator) -> torch.Tensor:
        """``[num_sequences, num_steps, Dx]`` draws (float32)."""
        lgssm, dz, dx = self.lgssm, self.lgssm.latent_dim, self.lgssm.obs_dim

        def noise(size, tril):
            return torch.randn(num_sequences, size, generator=generator, dtype=torch.float64) @ tril.T

        regime = torch.randint(self.num_regimes, (num_sequences,), generator=generator)
        z = noise(dz, torch.linalg.cholesky(lgssm.init_cov))
        xs = []
        for t in range(num_steps):
            if t:
                z = (self.transitions[regime] @ z.unsqueeze(-1)).squeeze(-1) + noise(dz, lgssm.Q_tril)
                regime = torch.multinomial(self.regime_transition[regime], 1, generator=generator).squeeze(-1)
            xs.append(z @ lgssm.C.T + noise(dx, lgssm.R_tril))
        return torch.stack(xs, 1).float()

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x)`` per sequence ``[B]`` of ``x [B, T, Dx]``, by enumerating the regime paths."""
        x, mask = check_sequences(x, mask)
        steps = x.shape[1]
        if self.num_regimes ** max(steps - 1, 0) > MAX_PATHS:
            raise ValueError(
                f"x has {steps} steps: {self.num_regimes}^{steps - 1} regime paths exceed "
                f"MAX_PATHS={MAX_PATHS}; use shorter sequences"
            )
        paths = torch.tensor(
            list(itertools.product(range(self.num_regimes), repeat=steps - 1)), dtype=torch.long
        ).reshape(-1, steps - 1)  # [P, T-1]: regimes of steps 2..T
        log_prior = self._path_log_prior(paths).unsqueeze(1)  # [P, 1]
        terms = [self._path_log_likelihood(x.double(), mask, chunk) for chunk in paths.split(_PATH_CHUNK)]
        return (log_prior + torch.cat(terms)).logsumexp(0).to(x.dtype)

    def _path_log_prior(self, paths: torch.Tensor) -> torch.Tensor:
        """``[P]`` log-probability of each path of regimes ``paths [P, T-1]``.

        A shorter sequence ignores its path's tail; summed over the tails, the full paths'
        probabilities give its own path's, so one prior serves every length.
        """
        if paths.shape[1] == 0:
            return torch.zeros(1, dtype=torch.float64)
        log_moves = self.regime_transition.log()[paths[:, :-1], paths[:, 1:]]  # [P, T-2]
        return log_moves.sum(1) - math.log(self.num_regimes)

    def _path_log_likelihood(self, x: torch.Tensor, mask: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
        """``[P, B]`` Kalman ``log p(x | path)`` of every sequence under each path of ``paths [P, T-1]``."""
        num_paths, (batch, steps, dx) = paths.shape[0], x.shape
        first = paths.new_zeros(num_paths, 1)  # step 1 has no transition; regime 0 fills the slot
        matrices = self.transitions[torch.cat([first, paths], 1)]  # [P, T, Dz, Dz]
        matrices = (
            matrices.unsqueeze(1).expand(-1, batch, -1, -1, -1).reshape(num_paths * batch, steps, *matrices.shape[-2:])
        )
        repeated_x = x.expand(num_paths, -1, -1, -1).reshape(-1, steps, dx)
        repeated_mask = mask.expand(num_paths, -1, -1).reshape(-1, steps)
        result = self.lgssm.kalman_filter(repeated_x, repeated_mask, transitions=matrices)
        return result.log_likelihood.reshape(num_paths, batch)


def switching_lg(
    num_regimes: int = 2,
    latent_dim: int = 2,
    obs_dim: int = 2,
    persistence: float = 0.9,
    num_train: int = 200,
    num_valid: int = 50,
    num_test: int = 100,
    num_steps: int = 8,
    seed: int = 0,
) -> ExperimentData:
    """Sequences ``[n, num_steps, obs_dim]`` of a random :class:`SwitchingLGSSM` drawn with ``seed``; not standardised.

    The validation and test sets of one ``seed`` are the same whatever ``num_train``.
    """
    for name, value in (
        ("num_train", num_train),
        ("num_valid", num_valid),
        ("num_test", num_test),
        ("num_steps", num_steps),
    ):
        check_positive_int(value, name=name)
    if num_regimes ** (num_steps - 1) > MAX_PATHS:
        raise ValueError(
            f"num_steps={num_steps} with num_regimes={num_regimes} gives more than MAX_PATHS="
            f"{MAX_PATHS} regime paths to enumerate; use fewer steps or regimes"
        )
    source = SwitchingLGSSM.random(
        num_regimes, latent_dim, obs_dim, persistence=persistence, generator=torch.Generator().manual_seed(seed)
    )
    splits = sample_splits(source, (num_train, num_valid, num_test), num_steps, first_seed=2000 + 3 * seed)
    description = (
        f"switching LGSSM: {num_regimes} regimes, Dz={latent_dim}, Dx={obs_dim}, persistence "
        f"{persistence} ({num_train} training sequences of {num_steps} steps)"
    )
    return ExperimentData(*splits, description=description, truth=source)

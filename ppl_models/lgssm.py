"""Linear-Gaussian state-space model with exact Kalman filtering and smoothing.

    z_1 ~ N(0, P_0),   z_t = A z_{t-1} + w_t,  w_t ~ N(0, Q),
    x_t = C z_t + v_t,  v_t ~ N(0, R).

It is a baseline of the collection (the PSRNN paper compares with Kalman filters)
and the oracle of the engines' tests: :meth:`LinearGaussianSSM.log_likelihood`
is exact, so every SMC, ELBO and IWAE estimate can be held against it.

The guide (also the particle filter's proposal) is a learnable linear-Gaussian
filtering distribution ``q(z_t | z_{t-1}, x_t) = N(F z_{t-1} + G x_t + b, S S^T)``,
initialised to the locally optimal proposal ``p(z_t | z_{t-1}, x_t)`` of the
initial parameters (its ``F, G, b, S`` exist only with this proposal, the default).
``proposal="bootstrap"`` uses the transition instead, and
``proposal="exact"`` the exact posterior ``p(z_t | z_{t-1}, x_{t:T})`` of the current
parameters (a backward information filter), with which every draw's
``log p(x, z) - log q(z)`` is ``log p(x)``: Pyro's ELBO is then the exact log-likelihood.

The filtering and smoothing kernels are in :mod:`ppl_models.kalman_kernels` and :mod:`ppl_models.kalman_smoothing`;
the PSRNN paper's baseline started by two-stage regression, :class:`~ppl_models.two_stage_kalman.TwoStageKalmanFilter`,
in :mod:`ppl_models.two_stage_kalman`.
"""

from __future__ import annotations

import pyro.distributions as dist
import torch
from torch import nn
from torch.distributions import constraints, transform_to

from ppl_models.inference.defaults import METHOD_PARTICLES
from ppl_models.inference.protocol import (
    Generation,
    OneStepPredictive,
    check_num_samples,
    exact_predictive,
)
from ppl_models.inference.saturation import saturated_sum
from ppl_models.inference.state_space import MarkovStateSpace
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences, value_checks_enabled

from .distributions import MultivariateNormal, times_transpose
from .kalman_kernels import FilterRun, KalmanResult, at_rows, kalman_pass, report_indices
from .kalman_smoothing import exact_proposals, rts_smooth

__all__ = ["LinearGaussianSSM", "KalmanResult", "PROPOSALS"]

#: guides / particle proposals of :class:`LinearGaussianSSM`
PROPOSALS = ("learned", "bootstrap", "exact")

_to_tril = transform_to(constraints.lower_cholesky)


def _square(name, value, size=None):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != 2 or value.shape[0] != value.shape[1] or (size is not None and value.shape[0] != size):
        want = f"[{size}, {size}]" if size is not None else "square [n, n]"
        raise ValueError(f"{name} must have shape {want}, got {tuple(value.shape)}")
    if not value.is_floating_point() or not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must hold finite floating-point numbers")
    return value


def _covariance(name, value, size):
    _square(name, value, size)
    if not torch.allclose(value, value.T, atol=1e-6) or torch.linalg.cholesky_ex(value).info != 0:
        raise ValueError(f"{name} must be symmetric positive definite")
    return value


#: the learned guide's parameters, which only ``proposal="learned"`` has
_LEARNED_GUIDE = ("F", "G", "b", "S_raw")


def _without_learned_guide(module, state_dict, prefix, *args) -> None:
    """Load checkpoints written when every proposal kept the learned guide's (unused) parameters."""
    for name in _LEARNED_GUIDE:
        state_dict.pop(prefix + name, None)


class LinearGaussianSSM(MarkovStateSpace):
    """Linear-Gaussian SSM with learnable ``A, C, Q, R`` (``P_0`` fixed).

    Args:
        A: ``[Dz, Dz]`` transition matrix.
        C: ``[Dx, Dz]`` emission matrix.
        Q: ``[Dz, Dz]`` transition noise covariance.
        R: ``[Dx, Dx]`` observation noise covariance.
        init_cov: ``[Dz, Dz]`` covariance ``P_0`` of ``z_1`` (mean zero).
        proposal: ``"learned"`` (linear-Gaussian guide, default), ``"bootstrap"`` or ``"exact"``
            (the exact posterior of the current parameters: every ELBO and IWAE draw is the exact
            likelihood; the particle filter stays unbiased).

    Its one-step ``predictive`` is the exact Kalman predictive; ``generate`` continues a prefix
    from an exact draw of its filtering posterior; ``forecast`` uses the shared filter.
    """

    capabilities = frozenset({"programs", "exact", "latent", "particles", "predictive", "generate", "forecast"})
    limitations = {}
    description = "linear-Gaussian state-space model with exact Kalman likelihood (baseline, oracle)"

    def __init__(self, A, C, Q, R, init_cov, proposal: str = "learned"):
        super().__init__()
        _square("A", A)
        latent = A.shape[0]
        if not isinstance(C, torch.Tensor) or C.dim() != 2 or C.shape[1] != latent:
            shape = tuple(C.shape) if isinstance(C, torch.Tensor) else type(C).__name__
            raise ValueError(f"C must have shape [Dx, {latent}], got {shape}")
        obs = C.shape[0]
        _covariance("Q", Q, latent)
        _covariance("R", R, obs)
        _covariance("init_cov", init_cov, latent)
        self.proposal_kind = check_choice(proposal, PROPOSALS, name="proposal")
        self.latent_dim, self.obs_dim = latent, obs
        self.A = nn.Parameter(A.detach().clone())
        self.C = nn.Parameter(C.detach().clone())
        self.Q_raw = nn.Parameter(_to_tril.inv(torch.linalg.cholesky(Q)).detach().clone())
        self.R_raw = nn.Parameter(_to_tril.inv(torch.linalg.cholesky(R)).detach().clone())
        self.register_buffer("init_cov", init_cov.detach().clone())
        # the learned guide q(z_t | z_{t-1}, x_t) = N(F z_{t-1} + G x_t + b, S S^T), index 0 for t = 0; the
        # other proposals have no parameters of their own, so Pyro registers none for them
        if self.proposal_kind == "learned":
            self.F = nn.Parameter(torch.zeros(latent, latent, dtype=A.dtype))
            self.G = nn.Parameter(torch.zeros(2, latent, obs, dtype=A.dtype))
            self.b = nn.Parameter(torch.zeros(2, latent, dtype=A.dtype))
            self.S_raw = nn.Parameter(torch.zeros(2, latent, latent, dtype=A.dtype))
            self.reset_proposal()
        else:
            self.register_load_state_dict_pre_hook(_without_learned_guide)

    @classmethod
    def random(
        cls,
        latent_dim: int,
        obs_dim: int,
        *,
        spectral_radius: float = 0.9,
        transition_noise: float = 0.3,
        observation_noise: float = 0.5,
        generator: torch.Generator | None = None,
        proposal: str = "learned",
    ) -> LinearGaussianSSM:
        """A stable random model: ``A`` scaled to the given spectral radius, isotropic noises."""
        check_positive_int(latent_dim, name="latent_dim")
        check_positive_int(obs_dim, name="obs_dim")
        A = torch.randn(latent_dim, latent_dim, generator=generator)
        A = A * spectral_radius / torch.linalg.eigvals(A).abs().max()
        C = torch.randn(obs_dim, latent_dim, generator=generator) / latent_dim**0.5
        eye_z, eye_x = torch.eye(latent_dim), torch.eye(obs_dim)
        return cls(A, C, transition_noise**2 * eye_z, observation_noise**2 * eye_x, eye_z, proposal=proposal)

    # --- parameters ---------------------------------------------------------------
    @property
    def Q_tril(self) -> torch.Tensor:
        return _to_tril(self.Q_raw)

    @property
    def R_tril(self) -> torch.Tensor:
        return _to_tril(self.R_raw)

    @property
    def Q(self) -> torch.Tensor:
        return self.Q_tril @ self.Q_tril.T

    @property
    def R(self) -> torch.Tensor:
        return self.R_tril @ self.R_tril.T

    @torch.no_grad()
    def reset_proposal(self) -> None:
        """Set the learned guide to the locally optimal proposal ``p(z_t | z_{t-1}, x_t)`` of the current parameters.

        The other proposals have no parameters of their own (``"exact"`` follows the model by construction).
        """
        if self.proposal_kind != "learned":
            return
        C, R_inv = self.C, torch.linalg.inv(self.R)
        for i, prior_cov in enumerate((self.init_cov, self.Q)):
            cov = torch.linalg.inv(torch.linalg.inv(prior_cov) + C.T @ R_inv @ C)
            self.G[i] = cov @ C.T @ R_inv
            self.S_raw[i] = _to_tril.inv(torch.linalg.cholesky(cov))
            if i == 1:
                self.F.copy_(cov @ torch.linalg.inv(prior_cov) @ self.A)
        self.b.zero_()

    @torch.no_grad()
    def _assign(self, A, C, Q, R, init_cov) -> None:
        """Set ``A, C, Q, R`` and ``P_0`` (in the model's dtype) and reset the proposal."""
        dtype = self.A.dtype
        self.A.copy_(A.to(dtype))
        self.C.copy_(C.to(dtype))
        self.Q_raw.copy_(_to_tril.inv(torch.linalg.cholesky(Q)).to(dtype))
        self.R_raw.copy_(_to_tril.inv(torch.linalg.cholesky(R)).to(dtype))
        self.init_cov.copy_(init_cov.to(dtype))
        self.reset_proposal()

    # --- the mathematics ------------------------------------------------------------
    def context(self, x, mask):
        """The noise factors (and the exact proposal's moments), computed once per pass instead of at every step.

        The exact proposal's one factorisation check reads the device only while value checks are enabled
        (graph-safe).
        """
        init_tril = torch.linalg.cholesky_ex(self.init_cov).L  # positive definite: checked at construction
        context = {"init_tril": init_tril, "Q_tril": self.Q_tril, "R_tril": self.R_tril}
        if self.proposal_kind == "exact":
            context["exact"] = self._exact_proposals(x, mask)
        elif self.proposal_kind == "learned":
            context["S_tril"] = _to_tril(self.S_raw)
        return context

    def _exact_proposals(self, x, mask):
        """The exact proposals' moments ``(G [B, T, Dz, Dz], m [B, T, Dz], cholesky(V) [B, T, Dz, Dz])`` in ``x``'s
        dtype (:func:`~ppl_models.kalman_smoothing.exact_proposals`), refused where they are out of reach."""
        moments, failed = exact_proposals(self.A, self.C, self.Q_tril, self.R_tril, self.init_cov, x, mask)
        if value_checks_enabled():  # one device read: a factorisation failed, or a moment is NaN or inf
            finite = torch.stack([torch.isfinite(part).all() for part in moments])
            if bool(torch.stack(failed).ne(0).any() | ~finite.all()):
                self._refuse_exact_proposal()
        return moments

    def _refuse_exact_proposal(self):
        """One-line ``ValueError``: the exact posterior of the current parameters is out of reach."""
        if not all(bool(torch.isfinite(p).all()) for p in (self.A, self.C, self.Q_raw, self.R_raw)):
            cause = "A, C, Q or R holds NaN or inf (diverged training: lower the learning rate)"
        else:
            cause = (
                "the parameters are too ill-conditioned for floating point (Q, R or init_cov near singular "
                'against the others): rescale the data or use proposal="learned"'
            )
        raise ValueError(
            f"{type(self).__name__} proposal='exact': the posterior precision does not factorise or "
            f"its moments are not finite; {cause}"
        )

    def prior(self, z_prev, t, context):
        if z_prev is None:
            zero = self.init_cov.new_zeros(self.latent_dim)
            return MultivariateNormal(zero, scale_tril=context["init_tril"])
        return MultivariateNormal(times_transpose(z_prev, self.A), scale_tril=context["Q_tril"])

    def emission(self, z, t, context):
        return MultivariateNormal(times_transpose(z, self.C), scale_tril=context["R_tril"])

    def proposal(self, z_prev, t, x_t, context):
        if self.proposal_kind == "bootstrap":
            return None
        if self.proposal_kind == "exact":
            transition, offset, tril = (part[:, t] for part in context["exact"])
            loc = offset if z_prev is None else (transition @ z_prev.unsqueeze(-1)).squeeze(-1) + offset
            return MultivariateNormal(loc, scale_tril=tril)
        i = 0 if z_prev is None else 1
        loc = x_t @ self.G[i].T + self.b[i]
        if z_prev is not None:
            loc = loc + z_prev @ self.F.T
        return MultivariateNormal(loc, scale_tril=context["S_tril"][i])

    # --- exact inference ---------------------------------------------------------------
    def kalman_filter(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, *, transitions: torch.Tensor | None = None
    ) -> KalmanResult:
        """Exact filtering of ``x [B, T, Dx]`` (``mask [B, T]``, valid steps first).

        ``transitions``: optional ``[B, T, Dz, Dz]`` matrices ``A_t`` taking ``z_{t-1}`` to ``z_t``
        in place of ``A`` (entry ``t = 0`` unused), e.g. one path of a switching system.
        At a padded step the filtered moments stay those of the last valid step and the predicted and
        predictive ones are the prediction of the first padded step. Computed in float64, returned in ``x``'s dtype.
        """
        x, mask = check_sequences(x, mask, model=self)
        if transitions is not None and transitions.shape != (*x.shape[:2], self.latent_dim, self.latent_dim):
            raise ValueError(
                f"transitions must have shape {(*x.shape[:2], self.latent_dim, self.latent_dim)}, "
                f"got {tuple(transitions.shape)}"
            )
        run = self._filter(x, mask, transitions)
        held, ahead = report_indices(mask)
        filtered_means = torch.cat([run.means.new_zeros(x.shape[0], 1, self.latent_dim), run.means], 1)
        filtered_covs = torch.cat([run.init_cov.expand(len(run.covs.filtered), 1, -1, -1), run.covs.filtered], 1)
        moments = (
            at_rows(filtered_means, held),
            at_rows(filtered_covs, held),
            at_rows(run.predicted_means, ahead),
            at_rows(run.covs.predicted, ahead),
            at_rows(run.predictive_means, ahead),
            at_rows(run.covs.innovation, ahead),
        )
        ll, *moments = (part.to(x.dtype) for part in (run.steps, *moments))
        return KalmanResult(ll.sum(1), ll, *moments)

    def _filter(self, x: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor | None) -> FilterRun:
        """The Kalman filter of validated ``x [B, T, Dx]`` in float64, padding run through as if observed
        (:func:`~ppl_models.kalman_kernels.kalman_pass`)."""
        A, C, Q_tril, R_tril = self.A, self.C, self.Q_tril, self.R_tril
        return kalman_pass(x, mask, A, C, Q_tril, R_tril, self.init_cov, transitions, name=type(self).__name__)

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x_{1:T_b})`` per sequence, ``[B]`` (differentiable in the parameters).

        A step below the dtype's range is held at its lowest value, with a warning
        (:func:`ppl_models.inference.saturation.saturated_sum`).
        """
        x, mask = check_sequences(x, mask, model=self)
        steps = self._filter(x, mask, None).steps.to(x.dtype)  # 0 at padding
        return saturated_sum(steps, what=f"{type(self).__name__}'s log-density")

    def predictive_distribution(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Exact ``p(x_t | x_{<t})`` for every step: batch shape ``[B, T]``, event ``[Dx]``."""
        x, mask = check_sequences(x, mask, model=self)
        run, (_, ahead) = self._filter(x, mask, None), report_indices(mask)
        loc, tril = at_rows(run.predictive_means, ahead), at_rows(run.covs.innovation_tril, ahead)
        return dist.MultivariateNormal(loc.to(x.dtype), scale_tril=tril.to(x.dtype))

    @torch.no_grad()
    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """The exact Kalman one-step predictive (``num_particles`` and ``generator`` unused; torch's RNG draws)."""
        num_samples = check_num_samples(num_samples)
        x, mask = check_sequences(x, mask, model=self)
        exact = self.predictive_distribution(x, mask)
        samples = exact.sample((num_samples,)) if num_samples else None
        return exact_predictive(exact, x, mask, samples)

    @torch.no_grad()
    def generate(
        self,
        num_steps: int,
        *,
        num_sequences: int = 1,
        prefix: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """``num_steps`` steps from the model, from scratch or after ``prefix [B, P, Dx]``.

        A prefix is continued from an exact draw of ``p(z_P | x_{1:P})`` (Kalman filter). ``mean``
        holds ``C z_t``, the emission means of the drawn states (the prefix's values in its place).
        """
        check_positive_int(num_steps, name="num_steps")
        if prefix is None:
            x, z = self.sample(check_positive_int(num_sequences, name="num_sequences"), num_steps, generator=generator)
            return Generation(x, z @ self.C.T)
        prefix, _ = check_sequences(prefix, None, name="prefix", model=self)
        k = self.kalman_filter(prefix)
        chol = torch.linalg.cholesky(k.filtered_covs[:, -1])
        z = k.filtered_means[:, -1] + (
            chol @ self._noise(prefix.shape[0], self.latent_dim, generator).unsqueeze(-1)
        ).squeeze(-1)
        xs, means = [], []
        for _ in range(num_steps):
            z = z @ self.A.T + self._noise(prefix.shape[0], self.latent_dim, generator) @ self.Q_tril.T
            means.append(z @ self.C.T)
            xs.append(means[-1] + self._noise(prefix.shape[0], self.obs_dim, generator) @ self.R_tril.T)
        return Generation(torch.cat([prefix, torch.stack(xs, 1)], 1), torch.cat([prefix, torch.stack(means, 1)], 1))

    def _noise(self, rows: int, size: int, generator: torch.Generator | None) -> torch.Tensor:
        return torch.randn(rows, size, dtype=self.A.dtype, device=self.A.device, generator=generator)

    def smooth(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rauch-Tung-Striebel smoothing: means ``[B, T, Dz]`` and covariances ``[B, T, Dz, Dz]``."""
        x, mask = check_sequences(x, mask, model=self)
        return rts_smooth(self.A, self.kalman_filter(x, mask), mask)

    @torch.no_grad()
    def sample(
        self, num_sequences: int, num_steps: int, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``(x [B, T, Dx], z [B, T, Dz])`` from the model."""
        check_positive_int(num_sequences, name="num_sequences")
        check_positive_int(num_steps, name="num_steps")

        def noise(size):
            return self._noise(num_sequences, size, generator)

        z = noise(self.latent_dim) @ torch.linalg.cholesky(self.init_cov).T
        zs, xs = [], []
        for t in range(num_steps):
            if t > 0:
                z = z @ self.A.T + noise(self.latent_dim) @ self.Q_tril.T
            zs.append(z)
            xs.append(z @ self.C.T + noise(self.obs_dim) @ self.R_tril.T)
        return torch.stack(xs, 1), torch.stack(zs, 1)

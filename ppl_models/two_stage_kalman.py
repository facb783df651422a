"""The Kalman-filter baseline of the PSRNN paper: :class:`TwoStageKalmanFilter`, a linear-Gaussian state-space model
started by linear two-stage regression."""

from __future__ import annotations

import torch

from ppl_models.inference.validation import check_positive_int, check_sequences

from .lgssm import LinearGaussianSSM
from .spectral import linear_two_stage_regression

__all__ = ["TwoStageKalmanFilter"]


class TwoStageKalmanFilter(LinearGaussianSSM):
    """The Kalman-filter baseline of the PSRNN paper: an LGSSM started by two-stage regression.

    :meth:`initialize` sets ``A, C, Q, R`` and ``P_0`` from training data by
    :func:`~ppl_models.spectral.linear_two_stage_regression`: predictive states of a
    ``horizon``-step future from a ``horizon``-step history, projected to ``state_dim``, in
    innovations form, so the LGSSM's latent has ``state_dim + obs_dim`` entries. The exact
    likelihood can then refine every parameter by gradient.

    Its guide is by default the exact posterior of the current parameters (``proposal="exact"``),
    so an SVI loss (ELBO) is minus the exact log-likelihood and follows the model as it trains: the
    two-stage start has near-deterministic dynamics (noise covariances of ``1e-4`` of the data's
    variance), under which a learned guide that lags the model makes the ELBO explode.

    Args:
        obs_dim: ``Dx``; state_dim: ``S``; horizon: ``k``; ridge: per-example ridge penalty;
        proposal: the guide and particle proposal, as :class:`LinearGaussianSSM`'s.
    """

    description = (
        "Kalman filter started by linear two-stage regression (the PSRNN paper's KF baseline), exact likelihood"
    )

    def __init__(
        self, obs_dim: int, *, state_dim: int = 20, horizon: int = 10, ridge: float = 1e-4, proposal: str = "exact"
    ):
        for name, value in (("obs_dim", obs_dim), ("state_dim", state_dim), ("horizon", horizon)):
            check_positive_int(value, name=name)
        if state_dim > horizon * obs_dim:
            raise ValueError(f"state_dim must be <= horizon * obs_dim = {horizon * obs_dim}, got {state_dim}")
        if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or ridge < 0:
            raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
        eye_z, eye_x = torch.eye(state_dim + obs_dim), torch.eye(obs_dim)
        super().__init__(0.5 * eye_z, torch.zeros(obs_dim, state_dim + obs_dim), eye_z, eye_x, eye_z, proposal=proposal)
        self.state_dim, self.horizon, self.ridge = state_dim, horizon, float(ridge)

    @torch.no_grad()
    def initialize(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> TwoStageKalmanFilter:
        """Two-stage regression on ``x [B, T, Dx]`` (in double precision); resets the proposal."""
        x, mask = check_sequences(x, mask, model=self)
        system = linear_two_stage_regression(x.double(), mask, self.state_dim, self.horizon, self.ridge)
        self._assign(system.A, system.C, system.Q, system.R, system.init_cov)
        return self

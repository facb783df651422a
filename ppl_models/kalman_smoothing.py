"""The Kalman smoothing kernels: the backward information filter that gives the exact posterior proposals
``p(z_t | z_{t-1}, x_{t:T})`` (:func:`exact_proposals`) and Rauch-Tung-Striebel smoothing of a filter's moments
(:func:`rts_smooth`). :class:`~ppl_models.lgssm.LinearGaussianSSM` runs them."""

from __future__ import annotations

import torch

from .kalman_kernels import symmetric

__all__ = ["exact_proposals", "rts_smooth"]


def _upper_factor(precision: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Upper-triangular ``U [..., n, n]`` with ``U U^T = precision`` and ``cholesky_ex``'s ``info [...]``.

    With ``flip(precision) = F F^T`` (flip: both indices reversed), ``U = flip(F)``; then ``U^{-T}`` is a
    lower-triangular factor of ``precision^{-1}`` (as ``torch.distributions`` does for a precision matrix).
    """
    factor, info = torch.linalg.cholesky_ex(precision.flip(-2, -1))
    return factor.flip(-2, -1), info


def _precision_solve(upper: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``(U U^T)^{-1} rhs`` for an upper-triangular ``U`` of :func:`_upper_factor`."""
    half = torch.linalg.solve_triangular(upper, rhs, upper=True)
    return torch.linalg.solve_triangular(upper.transpose(-1, -2), half, upper=False)


def exact_proposals(A, C, Q_tril, R_tril, init_cov, x, mask) -> tuple[tuple[torch.Tensor, ...], list[torch.Tensor]]:
    """``p(z_t | z_{t-1}, x_{t:T}) = N(G_t z_{t-1} + m_t, V_t)`` for every step of ``x [B, T, Dx]`` (``mask [B, T]``
    or ``None``), in float64, for ``A, C``, the noises' Cholesky factors ``Q_tril, R_tril`` and ``init_cov``.

    A backward information filter gives ``p(x_{t:T} | z_t) ~ exp(-z^T J_t z / 2 + h_t^T z)``
    (``J, h = 0`` from the first padded step on); with prior covariance ``P`` (``P_0`` at
    ``t = 0``, else ``Q``) the precision is ``L_t = P^{-1} + J_t``, so ``V_t = L_t^{-1}``,
    ``G_t = V_t P^{-1} A`` (0 at ``t = 0``) and ``m_t = V_t h_t``. Passing ``J`` through the
    transition uses Woodbury's identity with ``Q = L L^T``:
    ``(J^{-1} + Q)^{-1} = J - J L (I + L^T J L)^{-1} L^T J``, which needs neither ``J^{-1}`` (``J``
    is singular with fewer observations than states) nor ``Q^{-1}`` (near-deterministic dynamics),
    factorises only matrices ``>= I`` and ``L_t``, and has finite gradients everywhere (an
    eigendecomposition of ``J`` has none where eigenvalues repeat, e.g. ``J = 0``). Returns
    ``((G [B, T, Dz, Dz], m [B, T, Dz], cholesky(V) [B, T, Dz, Dz]), failed)``, the moments in ``x``'s dtype and
    ``failed`` the factorisations' ``info`` tensors (0: none failed).
    """
    mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device) if mask is None else mask
    A, C, Q_tril, R_tril = (m.double() for m in (A, C, Q_tril, R_tril))
    latent = A.shape[0]
    eye = torch.eye(latent, dtype=A.dtype, device=A.device)
    whitened = torch.linalg.solve_triangular(R_tril, C, upper=False)  # R^{-1/2} C
    obs_info = whitened.T @ whitened  # C^T R^{-1} C
    obs_h = whitened.T @ torch.linalg.solve_triangular(
        R_tril, x.double().unsqueeze(-1), upper=False
    )  # C^T R^{-1} x_t: [B, T, Dz, 1]
    init_tril = torch.linalg.cholesky_ex(init_cov.double()).L  # positive definite: checked at construction
    prior_precisions = [torch.cholesky_inverse(tril) for tril in (init_tril, Q_tril)]
    J = A.new_zeros(x.shape[0], latent, latent)
    h = A.new_zeros(x.shape[0], latent, 1)
    out, failed = [], []
    for t in range(x.shape[1] - 1, -1, -1):
        if t < x.shape[1] - 1:  # the future's information about z_{t+1}, passed back through the transition
            inner, info = torch.linalg.cholesky_ex(symmetric(eye + Q_tril.T @ J @ Q_tril))  # K K^T = I + L^T J L
            gain = torch.linalg.solve_triangular(inner, Q_tril.T @ J, upper=False)  # K^{-1} L^T J
            h = A.T @ (h - gain.transpose(-1, -2) @ torch.linalg.solve_triangular(inner, Q_tril.T @ h, upper=False))
            J = A.T @ (J - gain.transpose(-1, -2) @ gain) @ A
            failed.append(info)
        valid = mask[:, t, None, None]
        J, h = symmetric(J + valid * obs_info), h + valid * obs_h[:, t]
        prior_precision = prior_precisions[t > 0]
        upper, info = _upper_factor(prior_precision + J)  # L_t = U U^T, V_t = U^{-T} U^{-1}
        failed.append(info)
        tril = torch.linalg.solve_triangular(upper.transpose(-1, -2), eye, upper=False)  # U^{-T}
        transition = _precision_solve(upper, prior_precision @ A) if t > 0 else torch.zeros_like(J)
        out.append((transition, _precision_solve(upper, h).squeeze(-1), tril))
    moments = tuple(torch.stack(parts[::-1], 1).to(x.dtype) for parts in zip(*out))
    return moments, failed


def rts_smooth(A, result, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rauch-Tung-Striebel smoothing of a :class:`~ppl_models.lgssm.KalmanResult` of the transition ``A`` over
    ``mask [B, T]``: means ``[B, T, Dz]`` and covariances ``[B, T, Dz, Dz]``."""
    means, covs = [result.filtered_means[:, -1]], [result.filtered_covs[:, -1]]
    for t in range(mask.shape[1] - 2, -1, -1):
        f_mean, f_cov = result.filtered_means[:, t], result.filtered_covs[:, t]
        p_mean, p_cov = result.predicted_means[:, t + 1], result.predicted_covs[:, t + 1]
        gain = torch.linalg.solve(p_cov, A @ f_cov).transpose(-1, -2)  # P_f A^T P_pred^{-1}
        s_mean = f_mean + (gain @ (means[0] - p_mean).unsqueeze(-1)).squeeze(-1)
        s_cov = f_cov + gain @ (covs[0] - p_cov) @ gain.transpose(-1, -2)
        nxt = mask[:, t + 1]
        means.insert(0, torch.where(nxt[:, None], s_mean, f_mean))
        covs.insert(0, torch.where(nxt[:, None, None], s_cov, f_cov))
    return torch.stack(means, 1), torch.stack(covs, 1)

"""Method-of-moments learning for predictive-state models (Downey et al. 2017, section 3).

* :class:`RandomFourierFeatures`: ``z(x)^T z(y) ~ exp(-|x - y|^2 / (2 bw^2))`` (Rahimi & Recht),
  the bandwidth by the median pairwise distance.
* :func:`time_windows`: the (history, observation, future, next future) windows of every
  step of padded sequences that has ``horizon`` steps on both sides.
* :class:`RidgeSolver` / :func:`ridge_regression` and :func:`two_stage_regression` (eqs. 2-4
  with ridge; one Cholesky factor of the history's Gram matrix serves every stage-1 regression): stage 1
  regresses future and extended-future features on history features; stage 2 regresses
  the denoised extended futures on the denoised states, giving the 3-mode tensor ``W``.
* :func:`cp_decompose`: canonical polyadic decomposition of a 3-mode tensor by
  alternating least squares (section 3.3).
* :func:`linear_two_stage_regression`: the same two stages with linear features, read as a
  linear-Gaussian state-space model (the Kalman-filter baseline of section 6).

Everything is batched linear algebra on the tensors' device; no loops over examples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ppl_models.inference.validation import check_positive_int, check_sequences

__all__ = [
    "RandomFourierFeatures",
    "median_distance",
    "time_windows",
    "window_count",
    "check_window_count",
    "RidgeSolver",
    "ridge_regression",
    "TwoStageRegression",
    "two_stage_regression",
    "top_directions",
    "leading_eigenvectors",
    "CPDecomposition",
    "cp_decompose",
    "cp_reconstruct",
    "LinearSystem",
    "linear_two_stage_regression",
]


def _check_ridge(ridge) -> float:
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not ridge >= 0:
        raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
    return float(ridge)


def median_distance(points: torch.Tensor, max_points: int = 1000, generator: torch.Generator | None = None):
    """Median Euclidean distance between distinct rows of ``points [n, d]`` (a random subset of ``max_points``)."""
    if points.dim() != 2 or points.shape[0] < 2:
        raise ValueError(f"points must have shape [n >= 2, d], got {tuple(points.shape)}")
    if points.shape[0] > max_points:
        index = torch.randperm(points.shape[0], generator=generator)[:max_points].to(points.device)
        points = points[index]
    distances = torch.cdist(points.double(), points.double())
    upper = torch.triu_indices(len(points), len(points), offset=1, device=points.device)
    median = float(distances[upper[0], upper[1]].median())
    return median if median > 0 else 1.0


class RandomFourierFeatures(nn.Module):
    """``z(x) = sqrt(2 / F) cos(x Omega / bw + phase)``, ``Omega ~ N(0, I)``, ``phase ~ U(0, 2 pi)``.

    In expectation over the draw, ``z(x) . z(y) = exp(-|x - y|^2 / (2 bw^2))``. The draw
    and the bandwidth are buffers, so a saved model keeps its features (:meth:`make_trainable` makes the draw
    parameters).

    Args:
        in_dim: ``d``, the size of the inputs.
        num_features: ``F``.
        bandwidth: the kernel width ``bw``.
        generator: source of the draw.
    """

    def __init__(
        self, in_dim: int, num_features: int, bandwidth: float = 1.0, generator: torch.Generator | None = None
    ):
        super().__init__()
        check_positive_int(in_dim, name="in_dim")
        check_positive_int(num_features, name="num_features")
        if not bandwidth > 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth!r}")
        self.register_buffer("frequencies", torch.randn(in_dim, num_features, generator=generator))
        self.register_buffer("phases", 2 * math.pi * torch.rand(num_features, generator=generator))
        self.register_buffer("bandwidth", torch.tensor(float(bandwidth)))

    def make_trainable(self) -> RandomFourierFeatures:
        """Turn the draw into parameters trained with the model (the PSRNN authors' code): the frequencies become
        ``Omega / bw`` and the bandwidth 1, the same map; returns ``self``."""
        if isinstance(self.frequencies, nn.Parameter):
            return self
        frequencies, phases = self.frequencies / self.bandwidth, self.phases
        del self.frequencies, self.phases
        self.frequencies, self.phases = nn.Parameter(frequencies), nn.Parameter(phases.clone())
        self.bandwidth.fill_(1.0)
        return self

    @classmethod
    def fit(
        cls,
        points: torch.Tensor,
        num_features: int,
        generator: torch.Generator | None = None,
        bandwidth_scale: float = 1.0,
    ):
        """Features for inputs like ``points [n, d]``: bandwidth ``bandwidth_scale`` times :func:`median_distance`."""
        bandwidth = bandwidth_scale * median_distance(points, generator=generator)
        return cls(points.shape[-1], num_features, bandwidth, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., d] -> [..., F]``."""
        scale = math.sqrt(2.0 / self.phases.numel())
        return scale * torch.cos(x @ self.frequencies.to(x.dtype) / self.bandwidth + self.phases)


@dataclass
class Windows:
    """Per-example windows of :func:`time_windows`, each ``[n, ...]``.

    ``history``: ``x_{t-k:t-1}`` flattened ``[n, k D]``; ``observation``: ``x_t`` ``[n, D]``;
    ``future``: ``x_{t:t+k-1}`` ``[n, k D]``; ``next_future``: ``x_{t+1:t+k}`` ``[n, k D]``.
    """

    history: torch.Tensor
    observation: torch.Tensor
    future: torch.Tensor
    next_future: torch.Tensor


def window_count(mask: torch.Tensor, horizon: int) -> int:
    """The number of windows of :func:`time_windows`: ``sum_b max(0, L_b - 2 horizon)`` (lengths ``L_b``)."""
    return int((mask.sum(1) - 2 * horizon).clamp(min=0).sum())


def check_window_count(mask: torch.Tensor, horizon: int, **sizes: int) -> None:
    """``ValueError`` naming the first of ``sizes`` (setting name -> value) above the number of windows ``n``.

    Two-stage regression projects ``n`` windows on leading singular directions, so each size
    it keeps (a state or feature count) can be at most ``n``. No windows at all is left to
    :func:`time_windows`'s message.
    """
    count = window_count(mask, horizon)
    for name, value in sizes.items():
        if 0 < count < value:
            raise ValueError(
                f"{name}={value} is more than the {count} windows two-stage regression finds in the "
                f"training data (valid steps with horizon={horizon} steps before and after them): use "
                f"a smaller {name} or horizon, or more or longer sequences"
            )


def time_windows(x: torch.Tensor, mask: torch.Tensor | None, horizon: int) -> Windows:
    """Every valid step ``t`` with ``horizon`` steps before it and ``horizon`` after it.

    Args:
        x: ``[B, T, D]`` padded sequences; ``mask``: ``[B, T]`` (valid steps first).
        horizon: ``k``.
    """
    x, mask = check_sequences(x, mask)
    check_positive_int(horizon, name="horizon")
    size = 2 * horizon + 1
    if x.shape[1] < size:
        raise ValueError(f"sequences need at least 2 * horizon + 1 = {size} steps, got T = {x.shape[1]}")
    windows = x.unfold(1, size, 1).transpose(-1, -2)  # [B, T - 2k, 2k + 1, D], time before features
    windows = windows[mask[:, size - 1 :]]  # the window's last step is valid
    if windows.shape[0] == 0:
        raise ValueError(f"no sequence has 2 * horizon + 1 = {size} valid steps")
    k = horizon
    return Windows(
        windows[:, :k].flatten(1), windows[:, k], windows[:, k : 2 * k].flatten(1), windows[:, k + 1 :].flatten(1)
    )


class RidgeSolver:
    """Ridge regressions of any targets on fixed ``inputs u [n, p]``, sharing one factorisation.

    The regularised Gram matrix ``u^T u + ridge n I`` is Cholesky-factorised once (``gram`` keeps ``u^T u``);
    each call then costs two triangular solves. A Gram matrix that is not positive definite (``ridge``
    0 with rank-deficient inputs) is a ``ValueError``.
    """

    def __init__(self, inputs: torch.Tensor, ridge: float = 1e-2):
        ridge = _check_ridge(ridge)
        n, p = inputs.shape
        self.inputs = inputs
        self.gram = inputs.T @ inputs
        regularised = self.gram + ridge * n * torch.eye(p, dtype=inputs.dtype, device=inputs.device)
        self._cholesky, info = torch.linalg.cholesky_ex(regularised)
        if int(info) != 0:
            raise ValueError(
                f"ridge={ridge!r}: the inputs' Gram matrix is singular (rank-deficient inputs); use ridge > 0"
            )

    def __call__(self, targets: torch.Tensor) -> torch.Tensor:
        """``M [q, p]`` minimising ``sum_n |y_n - M u_n|^2 + ridge * n * |M|_F^2`` for ``targets y [n, q]``."""
        return torch.cholesky_solve(self.inputs.T @ targets, self._cholesky).T


def ridge_regression(inputs: torch.Tensor, targets: torch.Tensor, ridge: float = 1e-2) -> torch.Tensor:
    """``M [q, p]`` minimising ``sum_n |y_n - M u_n|^2 + ridge * n * |M|_F^2``.

    Args:
        inputs: ``u [n, p]``; targets: ``y [n, q]``; ridge: the penalty per example (the
            PSRNN paper uses ``1e-2 n`` in total).
    """
    return RidgeSolver(inputs, ridge)(targets)


def top_directions(features: torch.Tensor, rank: int) -> torch.Tensor:
    """``[p, rank]``: the leading right singular vectors of ``features [n, p]`` (uncentred).

    With many more rows than columns (``n >= 4 p``) they are the leading eigenvectors of the Gram matrix
    ``features^T features`` (solved in double precision): one ``n p^2`` product instead of a thin SVD of the rows.
    """
    check_positive_int(rank, name="rank")
    if rank > min(features.shape):
        raise ValueError(f"rank must be <= min(n, p) = {min(features.shape)}, got {rank}")
    if features.shape[0] < 4 * features.shape[1]:
        return torch.linalg.svd(features, full_matrices=False).Vh[:rank].T
    return leading_eigenvectors(features.T @ features, rank)


def leading_eigenvectors(gram: torch.Tensor, rank: int) -> torch.Tensor:
    """``[p, rank]``: the eigenvectors of the largest eigenvalues of a symmetric ``gram [p, p]``, largest first
    (solved in double precision): the leading right singular vectors of any ``u`` with ``u^T u = gram``."""
    vectors = torch.linalg.eigh(gram.double()).eigenvectors  # ascending eigenvalues
    return vectors[:, -rank:].flip(-1).to(gram.dtype)


@dataclass
class TwoStageRegression:
    """``initial_state [S]`` (eq. 2), ``transition [S, P, S]`` (eq. 3: out state, observation, in state) and, with an
    intercept, ``observation_bias [S, P]``: ``E[phi_{t+1} (x) omega_t | h_t] = W x_3 q_t + B``."""

    initial_state: torch.Tensor
    transition: torch.Tensor
    #: ``[S, P]``: the stage-2 intercept as a bias linear in the observation (``None`` without an intercept)
    observation_bias: torch.Tensor | None = None


def two_stage_regression(
    future: torch.Tensor,
    next_future: torch.Tensor,
    observation: torch.Tensor,
    history: torch.Tensor,
    ridge: float = 1e-2,
    *,
    stage1: RidgeSolver | None = None,
    intercept: bool = False,
) -> TwoStageRegression:
    """Two-stage regression of a predictive-state model from features of ``n`` examples.

    Stage 1 denoises by ridge regression on the history features ``eta_t``:
    ``q_t = E[phi_t | eta_t]`` and ``e_t = E[phi_{t+1} (x) omega_t | eta_t]``. Stage 2
    regresses ``e_t`` on ``q_t``; the map, reshaped, is ``W`` with
    ``E[phi_{t+1} (x) omega_t | h_t] = W x_3 q_t``. Without ridge this is eq. 3 of the paper
    (an instrumental-variable regression with the history as instrument).

    Args:
        future: ``phi_t [n, S]``; next_future: ``phi_{t+1} [n, S]``; observation: ``omega_t [n, P]``;
        history: ``eta_t [n, H]``; ridge: per-example penalty of both stages.
        stage1: a :class:`RidgeSolver` already built on ``history`` with ``ridge``, to reuse its
            factorisation (built here when ``None``).
        intercept: fit stage 2 with an unpenalised intercept (the authors' code), returned as ``observation_bias``.
    """
    n = future.shape[0]
    for name, value in (("next_future", next_future), ("observation", observation), ("history", history)):
        if value.dim() != 2 or value.shape[0] != n:
            raise ValueError(f"{name} must have shape [n={n}, ...], got {tuple(value.shape)}")
    states, obs = future.shape[1], observation.shape[1]
    extended = (next_future.unsqueeze(-1) * observation.unsqueeze(-2)).flatten(1)  # [n, S P]
    stage1 = RidgeSolver(history, ridge) if stage1 is None else stage1
    denoised = history @ stage1(torch.cat([future, extended], 1)).T
    q, e = denoised[:, :states], denoised[:, states:]
    if not intercept:
        transition = ridge_regression(q, e, ridge).reshape(states, obs, states)
        return TwoStageRegression(future.mean(0), transition)
    q_mean, e_mean = q.mean(0), e.mean(0)
    weight = ridge_regression(q - q_mean, e - e_mean, ridge)
    offset = e_mean - weight @ q_mean
    return TwoStageRegression(future.mean(0), weight.reshape(states, obs, states), offset.reshape(states, obs))


@dataclass
class CPDecomposition:
    """``tensor ~ sum_r a_r (x) b_r (x) c_r`` with factors ``[R, I]``, ``[R, J]``, ``[R, K]`` (rows are components)."""

    factors: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    relative_error: float
    iterations: int


def cp_reconstruct(factors) -> torch.Tensor:
    """The tensor ``[I, J, K]`` of CP factors ``([R, I], [R, J], [R, K])``."""
    a, b, c = factors
    return torch.einsum("ri,rj,rk->ijk", a, b, c)


def cp_decompose(
    tensor: torch.Tensor,
    rank: int,
    *,
    max_iterations: int = 1000,
    tol: float = 1e-10,
    generator: torch.Generator | None = None,
) -> CPDecomposition:
    """Rank-``rank`` CP decomposition of a 3-mode ``tensor [I, J, K]`` by alternating least squares.

    Each sweep solves for one factor with the other two fixed (normal equations with the
    Hadamard product of Gram matrices, solved by its symmetric pseudo-inverse: the same seed gives the same factors
    bit for bit, which ``torch.linalg.lstsq``'s default CPU driver does not); it stops when the relative error
    changes by less than ``tol``. The component weights end up in the first factor.
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 3:
        raise ValueError(f"tensor must be a 3-mode torch.Tensor, got {getattr(tensor, 'shape', type(tensor))}")
    check_positive_int(rank, name="rank")
    check_positive_int(max_iterations, name="max_iterations")
    work = tensor.double()
    factors = [torch.randn(rank, size, dtype=work.dtype, generator=generator).to(work.device) for size in work.shape]
    equations = ("ijk,rj,rk->ri", "ijk,ri,rk->rj", "ijk,ri,rj->rk")
    norm, error, sweep = work.norm(), math.inf, 0
    for sweep in range(1, max_iterations + 1):  # noqa: B007 (the count is reported)
        for mode, equation in enumerate(equations):
            a, b = (factors[m] for m in range(3) if m != mode)
            rhs = torch.einsum(equation, work, a, b)
            gram = (a @ a.T) * (b @ b.T)
            factors[mode] = torch.linalg.pinv(gram, hermitian=True) @ rhs
            if mode < 2:  # keep the scale in the last factor solved, for conditioning
                factors[mode] = factors[mode] / factors[mode].norm(dim=1, keepdim=True).clamp(min=1e-30)
        new_error = float((work - cp_reconstruct(factors)).norm() / norm)
        if abs(error - new_error) < tol:
            error = new_error
            break
        error = new_error
    scale = factors[2].norm(dim=1, keepdim=True).clamp(min=1e-30)
    factors = [factors[0] * scale, factors[1], factors[2] / scale]
    return CPDecomposition(tuple(f.to(tensor.dtype) for f in factors), error, sweep)


@dataclass
class LinearSystem:
    """``z_{t+1} = A z_t + w``, ``x_t = C z_t + v``: ``A [Z, Z]``, ``C [D, Z]``, noise covariances
    ``Q [Z, Z]``, ``R [D, D]`` and the covariance ``P_0`` of the first state (mean zero)."""

    A: torch.Tensor
    C: torch.Tensor
    Q: torch.Tensor
    R: torch.Tensor
    init_cov: torch.Tensor


def _covariance(residuals: torch.Tensor) -> torch.Tensor:
    cov = residuals.T @ residuals / residuals.shape[0]
    return (cov + cov.T) / 2


def linear_two_stage_regression(
    x: torch.Tensor, mask: torch.Tensor | None, state_dim: int, horizon: int, ridge: float = 1e-2, jitter: float = 1e-4
) -> LinearSystem:
    """A linear-Gaussian state-space model learned by two-stage regression with linear features.

    Stage 1: the predictive state ``s_t = U^T E[x_{t:t+k-1} | x_{t-k:t-1}]`` (ridge), projected
    on its ``state_dim`` leading singular directions ``U``, and the same map one step later,
    ``s_{t+1}``. Stage 2: ``s_{t+1} = A s_t + K e_t`` and ``x_t = C s_t + e_t`` by regression,
    with innovations ``e_t`` of covariance ``Sigma``. This innovations form is an LGSSM whose
    state carries the innovation, ``z_t = [s_t, e_t]``:

        A_z = [[A, K], [0, 0]],  Q_z = diag(0, Sigma),  C_z = [C, I],  R_z = 0,

    plus ``jitter`` (relative to the data's mean variance) on both noise covariances. Its
    Kalman filter is the steady-state predictor of the data, consistent as the data and
    the horizon grow.

    Args:
        x: ``[B, T, D]`` (zero-mean data: the state has mean zero); mask: ``[B, T]``.
        state_dim: ``S`` (the LGSSM's state has ``S + D`` entries); horizon: ``k`` (``k D >= S``);
        ridge: per-example penalty.
    """
    check_positive_int(state_dim, name="state_dim")
    w = time_windows(x, mask, horizon)
    if state_dim > w.future.shape[1]:
        raise ValueError(f"state_dim must be <= horizon * D = {w.future.shape[1]}, got {state_dim}")
    check_window_count(check_sequences(x, mask)[1], horizon, state_dim=state_dim)
    stage1 = ridge_regression(w.history, w.future, ridge)
    next_history = torch.cat([w.history[:, x.shape[-1] :], w.observation], 1)  # x_{t-k+1:t}
    basis = top_directions(w.history @ stage1.T, state_dim)  # [k D, S]
    states, next_states = w.history @ stage1.T @ basis, next_history @ stage1.T @ basis
    A = ridge_regression(states, next_states, ridge)
    C = ridge_regression(states, w.observation, ridge)
    innovations = w.observation - states @ C.T
    K = ridge_regression(innovations, next_states - states @ A.T, ridge)
    sigma = _covariance(innovations)
    size, obs = state_dim + x.shape[-1], x.shape[-1]
    scale = jitter * float(w.observation.var(0).mean())
    eye = torch.eye(size, dtype=x.dtype, device=x.device)
    A_z, Q_z, init_cov = torch.zeros_like(eye), scale * eye, scale * eye
    A_z[:state_dim, :state_dim], A_z[:state_dim, state_dim:] = A, K
    Q_z[state_dim:, state_dim:] += sigma
    init_cov[:state_dim, :state_dim] += _covariance(states)
    init_cov[state_dim:, state_dim:] += sigma
    C_z = torch.cat([C, torch.eye(obs, dtype=x.dtype, device=x.device)], 1)
    return LinearSystem(A_z, C_z, Q_z, scale * torch.eye(obs, dtype=x.dtype, device=x.device), init_cov)

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
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import pyro.distributions as dist
import torch
from torch import nn
from torch.distributions import constraints, transform_to

from ppl_models.inference.protocol import (
    DEFAULT_PARTICLES,
    Generation,
    OneStepPredictive,
    check_num_samples,
    exact_predictive,
)
from ppl_models.inference.saturation import saturated_sum
from ppl_models.inference.state_space import MarkovStateSpace
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences, value_checks_enabled

from .distributions import MultivariateNormal, times_transpose
from .spectral import linear_two_stage_regression

__all__ = ["LinearGaussianSSM", "KalmanResult", "TwoStageKalmanFilter", "PROPOSALS"]

#: guides / particle proposals of :class:`LinearGaussianSSM`
PROPOSALS = ("learned", "bootstrap", "exact")

_to_tril = transform_to(constraints.lower_cholesky)


@dataclass
class KalmanResult:
    """Exact filtering output for a batch ``[B, T]``.

    Attributes:
        log_likelihood: ``[B]`` exact ``log p(x_{1:T_b})``.
        log_likelihood_steps: ``[B, T]`` exact ``log p(x_t | x_{<t})`` (0 at padding).
        filtered_means, filtered_covs: ``[B, T, Dz]``, ``[B, T, Dz, Dz]``.
        predicted_means, predicted_covs: moments of ``p(z_t | x_{<t})``.
        predictive_means, predictive_covs: ``[B, T, Dx]``, ``[B, T, Dx, Dx]``,
            moments of ``p(x_t | x_{<t})``.
    """

    log_likelihood: torch.Tensor
    log_likelihood_steps: torch.Tensor
    filtered_means: torch.Tensor
    filtered_covs: torch.Tensor
    predicted_means: torch.Tensor
    predicted_covs: torch.Tensor
    predictive_means: torch.Tensor
    predictive_covs: torch.Tensor


def _square(name, value, size=None):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != 2 or value.shape[0] != value.shape[1] or (size is not None and value.shape[0] != size):
        want = f"[{size}, {size}]" if size is not None else "square [n, n]"
        raise ValueError(f"{name} must have shape {want}, got {tuple(value.shape)}")
    if not value.is_floating_point() or not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must hold finite floating-point numbers")
    return value


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


def _symmetric(matrix: torch.Tensor) -> torch.Tensor:
    return (matrix + matrix.transpose(-1, -2)) / 2


def _covariance(name, value, size):
    _square(name, value, size)
    if not torch.allclose(value, value.T, atol=1e-6) or torch.linalg.cholesky_ex(value).info != 0:
        raise ValueError(f"{name} must be symmetric positive definite")
    return value


#: the covariance recursion of a time-invariant filter stops once a step changes the filtered covariance by at most
#: this much relative to its largest entry (float64 rounding: the steps after it would repeat it), checked every
#: :data:`_STEADY_EVERY` steps
_STEADY = 1e-12
_STEADY_EVERY = 8
#: the means past the steady state are computed in blocks of about this many numbers (steps times ``Dz``): a block's
#: Toeplitz matrix, ``(L Dz)^2`` numbers, stays under the size from which torch splits an operation across threads
#: (each such operation waits for every thread: slow on small work when the cores are busy)
_BLOCK_SIZE = 128


@contextmanager
def _one_thread():
    """Torch's intra-op threads set to one inside: the filter's operations are on matrices of a few numbers, and an
    operation split across threads waits for all of them (milliseconds when another process holds a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class _Covariances:
    """The data-free half of a Kalman filter, in float64, for ``S`` sets of matrices (1 when ``A`` is shared), at its
    first ``n`` steps: every later step repeats step ``n - 1`` (the steady state; ``n = T`` without one).

    Attributes:
        predicted, filtered: ``[S, n, Dz, Dz]`` covariances of ``p(z_t | x_{<t})`` and ``p(z_t | x_{<=t})``.
        innovation, innovation_tril: ``[S, n, Dx, Dx]`` ``S_t = C P_t C^T + R`` and its Cholesky factor ``L_t``.
        gain: ``[S, n, Dx, Dz]`` the transposed Kalman gain ``K_t^T = S_t^{-1} C P_t``.
        failed: ``[S, n]`` Cholesky failures (0: none).
    """

    predicted: torch.Tensor
    filtered: torch.Tensor
    innovation: torch.Tensor
    innovation_tril: torch.Tensor
    gain: torch.Tensor
    failed: torch.Tensor


@dataclass
class _FilterRun:
    """One float64 pass of :meth:`LinearGaussianSSM._filter` over ``[B, T]``, padding run through as if observed.

    ``steps [B, T]`` (0 at padding), ``means``, ``predicted_means [B, T, Dz]``, ``predictive_means [B, T, Dx]``,
    ``covs`` (:class:`_Covariances`) and ``init_cov [Dz, Dz]``.
    """

    steps: torch.Tensor
    means: torch.Tensor
    predicted_means: torch.Tensor
    predictive_means: torch.Tensor
    covs: _Covariances
    init_cov: torch.Tensor


def _covariance_pass(moves, C, Q, R, init_cov, steps: int) -> _Covariances:
    """The Kalman covariances of ``steps`` steps for transitions ``moves`` ``[S, T, Dz, Dz]`` (entry 0 unused) or
    ``[S, 1, Dz, Dz]`` (the same at every step), ``C [Dx, Dz]``, ``Q``, ``R``, ``init_cov``: a loop of batched
    products over ``S`` (update ``P - (C P)^T S^{-1} C P``; the innovation covariances' Cholesky factors after it).

    With the same ``moves`` at every step, the loop stops once the filtered covariance stops changing
    (:data:`_STEADY`): the later steps would repeat its last step.
    """
    sets, steady = moves.shape[0], moves.shape[1] == 1
    moves = moves.unbind(1)  # one backward node for every step's selection
    C_rows, C_cols = C.expand(sets, -1, -1), C.T.expand(sets, -1, -1)
    Q, R = Q.expand(sets, -1, -1), R.expand(sets, -1, -1)
    filtered, rows = None, []
    for t in range(steps):
        move = moves[0 if steady else t]
        predicted = (
            init_cov.expand(sets, -1, -1) if t == 0 else torch.baddbmm(Q, move @ filtered, move.transpose(-1, -2))
        )
        observed = torch.bmm(C_rows, predicted)  # C P_t
        innovation = torch.baddbmm(R, observed, C_cols)
        gain = torch.linalg.solve_ex(innovation, observed).result  # K_t^T = S_t^{-1} C P_t
        updated = _symmetric(torch.baddbmm(predicted, observed.transpose(-1, -2), gain, alpha=-1))
        rows.append((predicted, updated, innovation, gain))
        if steady and _settled(updated, filtered, t):
            break
        filtered = updated
    predicted, filtered, innovation, gain = (torch.stack(part, 1) for part in zip(*rows))
    tril, failed = torch.linalg.cholesky_ex(innovation)  # one factorisation for every step: the check, log-det
    return _Covariances(predicted, filtered, innovation, tril, gain, failed)


def _settled(updated: torch.Tensor, filtered: torch.Tensor | None, t: int) -> bool:
    """Whether step ``t``'s filtered covariance equals the previous one to float64 rounding (every
    :data:`_STEADY_EVERY` steps; never while a CUDA graph is being recorded, which cannot read values)."""
    if t % _STEADY_EVERY or filtered is None or (updated.is_cuda and torch.cuda.is_current_stream_capturing()):
        return False
    return bool((updated - filtered).abs().max() <= _STEADY * updated.abs().max())


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for small matrices ``[..., m, k] @ [..., k, n]`` (batch dimensions broadcast) as a product and a sum:
    elementwise operations, split across threads only when large, where a matrix product over many rows or
    matrices is split even when small."""
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)


def _at_steps(rows: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    """``rows [B, T, a]``, each times its step's matrix of ``matrices [S, n, a, b]`` (``S`` is 1 or ``B``; the steps
    from ``n - 1`` on all take the last): ``[B, T, b]``."""
    last = matrices.shape[1] - 1
    head = _product(rows[:, :last].unsqueeze(-2), matrices[:, :last]).squeeze(-2)
    return torch.cat([head, _product(rows[:, last:], matrices[:, last])], 1)


def _filtered_means(drive: torch.Tensor, closed: torch.Tensor) -> torch.Tensor:
    """``m_t = m_{t-1} N_t + u_t`` (row vectors, ``m_0 = u_0``) for ``drive`` ``u [S, B', T, Dz]`` and ``closed``
    ``N [S, k, Dz, Dz]`` (``N_1..N_k``; every later step's is ``N_k``): ``[S, B', T, Dz]``, one batched product per
    step, past ``k`` by :func:`_invariant_means` where that leaves several of its blocks."""
    steps, known = drive.shape[2], closed.shape[1]
    one_by_one = steps if steps - known < 4 * _block(drive.shape[3]) else known + 1
    matrices, means = closed.unbind(1), [drive[:, :, 0]]
    for t, drive_t in enumerate(drive[:, :, 1:one_by_one].unbind(2), 1):
        means.append(torch.baddbmm(drive_t, means[-1], matrices[min(t, known) - 1]))
    head = torch.stack(means, 2)
    if one_by_one == steps:
        return head
    return torch.cat([head, _invariant_means(means[-1], drive[:, :, one_by_one:], closed[:, -1])], 2)


def _block(dz: int) -> int:
    """Steps in a block of :func:`_invariant_means` (:data:`_BLOCK_SIZE`)."""
    return max(1, _BLOCK_SIZE // dz)


def _invariant_means(start: torch.Tensor, drive: torch.Tensor, closed: torch.Tensor) -> torch.Tensor:
    """``m_t = m_{t-1} N + u_t`` for ``t = 1..T'`` from ``m_0 = start [S, B', Dz]``, ``drive`` ``u [S, B', T', Dz]``,
    ``N [S, Dz, Dz]``: ``[S, B', T', Dz]``, by blocks of ``L`` steps (:data:`_BLOCK_SIZE`), one product per block.

    Within a block the means are ``m_{s-1} N^{k+1} + sum_{j <= k} u_{s+j} N^{k-j}``: the sums for every block at
    once as one product with the block-Toeplitz matrix of the powers ``N^0..N^{L-1}``; only the block ends run
    in sequence.
    """
    sets, rows, steps, dz = drive.shape
    block = min(steps, _block(dz))
    blocks = -(-steps // block)
    powers = torch.eye(dz, dtype=closed.dtype, device=closed.device).expand(sets, 1, dz, dz)
    powers = torch.cat([powers, closed.unsqueeze(1)], 1)  # N^0, N^1: [S, n + 1, Dz, Dz], doubled until n >= L
    while powers.shape[1] <= block:
        powers = torch.cat([powers, powers[:, 1:] @ powers[:, -1:]], 1)
    lag = torch.arange(block, device=closed.device)
    lag = lag.unsqueeze(0) - lag.unsqueeze(1)  # [j, k] = k - j
    toeplitz = powers[:, lag.clamp(min=0)] * (lag >= 0)[..., None, None].to(closed.dtype)  # [S, L, L, Dz, Dz]
    toeplitz = toeplitz.transpose(2, 3).reshape(sets, block * dz, block * dz)  # row (j, a), column (k, b)
    padded = torch.nn.functional.pad(drive, (0, 0, 0, blocks * block - steps)).reshape(sets, rows * blocks, -1)
    sums = (padded @ toeplitz).reshape(sets, rows, blocks, block, dz)
    ends = [start]
    for block_sum in sums[:, :, :, -1].unbind(2):  # the mean at each block's end, from the one before
        ends.append(torch.baddbmm(block_sum, ends[-1], powers[:, block]))
    carried = torch.stack(ends[:-1], 2) @ powers[:, 1 : block + 1].transpose(1, 2).reshape(sets, 1, dz, -1)
    return (carried.reshape(sets, rows, blocks, block, dz) + sums).reshape(sets, rows, -1, dz)[:, :, :steps]


def _indices(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T]`` indices of what a step of ``mask [B, T]`` reports: ``held`` into the filtered moments with the start
    first (the last valid step's at padding), ``ahead`` into the predictions (the first padded step's at padding)."""
    steps = torch.arange(mask.shape[1], device=mask.device)
    lengths = mask.sum(1, keepdim=True)
    return torch.minimum(steps + 1, lengths), torch.minimum(steps, lengths)


def _rows(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values [S, n, ...]`` (``S`` is 1 or ``B``) at step ``index[b, t]`` of row ``b`` (``n - 1`` past the last):
    ``[B, T, ...]``."""
    rows = torch.arange(index.shape[0], device=index.device).unsqueeze(1)
    return values.expand(index.shape[0], *values.shape[1:])[rows, index.clamp(max=values.shape[1] - 1)]


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
        """``p(z_t | z_{t-1}, x_{t:T}) = N(G_t z_{t-1} + m_t, V_t)`` for every step, in float64.

        A backward information filter gives ``p(x_{t:T} | z_t) ~ exp(-z^T J_t z / 2 + h_t^T z)``
        (``J, h = 0`` from the first padded step on); with prior covariance ``P`` (``P_0`` at
        ``t = 0``, else ``Q``) the precision is ``L_t = P^{-1} + J_t``, so ``V_t = L_t^{-1}``,
        ``G_t = V_t P^{-1} A`` (0 at ``t = 0``) and ``m_t = V_t h_t``. Passing ``J`` through the
        transition uses Woodbury's identity with ``Q = L L^T``:
        ``(J^{-1} + Q)^{-1} = J - J L (I + L^T J L)^{-1} L^T J``, which needs neither ``J^{-1}`` (``J``
        is singular with fewer observations than states) nor ``Q^{-1}`` (near-deterministic dynamics),
        factorises only matrices ``>= I`` and ``L_t``, and has finite gradients everywhere (an
        eigendecomposition of ``J`` has none where eigenvalues repeat, e.g. ``J = 0``). Returns
        ``(G [B, T, Dz, Dz], m [B, T, Dz], cholesky(V) [B, T, Dz, Dz])`` in ``x``'s dtype.
        """
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device) if mask is None else mask
        A, C, Q_tril, R_tril = (m.double() for m in (self.A, self.C, self.Q_tril, self.R_tril))
        eye = torch.eye(self.latent_dim, dtype=A.dtype, device=A.device)
        whitened = torch.linalg.solve_triangular(R_tril, C, upper=False)  # R^{-1/2} C
        obs_info = whitened.T @ whitened  # C^T R^{-1} C
        obs_h = whitened.T @ torch.linalg.solve_triangular(
            R_tril, x.double().unsqueeze(-1), upper=False
        )  # C^T R^{-1} x_t: [B, T, Dz, 1]
        init_tril = torch.linalg.cholesky_ex(self.init_cov.double()).L  # positive definite: checked at construction
        prior_precisions = [torch.cholesky_inverse(tril) for tril in (init_tril, Q_tril)]
        J = A.new_zeros(x.shape[0], self.latent_dim, self.latent_dim)
        h = A.new_zeros(x.shape[0], self.latent_dim, 1)
        out, failed = [], []
        for t in range(x.shape[1] - 1, -1, -1):
            if t < x.shape[1] - 1:  # the future's information about z_{t+1}, passed back through the transition
                inner, info = torch.linalg.cholesky_ex(_symmetric(eye + Q_tril.T @ J @ Q_tril))  # K K^T = I + L^T J L
                gain = torch.linalg.solve_triangular(inner, Q_tril.T @ J, upper=False)  # K^{-1} L^T J
                h = A.T @ (h - gain.transpose(-1, -2) @ torch.linalg.solve_triangular(inner, Q_tril.T @ h, upper=False))
                J = A.T @ (J - gain.transpose(-1, -2) @ gain) @ A
                failed.append(info)
            valid = mask[:, t, None, None]
            J, h = _symmetric(J + valid * obs_info), h + valid * obs_h[:, t]
            prior_precision = prior_precisions[t > 0]
            upper, info = _upper_factor(prior_precision + J)  # L_t = U U^T, V_t = U^{-T} U^{-1}
            failed.append(info)
            tril = torch.linalg.solve_triangular(upper.transpose(-1, -2), eye, upper=False)  # U^{-T}
            transition = _precision_solve(upper, prior_precision @ A) if t > 0 else torch.zeros_like(J)
            out.append((transition, _precision_solve(upper, h).squeeze(-1), tril))
        moments = tuple(torch.stack(parts[::-1], 1).to(x.dtype) for parts in zip(*out))
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
        held, ahead = _indices(mask)
        filtered_means = torch.cat([run.means.new_zeros(x.shape[0], 1, self.latent_dim), run.means], 1)
        filtered_covs = torch.cat([run.init_cov.expand(len(run.covs.filtered), 1, -1, -1), run.covs.filtered], 1)
        moments = (
            _rows(filtered_means, held),
            _rows(filtered_covs, held),
            _rows(run.predicted_means, ahead),
            _rows(run.covs.predicted, ahead),
            _rows(run.predictive_means, ahead),
            _rows(run.covs.innovation, ahead),
        )
        ll, *moments = (part.to(x.dtype) for part in (run.steps, *moments))
        return KalmanResult(ll.sum(1), ll, *moments)

    def _filter(self, x: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor | None) -> _FilterRun:
        """The Kalman filter of validated ``x [B, T, Dx]`` in float64, padding run through as if observed.

        The covariances do not read ``x``: with ``A`` shared they are computed once for the batch, up to their steady
        state (:func:`_covariance_pass`); the means then follow the linear recursion
        ``m_t = (I - K_t C) A_t m_{t-1} + K_t x_t`` (:func:`_filtered_means`).
        """
        with _one_thread():
            return self._filter_steps(x, mask, transitions)

    def _filter_steps(self, x: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor | None) -> _FilterRun:
        """The body of :meth:`_filter`, on the threads it leaves."""
        batch, steps, dz = x.shape[0], x.shape[1], self.latent_dim
        A, C, Q_tril, R_tril = (m.double() for m in (self.A, self.C, self.Q_tril, self.R_tril))
        moves = A.expand(1, 1, dz, dz) if transitions is None else transitions.double()  # [S, T or 1, Dz, Dz]
        init_cov = self.init_cov.double()
        covs = _covariance_pass(moves, C, Q_tril @ Q_tril.T, R_tril @ R_tril.T, init_cov, steps)
        if value_checks_enabled() and bool(covs.failed.ne(0).any()):  # one device read for the whole pass
            raise ValueError(
                f"{type(self).__name__}.kalman_filter: an innovation covariance C P C^T + R is not "
                "positive definite (A, C, Q or R holds NaN or inf, or is too ill-conditioned)"
            )
        known = covs.gain.shape[1]  # the steps computed: the later ones repeat the last
        observed = torch.where(mask.unsqueeze(-1), x.double(), 0.0)  # the padding's values never reach a mean
        later = moves if transitions is None else moves[:, 1:]  # A_t for t >= 1
        closed = later[:, : known - 1] - _product(covs.gain[:, 1:].transpose(-1, -2), C @ later[:, : known - 1])
        drive = _at_steps(observed, covs.gain).reshape(len(moves), -1, steps, dz)  # (K_t x_t)^T
        # the means run as [S, B / S, Dz]: one batched product per step (or block) for S = 1 and S = B alike
        means = _filtered_means(drive, closed.transpose(-1, -2)).reshape(batch, steps, dz)
        predicted_means = means.new_zeros(batch, 1, dz)  # A_t m_{t-1}, 0 at t = 0
        if steps > 1:
            predicted_means = torch.cat([predicted_means, _at_steps(means[:, :-1], later.transpose(-1, -2))], 1)
        predictive_means = _product(predicted_means, C.T)
        inverse_tril = torch.linalg.solve_triangular(covs.innovation_tril, torch.eye(self.obs_dim).to(C), upper=False)
        whitened = _at_steps(observed - predictive_means, inverse_tril.transpose(-1, -2))  # L_t^{-1} (x_t - C m)
        log_det = covs.innovation_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # [S, n]
        log_det = log_det[:, torch.arange(steps, device=x.device).clamp(max=known - 1)]
        steps_ll = -0.5 * (whitened.pow(2).sum(-1) + self.obs_dim * math.log(2 * math.pi)) - log_det
        return _FilterRun(torch.where(mask, steps_ll, 0.0), means, predicted_means, predictive_means, covs, init_cov)

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
        run, (_, ahead) = self._filter(x, mask, None), _indices(mask)
        loc, tril = _rows(run.predictive_means, ahead), _rows(run.covs.innovation_tril, ahead)
        return dist.MultivariateNormal(loc.to(x.dtype), scale_tril=tril.to(x.dtype))

    @torch.no_grad()
    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        num_particles: int = DEFAULT_PARTICLES,
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
        k = self.kalman_filter(x, mask)
        means, covs = [k.filtered_means[:, -1]], [k.filtered_covs[:, -1]]
        for t in range(x.shape[1] - 2, -1, -1):
            f_mean, f_cov = k.filtered_means[:, t], k.filtered_covs[:, t]
            p_mean, p_cov = k.predicted_means[:, t + 1], k.predicted_covs[:, t + 1]
            gain = torch.linalg.solve(p_cov, self.A @ f_cov).transpose(-1, -2)  # P_f A^T P_pred^{-1}
            s_mean = f_mean + (gain @ (means[0] - p_mean).unsqueeze(-1)).squeeze(-1)
            s_cov = f_cov + gain @ (covs[0] - p_cov) @ gain.transpose(-1, -2)
            nxt = mask[:, t + 1]
            means.insert(0, torch.where(nxt[:, None], s_mean, f_mean))
            covs.insert(0, torch.where(nxt[:, None, None], s_cov, f_cov))
        return torch.stack(means, 1), torch.stack(covs, 1)

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
        dtype = self.A.dtype
        self.A.copy_(system.A.to(dtype))
        self.C.copy_(system.C.to(dtype))
        self.Q_raw.copy_(_to_tril.inv(torch.linalg.cholesky(system.Q)).to(dtype))
        self.R_raw.copy_(_to_tril.inv(torch.linalg.cholesky(system.R)).to(dtype))
        self.init_cov.copy_(system.init_cov.to(dtype))
        self.reset_proposal()
        return self

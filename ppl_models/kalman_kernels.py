"""The Kalman filter's kernels in float64 and its output (:class:`KalmanResult`): the data-free covariance
recursion up to its steady state (:func:`covariance_pass`), the means' linear recursion (by blocks past the steady
state) and one whole pass over a batch (:func:`kalman_pass`), with the indices that report each step's moments at
padding (:func:`report_indices`, :func:`at_rows`). :class:`~ppl_models.lgssm.LinearGaussianSSM` runs them."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ppl_models.inference.validation import value_checks_enabled

__all__ = [
    "KalmanResult",
    "Covariances",
    "FilterRun",
    "kalman_pass",
    "covariance_pass",
    "report_indices",
    "at_rows",
    "symmetric",
]


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


def symmetric(matrix: torch.Tensor) -> torch.Tensor:
    return (matrix + matrix.transpose(-1, -2)) / 2


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
class Covariances:
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
class FilterRun:
    """One float64 pass of :func:`kalman_pass` over ``[B, T]``, padding run through as if observed.

    ``steps [B, T]`` (0 at padding), ``means``, ``predicted_means [B, T, Dz]``, ``predictive_means [B, T, Dx]``,
    ``covs`` (:class:`Covariances`) and ``init_cov [Dz, Dz]``.
    """

    steps: torch.Tensor
    means: torch.Tensor
    predicted_means: torch.Tensor
    predictive_means: torch.Tensor
    covs: Covariances
    init_cov: torch.Tensor


def covariance_pass(moves, C, Q, R, init_cov, steps: int) -> Covariances:
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
        updated = symmetric(torch.baddbmm(predicted, observed.transpose(-1, -2), gain, alpha=-1))
        rows.append((predicted, updated, innovation, gain))
        if steady and _settled(updated, filtered, t):
            break
        filtered = updated
    predicted, filtered, innovation, gain = (torch.stack(part, 1) for part in zip(*rows))
    tril, failed = torch.linalg.cholesky_ex(innovation)  # one factorisation for every step: the check, log-det
    return Covariances(predicted, filtered, innovation, tril, gain, failed)


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


def report_indices(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T]`` indices of what a step of ``mask [B, T]`` reports: ``held`` into the filtered moments with the start
    first (the last valid step's at padding), ``ahead`` into the predictions (the first padded step's at padding)."""
    steps = torch.arange(mask.shape[1], device=mask.device)
    lengths = mask.sum(1, keepdim=True)
    return torch.minimum(steps + 1, lengths), torch.minimum(steps, lengths)


def at_rows(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values [S, n, ...]`` (``S`` is 1 or ``B``) at step ``index[b, t]`` of row ``b`` (``n - 1`` past the last):
    ``[B, T, ...]``."""
    rows = torch.arange(index.shape[0], device=index.device).unsqueeze(1)
    return values.expand(index.shape[0], *values.shape[1:])[rows, index.clamp(max=values.shape[1] - 1)]


def kalman_pass(x, mask, A, C, Q_tril, R_tril, init_cov, transitions=None, *, name: str) -> FilterRun:
    """The Kalman filter of validated ``x [B, T, Dx]`` (``mask [B, T]``) in float64, padding run through as if
    observed, for ``A, C`` and the noises' Cholesky factors ``Q_tril, R_tril`` (``transitions [B, T, Dz, Dz]`` in
    place of ``A``: entry 0 unused); ``name``: the model, for the error of a covariance that does not factorise.

    The covariances do not read ``x``: with ``A`` shared they are computed once for the batch, up to their steady
    state (:func:`covariance_pass`); the means then follow the linear recursion
    ``m_t = (I - K_t C) A_t m_{t-1} + K_t x_t`` (:func:`_filtered_means`).
    """
    with _one_thread():
        batch, steps, dz = x.shape[0], x.shape[1], A.shape[0]
        A, C, Q_tril, R_tril = (m.double() for m in (A, C, Q_tril, R_tril))
        moves = A.expand(1, 1, dz, dz) if transitions is None else transitions.double()  # [S, T or 1, Dz, Dz]
        init_cov = init_cov.double()
        covs = covariance_pass(moves, C, Q_tril @ Q_tril.T, R_tril @ R_tril.T, init_cov, steps)
        if value_checks_enabled() and bool(covs.failed.ne(0).any()):  # one device read for the whole pass
            raise ValueError(
                f"{name}.kalman_filter: an innovation covariance C P C^T + R is not "
                "positive definite (A, C, Q or R holds NaN or inf, or is too ill-conditioned)"
            )
        observed = torch.where(mask.unsqueeze(-1), x.double(), 0.0)  # the padding's values never reach a mean
        later = moves if transitions is None else moves[:, 1:]  # A_t for t >= 1
        means = _means(observed, C, covs, later, sets=len(moves))
        predicted_means = means.new_zeros(batch, 1, dz)  # A_t m_{t-1}, 0 at t = 0
        if steps > 1:
            predicted_means = torch.cat([predicted_means, _at_steps(means[:, :-1], later.transpose(-1, -2))], 1)
        predictive_means = _product(predicted_means, C.T)
        steps_ll = _step_log_likelihoods(observed, covs, predictive_means)
        return FilterRun(torch.where(mask, steps_ll, 0.0), means, predicted_means, predictive_means, covs, init_cov)


def _means(observed, C, covs: Covariances, later, *, sets: int) -> torch.Tensor:
    """``[B, T, Dz]`` filtered means of ``observed [B, T, Dx]`` (0 at padding) for the transitions ``later``
    (``A_t``, ``t >= 1``), run as ``[S, B / S, Dz]``: one batched product per step (or block) for ``S = 1`` (``A``
    shared) and ``S = B`` alike."""
    batch, steps, dz = observed.shape[0], observed.shape[1], C.shape[1]
    known = covs.gain.shape[1]  # the steps computed: the later ones repeat the last
    closed = later[:, : known - 1] - _product(covs.gain[:, 1:].transpose(-1, -2), C @ later[:, : known - 1])
    drive = _at_steps(observed, covs.gain).reshape(sets, -1, steps, dz)  # (K_t x_t)^T
    return _filtered_means(drive, closed.transpose(-1, -2)).reshape(batch, steps, dz)


def _step_log_likelihoods(observed, covs: Covariances, predictive_means) -> torch.Tensor:
    """``[B, T]`` ``log p(x_t | x_{<t})`` of every step of ``observed [B, T, Dx]`` (0 at padding, which is scored as
    if observed), from the innovations' Cholesky factors."""
    steps, obs_dim, known = observed.shape[1], observed.shape[2], covs.gain.shape[1]
    eye = torch.eye(obs_dim).to(covs.innovation_tril)
    inverse_tril = torch.linalg.solve_triangular(covs.innovation_tril, eye, upper=False)
    whitened = _at_steps(observed - predictive_means, inverse_tril.transpose(-1, -2))  # L_t^{-1} (x_t - C m)
    log_det = covs.innovation_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # [S, n]
    log_det = log_det[:, torch.arange(steps, device=observed.device).clamp(max=known - 1)]
    return -0.5 * (whitened.pow(2).sum(-1) + obs_dim * math.log(2 * math.pi)) - log_det

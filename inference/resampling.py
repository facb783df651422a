"""Resampling of weighted particle sets, batched over sequences.

Log-weights have shape ``[K, B]``: ``K`` particles for each of ``B`` sequences.
Each scheme returns ancestor indices ``[K, B]`` (particle ``k`` of sequence ``b``
descends from particle ``ancestors[k, b]``) and the log-weights after resampling,
normalised per sequence.

Schemes:

* ``multinomial``: ``K`` independent draws from the weights.
* ``stratified``: one uniform draw in each of ``K`` equal strata of [0, 1).
* ``systematic``: one uniform draw per sequence, shifted by ``k / K``.
* ``soft``: multinomial draws from ``q = alpha * w + (1 - alpha) / K`` with the
  importance-corrected weights ``w / q`` (Karkus et al. 2018; Ma et al. 2020),
  differentiable in the log-weights.
* ``none``: identity ancestors, weights unchanged.

All draws use the given ``torch.Generator`` (or the global one), on the
log-weights' device.
"""

from __future__ import annotations

import math

import torch

from .validation import check_choice, check_probability, value_checks_enabled

__all__ = [
    "SCHEMES",
    "logsumexp_particles",
    "normalize",
    "normalize_with_total",
    "effective_sample_size",
    "resample",
    "resample_adaptive",
    "gather_particles",
]

SCHEMES = ("multinomial", "stratified", "systematic", "soft", "none")


def logsumexp_particles(log_weights: torch.Tensor) -> torch.Tensor:
    """``log sum_k exp(log_weights[k])`` over the particle dim of ``[K, B]``; returns ``[B]``.

    Same value as ``torch.logsumexp(., 0)``, about twice as fast on CPU for this layout; on an
    accelerator, where each of the seven operations costs a launch, ``torch.logsumexp`` itself.
    """
    if log_weights.device.type != "cpu":
        return torch.logsumexp(log_weights, dim=0)
    top = log_weights.detach().max(dim=0).values.clamp(min=-1e30)  # a column of -inf gives -inf, not NaN
    return top + torch.log(torch.exp(log_weights - top).sum(0))


def normalize(log_weights: torch.Tensor) -> torch.Tensor:
    """Normalise log-weights ``[K, B]`` so that ``exp`` sums to one over ``K``."""
    return normalize_with_total(log_weights)[0]


def normalize_with_total(log_weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(normalised [K, B], log sum_k exp(log_weights[k]) [B])``, accurate at any magnitude.

    The largest weight is subtracted first and the (small) log-sum of the shifted weights
    second: subtracting the log-sum in one go loses the normalisation once the weights are
    so large (a 1e6 outlier in float32 gives ~1e12) that ``log K`` is below their round-off,
    and tied particles then each get weight one.
    """
    top = log_weights.detach().max(dim=0).values.clamp(min=torch.finfo(log_weights.dtype).min)
    shifted = log_weights - top
    log_total = torch.log(torch.exp(shifted).sum(0))
    return shifted - log_total, top + log_total


def effective_sample_size(log_weights: torch.Tensor) -> torch.Tensor:
    """ESS ``1 / sum_k w_k^2`` per sequence, from log-weights ``[K, B]``; returns ``[B]`` in ``[1, K]``."""
    return torch.exp(-logsumexp_particles(2.0 * normalize(log_weights))).clamp(1.0, log_weights.shape[0])


def _offspring_to_ancestors(below: torch.Tensor) -> torch.Tensor:
    """Ancestors ``[B, K]`` from ``below[b, i]`` = number of sorted uniforms under the cdf at ``i``.

    Particle ``i``'s offspring fill slots ``below[i-1] .. below[i]-1``, so the ancestor of
    slot ``j`` is the number of particles whose block ends at or before ``j``: a scatter of
    block ends and a cumulative sum, O(K) with no per-particle loop.
    """
    batch, num_particles = below.shape
    below[:, -1] = num_particles  # guard against round-off in the last cdf value
    ends = torch.zeros(batch, num_particles + 1, dtype=below.dtype, device=below.device)
    ends.scatter_add_(1, below, below.new_ones(()).expand_as(below))
    return ends[:, :num_particles].cumsum_(1)


def _draw_ancestors(weights, scheme, generator):
    """Ancestors ``[K, B]`` drawn from normalised ``weights [K, B]``, in O(K) for the ordered schemes.

    The scans run along the particle axis laid out last (``[B, K]``): on a GPU a scan
    over the leading axis of ``[K, B]`` is serial in ``K``.
    """
    num_particles, batch = weights.shape
    weights = weights.T
    if scheme == "multinomial":  # a NaN weight (a caller that skipped the checks) counts as 1, not an error
        weights = torch.nan_to_num(weights, nan=1.0)
        return _particles_first(torch.multinomial(weights, num_particles, replacement=True, generator=generator))
    if weights.device.type != "cpu":
        return _search_ancestors(weights, scheme, generator).T
    # NaN weights (a caller that skipped the checks) must not become index -2**63
    scaled_cdf = torch.nan_to_num_(num_particles * torch.cumsum(weights, dim=1), nan=num_particles)
    if scheme == "systematic":
        # uniforms (j + u) / K: #{j : j + u < K c} = ceil(K c - u)
        u = torch.rand(batch, 1, device=weights.device, dtype=weights.dtype, generator=generator)
        below = torch.ceil(scaled_cdf - u)
    else:  # stratified: uniforms (j + u_j) / K, one u_j per stratum
        u = torch.rand(batch, num_particles, device=weights.device, dtype=weights.dtype, generator=generator)
        stratum = torch.floor(scaled_cdf).clamp_(max=num_particles - 1)
        inside = torch.gather(u, 1, stratum.long()) < scaled_cdf - stratum
        below = stratum + inside
    return _particles_first(_offspring_to_ancestors(below.clamp_(0, num_particles).long()))


def _particles_first(ancestors: torch.Tensor) -> torch.Tensor:
    """``[B, K] -> [K, B]``, contiguous on the CPU: the selections and gathers that follow then run on
    contiguous indices (a gather of 1000 x 16 scalar particles 59 -> 41 µs, the copy included)."""
    return ancestors.T.contiguous() if ancestors.device.type == "cpu" else ancestors.T


def _search_ancestors(weights: torch.Tensor, scheme: str, generator) -> torch.Tensor:
    """Ancestors ``[B, K]`` of the ordered schemes by a binary search of the uniforms in the cdf.

    ``O(K log K)`` work but a handful of kernels: on an accelerator, where a step costs its
    launches, this beats the ``O(K)`` scatter-and-scan of :func:`_offspring_to_ancestors`. The
    same uniforms give the same ancestors (up to round-off at block edges).
    """
    batch, num_particles = weights.shape
    shape = (batch, 1) if scheme == "systematic" else (batch, num_particles)
    u = torch.rand(shape, device=weights.device, dtype=weights.dtype, generator=generator)
    positions = (torch.arange(num_particles, device=weights.device, dtype=weights.dtype) + u) / num_particles
    ancestors = torch.searchsorted(torch.cumsum(weights, dim=1), positions, right=True)
    return ancestors.clamp_(max=num_particles - 1)  # round-off in the last cdf value


def resample(
    log_weights: torch.Tensor,
    scheme: str = "systematic",
    *,
    alpha: float = 0.5,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resample every sequence once.

    Args:
        log_weights: ``[K, B]`` log-weights (need not be normalised).
        scheme: one of :data:`SCHEMES`.
        alpha: mixing weight of the soft scheme (1 = plain multinomial, 0 = uniform).
        generator: source of the uniform draws.

    Returns:
        ``(ancestors [K, B] long, new_log_weights [K, B])``; the new log-weights are
        normalised. They are constant ``-log K`` except for ``soft`` (differentiable)
        and ``none`` (the normalised input).
    """
    check_choice(scheme, SCHEMES, name="scheme")
    if log_weights.dim() != 2:
        raise ValueError(f"log_weights must have shape [K, B], got {tuple(log_weights.shape)}")
    if scheme == "soft":
        check_probability(alpha, name="alpha", open_left=True)
    _check_log_weights(log_weights)
    return _resample_normalized(normalize(log_weights), scheme, alpha, generator)


def _check_log_weights(log_weights: torch.Tensor) -> None:
    """Raise unless every sequence of ``[K, B]`` has no NaN or +inf and some finite weight."""
    if not value_checks_enabled():
        return
    values = log_weights.detach()
    bad = torch.isnan(values).any(0) | (values == math.inf).any(0) | (values == -math.inf).all(0)
    if bool(bad.any()):
        column = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"log_weights must be finite or -inf with some finite weight per sequence [K, B]; "
            f"sequence {column} has {values[:, column].tolist()[:8]}"
        )


def _resample_normalized(log_w, scheme, alpha, generator):
    num_particles = log_w.shape[0]
    if scheme == "none":
        return torch.arange(num_particles, device=log_w.device).unsqueeze(-1).expand_as(log_w), log_w
    if scheme == "soft":
        log_q = log_w
        if alpha < 1:  # the uniform part as a 0-d tensor: broadcast, not a [K, B] allocation
            uniform = log_w.new_full((), math.log((1 - alpha) / num_particles))
            log_q = torch.logaddexp(log_w + math.log(alpha), uniform)
        ancestors = _draw_ancestors(log_q.detach().exp(), "multinomial", generator)
        return ancestors, normalize(torch.gather(log_w - log_q, 0, ancestors))
    ancestors = _draw_ancestors(log_w.detach().exp(), scheme, generator)
    return ancestors, torch.full_like(log_w, -math.log(num_particles))


def resample_adaptive(
    log_weights: torch.Tensor,
    scheme: str = "systematic",
    *,
    ess_threshold: float = 0.5,
    alpha: float = 0.5,
    generator: torch.Generator | None = None,
    ess: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Resample only the sequences whose ESS is below ``ess_threshold * K``.

    Sequences above the threshold keep their particles (identity ancestors) and
    their normalised log-weights. ``ess_threshold=1`` resamples at every step,
    ``0`` never. Passing the ESS ``[B]`` of already *normalised* ``log_weights``
    skips recomputing it (the particle filter's hot loop does).

    Returns:
        ``(ancestors [K, B], new_log_weights [K, B], resampled [B] bool)``.
    """
    check_choice(scheme, SCHEMES, name="scheme")
    if scheme == "soft":
        check_probability(alpha, name="alpha", open_left=True)
    num_particles, batch = log_weights.shape
    identity = torch.arange(num_particles, device=log_weights.device).unsqueeze(-1)
    if ess is None:
        _check_log_weights(log_weights)
        log_weights = normalize(log_weights)
        ess = effective_sample_size(log_weights)
    if scheme == "none" or ess_threshold <= 0:
        resampled = torch.zeros(batch, dtype=torch.bool, device=log_weights.device)
        return identity.expand(num_particles, batch), log_weights, resampled
    ancestors, new_log_w = _resample_normalized(log_weights, scheme, alpha, generator)
    if ess_threshold >= 1:  # every sequence: nothing to select
        return ancestors, new_log_w, torch.ones(batch, dtype=torch.bool, device=log_weights.device)
    resampled = ess < ess_threshold * num_particles
    ancestors = torch.where(resampled, ancestors, identity)
    new_log_w = torch.where(resampled, new_log_w, log_weights)
    return ancestors, new_log_w, resampled


def gather_particles(tensor: torch.Tensor, ancestors: torch.Tensor) -> torch.Tensor:
    """Select ``out[s, b, ...] = tensor[ancestors[s, b], b, ...]``.

    ``tensor`` is ``[K, B, ...]`` and ``ancestors`` ``[S, B]`` (``S`` may differ from ``K``).
    Whole particles are copied as rows of the flattened ``[K B, ...]`` tensor
    (``index_select``): on CPU about twice as fast as an element-wise ``gather`` for scalar
    particles and ten times for particles of 64 features, forward and backward.
    """
    num_particles, batch = tensor.shape[:2]
    if ancestors.dim() != 2 or ancestors.shape[1] != batch:
        raise ValueError(f"ancestors must have shape [S, B] with B = {batch}, got {tuple(ancestors.shape)}")
    extra = tensor.shape[2:]
    rows = torch.add(torch.arange(batch, device=ancestors.device), ancestors, alpha=batch)  # a * B + b
    width = math.prod(extra)
    flat = tensor.reshape(num_particles * batch, width) if width > 1 else tensor.reshape(-1)  # 1-d: 4x faster
    return flat.index_select(0, rows.reshape(-1)).reshape(ancestors.shape + extra)

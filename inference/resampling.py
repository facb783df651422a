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

from .validation import check_choice, check_probability

__all__ = [
    "SCHEMES",
    "normalize",
    "effective_sample_size",
    "resample",
    "resample_adaptive",
    "gather_particles",
]

SCHEMES = ("multinomial", "stratified", "systematic", "soft", "none")


def normalize(log_weights: torch.Tensor) -> torch.Tensor:
    """Normalise log-weights ``[K, B]`` so that ``exp`` sums to one over ``K``."""
    return log_weights - torch.logsumexp(log_weights, dim=0, keepdim=True)


def effective_sample_size(log_weights: torch.Tensor) -> torch.Tensor:
    """ESS ``1 / sum_k w_k^2`` per sequence, from log-weights ``[K, B]``; returns ``[B]``."""
    log_w = normalize(log_weights)
    return torch.exp(-torch.logsumexp(2.0 * log_w, dim=0))


def _inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Ancestors ``[K, B]`` for sorted ``uniforms [K, B]`` in [0, 1) under ``weights [K, B]``."""
    cdf = torch.cumsum(weights, dim=0).T.contiguous()  # [B, K]
    cdf[:, -1] = 1.0  # guard against round-off below the last uniform
    idx = torch.searchsorted(cdf, uniforms.T.contiguous(), right=True)
    return idx.clamp_(max=weights.shape[0] - 1).T


def _draw_ancestors(weights, scheme, generator):
    num_particles, batch = weights.shape
    device, dtype = weights.device, weights.dtype
    if scheme == "multinomial":
        return torch.multinomial(weights.T, num_particles, replacement=True, generator=generator).T
    offsets = torch.arange(num_particles, device=device, dtype=dtype).unsqueeze(-1)
    if scheme == "stratified":
        u = torch.rand(num_particles, batch, device=device, dtype=dtype, generator=generator)
    else:  # systematic
        u = torch.rand(1, batch, device=device, dtype=dtype, generator=generator)
    return _inverse_cdf(weights, (offsets + u) / num_particles)


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
    num_particles = log_weights.shape[0]
    log_w = normalize(log_weights)
    if scheme == "none":
        ancestors = torch.arange(num_particles, device=log_w.device).unsqueeze(-1).expand_as(log_w)
        return ancestors, log_w
    if scheme == "soft":
        alpha = check_probability(alpha, name="alpha", open_left=True)
        log_q = log_w
        if alpha < 1:
            uniform = torch.full_like(log_w, math.log((1 - alpha) / num_particles))
            log_q = torch.logaddexp(log_w + math.log(alpha), uniform)
        ancestors = _draw_ancestors(log_q.detach().exp(), "multinomial", generator)
        corrected = torch.gather(log_w - log_q, 0, ancestors)
        return ancestors, normalize(corrected)
    ancestors = _draw_ancestors(log_w.detach().exp(), scheme, generator)
    return ancestors, torch.full_like(log_w, -math.log(num_particles))


def resample_adaptive(
    log_weights: torch.Tensor,
    scheme: str = "systematic",
    *,
    ess_threshold: float = 0.5,
    alpha: float = 0.5,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Resample only the sequences whose ESS is below ``ess_threshold * K``.

    Sequences above the threshold keep their particles (identity ancestors) and
    their normalised log-weights. ``ess_threshold=1`` resamples at every step
    (an ESS never exceeds ``K``), ``0`` never.

    Returns:
        ``(ancestors [K, B], new_log_weights [K, B], resampled [B] bool)``.
    """
    num_particles = log_weights.shape[0]
    log_w = normalize(log_weights)
    if scheme == "none" or ess_threshold <= 0:
        resampled = torch.zeros(log_w.shape[1], dtype=torch.bool, device=log_w.device)
        return resample(log_w, "none")[0], log_w, resampled
    resampled = effective_sample_size(log_w) < ess_threshold * num_particles - 1e-9
    if ess_threshold >= 1:
        resampled = torch.ones_like(resampled)
    ancestors, new_log_w = resample(log_w, scheme, alpha=alpha, generator=generator)
    identity = torch.arange(num_particles, device=log_w.device).unsqueeze(-1)
    ancestors = torch.where(resampled, ancestors, identity)
    new_log_w = torch.where(resampled, new_log_w, log_w)
    return ancestors, new_log_w, resampled


def gather_particles(tensor: torch.Tensor, ancestors: torch.Tensor) -> torch.Tensor:
    """Select ``out[s, b, ...] = tensor[ancestors[s, b], b, ...]``.

    ``tensor`` is ``[K, B, ...]`` and ``ancestors`` ``[S, B]`` (``S`` may differ from ``K``).
    """
    extra = tensor.shape[2:]
    index = ancestors.reshape(ancestors.shape + (1,) * len(extra)).expand(ancestors.shape + extra)
    return torch.gather(tensor, 0, index)

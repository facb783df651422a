"""Exact scores of a Gaussian-mixture predictive (a particle belief with Gaussian emissions).

A weighted particle set with per-particle predictions ``N(loc_i, scale_i^2)`` and normalised
log-weights ``log w_i`` is the one-dimensional mixture ``F = sum_i w_i N(loc_i, scale_i^2)``.
Both proper scores of it have closed forms, so no sampling noise enters a comparison:

* :func:`gaussian_mixture_log_density`: ``log sum_i w_i N(y; loc_i, scale_i^2)`` (its negative is
  the NLPD of one target);
* :func:`gaussian_mixture_crps`: the continuous ranked probability score
  ``E|X - y| - E|X - X'| / 2`` (Grimit et al. 2006):
  ``sum_i w_i A(y - loc_i, scale_i^2) - 1/2 sum_ij w_i w_j A(loc_i - loc_j, scale_i^2 + scale_j^2)``
  with ``A(m, s^2) = E|N(m, s^2)| = 2 s phi(m / s) + m (2 Phi(m / s) - 1)``. One component gives
  the Gaussian closed form ``scale (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))``.

Shapes: ``y [...]``; ``loc``, ``scale``, ``log_weights`` ``[..., K]`` (broadcastable to one
another, the components last); results ``[...]``. The log-weights are normalised here (a
``logsumexp`` of 0 is not required). The cost is ``O(K^2)`` per target.
"""

from __future__ import annotations

import math

import torch

__all__ = ["gaussian_mixture_log_density", "gaussian_mixture_crps"]


def gaussian_mixture_log_density(
    y: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor, log_weights: torch.Tensor
) -> torch.Tensor:
    """``log sum_i w_i N(y; loc_i, scale_i^2)``, ``[...]`` (see the module for shapes)."""
    y, loc, scale, log_weights = _check_mixture(y, loc, scale, log_weights)
    component = torch.distributions.Normal(loc, scale).log_prob(y.unsqueeze(-1))
    return torch.logsumexp(log_weights + component, dim=-1)


def gaussian_mixture_crps(
    y: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor, log_weights: torch.Tensor
) -> torch.Tensor:
    """Exact CRPS of ``sum_i w_i N(loc_i, scale_i^2)`` at ``y``, ``[...]`` (units of ``y``; lower is better)."""
    y, loc, scale, log_weights = _check_mixture(y, loc, scale, log_weights)
    loc, scale, weights = torch.broadcast_tensors(loc, scale, log_weights.exp())
    to_target = (weights * _expected_abs(y.unsqueeze(-1) - loc, scale.square())).sum(-1)
    pair_loc = loc.unsqueeze(-1) - loc.unsqueeze(-2)  # [..., K, K]
    pair_var = scale.square().unsqueeze(-1) + scale.square().unsqueeze(-2)
    pair_weights = weights.unsqueeze(-1) * weights.unsqueeze(-2)
    return to_target - 0.5 * (pair_weights * _expected_abs(pair_loc, pair_var)).sum((-1, -2))


def _expected_abs(mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """``E|Z|`` for ``Z ~ N(mean, variance)``: the folded-normal mean."""
    sd = variance.sqrt()
    z = mean / sd
    density = torch.exp(-0.5 * z.square()) / math.sqrt(2 * math.pi)
    return 2 * sd * density + mean * torch.erf(z / math.sqrt(2))


def _check_mixture(y, loc, scale, log_weights):
    """One ValueError/TypeError naming the argument: tensors, broadcastable, finite, ``scale > 0``."""
    named = {"y": y, "loc": loc, "scale": scale, "log_weights": log_weights}
    for name, value in named.items():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            got = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got {got}")
    for name in ("loc", "scale", "log_weights"):
        if named[name].dim() == 0:
            raise ValueError(f"{name} must have the components as its last dim [..., K], got a scalar")
    try:
        lead = torch.broadcast_shapes(loc.shape, scale.shape, log_weights.shape)
        torch.broadcast_shapes(y.shape + (1,), lead)
    except RuntimeError:
        raise ValueError(
            f"shapes do not broadcast: y {tuple(y.shape)} against loc {tuple(loc.shape)}, "
            f"scale {tuple(scale.shape)}, log_weights {tuple(log_weights.shape)} "
            "(expected y [...] and [..., K])"
        ) from None
    for name in ("y", "loc", "scale"):
        if not bool(torch.isfinite(named[name]).all()):
            raise ValueError(f"{name} must be finite")
    if not bool((scale > 0).all()):
        raise ValueError(f"scale must be > 0, got minimum {float(scale.min())}")
    if bool(torch.isnan(log_weights).any()) or not bool(torch.isfinite(torch.logsumexp(log_weights, -1)).all()):
        raise ValueError("log_weights must be log-probabilities (no NaN; not all -inf in a mixture)")
    return y, loc, scale, log_weights - torch.logsumexp(log_weights, -1, keepdim=True)

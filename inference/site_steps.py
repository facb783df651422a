"""A trace's sample sites read as draws per step: the chain-rule factors of a step's log-density per feature
(:func:`entry_log_prob`), and the observed and latent sites of one pass stacked in time as ``[S, B, T, ...]``
(:func:`stack_steps`, :func:`observed_steps`, :func:`latent_steps`). A per-step site is named ``x_t`` or ``t{t}/x``."""

from __future__ import annotations

import re

import pyro.distributions as dist
import torch
from pyro.distributions.torch_distribution import ExpandedDistribution, MaskedDistribution

from .traces import latent_sites, observed_sites

__all__ = ["entry_log_prob", "stack_steps", "observed_steps", "latent_steps"]

_STEP_SITE = re.compile(r"(?P<base>.+)_(?P<t>\d+)|t(?P<t2>\d+)/(?P<base2>.+)")


def entry_log_prob(fn: dist.Distribution, value: torch.Tensor) -> torch.Tensor:
    """Chain-rule factors of ``fn.log_prob(value)`` along the last event dim: shape ``batch + event``.

    Independent features give their own log-densities; a ``MultivariateNormal`` the factors
    ``log N(x_d; mean_d + sum_{j<d} L_dj e_j, L_dd^2)``; a ``MixtureSameFamily`` of independent
    features ``log p(x_{<=d}) - log p(x_{<d})``. Masked-out entries are 0. The factors sum to
    ``fn.log_prob(value)`` over the event dims.
    """
    if isinstance(fn, dist.Independent):
        return entry_log_prob(fn.base_dist, value)
    if isinstance(fn, ExpandedDistribution):
        factors = entry_log_prob(fn.base_dist, value)
        return factors.expand(fn.batch_shape + fn.event_shape)
    if isinstance(fn, MaskedDistribution):
        factors = entry_log_prob(fn.base_dist, value)
        keep = fn._mask.reshape(fn._mask.shape + (1,) * len(fn.base_dist.event_shape))
        return factors.masked_fill(~keep, 0.0)
    if not fn.event_shape:
        return fn.log_prob(value)
    if len(fn.event_shape) == 1 and isinstance(fn, dist.MultivariateNormal):
        scale = fn.scale_tril.expand(value.shape[:-1] + fn.scale_tril.shape[-2:])
        noise = torch.linalg.solve_triangular(scale, (value - fn.loc).unsqueeze(-1), upper=False).squeeze(-1)
        diagonal = scale.diagonal(dim1=-2, dim2=-1)
        return dist.Normal(0.0, 1.0).log_prob(noise) - diagonal.log()
    if len(fn.event_shape) == 1 and isinstance(fn, dist.MixtureSameFamily):
        components = entry_log_prob(fn.component_distribution, value.unsqueeze(-2))  # [..., K, D]
        weights = torch.log_softmax(fn.mixture_distribution.logits, -1).unsqueeze(-1)
        joint = torch.logsumexp(weights + components.cumsum(-1), dim=-2)  # log p(x_{<=d}), [..., D]
        return joint - torch.cat([torch.zeros_like(joint[..., :1]), joint[..., :-1]], -1)
    if fn.event_shape[-1:] == (1,):
        return fn.log_prob(value).reshape(fn.batch_shape + fn.event_shape)
    raise ValueError(
        f"cannot split the log-density of {type(fn).__name__} (event shape {tuple(fn.event_shape)}) "
        "into per-feature factors"
    )


def stack_steps(values, count, shape):
    """``[S, B, T, D]`` from one site ``x`` (event ``[T, D]``) or per-step sites ``x_t`` / ``t{t}/x``."""
    batch, steps = shape
    by_step = {}
    for name, value in values.items():
        step = _step_index(name)
        if step is None:  # one site for the whole sequence
            return _as_draws(value, count, batch, steps)
        by_step[step] = _as_draws(value, count, batch)
    if sorted(by_step) != list(range(steps)):
        missing = sorted(set(range(steps)) - set(by_step))
        raise ValueError(f"the model's trace has no observed site for steps {missing[:5]} (expected x_t or t{{t}}/x)")
    return torch.stack([by_step[t] for t in range(steps)], 2)


def observed_steps(trace, count, shape):
    """Per-entry log-likelihoods and replicates, each ``[S, B, T, D]``, of the observed sites."""
    log_lik, replicates = {}, {}
    for name in observed_sites(trace):
        site = trace.nodes[name]
        fn = site["fn"]
        log_lik[name] = entry_log_prob(fn, site["value"].expand(fn.batch_shape + fn.event_shape))
        replicates[name] = fn.sample()
    return stack_steps(log_lik, count, shape), stack_steps(replicates, count, shape)


def latent_steps(trace, count, shape):
    """``{base name: [S, B, T, ...]}`` of the per-step latent sites of one draw per sequence and step."""
    batch, steps = shape
    found: dict[str, dict[int, torch.Tensor]] = {}
    for name in latent_sites(trace):
        step = _step_index(name)
        site = trace.nodes[name]
        if step is None or site["value"].numel() != count * batch * site["fn"].event_shape.numel():
            continue  # a site of another plate (the PF-RNN's particles) or of no step
        found.setdefault(_step_base(name), {})[step] = site["value"].reshape(count, batch, *site["fn"].event_shape)
    return {
        base: torch.stack([by_step[t] for t in range(steps)], 2)
        for base, by_step in found.items()
        if sorted(by_step) == list(range(steps))
    }


def _as_draws(values, count, batch, steps=None):
    """``values`` of a site (batch shape with draws and size-1 plates, then event) as ``[S, B, (T,) D]``."""
    lead = (count, batch) if steps is None else (count, batch, steps)
    values = values.reshape(*lead, -1)
    return values.float() if not values.is_floating_point() else values


def _step_index(name: str) -> int | None:
    match = _STEP_SITE.fullmatch(name)
    return None if match is None else int(match.group("t") or match.group("t2"))


def _step_base(name: str) -> str:
    match = _STEP_SITE.fullmatch(name)
    return match.group("base") or match.group("base2")

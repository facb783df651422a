"""Multi-step forecasts: continue filtered particles by simulating the model forward.

After :meth:`ParticleFilter.run` has filtered a prefix ``x_{1:T}``, :func:`forecast`
draws ``S`` particles per sequence from the final weighted set (the filtering
distribution ``p(z_T | x_{1:T})``) and runs the model's ``simulate`` for ``H`` steps,
each draw's own sampled observations feeding its next step. The result samples the
joint predictive ``p(x_{T+1:T+H} | x_{1:T})``.
"""

from __future__ import annotations

import pyro
import torch

from .particle_filter import FilterResult, particle_option
from .resampling import gather_particles
from .validation import check_positive_int

__all__ = ["forecast", "pick_particles"]


def pick_particles(
    result: FilterResult, count: int, generator: torch.Generator | None = None, *, replacement: bool = True
) -> torch.Tensor:
    """``[count, B]`` indices of particles drawn from the final weighted set of ``result`` (its posterior)."""
    weights = result.log_weights.detach().exp().T  # [B, K]
    return torch.multinomial(weights, count, replacement=replacement, generator=generator).T


@torch.no_grad()
def forecast(
    model,
    result: FilterResult,
    horizon: int,
    num_samples: int = 1000,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sample ``[S, B, H, D]`` continuations of the sequences the filter has seen.

    Args:
        model: the particle model the filter ran (it must declare ``simulate`` in its ``particle_options``).
        result: the :class:`FilterResult` of that run.
        horizon: ``H``, steps to forecast.
        num_samples: ``S``, forecast paths per sequence.
        generator: source of the draws of the starting particles.

    Sequences of different lengths continue from their own last valid step (the
    filter's state stays put over padding); the time index passed to ``simulate``
    counts on from the padded length.
    """
    check_positive_int(horizon, name="horizon")
    check_positive_int(num_samples, name="num_samples")
    simulate = particle_option(model, "simulate", needed_for="forecast")
    if not isinstance(result, FilterResult):  # its context may be None: a model's context is optional
        raise ValueError("result must be the FilterResult of ParticleFilter.run on this model")
    picks = pick_particles(result, num_samples, generator)  # [S, B]
    state = {k: gather_particles(v.detach(), picks) for k, v in result.state.items()}
    draws = []
    with pyro.validation_enabled(False):  # as in the filter: zero noise scales (deterministic limits) are allowed
        for h in range(horizon):
            state, x_t = simulate(state, result.num_steps_total + h, result.context)
            draws.append(x_t)
    return torch.stack(draws, dim=2)

"""Batch norms' running statistics re-estimated at the current weights (``TrainConfig.norm_refresh_batches``)."""

from __future__ import annotations

import pyro.util
import torch
from torch import nn

from .rng import rng_state, set_rng_state

__all__ = ["refresh_norm_statistics"]


@torch.no_grad()
def refresh_norm_statistics(module: nn.Module, batches, *, seed: int = 0) -> int:
    """Re-estimate the running statistics of ``module``'s batch norms at its current weights.

    Running averages taken during training lag the moving weights. Each submodule with running
    statistics (a ``reset_running_stats`` method and a ``running_mean`` buffer: ``nn.BatchNorm*``,
    :class:`~ppl_models.pf_rnn.StepBatchNorm`) is reset, then ``module(*batch)`` runs in training
    mode, without gradients, on each of ``batches`` (tuples of tensors), every batch weighing the
    same (momentum ``1 / (i + 1)`` at batch ``i``): the statistics become the average of the
    batches' own. Draws come from ``seed``; the caller's random streams, modes and momenta are
    restored. Returns the number of norm layers refreshed.
    """
    norms = [
        m
        for m in module.modules()
        if callable(getattr(m, "reset_running_stats", None)) and getattr(m, "running_mean", None) is not None
    ]
    modes = {m: m.training for m in module.modules()}
    momenta = [m.momentum for m in norms]
    state = rng_state()
    try:
        pyro.util.set_rng_seed(seed)
        module.train()
        for norm in norms:
            norm.reset_running_stats()
        for index, batch in enumerate(batches if norms else ()):
            for norm in norms:
                norm.momentum = 1.0 / (index + 1)
            module(*batch)
    finally:
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum
        for m, mode in modes.items():
            m.training = mode
        set_rng_state(state)
    return len(norms)

"""The validation of a training run: the objective's bound per time step over the whole validation set, the
number that drives early stopping and the best checkpoint."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .batches import length_batches, trim_padding
from .distributed import sum_over_ranks

__all__ = ["validation_bound"]


@torch.no_grad()
def validation_bound(
    objective: nn.Module,
    data: tuple[torch.Tensor, ...],
    scored: torch.Tensor | None,
    batch: Callable[[tuple[torch.Tensor, ...], torch.Tensor], tuple[torch.Tensor, ...]],
    *,
    batch_size: int,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> float:
    """``sum(bound) / sum(num_steps)`` of ``objective`` (in eval mode, at ``kl_factor`` 1) over ``data`` (``(x [N,
    T, D], mask [N, T][, y])``), taken in batches of similar length, this rank's share summed over the ranks on
    ``device``.

    ``scored`` (``[N, T]`` or ``None``): the steps scored, each row's other valid steps its context, whose bound is
    taken off (:func:`given_context`). ``batch(data, index)`` gives rows ``index`` on the training device.
    """
    objective.eval()
    objective.kl_factor = 1.0
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    for index in length_batches(data[1], batch_size, rank=rank, world_size=world_size):
        rows = batch(data, index)
        out = objective(*rows)
        bound, steps = out.bound, out.num_steps
        if scored is not None:
            bound, steps = given_context(objective, *rows, scored[index][:, : rows[0].shape[1]], bound)
        totals += torch.stack([bound.sum().double(), steps.sum().double()])
    totals = sum_over_ranks(totals)
    return (totals[0] / totals[1]).item()


def given_context(
    objective: nn.Module, x: torch.Tensor, mask: torch.Tensor, scored: torch.Tensor, bound: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bound [B] of the scored steps given the context, scored steps [B])`` of a validation batch whose
    ``bound [B]`` covers every valid step: the objective's estimate on each row's context is taken off."""
    scored = scored.to(mask.device)
    context = mask & ~scored
    rows = context.any(1)
    if bool(rows.any()):
        bound = bound.clone()
        bound[rows] = bound[rows] - objective(*trim_padding(x[rows], context[rows])).bound
    return bound, scored.sum(1)

"""Training and evaluation objectives, each an ``nn.Module`` over a batch of sequences.

Every objective maps ``(x [B, T, D], mask [B, T])`` to an :class:`ObjectiveOutput`:
a scalar ``loss`` to minimise (minus the bound summed over sequences, divided by the
number of valid time steps, so learning rates do not depend on sequence length) and
the per-sequence ``bound`` in nats, which callers divide by ``num_steps`` to report
per-time-step figures. Objectives are modules so that ``DistributedDataParallel``
can wrap them; ``kl_factor`` is the annealing temperature that the training loop sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .validation import check_sequences

__all__ = ["ObjectiveOutput", "Objective", "ExactLikelihood"]


@dataclass
class ObjectiveOutput:
    """``loss``: scalar to minimise; ``bound``: ``[B]`` nats per sequence; ``num_steps``: ``[B]``."""

    loss: torch.Tensor
    bound: torch.Tensor
    num_steps: torch.Tensor

    @property
    def per_step(self) -> torch.Tensor:
        """The bound per valid time step, pooled over the batch (a 0-d tensor)."""
        return self.bound.sum() / self.num_steps.sum()


class Objective(nn.Module):
    """Base class: holds the model (a submodule, so its parameters are the objective's)."""

    #: which estimate ``bound`` is, for reports: ``exact``, ``elbo``, ``iwae-K``, ``smc-K``.
    kind: str = "objective"

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.kl_factor = 1.0

    def bound(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` per-sequence estimate of ``log p(x)``; subclasses define it."""
        raise NotImplementedError

    def surrogate(self, x: torch.Tensor, mask: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
        """``[B]`` quantity whose gradient is the training signal (default: the bound itself)."""
        return bound

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> ObjectiveOutput:
        x, mask = check_sequences(x, mask)
        bound = self.bound(x, mask)
        num_steps = mask.sum(1)
        loss = -self.surrogate(x, mask, bound).sum() / num_steps.sum().clamp(min=1)
        return ObjectiveOutput(loss=loss, bound=bound, num_steps=num_steps)


class ExactLikelihood(Objective):
    """Exact ``log p(x)`` of a model with a ``log_likelihood(x, mask) -> [B]`` method (e.g. the LGSSM)."""

    kind = "exact"

    def bound(self, x, mask):
        return self.model.log_likelihood(x, mask)

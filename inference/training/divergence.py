"""A diverging run, told apart from a plain error: :class:`TrainingDiverged`, raised where the loss became NaN or
infinite, or where a step failed after the parameters' norm blew up since the start of ``fit``."""

from __future__ import annotations

import math

import torch

from .settings import TrainConfig

__all__ = ["TrainingDiverged", "BLOWN_UP", "parameter_norm", "diverged", "blown_up"]

#: a step that fails after the parameters' norm grew this many times since the start of ``fit`` is a divergence
BLOWN_UP = 100.0


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; the run folder keeps its last good checkpoint."""


@torch.no_grad()
def parameter_norm(parameters: list[torch.Tensor]) -> float:
    """Global L2 norm of ``parameters`` (``inf`` or ``nan`` if any is)."""
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p) for p in parameters])))


def diverged(config: TrainConfig, epoch: int, where: str, what: str) -> TrainingDiverged:
    """The error of a run that diverged at ``where`` (a step, or the validation) of epoch ``epoch + 1`` (``epoch``
    epochs done) because of ``what``, with its likely causes."""
    kept = f"checkpoints/last.pt of epoch {epoch} is kept" if epoch else "no checkpoint was written"
    return TrainingDiverged(
        f"training diverged at epoch {epoch + 1}, {where}: {what}; likely causes: a "
        f"learning rate too high (lr={config.lr:g}), no or loose gradient clipping (clip_norm={config.clip_norm}), "
        f"or extreme values in the data; {kept}"
    )


def blown_up(error: BaseException, norm: float, start: float) -> str | None:
    """Why ``error`` counts as a divergence (the parameters' norm went from ``start`` to ``norm``, non-finite or
    more than :data:`BLOWN_UP` times larger), or ``None``: a plain error."""
    if math.isfinite(norm) and norm <= BLOWN_UP * max(start, 1e-12):
        return None
    reason = " ".join(str(error).split())
    reason = reason if len(reason) <= 200 else reason[:200].rsplit(" ", 1)[0] + " ..."  # cut at a word, said so
    return (
        f"the parameters' norm went from {start:.3g} (start of fit) to {norm:.3g} and this "
        f"failed ({type(error).__name__}: {reason})"
    )

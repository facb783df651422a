"""Where a training run computes: its device and, under ``torchrun`` (``torch.distributed``), its share of the ranks."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

__all__ = ["distributed", "rank_and_size", "resolve_device", "wrap", "sum_over_ranks"]


def distributed() -> bool:
    """Whether ``torch.distributed`` is initialised (the process is one rank of several)."""
    return dist.is_available() and dist.is_initialized()


def rank_and_size() -> tuple[int, int]:
    """``(rank, world size)`` of this process: ``(0, 1)`` outside ``torch.distributed``."""
    return (dist.get_rank(), dist.get_world_size()) if distributed() else (0, 1)


def resolve_device(device, objective: nn.Module) -> torch.device:
    """``None``: the device of the objective's first parameter (CPU if it has none)."""
    if device is None:
        parameter = next(objective.parameters(), None)
        return torch.device("cpu") if parameter is None else parameter.device
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got {device!r}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device is {device!r} but CUDA is not available here (torch.cuda.is_available() is False)")
    if device.type == "cuda" and device.index is None:  # one GPU per process under torchrun
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    return device


def wrap(objective: nn.Module, device: torch.device) -> nn.Module:
    """``DistributedDataParallel(objective)`` under ``torch.distributed``, else the objective itself.

    ``find_unused_parameters`` is on because objectives often leave some parameters out
    (an exact likelihood ignores the guide's).
    """
    if not distributed():
        return objective
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(objective, device_ids=device_ids, find_unused_parameters=True)


def sum_over_ranks(totals: torch.Tensor) -> torch.Tensor:
    """``totals`` summed in place over the ranks (unchanged outside ``torch.distributed``)."""
    if distributed():
        dist.all_reduce(totals)
    return totals

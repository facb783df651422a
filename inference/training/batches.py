"""The data a :class:`~ppl_models.inference.training.trainer.Trainer` takes, and how it is cut into batches.

Training data is ``(x [N, T, D], mask [N, T])`` or, for a supervised objective, ``(x, mask, y [N, ...])``
(:func:`check_data`). An epoch shuffles it into minibatches (:func:`epoch_batches`), or, for truncated BPTT, takes
its rows as consecutive chunks of continuous streams, in order (:func:`stream_batches`); evaluation takes it in batches
of similar length (:func:`length_batches`; fewer rows where the lengths are skewed), each cut to its longest sequence
(:func:`trim_padding`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..data.datasets import PADDING_LIMIT, skewed
from ..validation import check_sequences
from .rng import SHUFFLE_STREAM, derived_seed

__all__ = [
    "check_data",
    "epoch_batches",
    "stream_batches",
    "check_streams",
    "batches_per_epoch",
    "length_batches",
    "trim_padding",
]


def check_data(data, name: str, model: nn.Module | None = None) -> tuple[torch.Tensor, ...]:
    """Validate ``(x [N, T, D], mask [N, T] or None)`` or ``(x, mask, y [N, ...])``; return it with the mask filled.

    With ``model`` (the objective's), ``x`` is checked against it as at every step (dtype,
    feature size, values), so a mismatch is refused before training, not after an epoch.
    """
    if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
        raise ValueError(
            f"{name} must be a pair (x [N, T, D], mask [N, T]) or a triple (x, mask, y [N, ...]) "
            f"of supervised data, got {type(data).__name__}"
            + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
        )
    x, mask = check_sequences(data[0], data[1], name=f"{name}[0]", model=model)
    if len(data) == 2:
        return x, mask
    y = data[2]
    if not isinstance(y, torch.Tensor) or y.dim() == 0 or y.shape[0] != x.shape[0]:
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"{name}[2] (targets y) must be a tensor with N = {x.shape[0]} rows like x, got {got}")
    return x, mask, y


def epoch_batches(
    num_items: int, batch_size: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1
) -> list[torch.Tensor]:
    """Minibatch indices (CPU ``int64`` tensors) of one epoch for one process.

    A permutation of ``range(num_items)`` drawn from a generator seeded by ``(seed, epoch)``,
    the same on every rank, is padded by wrapping around to a multiple of ``world_size``, dealt
    out (``rank::world_size``) and cut into batches of ``batch_size`` (the last may be smaller),
    so every rank gets the same number of batches and together they cover every item.
    """
    generator = torch.Generator().manual_seed(derived_seed(SHUFFLE_STREAM, seed, epoch))
    order = torch.randperm(num_items, generator=generator)
    total = math.ceil(num_items / world_size) * world_size
    order = order.repeat(math.ceil(total / num_items))[:total]
    return list(order[rank::world_size].split(batch_size))


def stream_batches(num_items: int, streams: int, *, rank: int = 0, world_size: int = 1) -> list[torch.Tensor]:
    """Batch indices (CPU ``int64`` tensors) of one epoch of truncated BPTT over ``streams`` continuous streams.

    The ``num_items`` rows are consecutive chunks of one text, in order. Stream ``s`` is rows ``s C .. s C + C - 1``
    with ``C = num_items // streams`` (the last ``num_items mod streams`` rows are left out); batch ``c`` is
    ``[c, C + c, 2 C + c, ...]``, row ``c`` of every stream, for ``c = 0 .. C - 1`` in order. Process ``rank`` of
    ``world_size`` takes the streams ``rank::world_size`` of every batch.
    """
    chunks = check_streams(num_items, streams, world_size)
    starts = torch.arange(streams)[rank::world_size] * chunks
    return [starts + c for c in range(chunks)]


def check_streams(num_items: int, streams: int, world_size: int = 1) -> int:
    """The chunks per stream, ``num_items // streams``; ``ValueError`` where that is 0 or ``streams`` is not a
    multiple of ``world_size``."""
    if streams > num_items:
        raise ValueError(f"TrainConfig.streams={streams} is more than the {num_items} training rows (chunks)")
    if streams % world_size:
        raise ValueError(f"TrainConfig.streams={streams} must be a multiple of the {world_size} processes")
    return num_items // streams


def batches_per_epoch(num_items: int, batch_size: int, world_size: int) -> int:
    """How many batches :func:`epoch_batches` gives each of ``world_size`` processes."""
    return math.ceil(math.ceil(num_items / world_size) / batch_size)


def length_batches(mask: torch.Tensor, batch_size: int, *, rank: int = 0, world_size: int = 1) -> list[torch.Tensor]:
    """Evaluation batches (CPU ``int64`` index tensors): rows of ``mask [N, T]`` longest first.

    Sequences of similar length share a batch, so :func:`trim_padding` leaves little padding;
    the rows are dealt out ``rank::world_size`` before being cut into batches of ``batch_size``
    rows, fewer where the lengths are skewed (:func:`~ppl_models.inference.data.datasets.skewed`): a batch then
    pads to at most ``batch_size`` times :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` times the
    mean length, and holds no row shorter than its longest over that limit, so a sequence far longer than the
    others goes alone and no batch pads to more than that limit times its steps (where padding every row to the
    longest stays within that limit, every batch has ``batch_size`` rows).
    """
    lengths = mask.sum(1).cpu()
    order = lengths.argsort(descending=True, stable=True)[rank::world_size]
    budget = batch_size * PADDING_LIMIT * int(lengths.sum())  # rows x longest x N, in whole numbers
    ends = _similar_ends(lengths[order]) if skewed(lengths.tolist()) else None
    batches, start = [], 0
    while start < len(order):
        longest = max(1, int(lengths[order[start]])) * len(lengths)
        size = min(batch_size, max(1, budget // longest))
        batches.append(order[start : start + size if ends is None else min(start + size, int(ends[start]))])
        start += len(batches[-1])
    return batches


def _similar_ends(lengths: torch.Tensor) -> torch.Tensor:
    """For each position ``i`` of ``lengths [n]`` (longest first), the first position after it whose length is
    shorter than ``lengths[i]`` over :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` ``[n]``."""
    shortest = -lengths.double()  # ascending
    return torch.maximum(
        torch.searchsorted(shortest, shortest / PADDING_LIMIT, side="right"), torch.arange(1, len(lengths) + 1)
    )


def trim_padding(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [B, T', D], mask [B, T'])`` without the trailing steps that are padding in every row.

    A model that respects its mask gives the same result on the trimmed batch; the time it
    spends is that of the longest sequence in the batch rather than of the whole data set.
    """
    valid = mask.any(0).nonzero()
    steps = int(valid[-1]) + 1 if len(valid) else 1
    return x[:, :steps], mask[:, :steps]

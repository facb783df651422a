"""Sequences of very skewed lengths: whether padding them to the longest is wasteful (:func:`skewed`) and the piece
length that keeps it within :data:`PADDING_LIMIT` times their steps (:func:`chunk_length`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["PADDING_LIMIT", "chunk_length", "skewed", "padding_ratio"]

#: a split whose padding to its longest sequence would hold more than this many times its steps is skewed: its long
#: training series are cut into pieces (:meth:`~ppl_models.inference.data.splits.DataSplits.chunked`), and a warning
#: says so
PADDING_LIMIT = 10


def chunk_length(lengths: Sequence[int], limit: float = PADDING_LIMIT) -> int | None:
    """The piece length ``C >= 2`` at which sequences of ``lengths``, each longer than ``C`` cut into consecutive
    pieces of ``C`` steps, pad to at most ``limit`` times their steps (pieces x ``C`` elements); ``None`` where
    padding them whole to the longest already does."""
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 1.5:
        raise ValueError(f"limit: expected a number >= 1.5 (pieces of 2 steps pad to up to 1.5 times), got {limit!r}")
    lengths = np.asarray(lengths, dtype=np.int64)
    budget = limit * lengths.sum()
    if not skewed(lengths, limit):
        return None
    fits, too_long = 2, int(lengths.max())
    while too_long - fits > 1:  # the pieces' padding grows with their length, up to multiples
        middle = (fits + too_long) // 2
        fits, too_long = (middle, too_long) if np.ceil(lengths / middle).sum() * middle <= budget else (fits, middle)
    return fits


def skewed(lengths: Sequence[int], limit: float = PADDING_LIMIT) -> bool:
    """Whether sequences of ``lengths`` padded to the longest would hold more than ``limit`` times their steps."""
    return padding_ratio(lengths) > limit


def padding_ratio(lengths: Sequence[int]) -> float:
    """How many times its steps sequences of ``lengths`` hold padded to the longest: ``N max(T_i) / sum(T_i)``."""
    return float(len(lengths) * np.max(lengths) / np.sum(lengths))

"""Sequences ``[T_i, D]`` of any lengths as tensors: each alone (:func:`tensor_rows`) or padded to the longest
(:func:`pad_rows`), standardised on the way."""

from __future__ import annotations

import numpy as np
import torch

from .standardize import Standardizer

__all__ = ["as_2d", "tensor_rows", "pad_rows"]


def as_2d(array, name: str) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        array = array.detach().cpu().numpy()
    try:
        array = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers [T_i, D], got {type(array).__name__}") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name}: expected shape [T_i, D] or [T_i], got {list(array.shape)}")
    return array


def tensor_rows(
    sequences: list[np.ndarray], dtype: torch.dtype, standardizer: Standardizer | None = None
) -> list[torch.Tensor]:
    """Each of ``sequences`` ``[T_i, D]`` as a tensor in ``dtype``, standardised (in float64, before the cast to
    ``dtype``) by ``standardizer`` if given."""
    if standardizer is None:
        return [torch.as_tensor(s, dtype=dtype) for s in sequences]
    return [standardizer.transform(torch.as_tensor(s, dtype=torch.float64)).to(dtype) for s in sequences]


def pad_rows(
    sequences: list[np.ndarray], dtype: torch.dtype, standardizer: Standardizer | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [N, max T, D] in dtype, mask [N, max T])`` of :func:`tensor_rows`, zeros after each end: one sequence at a
    time, so nothing wider than ``dtype`` is ever padded."""
    rows = tensor_rows(sequences, dtype, standardizer)
    lengths = torch.tensor([len(row) for row in rows])
    x = torch.zeros(len(rows), int(lengths.max()), rows[0].shape[1], dtype=dtype)
    for i, row in enumerate(rows):
        x[i, : len(row)] = row
    return x, torch.arange(x.shape[1]) < lengths.unsqueeze(1)

"""Whitened projections of feature blocks for two-stage regression: the start of the PSRNN authors' code.

The authors' code (github cmdowney/psrnn, ``two_stage_regression.py``) projects each block of random Fourier features
on the leading left singular vectors of its cross-covariance with a partner block, each vector divided by the square
root of its singular value (:func:`whitened_directions`): the observation features against the history features
(second moments, uncentred), the history features against the future features and the future features against the
history features (both centred). The projections are applied to the uncentred features. The PSRNN's own start
(:meth:`~ppl_models.psrnn.PSRNNLayer.two_stage_regression`) uses them with ``projections="whitened"``.
"""

from __future__ import annotations

import torch

from ppl_models.inference.validation import check_positive_int

__all__ = ["whitened_directions"]


def whitened_directions(x: torch.Tensor, y: torch.Tensor, rank: int, *, centre: bool) -> torch.Tensor:
    """``[p, rank]``: ``u_i / sqrt(s_i)`` for the ``rank`` leading singular triples ``(u_i, s_i, v_i)`` of the
    cross-covariance ``C = x^T y / n`` of ``x [n, p]`` and ``y [n, q]`` (each centred on its mean with ``centre``),
    largest first (a zero singular value gives a zero column, as in the authors' code). Solved in double precision;
    the vectors' signs are the SVD's (another sign flips a coordinate of the state or encoding, the same model)."""
    check_positive_int(rank, name="rank")
    if x.dim() != 2 or y.dim() != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have shapes [n, p] and [n, q], got {tuple(x.shape)} and {tuple(y.shape)}")
    if rank > min(x.shape[1], y.shape[1]):
        raise ValueError(f"rank must be <= min(p, q) = {min(x.shape[1], y.shape[1])}, got {rank}")
    x, y = x.double(), y.double()
    if centre:
        x, y = x - x.mean(0), y - y.mean(0)
    vectors, values, _ = torch.linalg.svd(x.T @ y / x.shape[0], full_matrices=False)
    values = values[:rank]
    scale = torch.where(values > 0, values.clamp(min=1e-300).rsqrt(), torch.zeros_like(values))
    return vectors[:, :rank] * scale

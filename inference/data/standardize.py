"""The standardisation of a user's data: per-feature ``(x - mean) / scale``, fit on the training split, kept in
the run folder and the checkpoints, and undone for every figure in the data's units."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .data_warnings import warn_once

__all__ = ["Standardizer"]


@dataclass
class Standardizer:
    """Per-feature ``(x - mean) / scale``, fit on a training split; identity for binary data.

    ``mean`` and ``scale`` are ``[D]`` lists of float64 numbers (``scale`` positive), in the data's
    own units. Every map computes in float64 and returns its input's dtype unless given another: a
    float32 value keeps only ~7 digits, so values in the data's units (``1e9 + x``) need
    ``dtype=torch.float64`` to keep ``x``.
    """

    mean: list[float]
    scale: list[float]
    features: list[str]

    @classmethod
    def fit(
        cls,
        sequences: Sequence[np.ndarray],
        features: list[str],
        *,
        binary: bool,
        source: str = "data",
        what: str = "feature",
    ) -> Standardizer:
        """Fit on ``sequences`` ``[T_i, D]``: every valid step of every sequence weighs the same.

        Each ``what`` is scaled by its own standard deviation, however small, unless it is constant
        (no spread beyond float64 rounding of its values): then it is only centred, and a
        :class:`DataWarning` names it (``source`` names the file).
        """
        dim = len(features)
        if binary:
            return cls([0.0] * dim, [1.0] * dim, list(features))
        values = np.concatenate([np.asarray(s, dtype=np.float64) for s in sequences])
        shift = values[0]  # about the first value: exact differences, so no digits are lost to a large offset
        mean, scale = shift + (values - shift).mean(0), (values - shift).std(0)
        constant = ~(scale > 4 * np.finfo(np.float64).eps * np.abs(values).max(0))
        warn_once(
            source,
            "constant on the training split, so centred but not scaled:",
            [f"{what} {features[d]!r} (every value {mean[d]:.6g})" for d in np.flatnonzero(constant)],
            "check the file, or leave the column out",
        )
        return cls(mean.tolist(), np.where(constant, 1.0, scale).tolist(), list(features))

    @property
    def identity(self) -> bool:
        return all(m == 0 for m in self.mean) and all(s == 1 for s in self.scale)

    def _stats(self, like: torch.Tensor):
        return (
            torch.tensor(self.mean, dtype=torch.float64, device=like.device),
            torch.tensor(self.scale, dtype=torch.float64, device=like.device),
        )

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Data units to standard units, ``x [..., D]`` (computed in float64, returned in ``x``'s dtype)."""
        mean, scale = self._stats(x)
        return ((x.double() - mean) / scale).to(x.dtype)

    def inverse(self, z: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Standard units back to the data's units, ``z [..., D]`` (draws, means, forecasts), in ``dtype``
        (default ``z``'s; ``torch.float64`` keeps the digits of a large mean)."""
        mean, scale = self._stats(z)
        return (z.double() * scale + mean).to(dtype or z.dtype)

    def inverse_scale(self, s: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """A spread (standard deviation, interval width) ``[..., D]`` back to the data's units, in ``dtype``
        (default ``s``'s)."""
        return (s.double() * self._stats(s)[1]).to(dtype or s.dtype)

    def to_dict(self) -> dict:
        return {"features": list(self.features), "mean": list(self.mean), "scale": list(self.scale)}

    @classmethod
    def from_dict(cls, record: dict) -> Standardizer:
        return cls([float(m) for m in record["mean"]], [float(s) for s in record["scale"]], list(record["features"]))

"""Input checks and conversions shared by the calibration metrics, storage and plots."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch

from ..validation import check_sequences


def _as_float_tensor(value, name: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(value).__name__}")
    return value.detach() if value.is_floating_point() else value.detach().double()


def _as_mask(mask, device) -> torch.Tensor | None:
    if mask is None:
        return None
    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor or numpy.ndarray of shape [B, T], got {type(mask).__name__}")
    return mask.to(device)


def _check_predictive(predictive, observed, mask, *, min_samples: int = 1):
    """Validate ``predictive [S, B, T, D]`` (``S >= min_samples``), ``observed [B, T, D]``, ``mask``.

    Returns them with one dtype and device.
    """
    predictive = _as_float_tensor(predictive, "predictive")
    if predictive.dim() != 4:
        raise ValueError(f"predictive must have shape [S, B, T, D] (4 dims), got shape {tuple(predictive.shape)}")
    if predictive.shape[0] < min_samples:
        raise ValueError(f"predictive needs S >= {min_samples} samples, got shape {tuple(predictive.shape)}")
    observed = _as_float_tensor(observed, "observed").to(predictive.device)
    observed, mask = check_sequences(observed, _as_mask(mask, predictive.device), name="observed", prefix=False)
    _require_valid_step(mask)
    if observed.shape != predictive.shape[1:]:
        raise ValueError(
            f"observed must have shape [B, T, D] = {tuple(predictive.shape[1:])} to match predictive, "
            f"got {tuple(observed.shape)}"
        )
    if not bool(torch.isfinite(predictive[:, mask]).all()):
        raise ValueError("predictive contains NaN or inf at valid (unmasked) steps")
    dtype = torch.promote_types(predictive.dtype, observed.dtype)
    return predictive.to(dtype), observed.to(dtype), mask


def _require_valid_step(mask: torch.Tensor) -> None:
    if not bool(mask.any()):
        raise ValueError("mask must mark at least one valid step, got none (all False)")


def _check_levels(levels, name: str = "levels") -> tuple[float, ...]:
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1), got {levels!r}")
    if not levels or not all(isinstance(level, numbers.Real) and 0 < level < 1 for level in levels):
        raise ValueError(f"{name} must be a non-empty sequence of numbers in (0, 1), got {levels!r}")
    return tuple(float(level) for level in levels)


def _to_numpy(values: torch.Tensor) -> np.ndarray:
    return values.detach().cpu().numpy()

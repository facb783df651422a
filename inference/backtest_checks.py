"""The checks of a backtest's arguments (its data, the forecaster, the standardizer) and of what the forecaster
draws at each origin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .data import DataUnits
from .validation import InputTypeError, check_memory, check_sequences

__all__ = [
    "check_data",
    "default_scored",
    "check_binary",
    "check_forecaster",
    "check_standardizer",
    "check_draw_memory",
    "check_starts",
    "checked_draws",
    "checked_binary",
]

#: the arguments of ``forecast`` that the backtest itself gives
_RESERVED = ("x", "mask", "horizon", "num_samples", "generator")


def check_data(x, mask, scored):
    """``(x, mask, scored)`` checked; ``scored`` defaults to every valid step but the first."""
    x, mask = check_sequences(x, mask)
    if scored is None:
        return x, mask, default_scored(mask)
    if not isinstance(scored, torch.Tensor) or scored.dtype != torch.bool:
        raise InputTypeError(f"scored must be a bool torch.Tensor [N, T] or None, got {_kind(scored)}")
    if tuple(scored.shape) != tuple(mask.shape):
        raise ValueError(f"scored must have shape [N, T] = {tuple(mask.shape)} to match x, got {tuple(scored.shape)}")
    scored = scored.to(mask.device)
    if bool((scored & ~mask).any()):
        raise ValueError("scored must mark valid steps only (a subset of mask), got a True where mask is False")
    return x, mask, scored


def default_scored(mask: torch.Tensor) -> torch.Tensor:
    """``[N, T]`` every valid step of ``mask`` but each row's first."""
    scored = mask.clone()
    scored[:, 0] = False
    return scored


def check_binary(binary, x: torch.Tensor, mask: torch.Tensor) -> bool:
    """``binary`` checked (a bool or ``None``); ``None``: whether every valid value of ``x`` is 0 or 1."""
    if binary is not None and not isinstance(binary, bool):
        raise InputTypeError(f"binary must be a bool or None, got {type(binary).__name__}")
    values = x[mask]
    return bool(((values == 0) | (values == 1)).all()) if binary is None else binary


def check_forecaster(forecaster, forecast_kwargs, generator):
    """``forecast(x, mask, horizon, num_samples)`` of ``forecaster`` with ``generator`` and ``forecast_kwargs``."""
    method = getattr(forecaster, "forecast", None)
    if not callable(method):
        raise InputTypeError(
            "forecaster must have a method forecast(x, mask, horizon, num_samples, generator=...), "
            f"got {type(forecaster).__name__}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InputTypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if forecast_kwargs is not None and not isinstance(forecast_kwargs, Mapping):
        raise InputTypeError(f"forecast_kwargs must be a dict or None, got {type(forecast_kwargs).__name__}")
    clash = sorted(set(forecast_kwargs or {}) & set(_RESERVED))
    if clash:
        raise ValueError(f"forecast_kwargs must not hold {clash}: the backtest gives those itself")
    options = {**(forecast_kwargs or {}), "generator": generator}
    return lambda x, mask, horizon, num_samples: method(x, mask, horizon, num_samples, **options)


def check_standardizer(standardizer, x: torch.Tensor) -> None:
    features = x.shape[-1]
    if standardizer is None:
        return
    if isinstance(standardizer, DataUnits):
        standardizer.check(x)
        return
    if not callable(getattr(standardizer, "inverse", None)) or not hasattr(standardizer, "mean"):
        raise InputTypeError(f"standardizer must be a Standardizer or None, got {type(standardizer).__name__}")
    if len(standardizer.mean) != features:
        raise ValueError(f"standardizer has {len(standardizer.mean)} features, x has {features}")


def check_starts(starts, scored: torch.Tensor) -> list[list[int]]:
    """``starts`` (per row of ``scored [N, T]``, its origin steps) as lists of ints; raise unless there is one list
    per row, each of increasing scored steps after step 0."""
    rows = scored.shape[0]
    if isinstance(starts, (str, bytes)) or not isinstance(starts, Sequence):
        raise InputTypeError(f"starts must be a list of lists of origin steps, one per row, got {_kind(starts)}")
    if len(starts) != rows:
        raise ValueError(f"starts must give one list of origin steps per row ({rows} rows), got {len(starts)}")
    checked = []
    for r, row in enumerate(starts):
        if any(not isinstance(step, (int, np.integer)) or isinstance(step, bool) for step in row):
            raise InputTypeError(f"starts[{r}] must hold integer steps, got {list(row)}")
        steps = [int(step) for step in row]
        bad = [s for s in steps if not 1 <= s < scored.shape[1] or not bool(scored[r, s])]
        if bad or steps != sorted(set(steps)):
            what = f"step {bad[0]} is not a scored step after step 0" if bad else "the steps are not increasing"
            raise ValueError(f"starts[{r}] must be increasing scored steps after step 0 of row {r}: {what}")
        checked.append(steps)
    return checked


def check_draw_memory(num_samples: int, rows: int, horizon: int, features: int) -> None:
    """Refuse ``num_samples`` whose draws of one origin, with their float64 copies, exceed the free memory."""
    size = num_samples * rows * horizon * features
    how = f"{num_samples} x {rows} x {horizon} x {features} draws (samples x rows x steps x features), 3 float64 copies"
    check_memory({"num_samples": (num_samples, 3 * 8 * size, how)})


def checked_draws(draws, shape: tuple, index: int) -> torch.Tensor:
    """The forecaster's draws at origin ``index`` as a tensor (a numpy array is taken too); raise unless they are
    finite, of ``shape``."""
    if isinstance(draws, np.ndarray):
        draws = torch.from_numpy(draws)
    if not isinstance(draws, torch.Tensor) or tuple(draws.shape) != shape:
        raise ValueError(
            f"forecaster.forecast must return draws [S, B, H, D] = {list(shape)} at origin {index}, got {_kind(draws)}"
        )
    if not bool(torch.isfinite(draws).all()):
        raise ValueError(f"forecaster.forecast returned NaN or inf draws at origin {index}")
    return draws


def checked_binary(draws: torch.Tensor, index: int) -> torch.Tensor:
    """``draws [S, B, H, D]`` of binary data at origin ``index``, in its units; raise unless each is 0 or 1."""
    other = draws[(draws != 0) & (draws != 1)]
    if other.numel():
        raise ValueError(
            f"forecaster.forecast must draw 0 or 1 on binary data, got {float(other[0]):g} at origin {index}"
        )
    return draws


def _kind(value) -> str:
    """A value's type, with its dtype and shape for a tensor."""
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor of shape {list(value.shape)}"
    return type(value).__name__

"""An hourly table as windows of per-step regression targets: :func:`build_windows` and its :class:`RegressionData`.

The preprocessing, in this order (the window settings are a
:class:`~ppl_models.experiments.tasks.hourly_window_spec.HourlyWindowSpec`):

1. **Chronological split** of the hours: the first ``fractions[0]`` train, the next
   ``fractions[1]`` validate, the rest test (``round(n * share)`` cut points). Windows never
   cross a cut, so no hour is in two splits and every test hour follows every training hour.
2. **Missing inputs** are forward-filled (the last observed value: causal, no look-ahead); an
   indicator input ``inputs_missing`` is 1 at hours where any measured input was filled. A
   value missing before the first observation becomes the training mean.
3. **Lagged target** (``lagged_target=True``, the default): the inputs also hold the last
   observed target value *before* the hour (``y_{t-1}``, forward-filled over gaps) and an
   indicator ``lag_missing`` that ``y_{t-1}`` itself is missing. The task is then a one-step
   ahead forecast given the current covariates. ``lagged_target=False`` predicts the target
   from the covariates alone.
4. **Calendar**: hour of day and day of week as ``(sin, cos)`` pairs.
5. **Normalisation**: measured inputs, the lag and the target are standardised by the mean
   and standard deviation (``ddof=0``) of their *observed* values in the training hours only;
   the lag uses the target's statistics. Indicators, one-hots and the sin/cos pairs stay as they are.
6. **Windows** of ``window`` consecutive hours (default 24) with a target at every step.
   Training windows start every ``stride`` hours (overlapping when ``stride < window``);
   validation and test windows do not overlap (stride ``window``), so each test hour is scored
   once. A **missing target** stays NaN in ``y``: that hour is not scored (training uses
   ``DiscriminativeLoss(missing_targets=True)``), while its inputs still update the belief.
   Windows with no observed target at all are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import torch

from ..data import SPLITS, SupervisedData
from .hourly_window_spec import HourlyWindowSpec

__all__ = ["RegressionData", "build_windows"]

#: named input columns ``[(name, [H])]``, in column order
Columns = list[tuple[str, np.ndarray]]


@dataclass
class RegressionData(SupervisedData):
    """Windows of one regression task and what is needed to undo the normalisation.

    Attributes:
        splits: ``{"train" | "valid" | "test": (x [N, T, D], None, y [N, T, 1])}``, float32,
            normalised; ``None`` is the mask (every step of every window has its inputs);
            ``y`` is NaN at hours whose target is missing.
        feature_names: the ``D`` input names, in column order.
        target: the target column; units: its units.
        target_mean, target_std: training statistics of the target (``y = (raw - mean) / std``).
        input_stats: ``{name: (mean, std)}`` of every standardised input column.
        bounds: ``(train_end, valid_end, hours)``: split cut points in hours (rows) of the file.
        starts: ``{split: [N]}`` the first hour (row) of each window.
        last_observed: ``{split: [N, T]}`` the last observed target before each step, original
            units (NaN before the first observation): the persistence forecast.
        times: the timestamp of every hour (row) of the file.
        description: one line for logs.
    """

    splits: dict[str, tuple[torch.Tensor, None, torch.Tensor]]
    feature_names: tuple[str, ...]
    target: str
    units: str
    target_mean: float
    target_std: float
    input_stats: dict[str, tuple[float, float]]
    bounds: tuple[int, int, int]
    starts: dict[str, np.ndarray]
    last_observed: dict[str, np.ndarray]
    times: list[datetime] = field(repr=False)
    description: str = ""

    def to_original(self, values: torch.Tensor) -> torch.Tensor:
        """Normalised target values (any shape) in the target's original units."""
        return values * self.target_std + self.target_mean


def build_windows(
    measured: np.ndarray,
    measured_names: Sequence[str],
    target: np.ndarray,
    times: list[datetime],
    spec: HourlyWindowSpec | None = None,
    *,
    categorical: np.ndarray | None = None,
    categorical_names: Sequence[str] = (),
    target_name: str,
    units: str,
    name: str = "",
    **settings,
) -> RegressionData:
    """Split, fill, standardise and window an hourly table (the module docstring's steps 1-6).

    Args:
        measured: ``[H, M]`` measured inputs, NaN where missing.
        measured_names: their ``M`` names.
        target: ``[H]`` target values, NaN where missing.
        times: ``H`` consecutive hourly timestamps.
        spec: the window settings (default: :class:`HourlyWindowSpec`'s defaults); ``settings`` (its fields:
            ``window``, ``stride``, ``fractions``, ``lagged_target``, ``max_windows``) replace them.
        categorical: optional ``[H, C]`` one-hot (or other 0/1) inputs, left unscaled.
        categorical_names: their ``C`` names.
        target_name, units: for reports.
        name: data set name for the description.
    """
    spec = HourlyWindowSpec.of(spec, **settings)
    target = np.asarray(target, dtype=float)
    hours = len(target)
    measured = _checked_columns(measured, measured_names, "measured", "[H, M]", hours)
    _check_hourly(times, hours, name)
    categorical = np.zeros((hours, 0)) if categorical is None else categorical
    categorical = _checked_columns(categorical, categorical_names, "categorical", "[H, C]", hours)
    train_end, valid_end = _split_bounds(hours, spec.fractions)

    input_stats = {n: _training_stats(measured[:, j], train_end, n) for j, n in enumerate(measured_names)}
    target_mean, target_std = _training_stats(target, train_end, target_name)
    previous = np.concatenate([[np.nan], target[:-1]])  # y_{t-1}
    last_observed = _forward_fill(previous)  # last observed target strictly before t
    columns = _measured_columns(measured, measured_names, input_stats)
    if spec.lagged_target:
        columns += _lag_columns(previous, last_observed, target_name, (target_mean, target_std))
        input_stats[f"{target_name} lag 1h"] = (target_mean, target_std)
    columns.append(("inputs_missing", np.isnan(measured).any(1).astype(float)))
    columns += list(zip(categorical_names, categorical.T))
    columns += _calendar_columns(times)
    features = np.stack([column for _, column in columns], 1)
    normalised_target = (target - target_mean) / target_std

    rows = _window_rows(target, (train_end, valid_end, hours), spec)
    splits = {split: _window_tensors(features, normalised_target, index) for split, index in rows.items()}
    starts = {split: index[:, 0].copy() for split, index in rows.items()}
    counts = "/".join(str(len(starts[s])) for s in SPLITS)
    description = (
        f"{name}: {target_name} ({units}) from {len(columns)} inputs, {spec.window}-hour windows, "
        f"{counts} train/valid/test windows"
    )
    return RegressionData(
        splits=splits,
        feature_names=tuple(n for n, _ in columns),
        target=target_name,
        units=units,
        target_mean=target_mean,
        target_std=target_std,
        input_stats=input_stats,
        bounds=(train_end, valid_end, hours),
        starts=starts,
        last_observed={split: last_observed[index] for split, index in rows.items()},
        times=list(times),
        description=description,
    )


# --------------------------------------------------------------------------- the table's checks and split


def _checked_columns(values, names: Sequence[str], label: str, shape: str, hours: int) -> np.ndarray:
    """``values`` as a float ``[H, len(names)]`` array; a ``ValueError`` naming ``label`` otherwise."""
    values = np.asarray(values, dtype=float)
    if values.shape != (hours, len(names)):
        raise ValueError(f"{label} must have shape {shape} = {(hours, len(names))}, got {values.shape}")
    return values


def _check_hourly(times: list[datetime], hours: int, name: str) -> None:
    """Raise unless ``times`` holds ``hours`` consecutive hours."""
    if len(times) != hours:
        raise ValueError(f"times must hold H = {hours} timestamps, got {len(times)}")
    gaps = [i for i, (a, b) in enumerate(zip(times[:-1], times[1:])) if b - a != timedelta(hours=1)]
    if gaps:
        raise ValueError(
            f"{name + ': ' if name else ''}times must be consecutive hours, but times[{gaps[0] + 1}] = "
            f"{times[gaps[0] + 1]} follows {times[gaps[0]]}"
        )


def _split_bounds(hours: int, fractions: Sequence[float]) -> tuple[int, int]:
    """``(train_end, valid_end)``: the chronological cut points of ``hours`` rows (step 1)."""
    train_share, valid_share = fractions
    train_end, valid_end = round(hours * train_share), round(hours * (train_share + valid_share))
    if not 0 < train_end < valid_end < hours:
        raise ValueError(f"fractions {fractions!r} leave an empty split of {hours} hours")
    return train_end, valid_end


def _training_stats(column: np.ndarray, train_end: int, label: str) -> tuple[float, float]:
    """``(mean, std)`` (``ddof = 0``) of the observed values of ``column [H]`` in the training hours."""
    observed = column[:train_end][~np.isnan(column[:train_end])]
    if observed.size == 0 or observed.std() == 0:
        raise ValueError(f"{label} has no spread in the training hours: cannot standardise it")
    return float(observed.mean()), float(observed.std())


# --------------------------------------------------------------------------- the input columns


def _forward_fill(values: np.ndarray) -> np.ndarray:
    """``[H, C]`` (or ``[H]``) with each NaN replaced by the last non-NaN value above it (leading NaN stay)."""
    values = np.asarray(values, dtype=float)
    flat = values.reshape(len(values), -1)
    rows = np.where(np.isnan(flat), 0, np.arange(len(flat))[:, None])
    np.maximum.accumulate(rows, axis=0, out=rows)
    return flat[rows, np.arange(flat.shape[1])].reshape(values.shape)  # leading NaN point at row 0: stay NaN


def _measured_columns(measured: np.ndarray, names: Sequence[str], stats: dict[str, tuple[float, float]]) -> Columns:
    """The measured inputs ``[H, M]`` forward-filled and standardised, 0 (the mean) before any observation."""
    filled = _forward_fill(measured)
    columns = []
    for j, n in enumerate(names):
        mean, std = stats[n]
        columns.append((n, np.nan_to_num((filled[:, j] - mean) / std, nan=0.0)))
    return columns


def _lag_columns(
    previous: np.ndarray, last_observed: np.ndarray, target_name: str, stats: tuple[float, float]
) -> Columns:
    """The last observed target before each hour, standardised by the target's ``stats`` (0 before any), and
    whether the previous hour's target ``previous [H]`` is missing (step 3)."""
    mean, std = stats
    return [
        (f"{target_name} lag 1h", np.nan_to_num((last_observed - mean) / std, nan=0.0)),
        (f"{target_name} lag missing", np.isnan(previous).astype(float)),
    ]


def _cyclic(values: list[int], period: float) -> tuple[np.ndarray, np.ndarray]:
    angle = 2 * math.pi * np.asarray(values, dtype=float) / period
    return np.sin(angle), np.cos(angle)


def _calendar_columns(times: list[datetime]) -> Columns:
    """Hour of day and day of week as ``(sin, cos)`` pairs (step 4)."""
    hour_sin, hour_cos = _cyclic([t.hour for t in times], 24)
    day_sin, day_cos = _cyclic([t.weekday() for t in times], 7)
    return [("hour sin", hour_sin), ("hour cos", hour_cos), ("weekday sin", day_sin), ("weekday cos", day_cos)]


# --------------------------------------------------------------------------- the windows


def _window_rows(target: np.ndarray, bounds: tuple[int, int, int], spec: HourlyWindowSpec) -> dict[str, np.ndarray]:
    """``{split: [N, T]}`` the rows of each kept window of each split (step 6)."""
    train_end, valid_end, hours = bounds
    spans = ((0, train_end), (train_end, valid_end), (valid_end, hours))
    rows = {}
    for split, (begin, end), step in zip(SPLITS, spans, (spec.train_stride, spec.window, spec.window)):
        first = np.arange(begin, end - spec.window + 1, step)
        index = first[:, None] + np.arange(spec.window)[None]  # [N, T]
        keep = (~np.isnan(target[index])).any(1) if len(first) else np.zeros(0, dtype=bool)
        index = index[keep][: spec.max_windows]
        if len(index) == 0:
            raise ValueError(
                f"window={spec.window} leaves no {split} window with an observed target "
                f"(the split has {end - begin} hours)"
            )
        rows[split] = index
    return rows


def _window_tensors(
    features: np.ndarray, target: np.ndarray, index: np.ndarray
) -> tuple[torch.Tensor, None, torch.Tensor]:
    """``(x [N, T, D], None, y [N, T, 1])``, float32, of ``features [H, D]`` and ``target [H]`` at ``index [N, T]``."""
    x = torch.as_tensor(features[index], dtype=torch.float32)
    y = torch.as_tensor(target[index], dtype=torch.float32).unsqueeze(-1)
    return x, None, y

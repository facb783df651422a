"""Hourly air-pollution regression for PF-RNNs (the PF-RNN paper's AIR and PM tasks).

Two UCI data sets, read in place from the shared data folder (checked against ``SHA256SUMS``
by :func:`ppl_models.experiments.data.verified_path`), turned into windows of per-step regression targets:

* **AIR** (:func:`air_quality_regression`, UCI Air Quality, 9,357 hours, 2004-03-10 to
  2005-04-04, ``-200`` = missing): target one reference-analyser concentration (default
  ``NO2(GT)`` in ug/m3); inputs the five metal-oxide sensor responses ``PT08.S1..S5`` and the
  weather ``T``, ``RH``, ``AH``. The other reference columns (``CO``, ``NMHC``, ``C6H6``,
  ``NOx`` ground truth) are not inputs: they are the same kind of measurement as the target,
  and ``NMHC(GT)`` is 90 % missing.
* **PM** (:func:`pm25_regression`, UCI Beijing PM2.5, 43,824 hours of 2010-2014, ``NA`` =
  missing): target ``pm2.5`` (ug/m3); inputs dew point, temperature, pressure, cumulated wind
  speed, cumulated hours of snow and of rain, and the wind direction ``cbwd`` one-hot
  (``NE, NW, SE, cv``). The file's last three columns ``pm2.5_{1,2,3}ago`` (added to the UCI
  file by a later user) are not read; the lag below is computed from ``pm2.5`` itself.

Both go through the preprocessing of :func:`~ppl_models.experiments.tasks.hourly_windows.build_windows`
(its module lists the steps): a chronological split, forward-filled inputs (no input of these files is missing
before its first observation), the lagged target, calendar columns, standardisation by the training hours and
windows of ``window`` hours with a target at every step (the paper: "a prediction is made after each time step").
With the lagged target (``y_{t-1}``, the default) the task is a one-step ahead forecast given the current
covariates, which is what the paper's error levels (13 to 26 for targets of standard deviation 48 and 92) suggest;
the ``pm2.5_1ago`` column appended to the PM file is exactly this lag. The AIR target misses 320 isolated hours
(mostly at 3 am) and some gaps of days: those hours stay NaN in ``y`` and are not scored.

Evaluation: :func:`~ppl_models.experiments.tasks.regression_evaluation.evaluate_regression` (the particle mixture's
errors and calibration in the target's units, next to persistence and the training mean).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from ppl_models.inference.defaults import WINDOW_SHARES
from ppl_models.inference.validation import check_choice

from ..data import SharedCsvRows, check_values, read_shared_csv
from .hourly_window_spec import HourlyWindowSpec
from .hourly_windows import RegressionData, build_windows
from .regression_evaluation import evaluate_regression, predictive_samples

__all__ = [
    "RegressionData",
    "HourlyWindowSpec",
    "AIR_TARGETS",
    "AIR_INPUTS",
    "PM25_INPUTS",
    "WIND_DIRECTIONS",
    "build_windows",
    "air_quality_regression",
    "pm25_regression",
    "predictive_samples",
    "evaluate_regression",
]

AIR_FILE = "air_quality/AirQualityUCI.csv"
PM25_FILE = "pm25/PRSA_data_2010.1.1-2014.12.31.csv"
#: reference-analyser columns of the air-quality file that can be the target, with their units
AIR_TARGETS = {"NO2(GT)": "ug/m3", "CO(GT)": "mg/m3", "NOx(GT)": "ppb", "C6H6(GT)": "ug/m3"}
AIR_INPUTS = ("PT08.S1(CO)", "PT08.S2(NMHC)", "PT08.S3(NOx)", "PT08.S4(NO2)", "PT08.S5(O3)", "T", "RH", "AH")
PM25_INPUTS = ("DEWP", "TEMP", "PRES", "Iws", "Is", "Ir")
WIND_DIRECTIONS = ("NE", "NW", "SE", "cv")


def _times(table: SharedCsvRows, columns: str, parse) -> list[datetime]:
    """``parse(row)`` of every row of ``table``; a row it cannot read is a ``ValueError`` naming its line."""
    times = []
    for row, line in zip(table.rows, table.lines):
        try:
            times.append(parse(row))
        except ValueError as error:
            raise ValueError(f"{table.name} line {line}, columns {columns}: not a time ({error})") from None
    return times


def air_quality_regression(
    target: str = "NO2(GT)",
    window: int = 24,
    stride: int | None = None,
    fractions: Sequence[float] = WINDOW_SHARES,
    lagged_target: bool = True,
    max_windows: int | None = None,
    data_dir: str | os.PathLike | None = None,
) -> tuple[RegressionData, dict]:
    """The AIR task: ``(data, splits)`` with ``splits[s] = (x [N, T, D], None, y [N, T, 1])``.

    ``target`` is one of :data:`AIR_TARGETS`; inputs are :data:`AIR_INPUTS` plus the derived
    columns of :func:`build_windows` (``D = 15`` with the lag). The window options are the fields of
    :class:`HourlyWindowSpec`; ``data_dir``: the shared data folder.
    """
    check_choice(target, AIR_TARGETS, name="target")
    spec = HourlyWindowSpec(
        window=window, stride=stride, fractions=fractions, lagged_target=lagged_target, max_windows=max_windows
    )
    table = read_shared_csv(AIR_FILE, data_dir, delimiter=";")
    table = table.where(lambda row: bool(row[table.index("Date")]))  # the file ends in rows of empty cells

    def number(text: str) -> float:
        value = float(text.replace(",", "."))
        if math.isnan(value):
            raise ValueError("NaN: the file marks a missing value by -200")
        return math.nan if value == -200 else value

    measured = table.numbers(AIR_INPUTS, parse=number)
    values = table.numbers((target,), parse=number)[:, 0]
    check_values(
        np.column_stack([measured, values]), AIR_FILE, (*AIR_INPUTS, target), lines=table.lines, allow_nan=True
    )
    date, hour = table.index("Date"), table.index("Time")
    times = _times(
        table, "Date and Time", lambda row: datetime.strptime(f"{row[date]} {row[hour]}", "%d/%m/%Y %H.%M.%S")
    )
    data = build_windows(
        measured,
        AIR_INPUTS,
        values,
        times,
        spec,
        target_name=target,
        units=AIR_TARGETS[target],
        name="UCI air quality",
    )
    return data, data.splits


def pm25_regression(
    window: int = 24,
    stride: int | None = None,
    fractions: Sequence[float] = WINDOW_SHARES,
    lagged_target: bool = True,
    max_windows: int | None = None,
    data_dir: str | os.PathLike | None = None,
) -> tuple[RegressionData, dict]:
    """The PM task: ``(data, splits)`` with ``splits[s] = (x [N, T, D], None, y [N, T, 1])``.

    Target ``pm2.5``; inputs :data:`PM25_INPUTS`, the wind direction one-hot over
    :data:`WIND_DIRECTIONS` and the derived columns of :func:`build_windows` (``D = 16`` with
    the lag). The file's ``pm2.5_{1,2,3}ago`` columns are ignored. The window options are the fields of
    :class:`HourlyWindowSpec`; ``data_dir``: the shared data folder.
    """
    spec = HourlyWindowSpec(
        window=window, stride=stride, fractions=fractions, lagged_target=lagged_target, max_windows=max_windows
    )
    table = read_shared_csv(PM25_FILE, data_dir)

    def number(text: str) -> float:
        value = math.nan if text in ("NA", "") else float(text)
        if math.isnan(value) and text not in ("NA", ""):
            raise ValueError("NaN: the file marks a missing value by NA")
        return value

    measured = table.numbers(PM25_INPUTS, parse=number)
    values = table.numbers(("pm2.5",), parse=number)[:, 0]
    check_values(
        np.column_stack([measured, values]), PM25_FILE, (*PM25_INPUTS, "pm2.5"), lines=table.lines, allow_nan=True
    )
    directions = [row[table.index("cbwd")] for row in table.rows]
    unknown = sorted(set(directions) - set(WIND_DIRECTIONS))
    if unknown:
        raise ValueError(f"{PM25_FILE}: unexpected wind directions {unknown}")
    wind = np.array([[direction == d for d in WIND_DIRECTIONS] for direction in directions], dtype=float)
    stamp = [table.index(c) for c in ("year", "month", "day", "hour")]
    times = _times(table, "year, month, day and hour", lambda row: datetime(*(int(row[i]) for i in stamp)))
    data = build_windows(
        measured,
        PM25_INPUTS,
        values,
        times,
        spec,
        categorical=wind,
        categorical_names=tuple(f"wind {d}" for d in WIND_DIRECTIONS),
        target_name="pm2.5",
        units="ug/m3",
        name="UCI Beijing PM2.5",
    )
    return data, data.splits

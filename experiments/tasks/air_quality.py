"""UCI air quality as sequences of the five sensor responses (real-valued), from the shared data folder."""

from __future__ import annotations

import os

import numpy as np
import torch

from ppl_models.inference.defaults import WINDOW_SHARES
from ppl_models.inference.validation import check_positive_int

from ..data import ExperimentData, check_values, read_shared_csv

__all__ = ["air_quality", "AIR_QUALITY_SENSORS", "AIR_QUALITY_FILE"]

AIR_QUALITY_FILE = "air_quality/AirQualityUCI.csv"

AIR_QUALITY_SENSORS = ("PT08.S1(CO)", "PT08.S2(NMHC)", "PT08.S3(NOx)", "PT08.S4(NO2)", "PT08.S5(O3)")


def air_quality(
    window: int = 100, fractions: tuple[float, float] = WINDOW_SHARES, data_dir: str | os.PathLike | None = None
) -> ExperimentData:
    """UCI Air Quality: the five metal-oxide sensor responses, hourly, as ``window``-hour sequences.

    Preprocessing: the file's missing values (``-200``; whole hours where every sensor is
    out) are filled by linear interpolation in time; the series is cut into consecutive
    non-overlapping windows of ``window`` hours; the first ``fractions[0]`` of the windows
    train, the next ``fractions[1]`` validate and the rest test (chronological, so no test
    hour precedes a training hour); values are standardised by the training windows'
    per-sensor mean and standard deviation.
    """
    check_positive_int(window, name="window")
    train_share, valid_share = fractions
    if not (0 < train_share and 0 < valid_share and train_share + valid_share < 1):
        raise ValueError(f"fractions must be two positive shares summing below 1, got {fractions!r}")
    table = read_shared_csv(AIR_QUALITY_FILE, data_dir, delimiter=";")
    table = table.where(lambda row: bool(row[table.index("Date")]))  # the file ends in rows of empty cells
    values = table.numbers(AIR_QUALITY_SENSORS, parse=lambda text: float(text.replace(",", ".")))
    hours = np.arange(len(values))
    for name, column in zip(AIR_QUALITY_SENSORS, values.T):
        missing = column == -200
        if missing.all():
            raise ValueError(f"{AIR_QUALITY_FILE}, column {name!r}: every value is missing (-200)")
        column[missing] = np.interp(hours[missing], hours[~missing], column[~missing])
    check_values(values, AIR_QUALITY_FILE, AIR_QUALITY_SENSORS, lines=table.lines)
    count = len(values) // window
    if count < 3:
        raise ValueError(f"window={window} leaves fewer than 3 sequences of {len(values)} hours")
    sequences = torch.as_tensor(values[: count * window].reshape(count, window, -1), dtype=torch.float32)
    cut_train, cut_valid = round(count * train_share), round(count * (train_share + valid_share))
    parts = sequences[:cut_train], sequences[cut_train:cut_valid], sequences[cut_valid:]
    mean, std = parts[0].mean((0, 1)), parts[0].std((0, 1))
    splits = [((p - mean) / std, torch.ones(p.shape[:2], dtype=torch.bool)) for p in parts]
    return ExperimentData(
        *splits,
        description=f"UCI air quality, 5 sensors, {window}-hour sequences "
        f"({len(parts[0])}/{len(parts[1])}/{len(parts[2])} train/valid/test)",
    )

"""Hourly air-pollution regression for PF-RNNs (the PF-RNN paper's AIR and PM tasks) and its evaluation.

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

Common preprocessing (:func:`build_windows`), in this order:

1. **Chronological split** of the hours: the first ``fractions[0]`` train, the next
   ``fractions[1]`` validate, the rest test (``round(n * share)`` cut points). Windows never
   cross a cut, so no hour is in two splits and every test hour follows every training hour.
2. **Missing inputs** are forward-filled (the last observed value: causal, no look-ahead); an
   indicator input ``inputs_missing`` is 1 at hours where any measured input was filled. A
   value missing before the first observation (none in these files) becomes the training mean.
3. **Lagged target** (``lagged_target=True``, the default): the inputs also hold the last
   observed target value *before* the hour (``y_{t-1}``, forward-filled over gaps) and an
   indicator ``lag_missing`` that ``y_{t-1}`` itself is missing. The task is then a one-step
   ahead forecast given the current covariates, which is what the paper's error levels
   (13 to 26 for targets of standard deviation 48 and 92) suggest; the ``pm2.5_1ago`` column
   appended to the PM file is exactly this lag. ``lagged_target=False`` predicts the target
   from the covariates alone.
4. **Calendar**: hour of day and day of week as ``(sin, cos)`` pairs.
5. **Normalisation**: measured inputs, the lag and the target are standardised by the mean
   and standard deviation (``ddof=0``) of their *observed* values in the training hours only;
   the lag uses the target's statistics. Indicators, one-hots and the sin/cos pairs stay as they are.
6. **Windows** of ``window`` consecutive hours (default 24) with a target at every step (the
   paper: "a prediction is made after each time step"). Training windows start every
   ``stride`` hours (overlapping when ``stride < window``); validation and test windows do not
   overlap (stride ``window``), so each test hour is scored once. A **missing target** stays
   NaN in ``y``: that hour is not scored (training uses ``DiscriminativeLoss(missing_targets=True)``),
   while its inputs still update the belief. The AIR target misses 320 isolated hours (mostly
   at 3 am) and some gaps of days; windows with no observed target at all are dropped.

Evaluation (:func:`evaluate_regression`): the point prediction is ``f_out`` of the mean
particle, which equals the mean of the particle mixture because ``f_out`` is linear. The
predictive distribution is the weighted mixture ``sum_i w_t^i N(f_out(h_t^i), sigma^2)`` with
the learned ``sigma`` (``learn_scale=True``); for the LSTM / GRU baselines it is one Gaussian.
RMSE, MAE, CRPS, interval widths and NLPD are reported in the target's original units (and
RMSE, CRPS also normalised), with coverage and the PIT's KS distance from
:func:`ppl_models.inference.calibration.calibration_summary` on samples of that mixture, next to two
reference predictors: persistence (the last observed target) and the training mean.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import torch

from ppl_models.inference.calibration import calibration_summary, pit, plot_pit_ecdf, plot_predictive_bands
from ppl_models.inference.validation import check_choice, check_positive_int

from ..data import SPLITS, SharedCsvRows, SupervisedData, check_values, read_shared_csv

__all__ = [
    "RegressionData",
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


# --------------------------------------------------------------------------- argument checks


def _times(table: SharedCsvRows, columns: str, parse) -> list[datetime]:
    """``parse(row)`` of every row of ``table``; a row it cannot read is a ``ValueError`` naming its line."""
    times = []
    for row, line in zip(table.rows, table.lines):
        try:
            times.append(parse(row))
        except ValueError as error:
            raise ValueError(f"{table.name} line {line}, columns {columns}: not a time ({error})") from None
    return times


def _check_options(window, stride, fractions, lagged_target, max_windows) -> tuple[int, int, tuple[float, float]]:
    window = check_positive_int(window, name="window")
    stride = window if stride is None else check_positive_int(stride, name="stride")
    if not isinstance(fractions, (list, tuple)) or len(fractions) != 2:
        raise ValueError(f"fractions must be two shares (train, valid), got {fractions!r}")
    if any(isinstance(f, bool) or not isinstance(f, (int, float)) for f in fractions):
        raise TypeError(f"fractions must hold numbers, got {fractions!r}")
    train_share, valid_share = (float(f) for f in fractions)
    if not (train_share > 0 and valid_share > 0 and train_share + valid_share < 1):
        raise ValueError(f"fractions must be two positive shares summing below 1, got {fractions!r}")
    if not isinstance(lagged_target, bool):
        raise TypeError(f"lagged_target must be true or false, got {lagged_target!r}")
    if max_windows is not None:
        check_positive_int(max_windows, name="max_windows")
    return window, stride, (train_share, valid_share)


# --------------------------------------------------------------------------- shared preprocessing


def _forward_fill(values: np.ndarray) -> np.ndarray:
    """``[H, C]`` (or ``[H]``) with each NaN replaced by the last non-NaN value above it (leading NaN stay)."""
    values = np.asarray(values, dtype=float)
    flat = values.reshape(len(values), -1)
    rows = np.where(np.isnan(flat), 0, np.arange(len(flat))[:, None])
    np.maximum.accumulate(rows, axis=0, out=rows)
    return flat[rows, np.arange(flat.shape[1])].reshape(values.shape)  # leading NaN point at row 0: stay NaN


def _cyclic(values: np.ndarray, period: float) -> tuple[np.ndarray, np.ndarray]:
    angle = 2 * math.pi * np.asarray(values, dtype=float) / period
    return np.sin(angle), np.cos(angle)


def build_windows(
    measured: np.ndarray,
    measured_names: Sequence[str],
    target: np.ndarray,
    times: list[datetime],
    *,
    categorical: np.ndarray | None = None,
    categorical_names: Sequence[str] = (),
    target_name: str,
    units: str,
    window: int = 24,
    stride: int | None = None,
    fractions: Sequence[float] = (0.7, 0.1),
    lagged_target: bool = True,
    max_windows: int | None = None,
    name: str = "",
) -> RegressionData:
    """Split, fill, standardise and window an hourly table (the module docstring's steps 1-6).

    Args:
        measured: ``[H, M]`` measured inputs, NaN where missing.
        measured_names: their ``M`` names.
        target: ``[H]`` target values, NaN where missing.
        times: ``H`` consecutive hourly timestamps.
        categorical: optional ``[H, C]`` one-hot (or other 0/1) inputs, left unscaled.
        categorical_names: their ``C`` names.
        target_name, units: for reports.
        window: steps per window; stride: hours between training-window starts (default ``window``).
        fractions: ``(train, valid)`` shares of the hours; the rest is the test split.
        lagged_target: add the last observed target before each hour (and its missing flag) as inputs.
        max_windows: keep only the first this many windows of each split (quick runs, tests).
        name: data set name for the description.
    """
    window, stride, (train_share, valid_share) = _check_options(window, stride, fractions, lagged_target, max_windows)
    measured = np.asarray(measured, dtype=float)
    target = np.asarray(target, dtype=float)
    hours = len(target)
    if measured.ndim != 2 or measured.shape != (hours, len(measured_names)):
        raise ValueError(f"measured must have shape [H, M] = {(hours, len(measured_names))}, got {measured.shape}")
    if len(times) != hours:
        raise ValueError(f"times must hold H = {hours} timestamps, got {len(times)}")
    gaps = [i for i, (a, b) in enumerate(zip(times[:-1], times[1:])) if b - a != timedelta(hours=1)]
    if gaps:
        raise ValueError(
            f"{name + ': ' if name else ''}times must be consecutive hours, but times[{gaps[0] + 1}] = "
            f"{times[gaps[0] + 1]} follows {times[gaps[0]]}"
        )
    if categorical is None:
        categorical = np.zeros((hours, 0))
    categorical = np.asarray(categorical, dtype=float)
    if categorical.shape != (hours, len(categorical_names)):
        raise ValueError(
            f"categorical must have shape [H, C] = {(hours, len(categorical_names))}, got {categorical.shape}"
        )
    train_end, valid_end = round(hours * train_share), round(hours * (train_share + valid_share))
    if not 0 < train_end < valid_end < hours:
        raise ValueError(f"fractions {tuple(fractions)!r} leave an empty split of {hours} hours")

    # statistics of the observed training hours (ddof = 0)
    def stats(column: np.ndarray, label: str) -> tuple[float, float]:
        observed = column[:train_end][~np.isnan(column[:train_end])]
        if observed.size == 0 or observed.std() == 0:
            raise ValueError(f"{label} has no spread in the training hours: cannot standardise it")
        return float(observed.mean()), float(observed.std())

    input_stats = {n: stats(measured[:, j], n) for j, n in enumerate(measured_names)}
    target_mean, target_std = stats(target, target_name)

    columns, names = [], []
    filled = _forward_fill(measured)
    for j, n in enumerate(measured_names):
        mean, std = input_stats[n]
        columns.append(np.nan_to_num((filled[:, j] - mean) / std, nan=0.0))
        names.append(n)
    previous = np.concatenate([[np.nan], target[:-1]])  # y_{t-1}
    last_observed = _forward_fill(previous)  # last observed target strictly before t
    if lagged_target:
        columns += [
            np.nan_to_num((last_observed - target_mean) / target_std, nan=0.0),
            np.isnan(previous).astype(float),
        ]
        names += [f"{target_name} lag 1h", f"{target_name} lag missing"]
        input_stats[f"{target_name} lag 1h"] = (target_mean, target_std)
    columns.append(np.isnan(measured).any(1).astype(float))
    names.append("inputs_missing")
    columns += list(categorical.T)
    names += list(categorical_names)
    hour_sin, hour_cos = _cyclic([t.hour for t in times], 24)
    day_sin, day_cos = _cyclic([t.weekday() for t in times], 7)
    columns += [hour_sin, hour_cos, day_sin, day_cos]
    names += ["hour sin", "hour cos", "weekday sin", "weekday cos"]
    features = np.stack(columns, 1)
    normalised_target = (target - target_mean) / target_std

    splits, starts, lasts = {}, {}, {}
    for split, (begin, end), step in zip(
        SPLITS, ((0, train_end), (train_end, valid_end), (valid_end, hours)), (stride, window, window)
    ):
        first = np.arange(begin, end - window + 1, step)
        index = first[:, None] + np.arange(window)[None]  # [N, T]
        keep = (~np.isnan(target[index])).any(1) if len(first) else np.zeros(0, dtype=bool)
        first, index = first[keep][:max_windows], index[keep][:max_windows]
        if len(first) == 0:
            raise ValueError(
                f"window={window} leaves no {split} window with an observed target (the split has {end - begin} hours)"
            )
        x = torch.as_tensor(features[index], dtype=torch.float32)
        y = torch.as_tensor(normalised_target[index], dtype=torch.float32).unsqueeze(-1)
        splits[split], starts[split], lasts[split] = (x, None, y), first, last_observed[index]
    counts = "/".join(str(len(starts[s])) for s in SPLITS)
    description = (
        f"{name}: {target_name} ({units}) from {len(names)} inputs, {window}-hour windows, "
        f"{counts} train/valid/test windows"
    )
    return RegressionData(
        splits=splits,
        feature_names=tuple(names),
        target=target_name,
        units=units,
        target_mean=target_mean,
        target_std=target_std,
        input_stats=input_stats,
        bounds=(train_end, valid_end, hours),
        starts=starts,
        last_observed=lasts,
        times=list(times),
        description=description,
    )


# --------------------------------------------------------------------------- the two data sets


def air_quality_regression(
    target: str = "NO2(GT)",
    window: int = 24,
    stride: int | None = None,
    fractions: Sequence[float] = (0.7, 0.1),
    lagged_target: bool = True,
    max_windows: int | None = None,
    data_dir: str | os.PathLike | None = None,
) -> tuple[RegressionData, dict]:
    """The AIR task: ``(data, splits)`` with ``splits[s] = (x [N, T, D], None, y [N, T, 1])``.

    ``target`` is one of :data:`AIR_TARGETS`; inputs are :data:`AIR_INPUTS` plus the derived
    columns of :func:`build_windows` (``D = 15`` with the lag). Other options: see
    :func:`build_windows`; ``data_dir``: the shared data folder.
    """
    check_choice(target, AIR_TARGETS, name="target")
    _check_options(window, stride, fractions, lagged_target, max_windows)
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
        target_name=target,
        units=AIR_TARGETS[target],
        window=window,
        stride=stride,
        fractions=fractions,
        lagged_target=lagged_target,
        max_windows=max_windows,
        name="UCI air quality",
    )
    return data, data.splits


def pm25_regression(
    window: int = 24,
    stride: int | None = None,
    fractions: Sequence[float] = (0.7, 0.1),
    lagged_target: bool = True,
    max_windows: int | None = None,
    data_dir: str | os.PathLike | None = None,
) -> tuple[RegressionData, dict]:
    """The PM task: ``(data, splits)`` with ``splits[s] = (x [N, T, D], None, y [N, T, 1])``.

    Target ``pm2.5``; inputs :data:`PM25_INPUTS`, the wind direction one-hot over
    :data:`WIND_DIRECTIONS` and the derived columns of :func:`build_windows` (``D = 16`` with
    the lag). The file's ``pm2.5_{1,2,3}ago`` columns are ignored.
    """
    _check_options(window, stride, fractions, lagged_target, max_windows)
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
        categorical=wind,
        categorical_names=tuple(f"wind {d}" for d in WIND_DIRECTIONS),
        target_name="pm2.5",
        units="ug/m3",
        window=window,
        stride=stride,
        fractions=fractions,
        lagged_target=lagged_target,
        max_windows=max_windows,
        name="UCI Beijing PM2.5",
    )
    return data, data.splits


# --------------------------------------------------------------------------- evaluation


def predictive_samples(predictor, belief, num_samples: int, generator: torch.Generator | None = None):
    """Samples of the particle mixture ``sum_i w_t^i N(f_out(h_t^i), sigma^2)`` and its log density.

    Args:
        predictor: a regression :class:`~ppl_models.pf_rnn.PFRNNPredictor` (one output).
        belief: its :class:`~ppl_models.pf_rnn.ParticleBelief` for a batch (``particles [T, K, B, H]``,
            ``log_weights [T, K, B]``).
        num_samples: ``S``.
        generator: source of the component and noise draws.

    Returns:
        ``(samples [S, B, T, 1], log_density)`` where ``log_density(y [B, T, 1]) -> [B, T]`` is the
        exact log density of the mixture (normalised units).
    """
    check_positive_int(num_samples, name="num_samples")
    loc = predictor.head(belief.particles)  # [T, K, B, 1]
    if loc.shape[-1] != 1:
        raise ValueError(f"predictor must have one output, got {loc.shape[-1]}")
    scale = predictor.log_scale.exp()
    samples = predictor.belief_predictive(belief, num_samples, generator).samples

    def log_density(y: torch.Tensor) -> torch.Tensor:
        component = torch.distributions.Normal(loc, scale).log_prob(y.transpose(0, 1).unsqueeze(1))
        return torch.logsumexp(belief.log_weights.unsqueeze(-1) + component, dim=1).squeeze(-1).T

    return samples, log_density


@torch.no_grad()
def evaluate_regression(
    predictor,
    data: RegressionData,
    split: str = "test",
    *,
    device="cpu",
    seed: int = 0,
    num_samples: int = 200,
    batch_size: int = 256,
    plots_dir: str | Path | None = None,
) -> dict:
    """Metrics of a regression predictor on one split of ``data``, over its observed target hours.

    Keys: ``rmse``, ``rmse_normalized``, ``mae``, ``crps``, ``crps_normalized``, ``nlpd`` (nats per
    hour, density in original units), ``coverage_<level>``, ``width_<level>``, ``pit_ks``,
    ``persistence_rmse`` and ``mean_rmse`` (the two reference predictors), ``sigma`` (the learned
    Gaussian scale, original units), ``mean_ess`` (mean effective sample size of the particle
    weights), ``particle_sd`` (mean weighted standard deviation of the particles' predictions
    ``f_out(h_t^i)``, original units: the spread the particle set adds to ``sigma``; 0 for the
    baselines), ``target``, ``units``, ``<split>_windows``, ``<split>_hours`` (observed hours
    scored). Errors, CRPS and widths are in ``units``. With ``plots_dir``, writes
    ``pit_ecdf.png`` and ``predictive_bands.png`` (the scored hours of the first 7 windows).
    """
    split = check_choice(split, SPLITS, name="split")
    check_positive_int(num_samples, name="num_samples")
    check_positive_int(batch_size, name="batch_size")
    predictor.eval().to(device)
    x, _, y = data.splits[split]
    generator = torch.Generator(device=device).manual_seed(seed)
    means, samples, log_densities, spreads, ess = [], [], [], [], 0.0
    for start in range(0, len(x), batch_size):
        xb, yb = x[start : start + batch_size].to(device), y[start : start + batch_size].to(device)
        belief = predictor.belief(xb, generator=generator)
        means.append(predictor.head(belief.mean).cpu())
        draws, log_density = predictive_samples(predictor, belief, num_samples, generator)
        samples.append(draws.cpu())
        log_densities.append(log_density(torch.nan_to_num(yb)).cpu())
        ess += float((1.0 / belief.log_weights.exp().square().sum(1)).sum())
        weights, loc = belief.log_weights.exp(), predictor.head(belief.particles)[..., 0]  # [T, K, B]
        centre = (weights * loc).sum(1, keepdim=True)
        spreads.append((weights * (loc - centre).square()).sum(1).sqrt().T.cpu())  # [B, T]
    scored = ~torch.isnan(y[..., 0])  # [N, T]
    # pooled metrics: the scored hours as one sequence [1, M, 1], in time order
    observed = data.to_original(y[scored]).view(1, -1, 1)
    predicted = data.to_original(torch.cat(means)[scored]).view(1, -1, 1)
    predictive = data.to_original(torch.cat(samples, 1)[:, scored]).view(num_samples, 1, -1, 1)
    log_density = torch.cat(log_densities)[scored].view(1, -1) - math.log(data.target_std)
    persistence = torch.as_tensor(data.last_observed[split], dtype=y.dtype)[scored]
    persistence = torch.where(torch.isnan(persistence), torch.full_like(persistence, data.target_mean), persistence)
    error = predicted - observed
    summary = calibration_summary(
        predictive, observed, log_pred_density=log_density, generator=torch.Generator().manual_seed(seed)
    )
    rmse = error.square().mean().sqrt().item()
    metrics = {
        "rmse": rmse,
        "rmse_normalized": rmse / data.target_std,
        "mae": error.abs().mean().item(),
        **summary,
        "crps_normalized": summary["crps"] / data.target_std,
        "persistence_rmse": (persistence - observed.flatten()).square().mean().sqrt().item(),
        "mean_rmse": (observed - data.target_mean).square().mean().sqrt().item(),
        "sigma": predictor.log_scale.exp().item() * data.target_std,
        "mean_ess": ess / scored.numel(),
        "particle_sd": torch.cat(spreads)[scored].mean().item() * data.target_std,
        "target": data.target,
        "units": data.units,
        "target_std": data.target_std,
        "predictive_samples": num_samples,
        f"{split}_windows": len(x),
        f"{split}_hours": int(scored.sum()),
    }
    if plots_dir is not None:
        plots_dir = Path(plots_dir)
        pit_values = pit(predictive, observed, generator=torch.Generator().manual_seed(seed))
        plot_pit_ecdf(pit_values, plots_dir / "pit_ecdf.png")
        shown = int(scored[:7].sum())
        plot_predictive_bands(predictive[:, :, :shown], observed[:, :shown], path=plots_dir / "predictive_bands.png")
    return metrics

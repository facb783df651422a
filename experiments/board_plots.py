"""The leaderboard's figures: ``calibration.png`` and ``fan_chart.png``, drawn from the models' run folders.

``calibration.png`` holds, for real-valued data, coverage against nominal level and the ECDF of the PIT
values (``pit.pt``) of every model; for binary data, the reliability curve of every model (predicted
probability of a 1 against the observed frequency of 1s, from ``reliability.json``; a run without it shows
its overall point, mean probability against frequency of ones, from ``metrics.json``) and how its
predictions spread over the probability bins. ``fan_chart.png`` forecasts, by each model, the test series
and feature that vary most (named from ``data_split.json``): quantile bands of real values, the
probability of a 1 for binary data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.calibration import ReliabilityCurve

from .run_plots import save_png

__all__ = [
    "RELIABILITY_FILE",
    "calibration_figure",
    "fan_chart",
    "pit_ecdf",
    "write_reliability",
    "read_reliability",
    "fan_choice",
    "fan_names",
]

#: the most steps a fan chart forecasts
FAN_HORIZON = 104

#: the file of a run folder (binary data) that holds its reliability curve (:func:`write_reliability`)
RELIABILITY_FILE = "reliability.json"


def pit_ecdf(values) -> tuple[np.ndarray, np.ndarray]:
    """The ECDF of PIT values (any shape; NaN dropped) as the corners of a step function from 0 to 1.

    Returns ``x [n + 2]`` (0, the sorted values, 1) and ``y [n + 2]`` (0, ``1/n, ..., 1``, 1), to draw
    with ``drawstyle="steps-post"``.
    """
    values = np.asarray(values, dtype=float).ravel()
    values = np.sort(values[~np.isnan(values)])
    n = values.size
    return np.concatenate([[0.0], values, [1.0]]), np.concatenate([[0.0], np.arange(1, n + 1) / max(n, 1), [1.0]])


def write_reliability(curve: ReliabilityCurve, run_dir: str | Path) -> None:
    """Write a :class:`~ppl_models.inference.calibration.ReliabilityCurve` into run folder ``run_dir`` as
    :data:`RELIABILITY_FILE` (atomically; an empty bin's frequency ``null``)."""
    write_json(
        Path(run_dir) / RELIABILITY_FILE,
        {
            "bin_centers": [float(c) for c in curve.bin_centers],
            "observed_frequency": [None if math.isnan(f) else float(f) for f in curve.observed_frequency],
            "counts": [int(c) for c in curve.counts],
        },
    )


def read_reliability(folder: Path) -> ReliabilityCurve | None:
    """The reliability curve run ``folder`` holds (:func:`write_reliability`; numpy arrays ``[bins]``, NaN for an
    empty bin), or ``None``."""
    path = Path(folder) / RELIABILITY_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    frequency = [math.nan if f is None else f for f in record["observed_frequency"]]
    return ReliabilityCurve(
        np.asarray(record["bin_centers"], dtype=float),
        np.asarray(frequency, dtype=float),
        np.asarray(record["counts"], dtype=float),
    )


def calibration_figure(folders: dict[str, Path], path: Path) -> Figure:
    """Coverage and PIT ECDF (real-valued data) or reliability and its bins' counts (binary data) of every model."""
    calibrations = {
        model: json.loads((folder / "metrics.json").read_text()).get("calibration", {})
        for model, folder in folders.items()
    }
    figure = Figure(figsize=(10, 4.2))
    left, right = figure.subplots(1, 2)
    binary = any("brier" in calibration for calibration in calibrations.values())
    (_reliability_panels if binary else _coverage_panels)(folders, calibrations, left, right)
    left.legend(fontsize=7)
    figure.tight_layout()
    save_png(figure, path)
    return figure


def _coverage_panels(folders, calibrations, coverage_axis, pit_axis) -> None:
    """Real-valued data: coverage against nominal level (``metrics.json``), ECDF of ``pit.pt``, per model."""
    for axis in (coverage_axis, pit_axis):
        axis.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
    for model, folder in folders.items():
        calibration = calibrations[model]
        levels = sorted((float(k.split("_", 1)[1]), v) for k, v in calibration.items() if k.startswith("coverage_"))
        if not levels:
            continue
        line = coverage_axis.plot(*zip(*levels), marker="o", lw=1.2, label=model)[0]
        if (folder / "pit.pt").is_file():
            pit_axis.plot(
                *pit_ecdf(torch.load(folder / "pit.pt").double().numpy()),
                drawstyle="steps-post",
                lw=1.2,
                color=line.get_color(),
                label=model,
            )
    coverage_axis.set(
        xlabel="nominal level of the central interval",
        ylabel="share of test values inside",
        title="coverage (on the diagonal: calibrated)",
    )
    pit_axis.set(
        xlim=(0, 1), ylim=(0, 1), xlabel="PIT value", ylabel="ECDF", title="PIT ECDF (on the diagonal: calibrated)"
    )


def _reliability_panels(folders, calibrations, reliability_axis, counts_axis) -> None:
    """Binary data: observed frequency of 1s against predicted probability, and the predictions per bin."""
    reliability_axis.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
    for model, folder in folders.items():
        calibration, curve = calibrations[model], read_reliability(folder)
        label = f"{model} (Brier {calibration['brier']:.3f}, ECE {calibration['ece']:.3f})"
        if curve is None:  # a run without the curve: its overall point
            reliability_axis.plot(
                [calibration["mean_probability"]],
                [calibration["frequency_of_ones"]],
                marker="s",
                ls="none",
                label=f"{label}, overall only",
            )
            continue
        filled = curve.counts > 0
        line = reliability_axis.plot(
            curve.bin_centers[filled], curve.observed_frequency[filled], marker="o", lw=1.2, label=label
        )[0]
        counts_axis.plot(
            curve.bin_centers[filled],
            curve.counts[filled] / curve.counts.sum(),
            marker="o",
            lw=1.2,
            color=line.get_color(),
            label=model,
        )
    if not counts_axis.lines:
        counts_axis.text(
            0.5,
            0.5,
            f"no run folder holds {RELIABILITY_FILE}",
            transform=counts_axis.transAxes,
            ha="center",
            fontsize=8,
        )
    reliability_axis.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="predicted probability of a 1",
        ylabel="observed frequency of 1s",
        title="reliability (on the diagonal: calibrated)",
    )
    counts_axis.set(
        xlim=(0, 1),
        yscale="log",
        xlabel="predicted probability of a 1 (bin centre)",
        ylabel="share of test entries",
        title="predictions per probability bin",
    )


def fan_choice(x: torch.Tensor, mask: torch.Tensor) -> tuple[int, int]:
    """``(series, feature)`` of ``x [N, T, D]`` (``mask [N, T]``) to draw: the feature with the largest variance
    over every valid entry, and the series whose valid steps vary most in it (the first of equals). ``x`` is in
    the model's units (a user's file standardised on its training split), so features of any units compare."""
    values = x[mask].double()  # [n, D]
    feature = int(torch.argmax(values.var(0, unbiased=False)))
    spread = [float(x[i, mask[i], feature].double().var(unbiased=False)) for i in range(x.shape[0])]
    return int(np.argmax(spread)), feature


def fan_names(record: dict | None, series: int, feature: int) -> tuple[str, str]:
    """The test series' id and the feature's name from a run's ``data_split.json`` record (else their indices)."""
    if record is None:
        return f"test series {series}", f"feature {feature}"
    return str(record["test"]["ids"][series]), str(record["standardizer"]["features"][feature])


@torch.no_grad()
def fan_chart(folders: dict[str, Path], path: Path, device: str, *, num_samples: int = 200, seed: int = 0) -> Figure:
    """A forecast by each model of the test series and feature that vary most (:func:`fan_choice`): given its history
    (the steps before its held-out segment, else its first two thirds), at most :data:`FAN_HORIZON` steps, as median
    and 50 / 90 % bands (real values) or the probability of a 1 (binary), in the data's own units (a transform
    undone), beside the data of twice as many steps before."""
    from .forecasting import _lag, _truth, load_run, paths_in_units

    figure = Figure(figsize=(4.2 * min(len(folders), 4), 3.4 * -(-len(folders) // 4)))
    axes = figure.subplots(-(-len(folders) // 4), min(len(folders), 4), squeeze=False).ravel()
    for axis, (model_name, folder) in zip(axes, folders.items()):
        _, data, model = load_run(model_name, folder, device)
        x, mask = data.test
        series, feature = fan_choice(x, mask)
        length, lag = int(mask[series].sum()), _lag(data)  # the model's steps start lag steps into the data
        scored = data.scored_mask("test") if hasattr(data, "scored_mask") else None
        start = (
            int(scored[series].nonzero()[0]) if scored is not None and bool(scored[series].any()) else (2 * length) // 3
        )
        start = max(1, start)
        end = min(length, start + FAN_HORIZON)
        shown = max(0, start - 2 * (end - start))
        truth = _truth(data, "test")[series, shown + lag : end + lag, feature]
        axis.plot(
            range(shown + lag, end + lag),
            truth,
            color="black",
            lw=1.0,
            label="data",
            drawstyle="steps-mid" if data.binary else "default",
        )
        axis.axvline(start + lag - 0.5, color="grey", ls=":")
        name, feature_name = fan_names(data.split_record, series, feature)
        axis.set_title(f"{model_name}: series {name}, {feature_name}", fontsize=9)
        axis.set(xlabel="time step", ylabel=feature_name)
        if not model.supports("forecast") or start >= length:
            axis.text(
                0.5,
                0.5,
                model.limitations.get("forecast", "no forecast"),
                transform=axis.transAxes,
                ha="center",
                fontsize=7,
                wrap=True,
            )
            continue
        torch.manual_seed(seed)
        paths = model.forecast(x[series : series + 1, :start].to(device), None, end - start, num_samples).cpu()
        paths = paths_in_units(data, paths, "test", start, torch.tensor([series]))[:, 0, :, feature]  # [S, H]
        _draw_fan(axis, range(start + lag, end + lag), paths, binary=data.binary)
    for axis in axes[len(folders) :]:
        axis.set_visible(False)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    save_png(figure, path)
    return figure


def _draw_fan(axis, steps, paths: torch.Tensor, *, binary: bool) -> None:
    """Forecast ``paths [S, H]`` over ``steps``: the probability of a 1 (binary), else median and 50 / 90 % bands."""
    if binary:
        axis.plot(steps, paths.double().mean(0), color="C0", lw=1.2, marker=".", label="P(1), forecast")
        axis.set_ylim(-0.05, 1.05)
        return
    low, q25, median, q75, high = torch.quantile(
        paths.double(), torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.float64), dim=0
    )
    axis.fill_between(steps, low, high, alpha=0.2, color="C0", label="90%")
    axis.fill_between(steps, q25, q75, alpha=0.4, color="C0", label="50%")
    axis.plot(steps, median, color="C0", lw=1.2, label="median")

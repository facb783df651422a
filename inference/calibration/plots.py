"""Calibration plots: PIT ECDF, coverage, predictive bands, reliability diagram.

Each returns a ``matplotlib.figure.Figure`` drawn on the Agg canvas, not registered with pyplot,
and writes a PNG atomically when given ``path``.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..atomic_files import atomic_write
from ..validation import check_positive_int
from ._checks import _as_float_tensor, _check_levels, _check_predictive, _to_numpy
from .metrics import ReliabilityCurve, _central_intervals, _sample_quantiles

__all__ = ["plot_pit_ecdf", "plot_coverage", "plot_predictive_bands", "plot_reliability"]


def plot_pit_ecdf(pit_values, path: str | os.PathLike | None = None) -> Figure:
    """ECDF of PIT values minus the uniform CDF, with a 94% simultaneous band.

    Args:
        pit_values: PIT values of any shape (e.g. :func:`pit`'s ``[B, T, D]``); NaN (padding)
            is dropped.
        path: optional PNG file to write.

    A calibrated predictive stays inside the band. Too narrow (over-confident): the curve rises
    above zero, then falls below it (PIT values pile up at both ends); too wide
    (under-confident): below, then above. One hump above zero: the observations fall low in the
    predictive (it is biased upwards); one dip below zero: biased downwards.
    """
    values = _to_numpy(_as_float_tensor(pit_values, "pit_values")).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        raise ValueError("pit_values must contain at least one non-NaN value, got none")
    if values.min() < 0 or values.max() > 1:
        raise ValueError(f"pit_values must lie in [0, 1], got range [{values.min()}, {values.max()}]")
    grid = np.linspace(0, 1, 101)
    difference = (values[:, None] <= grid).mean(0) - grid
    half_width = _uniform_ecdf_band(values.size, grid, prob=0.94)
    figure = Figure(figsize=(5, 3.5), layout="constrained")
    axes = figure.subplots()
    axes.fill_between(grid, -half_width, half_width, color="C0", alpha=0.2, linewidth=0, label="94% simultaneous band")
    axes.plot(grid, difference, color="C0", label="ECDF - uniform CDF")
    axes.legend(loc="best")
    axes.axhline(0, color="grey", linewidth=0.8)
    axes.set(xlabel="PIT value", ylabel="ECDF - uniform CDF", title=f"PIT ECDF difference ({values.size} values)")
    return _save_png(figure, path)


def plot_coverage(coverage_by_level: Mapping[float, float], path: str | os.PathLike | None = None) -> Figure:
    """Empirical against nominal coverage (from :func:`coverage`), with the diagonal.

    Points above the diagonal: intervals too wide (under-confident); below: too narrow.
    """
    if not isinstance(coverage_by_level, Mapping) or not coverage_by_level:
        raise ValueError(f"coverage_by_level must be a non-empty dict level -> coverage, got {coverage_by_level!r}")
    levels = _check_levels(sorted(coverage_by_level), name="coverage_by_level keys (levels)")
    empirical = [coverage_by_level[level] for level in levels]
    if not all(isinstance(rate, numbers.Real) and 0 <= rate <= 1 for rate in empirical):
        raise ValueError(f"coverage_by_level values must be numbers in [0, 1], got {empirical}")
    figure = Figure(figsize=(4, 4), layout="constrained")
    axes = figure.subplots()
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
    axes.plot(levels, empirical, marker="o", label="empirical")
    axes.set(xlim=(0, 1), ylim=(0, 1), aspect="equal", xlabel="nominal level", ylabel="empirical coverage")
    axes.legend(loc="upper left")
    return _save_png(figure, path)


def plot_predictive_bands(
    predictive,
    observed,
    sequence: int = 0,
    feature: int = 0,
    levels: Sequence[float] = (0.5, 0.9),
    mask=None,
    path: str | os.PathLike | None = None,
    start: int = 0,
) -> Figure:
    """Median and central bands of the samples over time for one sequence and feature, with the data.

    Args:
        predictive: samples ``[S, B, T, D]``.
        observed: observations ``[B, T, D]``.
        sequence: index into ``B``; feature: index into ``D``.
        levels: levels of the shaded central intervals.
        mask: optional bool ``[B, T]``; only the valid steps of the sequence are drawn.
        path: optional PNG file to write.
        start: the time step of the sequence's first drawn step (its earlier steps not given).
    """
    levels = _check_levels(levels)
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    start = check_positive_int(start, name="start", minimum=0)
    _check_index(sequence, observed.shape[0], "sequence")
    _check_index(feature, observed.shape[2], "feature")
    steps = int(mask[sequence].sum())
    samples = predictive[:, sequence, :steps, feature]
    lower, upper = (_to_numpy(bound) for bound in _central_intervals(samples, levels))
    median = _to_numpy(_sample_quantiles(samples, samples.new_tensor([0.5]))[0])
    time = start + np.arange(steps)
    figure = Figure(figsize=(7, 3.5), layout="constrained")
    axes = figure.subplots()
    for index in np.argsort(levels)[::-1]:
        label = f"{levels[index]:.0%} interval"
        axes.fill_between(time, lower[index], upper[index], color="C0", alpha=0.25, linewidth=0, label=label)
    axes.plot(time, median, color="C0", label="median")
    axes.plot(time, _to_numpy(observed[sequence, :steps, feature]), "k.", markersize=4, label="observed")
    axes.set(xlabel="time step", ylabel=f"feature {feature}", title=f"Predictive bands, sequence {sequence}")
    axes.legend(loc="best")
    return _save_png(figure, path)


def plot_reliability(curve: ReliabilityCurve, path: str | os.PathLike | None = None) -> Figure:
    """Reliability diagram (observed frequency against bin centre) over a histogram of the counts.

    Args:
        curve: :func:`reliability_curve`'s result (bin centres, observed frequency, counts).
        path: optional PNG file to write.
    """
    centers, frequency, counts = _check_curve(curve)
    filled = counts > 0
    figure = Figure(figsize=(4.5, 5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", label="reliable")
    top.plot(centers[filled], frequency[filled], marker="o", label="forecast")
    top.set(xlim=(0, 1), ylim=(0, 1), ylabel="observed frequency")
    top.legend(loc="upper left")
    bottom.bar(centers, counts, width=1 / len(centers), edgecolor="white")
    bottom.set(xlabel="predicted probability", ylabel="count")
    return _save_png(figure, path)


# --------------------------------------------------------------------------- helpers


def _uniform_ecdf_band(size: int, grid: np.ndarray, prob: float, trials: int = 4000) -> np.ndarray:
    """Half-widths at ``grid`` of a simultaneous ``prob`` band for the ECDF of ``size`` uniforms minus their CDF.

    The band is ``c * sd(t)`` with ``sd(t) = sqrt(t (1 - t) / size)``, where ``c`` is the
    ``prob`` quantile of the largest standardised deviation over the grid, in ``trials``
    simulated samples (the counts between grid points are multinomial; seeded, so a plot
    repeats).
    """
    counts = np.random.default_rng(0).multinomial(size, np.diff(grid), size=trials)
    inner = grid[1:-1]  # the ends have sd 0: every ECDF is exact there
    ecdf = counts.cumsum(1)[:, :-1] / size
    sd = np.sqrt(inner * (1 - inner) / size)
    scale = np.quantile((np.abs(ecdf - inner) / sd).max(1), prob)
    return np.concatenate([[0.0], scale * sd, [0.0]])


def _save_png(figure: Figure, path) -> Figure:
    if path is not None:
        atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    return figure


def _check_index(index, size: int, name: str) -> None:
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < size:
        raise ValueError(f"{name} must be an int in [0, {size}), got {index!r}")


def _check_curve(curve):
    arrays = [np.asarray(part, dtype=float) for part in curve]
    if len(arrays) != 3 or any(array.ndim != 1 for array in arrays) or len({array.size for array in arrays}) != 1:
        raise ValueError(
            "curve must be (bin_centers, observed_frequency, counts), three 1-D arrays of one length, "
            f"got shapes {[array.shape for array in arrays]}"
        )
    if arrays[0].size == 0:
        raise ValueError("curve must have at least one bin, got 0")
    return arrays

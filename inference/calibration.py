"""Calibration of predictive distributions, judged from Monte Carlo samples, with ArviZ.

Every metric takes samples of the predictive distribution, samples first, and the observations:

- ``predictive``: ``[S, B, T, D]`` (S samples of B sequences of T steps of D features),
- ``observed``: ``[B, T, D]``,
- ``mask``: optional bool ``[B, T]``, ``True`` at valid steps (valid steps first, padding after).

Tensors and numpy arrays are both accepted (integer data, e.g. counts, is converted to float).
Padded steps never enter a metric; where a function returns values per step, padded steps hold NaN.
Pooled metrics average over all valid entries (valid steps times features).

Metrics: :func:`pit`, :func:`coverage`, :func:`interval_width`, :func:`crps`, :func:`nlpd`,
:func:`brier_score`, :func:`reliability_curve` and the table :func:`calibration_summary`.
Storage: :func:`to_inference_data`, :func:`save_inference_data`; :func:`stack_sequence_sites` turns
the per-step sites of ``pyro.infer.Predictive`` output into one ``[S, B, T, D]`` tensor;
:func:`posterior_inference_data` gives any model with Pyro programs the groups ``az.loo``,
``az.waic`` and ``az.plot_loo_pit`` read (posterior draws, pointwise log-likelihood, replicates).
Plots (each returns a ``matplotlib.figure.Figure`` drawn on the Agg canvas, not registered with
pyplot, and writes a PNG atomically when given ``path``): :func:`plot_pit_ecdf`,
:func:`plot_coverage`, :func:`plot_predictive_bands`, :func:`plot_reliability`.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.stats
import torch
from matplotlib.figure import Figure
from pyro.ops.stats import crps_empirical

from .arviz_compat import az, dataset, inference_data, is_inference_data
from .io import atomic_write
from .validation import check_positive_int, check_sequences

__all__ = [
    "DEFAULT_LEVELS",
    "SEQUENCE_DIMS",
    "ReliabilityCurve",
    "to_inference_data",
    "posterior_inference_data",
    "save_inference_data",
    "stack_sequence_sites",
    "pit",
    "coverage",
    "interval_width",
    "crps",
    "nlpd",
    "brier_score",
    "reliability_curve",
    "calibration_summary",
    "plot_pit_ecdf",
    "plot_coverage",
    "plot_predictive_bands",
    "plot_reliability",
]

DEFAULT_LEVELS = (0.5, 0.8, 0.9, 0.95)
SEQUENCE_DIMS = ("sequence", "time", "feature")


class ReliabilityCurve(NamedTuple):
    """Reliability diagram data, one entry per probability bin (numpy arrays ``[bins]``)."""

    bin_centers: np.ndarray
    observed_frequency: np.ndarray  # NaN where a bin is empty
    counts: np.ndarray


# --------------------------------------------------------------------------- storage


def to_inference_data(
    predictive,
    observed,
    *,
    mask=None,
    log_likelihood=None,
    posterior: Mapping[str, object] | None = None,
    var_name: str = "x",
    coords: Mapping[str, Sequence] | None = None,
) -> az.InferenceData:
    """Pack draws and observations into an ArviZ ``InferenceData`` (an ``xarray.DataTree`` on ArviZ 1.x).

    Args:
        predictive: draws ``[S, B, T, D]`` (torch or numpy): one-step predictive draws for
            calibration, or replicates given posterior draws (:func:`posterior_inference_data`).
        observed: observations ``[B, T, D]``.
        mask: optional bool ``[B, T]``.
        log_likelihood: optional ``[S, B, T, D]`` pointwise log-likelihood of each entry given
            each draw (:class:`~inference.pointwise.PosteriorDraws`), for ``az.loo``, ``az.waic``
            and ``az.plot_loo_pit``.
        posterior: optional ``{name: [S, B, T, ...]}`` the draws themselves (latent paths);
            ArviZ's ``loo`` reads the number of chains from this group.
        var_name: name of the data variable in every group.
        coords: optional coordinate values per dimension, e.g. ``{"feature": ["x", "y"]}``.

    Returns:
        ``InferenceData`` with groups ``posterior_predictive`` (dims chain=1, draw=S, sequence,
        time, feature), ``observed_data`` (sequence, time, feature) and, if given,
        ``log_likelihood`` (chain, draw, sequence, time, feature) and ``posterior`` (chain,
        draw, sequence, time, ``<name>_dim``). A batch with padding is stored as its valid steps
        only: the dims ``(sequence, time)`` become one dim ``step``, with coordinates
        ``sequence`` and ``time`` along it, so that no padding reaches ArviZ's statistics.
    """
    if not isinstance(var_name, str) or not var_name:
        raise ValueError(f"var_name must be a non-empty string, got {var_name!r}")
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    pack = _step_packer(mask)
    step_dims = list(SEQUENCE_DIMS[:2]) if pack is None else ["step"]
    dims = {var_name: step_dims + ["feature"]}

    def group(values, draws=True):
        return _with_step_coords(dataset(values, coords=coords, dims=dims, draws=draws), mask, pack)

    groups = {
        "posterior_predictive": group({var_name: _packed(predictive, pack, draws=True)}),
        "observed_data": group({var_name: _packed(observed, pack)}, draws=False),
    }
    if log_likelihood is not None:
        values = _as_float_tensor(log_likelihood, "log_likelihood").to(predictive.device)
        if values.shape[1:] != predictive.shape[1:] or values.shape[0] < 1:
            raise ValueError(f"log_likelihood must have shape [S, B, T, D] with [B, T, D] = "
                             f"{tuple(predictive.shape[1:])}, got {tuple(values.shape)}")  # fmt: skip
        if not bool(torch.isfinite(values[:, mask]).all()):
            raise ValueError("log_likelihood contains NaN or inf at valid (unmasked) steps")
        groups["log_likelihood"] = group({var_name: _packed(values, pack, draws=True)})
    if posterior is not None:
        groups["posterior"] = _posterior_dataset(posterior, mask, pack, step_dims, coords)
    return inference_data(groups)


def posterior_inference_data(model, x, mask=None, num_draws: int = 100, *, targets=None, var_name: str | None = None,
                             **options) -> az.InferenceData:  # fmt: skip
    """``InferenceData`` for ``az.loo``, ``az.waic`` and ``az.plot_loo_pit`` of any model with Pyro programs.

    Draws the model's latent sites from its guide (:func:`inference.pointwise.posterior_draws`,
    which takes ``options`` such as ``resample`` and ``parallel``) and stores them as the
    ``posterior``, each entry's log-likelihood given each draw as ``log_likelihood``, replicates
    of the data given each draw as ``posterior_predictive``, and the data as ``observed_data``.

    Args:
        model: a :class:`~inference.protocol.SequenceModel` declaring ``programs``.
        x: ``[B, T, D]`` data (the inputs of a conditional model); mask: optional ``[B, T]``.
        num_draws: ``S``.
        targets: the targets ``y`` of a conditional model (PF-RNN), which are then the observed data.
        var_name: name of the observed variable (default ``"y"`` for a conditional model, else ``"x"``).
    """
    from .pointwise import posterior_draws  # pointwise -> traces -> state_space -> forecast imports this module

    draws = posterior_draws(model, x, mask, num_draws, targets=targets, **options)
    observed = x if targets is None else (targets.unsqueeze(-1) if targets.dim() == 2 else targets)
    posterior = draws.latents or {"log_weight": draws.log_weights}
    name = var_name or ("y" if targets is not None else "x")
    return to_inference_data(draws.replicates, observed, mask=mask, log_likelihood=draws.log_likelihood,
                             posterior=posterior, var_name=name)  # fmt: skip


def stack_sequence_sites(samples: Mapping[str, torch.Tensor], site: str = "x", *, event_dim: int = 1) -> torch.Tensor:
    """One ``[S, B, T, D]`` tensor of a sequence variable from ``pyro.infer.Predictive`` output.

    The collection's programs name a variable per step, ``x_0, x_1, ...`` (``MarkovStateSpace``,
    VRNN, ``y_0, ...`` for the PF-RNN program) or ``t0/x, t1/x, ...`` (the SMC Transformer),
    each ``[S, B, D]``; models without latent variables have one site ``x`` ``[S, B, T, D]``.
    ``Predictive`` pads a site's batch dims to the program's plate nesting (the PF-RNN program's
    ``y_t`` come back ``[S, 1, B, O]``): those size-1 dims are dropped. ``event_dim=0`` reads sites
    of one class index per step (``[S, B]``, a categorical emission) as ``D = 1``. The steps are
    stacked in time order; give the result to :func:`to_inference_data` for ArviZ, with dims
    ``(chain, draw, sequence, time, feature)``.

    Note that ``Predictive(model, guide=guide)(x)`` returns the *observed* values at observed
    sites: for replicates of the data use :func:`inference.pointwise.posterior_predictive`.
    """
    if not isinstance(samples, Mapping):
        raise TypeError(f"samples must be the dict Predictive returns, got {type(samples).__name__}")
    if event_dim not in (0, 1) or isinstance(event_dim, bool):
        raise ValueError(f"event_dim must be 1 (a vector per step) or 0 (a class index per step), got {event_dim!r}")
    if site in samples and samples[site].dim() >= 3 + event_dim:
        return _unpadded(samples[site], site, "BTD"[: 2 + event_dim])
    pattern = re.compile(rf"{re.escape(site)}_(\d+)|t(\d+)/{re.escape(site)}")
    steps = {}
    for name, value in samples.items():
        match = pattern.fullmatch(name)
        if match:
            steps[int(match.group(1) or match.group(2))] = _unpadded(value, name, "BD"[: 1 + event_dim])
    if not steps or sorted(steps) != list(range(len(steps))):
        raise ValueError(f"samples must hold the sites {site}_0, {site}_1, ... (or t0/{site}, ...) of every step, "
                         f"or one site {site!r} [S, B, T, D]; got {sorted(samples)}")  # fmt: skip
    return torch.stack([steps[t] for t in range(len(steps))], dim=-2)


def _unpadded(value: torch.Tensor, name: str, layout: str) -> torch.Tensor:
    """``value [S, 1, ..., 1, *layout]`` without the plate padding; ``D = 1`` added if ``layout`` has none."""
    kept = len(layout)
    if value.dim() < kept + 1 or any(size != 1 for size in value.shape[1 : value.dim() - kept]):
        raise ValueError(f"samples[{name!r}] must have shape [S, (1, ...,) {', '.join(layout)}] (Predictive pads "
                         f"plates with size-1 dims), got {tuple(value.shape)}")  # fmt: skip
    value = value.reshape(value.shape[0], *value.shape[value.dim() - kept :])
    return value if layout.endswith("D") else value.unsqueeze(-1)


def save_inference_data(idata: az.InferenceData, path: str | os.PathLike) -> Path:
    """Write ``idata`` to a netCDF file (``.nc``, ArviZ's default h5netcdf engine), atomically."""
    if not is_inference_data(idata):
        raise TypeError("idata must be an arviz.InferenceData (an xarray.DataTree on ArviZ 1.x), "
                        f"got {type(idata).__name__}")
    return atomic_write(path, lambda tmp: idata.to_netcdf(tmp))


# --------------------------------------------------------------------------- sample-based metrics


def pit(predictive, observed, mask=None, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Randomised probability integral transform of each observation under its samples.

    With ``below = #{s < y}`` and ``ties = #{s == y}`` among the S samples,
    ``pit = (below + U * (ties + 1)) / (S + 1)`` with ``U ~ Uniform(0, 1)``: the rank of ``y``
    among the S samples and itself, ties broken at random, spread over its ``1 / (S + 1)`` slot.
    If ``y`` is a draw from the same distribution as the samples, the PIT is exactly
    ``Uniform(0, 1)`` for continuous and discrete data alike.

    Args:
        predictive: samples ``[S, B, T, D]``.
        observed: observations ``[B, T, D]``.
        mask: optional bool ``[B, T]``.
        generator: source of ``U`` (defaults to torch's global generator, seeded by Pyro's seed).

    Returns:
        ``[B, T, D]`` values in ``[0, 1)``, NaN at padded steps.
    """
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    return _randomised_pit(predictive, observed, mask, generator)


def coverage(predictive, observed, levels: Sequence[float] = DEFAULT_LEVELS, mask=None) -> dict[float, float]:
    """Fraction of valid observations inside the central (equal-tailed) interval of each level.

    The interval at level ``a`` runs from the ``(1 - a) / 2`` to the ``(1 + a) / 2`` quantile of
    the samples (linear interpolation between order statistics, as numpy's default), ends
    included. A calibrated predictive covers a fraction close to ``a``.

    Args:
        predictive: samples ``[S, B, T, D]``, ``S >= 2`` (one sample spans no interval).
        observed: observations ``[B, T, D]``.
        levels: nominal levels, each in ``(0, 1)``.
        mask: optional bool ``[B, T]``.

    Returns:
        ``{level: empirical coverage}``, pooled over valid steps and features.
    """
    levels = _check_levels(levels)
    predictive, observed, mask = _check_predictive(predictive, observed, mask, min_samples=2)
    lower, upper = _central_intervals(predictive, levels)
    return dict(zip(levels, _coverage_rates(lower, upper, observed, mask)))


def interval_width(predictive, observed, levels: Sequence[float] = DEFAULT_LEVELS, mask=None) -> dict[float, float]:
    """Mean width of the central interval of each level (same intervals as :func:`coverage`).

    ``observed`` ``[B, T, D]`` is needed only to check shapes and the mask.

    Returns:
        ``{level: mean width}``, in the units of the data, pooled over valid steps and features.
    """
    levels = _check_levels(levels)
    predictive, _, mask = _check_predictive(predictive, observed, mask, min_samples=2)
    lower, upper = _central_intervals(predictive, levels)
    return dict(zip(levels, _mean_widths(lower, upper, mask)))


def crps(predictive, observed, mask=None) -> torch.Tensor:
    """Continuous ranked probability score of the samples' empirical distribution, per step.

    Uses ``pyro.ops.stats.crps_empirical``: ``E|X - y| - E|X - X'| / 2`` over the samples
    (lower is better; equals the absolute error for one sample; in the units of the data).

    Args:
        predictive: samples ``[S, B, T, D]``.
        observed: observations ``[B, T, D]``.
        mask: optional bool ``[B, T]``.

    Returns:
        ``[B, T]``, mean over features, NaN at padded steps.
    """
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    return _nan_where_padded(crps_empirical(predictive, observed).mean(-1), mask)


def nlpd(log_pred_density, mask=None) -> float:
    """Mean negative log predictive density per valid step (nats; lower is better).

    Args:
        log_pred_density: ``log p(x_t | ...)`` per step ``[B, T]``; the caller knows and reports
            which estimate it is (exact, IWAE-K, SMC-K).
        mask: optional bool ``[B, T]``.
    """
    values, mask = _check_step_values(log_pred_density, mask, name="log_pred_density")
    return -float(values[mask].mean())


def brier_score(prob, observed, mask=None) -> float:
    """Mean squared difference between predicted probabilities and binary outcomes.

    Args:
        prob: predicted probability that an entry is 1, ``[B, T, D]`` in ``[0, 1]``.
        observed: binary outcomes ``[B, T, D]`` (0 or 1).
        mask: optional bool ``[B, T]``.

    Returns:
        The score pooled over valid steps and features: 0 is perfect, 0.25 is a constant 0.5.
    """
    prob, observed, mask = _check_binary_forecast(prob, observed, mask)
    return float(((prob - observed) ** 2)[mask].mean())


def reliability_curve(prob, observed, mask=None, bins: int = 10) -> ReliabilityCurve:
    """Observed frequency of 1s among entries whose predicted probability falls in each bin.

    Args:
        prob: predicted probabilities ``[B, T, D]`` in ``[0, 1]``.
        observed: binary outcomes ``[B, T, D]``.
        mask: optional bool ``[B, T]``.
        bins: number of equal-width bins on ``[0, 1]`` (a probability of exactly 1 goes in the last).

    Returns:
        :class:`ReliabilityCurve` of numpy arrays ``[bins]``: bin centres, observed frequency
        (NaN for an empty bin) and counts. A reliable forecast has frequency close to the centre.
    """
    bins = check_positive_int(bins, name="bins")
    prob, observed, mask = _check_binary_forecast(prob, observed, mask)
    prob, observed = prob[mask].flatten(), observed[mask].flatten()
    index = (prob * bins).long().clamp(max=bins - 1)
    counts = torch.bincount(index, minlength=bins)
    ones = torch.bincount(index, weights=observed.double(), minlength=bins)
    frequency = _to_numpy(ones / counts)  # 0 / 0 is NaN for an empty bin
    centers = (np.arange(bins) + 0.5) / bins
    return ReliabilityCurve(centers, frequency, _to_numpy(counts))


def calibration_summary(
    predictive,
    observed,
    mask=None,
    log_pred_density=None,
    *,
    levels: Sequence[float] = DEFAULT_LEVELS,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """The metrics table of a run: one float per metric, pooled over valid entries.

    Args:
        predictive: samples ``[S, B, T, D]``.
        observed: observations ``[B, T, D]``.
        mask: optional bool ``[B, T]``.
        log_pred_density: optional ``[B, T]`` log predictive density per step.
        levels: nominal levels of the central intervals.
        generator: source of the PIT's randomisation.

    Returns:
        ``coverage_<level>`` and ``width_<level>`` for each level, ``crps`` (mean),
        ``nlpd`` (only with ``log_pred_density``) and ``pit_ks``: the Kolmogorov-Smirnov
        distance between the PIT values and ``Uniform(0, 1)`` (0 is perfect).
    """
    levels = _check_levels(levels)
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    if log_pred_density is not None:
        log_pred_density, _ = _check_step_values(log_pred_density, mask, name="log_pred_density")
    lower, upper = _central_intervals(predictive, levels)
    summary = {}
    for level, rate in zip(levels, _coverage_rates(lower, upper, observed, mask)):
        summary[f"coverage_{level:g}"] = rate
    for level, width in zip(levels, _mean_widths(lower, upper, mask)):
        summary[f"width_{level:g}"] = width
    summary["crps"] = float(crps_empirical(predictive, observed)[mask].mean())
    if log_pred_density is not None:
        summary["nlpd"] = -float(log_pred_density[mask].mean())
    pit_values = _to_numpy(_randomised_pit(predictive, observed, mask, generator)[mask])
    summary["pit_ks"] = float(scipy.stats.kstest(pit_values.ravel(), "uniform").statistic)
    return summary


# --------------------------------------------------------------------------- plots


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
) -> Figure:
    """Median and central bands of the samples over time for one sequence and feature, with the data.

    Args:
        predictive: samples ``[S, B, T, D]``.
        observed: observations ``[B, T, D]``.
        sequence: index into ``B``; feature: index into ``D``.
        levels: levels of the shaded central intervals.
        mask: optional bool ``[B, T]``; only the valid steps of the sequence are drawn.
        path: optional PNG file to write.
    """
    levels = _check_levels(levels)
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    _check_index(sequence, observed.shape[0], "sequence")
    _check_index(feature, observed.shape[2], "feature")
    steps = int(mask[sequence].sum())
    samples = predictive[:, sequence, :steps, feature]
    lower, upper = (_to_numpy(bound) for bound in _central_intervals(samples, levels))
    median = _to_numpy(_sample_quantiles(samples, samples.new_tensor([0.5]))[0])
    time = np.arange(steps)
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


# --------------------------------------------------------------------------- computation helpers


def _randomised_pit(predictive, observed, mask, generator):
    below = (predictive < observed).sum(0)
    ties = (predictive == observed).sum(0)
    uniform = torch.rand(observed.shape, generator=generator, dtype=observed.dtype, device=observed.device)
    values = (below + uniform * (ties + 1)) / (predictive.shape[0] + 1)
    return _nan_where_padded(values, mask.unsqueeze(-1))


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


def _sample_quantiles(samples: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Quantiles along dim 0, interpolating linearly between order statistics: ``[len(probs), ...]``."""
    ordered = samples.sort(dim=0).values
    position = probs * (samples.shape[0] - 1)
    below = position.floor().long()
    above = (below + 1).clamp(max=samples.shape[0] - 1)
    fraction = (position - below).reshape((-1,) + (1,) * (samples.dim() - 1))
    return ordered[below] * (1 - fraction) + ordered[above] * fraction


def _central_intervals(samples, levels):
    """Lower and upper ends of the central intervals, each ``[len(levels), ...]`` (one sort)."""
    levels = samples.new_tensor(levels)
    bounds = _sample_quantiles(samples, torch.cat([(1 - levels) / 2, (1 + levels) / 2]))
    return bounds[: len(levels)], bounds[len(levels) :]


def _coverage_rates(lower, upper, observed, mask) -> list[float]:
    inside = (lower <= observed) & (observed <= upper)
    return inside[:, mask].double().mean(dim=(1, 2)).tolist()


def _mean_widths(lower, upper, mask) -> list[float]:
    return (upper - lower)[:, mask].double().mean(dim=(1, 2)).tolist()


def _step_packer(mask: torch.Tensor) -> torch.Tensor | None:
    """Indices of the valid steps in the flattened ``[B * T]`` grid, or ``None`` when every step is valid."""
    return None if bool(mask.all()) else mask.flatten().nonzero().squeeze(-1)


def _packed(values: torch.Tensor, pack, *, draws: bool = False) -> np.ndarray:
    """``[(S,) B, T, ...]`` as numpy, with a leading chain dim for draws; valid steps only when ``pack``."""
    if pack is not None:
        lead = values.shape[:1] if draws else ()
        flat = values.reshape(*lead, -1, *values.shape[len(lead) + 2 :])
        values = flat.index_select(len(lead), pack.to(values.device))
    values = _to_numpy(values)
    return values[None] if draws else values


def _with_step_coords(dataset, mask, pack):
    """Add the ``sequence`` and ``time`` coordinates along the ``step`` dim of a packed dataset."""
    if pack is None or "step" not in dataset.dims:
        return dataset
    sequence, time = np.divmod(_to_numpy(pack), mask.shape[1])
    return dataset.assign_coords(sequence=("step", sequence), time=("step", time))


def _posterior_dataset(posterior, mask, pack, step_dims, coords):
    if not isinstance(posterior, Mapping) or not posterior:
        raise ValueError(f"posterior must be a non-empty dict name -> [S, B, T, ...] draws, got {posterior!r}")
    values, dims = {}, {}
    batch, steps = mask.shape
    for name, draws in posterior.items():
        draws = _as_float_tensor(draws, f"posterior[{name!r}]")
        if draws.dim() == 2 and draws.shape[1] == batch:  # one value per draw and sequence
            values[name], dims[name] = _to_numpy(draws)[None], ["sequence"]
            continue
        if draws.dim() < 3 or draws.shape[1:3] != (batch, steps):
            raise ValueError(f"posterior[{name!r}] must have shape [S, B, T, ...] with [B, T] = {(batch, steps)}, "
                             f"got {tuple(draws.shape)}")  # fmt: skip
        values[name] = _packed(draws, pack, draws=True)
        dims[name] = step_dims + [f"{name}_dim_{i}" for i in range(draws.dim() - 3)]
    per_sequence = [name for name, names in dims.items() if names == ["sequence"]]
    if pack is not None and per_sequence and len(per_sequence) < len(dims):
        raise ValueError(f"posterior variables {per_sequence} are per sequence [S, B]: with padding they cannot share "
                         "a group with per-step variables [S, B, T, ...]")  # fmt: skip
    return _with_step_coords(dataset(values, coords=coords, dims=dims), mask, pack)


def _nan_where_padded(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return values.masked_fill(~valid, float("nan"))


def _to_numpy(values: torch.Tensor) -> np.ndarray:
    return values.detach().cpu().numpy()


def _save_png(figure: Figure, path) -> Figure:
    if path is not None:
        atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    return figure


# --------------------------------------------------------------------------- input checks


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
    observed, mask = check_sequences(observed, _as_mask(mask, predictive.device), name="observed")
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


def _check_step_values(values, mask, *, name: str):
    """Validate one finite value per step, ``[B, T]``; returns ``(values, mask)``."""
    values = _as_float_tensor(values, name)
    if values.dim() != 2:
        raise ValueError(f"{name} must have shape [B, T] (2 dims), got shape {tuple(values.shape)}")
    mask = _as_mask(mask, values.device)
    if mask is not None and mask.shape != values.shape:
        raise ValueError(
            f"{name} and mask must have the same shape [B, T], got {name} {tuple(values.shape)} "
            f"and mask {tuple(mask.shape)}"
        )
    with_feature, mask = check_sequences(values.unsqueeze(-1), mask, name=name)
    _require_valid_step(mask)
    return with_feature.squeeze(-1), mask


def _check_binary_forecast(prob, observed, mask):
    """Validate probabilities and binary outcomes, both ``[B, T, D]``; returns ``(prob, observed, mask)``."""
    prob = _as_float_tensor(prob, "prob")
    prob, mask = check_sequences(prob, _as_mask(mask, prob.device), name="prob")
    _require_valid_step(mask)
    observed = _as_float_tensor(observed, "observed").to(prob.device)
    if observed.shape != prob.shape:
        raise ValueError(
            f"observed must have shape [B, T, D] = {tuple(prob.shape)} to match prob, got {tuple(observed.shape)}"
        )
    valid_prob, valid_observed = prob[mask], observed[mask]
    if bool(((valid_prob < 0) | (valid_prob > 1)).any()):
        raise ValueError(
            f"prob must lie in [0, 1] at valid steps, got range [{float(valid_prob.min())}, {float(valid_prob.max())}]"
        )
    if not bool(((valid_observed == 0) | (valid_observed == 1)).all()):
        unexpected = valid_observed[(valid_observed != 0) & (valid_observed != 1)]
        raise ValueError(f"observed must be binary (0 or 1) at valid steps, got e.g. {float(unexpected[0])}")
    return prob, observed.to(prob.dtype), mask


def _require_valid_step(mask: torch.Tensor) -> None:
    if not bool(mask.any()):
        raise ValueError("mask must mark at least one valid step, got none (all False)")


def _check_levels(levels, name: str = "levels") -> tuple[float, ...]:
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1), got {levels!r}")
    if not levels or not all(isinstance(level, numbers.Real) and 0 < level < 1 for level in levels):
        raise ValueError(f"{name} must be a non-empty sequence of numbers in (0, 1), got {levels!r}")
    return tuple(float(level) for level in levels)


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

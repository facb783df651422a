"""Sample-based calibration metrics: PIT, interval coverage and width, CRPS, NLPD, Brier score, reliability.

Shapes as in :mod:`ppl_models.inference.calibration`: ``predictive [S, B, T, D]``, ``observed [B, T, D]``,
optional bool ``mask [B, T]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from pyro.ops.stats import crps_empirical

from ..validation import check_positive_int, check_sequences
from ._checks import _as_float_tensor, _as_mask, _check_levels, _check_predictive, _require_valid_step, _to_numpy

__all__ = [
    "DEFAULT_LEVELS",
    "ReliabilityCurve",
    "pit",
    "coverage",
    "interval_width",
    "crps",
    "nlpd",
    "brier_score",
    "reliability_curve",
    "calibration_summary",
]

DEFAULT_LEVELS = (0.5, 0.8, 0.9, 0.95)


class ReliabilityCurve(NamedTuple):
    """Reliability diagram data, one entry per probability bin (numpy arrays ``[bins]``)."""

    bin_centers: np.ndarray
    observed_frequency: np.ndarray  # NaN where a bin is empty
    counts: np.ndarray


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
    from scipy import stats  # imported where used: seconds that a command scoring nothing need not pay

    summary["pit_ks"] = float(stats.kstest(pit_values.ravel(), "uniform").statistic)
    return summary


# --------------------------------------------------------------------------- helpers


def _randomised_pit(predictive, observed, mask, generator):
    below = (predictive < observed).sum(0)
    ties = (predictive == observed).sum(0)
    uniform = torch.rand(observed.shape, generator=generator, dtype=observed.dtype, device=observed.device)
    values = (below + uniform * (ties + 1)) / (predictive.shape[0] + 1)
    return _nan_where_padded(values, mask.unsqueeze(-1))


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


def _nan_where_padded(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return values.masked_fill(~valid, float("nan"))


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
    with_feature, mask = check_sequences(values.unsqueeze(-1), mask, name=name, prefix=False)
    _require_valid_step(mask)
    return with_feature.squeeze(-1), mask


def _check_binary_forecast(prob, observed, mask):
    """Validate probabilities and binary outcomes, both ``[B, T, D]``; returns ``(prob, observed, mask)``."""
    prob = _as_float_tensor(prob, "prob")
    prob, mask = check_sequences(prob, _as_mask(mask, prob.device), name="prob", prefix=False)
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

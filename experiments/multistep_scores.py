"""The figures of a board's multi-step table: each forecast's CRPS per step ahead, the mean over horizons as a mean
over (series, origin) pairs, and the paired bootstrap interval of a difference in mean CRPS between two rows.

A row's *mean CRPS* is the mean over the horizons ``h`` that have targets of its CRPS at ``h`` (itself the mean over
the pairs forecast that far, and over features). Pair ``i``'s share of it is
``u_i = (P / H') sum_h c_ih / n_h`` (``c_ih`` its CRPS at ``h``, ``n_h`` the pairs with a target at ``h``, ``P`` the
pairs, ``H'`` the horizons with targets): the mean of ``u_i`` over the pairs is the mean CRPS exactly, and where
every pair reaches every horizon ``u_i`` is the pair's own mean over ``h``. Two rows judged on the same pairs differ
in mean CRPS by the mean of ``u_i - u'_i``, whose interval :func:`paired_bootstrap` gives.

The paired bootstrap rather than Diebold and Mariano's test: the pairs come from many series, each with a few origins
(a panel, not one long series of loss differences whose autocorrelation a HAC variance would estimate), and the
bootstrap needs no normal approximation of a mean of few, skewed differences. Forecasts of one series share its
history and, from origins closer than ``H`` steps, targets, so they are not independent: with at least
:data:`MIN_CLUSTERS` test series whole series are resampled (each with all of its origins), otherwise the pairs.
"""

from __future__ import annotations

import math

import numpy as np

from ppl_models.inference.calibration import crps

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "INTERVAL_LEVEL",
    "MIN_CLUSTERS",
    "PairRecord",
    "mean_over_horizons",
    "pair_shares",
    "paired_bootstrap",
    "verdict",
]

#: resamples of the paired bootstrap
BOOTSTRAP_RESAMPLES = 2000
#: the central level of its interval
INTERVAL_LEVEL = 0.95
#: the fewest test series from which whole series are resampled rather than (series, origin) pairs
MIN_CLUSTERS = 10


class PairRecord:
    """An ``on_forecast`` of :func:`~ppl_models.inference.backtest.backtest_held_out` that keeps, per (series, origin)
    pair, the CRPS of each step ahead (``None`` where there is no target): ``series``, ``origins`` (each origin's step
    in the data as read: the forecaster's step plus ``lag``, the steps its transform's differences take) and
    ``crps`` (``[P][H]``), in the order the pairs were forecast."""

    def __init__(self, lag: int = 0):
        self.lag = lag
        self.series: list[int] = []
        self.origins: list[int] = []
        self.crps: list[list[float | None]] = []

    def __call__(self, rows, start, draws, target, valid) -> None:
        scores = crps(draws, target, valid).cpu()  # [B, H], NaN where no target
        self.series += list(rows)
        self.origins += [int(step) + self.lag for step in start.cpu()]
        self.crps += [[None if math.isnan(v) else v for v in row] for row in scores.tolist()]

    def to_dict(self) -> dict:
        return {"series": self.series, "origins": self.origins, "crps": self.crps}


def mean_over_horizons(values: list[float | None]) -> float | None:
    """The mean of the per-horizon ``values`` that are not ``None`` (``None`` where all are)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def pair_shares(scores: list[list[float | None]]) -> np.ndarray:
    """``[P]``: each pair's share ``u_i`` of the mean CRPS over horizons of ``scores [P][H]`` (``None``: no target),
    whose mean is that mean CRPS (module docstring)."""
    table = np.array([[np.nan if v is None else v for v in row] for row in scores], dtype=np.float64)
    if table.ndim != 2 or not table.size:
        raise ValueError(f"scores must be a non-empty [pairs][horizon] table, got shape {list(table.shape)}")
    counts = np.isfinite(table).sum(0)  # n_h
    reached = counts > 0
    if not np.isfinite(table[:, reached]).any(1).all():
        raise ValueError("scores: every pair needs a target at some step ahead")
    per_step = np.where(np.isfinite(table[:, reached]), table[:, reached], 0.0) / counts[reached]
    return per_step.sum(1) * len(table) / reached.sum()


def paired_bootstrap(
    differences,
    groups=None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = INTERVAL_LEVEL,
    seed: int = 0,
) -> tuple[float, float]:
    """The central ``level`` percentile interval of the mean of ``differences [P]`` over ``resamples`` bootstrap
    resamples (numpy's generator seeded by ``seed``): the pairs drawn with replacement, or with ``groups [P]`` (a
    label per pair) whole groups, each resample's mean then the sum of its groups' differences over their count."""
    values = np.asarray(differences, dtype=np.float64).reshape(-1)
    if not values.size or not np.isfinite(values).all():
        raise ValueError(f"differences must be a non-empty array of finite numbers, got {values.size} values")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    labels = np.arange(values.size) if groups is None else np.asarray(groups).reshape(-1)
    if labels.size != values.size:
        raise ValueError(f"groups must hold one label per difference ({values.size}), got {labels.size}")
    _, index = np.unique(labels, return_inverse=True)
    sums, counts = np.bincount(index, weights=values), np.bincount(index)
    drawn = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    means = sums[drawn].sum(1) / counts[drawn].sum(1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def verdict(low: float, high: float) -> str:
    """A row against the reference from the interval ``[low, high]`` of its mean CRPS minus the reference's:
    ``beats`` (all of it below 0: lower CRPS), ``behind`` (all above 0), else ``tie``."""
    return "beats" if high < 0 else "behind" if low > 0 else "tie"

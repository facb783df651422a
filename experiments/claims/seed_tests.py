"""The tests a verdict states when it says a difference holds across seeds: Welch's t-test between two models'
figures over seeds, and a one-sample t-test of one model's figures against a fixed edge (a paper's figure less its
allowance). One-sided p-values; :data:`LEVEL` is the level every verdict uses."""

from __future__ import annotations

import math

from scipy import stats

from .readings import Stat

__all__ = ["LEVEL", "welch_p", "edge_p"]

#: a difference holds across seeds when its one-sided p-value is below this level
LEVEL = 0.05


def welch_p(better: Stat, worse: Stat, *, lower_is_better: bool) -> float:
    """One-sided p-value of Welch's t-test that ``better``'s mean is better than ``worse``'s (both on >= 2 values);
    with no spread on either side, 0 when it is better and 1 otherwise."""
    lead = (worse.mean - better.mean) if lower_is_better else (better.mean - worse.mean)
    a, b = ((stat.sd or 0.0) ** 2 / len(stat.values) for stat in (better, worse))
    if a + b == 0:
        return 0.0 if lead > 0 else 1.0
    df = (a + b) ** 2 / sum(v * v / (len(s.values) - 1) for v, s in ((a, better), (b, worse)) if v > 0)
    return float(stats.t.sf(lead / math.sqrt(a + b), df))


def edge_p(figure: Stat, edge: float, *, above: bool) -> float:
    """One-sided p-value of the one-sample t-test that ``figure``'s mean is above ``edge`` (below it with
    ``above=False``), on >= 2 values; with no spread, 0 when it is and 1 otherwise."""
    gap = (figure.mean - edge) if above else (edge - figure.mean)
    n, sd = len(figure.values), figure.sd or 0.0
    if sd == 0:
        return 0.0 if gap > 0 else 1.0
    return float(stats.t.sf(gap / (sd / math.sqrt(n)), n - 1))

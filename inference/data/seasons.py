"""The season of real series: the lag of the strongest autocorrelation of their first differences
(:func:`detect_season`), its fundamental period (:func:`fundamental_lag`)."""

from __future__ import annotations

import numpy as np

__all__ = ["detect_season", "fundamental_lag", "SEASON_THRESHOLD", "LONGEST_SEASON", "SEASON_PEAK_SHARE"]

#: a detected season is kept only where the autocorrelation of first differences at its lag exceeds this
SEASON_THRESHOLD = 0.3
#: the longest season looked for
LONGEST_SEASON = 400


def detect_season(
    sequences: list[np.ndarray], *, threshold: float = SEASON_THRESHOLD, longest: int = LONGEST_SEASON
) -> int | None:
    """The lag in ``2 .. min(T / 2, longest)`` (``T``: the longest sequence) with the largest autocorrelation of first
    differences, pooled over the ``sequences [T_i, D]`` and averaged over features; ``None`` unless it exceeds
    ``threshold``."""
    top = min(max(len(s) for s in sequences) // 2, longest)
    if top < 2:
        return None
    covariance = np.zeros((top + 1, sequences[0].shape[1]))
    for values in sequences:
        centred = np.diff(values, axis=0)
        centred = centred - centred.mean(0)
        n = len(centred)
        spectrum = np.fft.rfft(centred, n=2 * n, axis=0)
        lags = min(n, top + 1)
        covariance[:lags] += np.fft.irfft(spectrum * spectrum.conj(), n=2 * n, axis=0)[:lags]
    varying = covariance[0] > 0
    if not varying.any():
        return None
    correlation = (covariance[:, varying] / covariance[0, varying]).mean(1)
    lag = fundamental_lag(correlation[2:]) + 2
    return lag if correlation[lag] > threshold else None


#: a divisor of the best lag whose autocorrelation is within this share of the best is the season (the best lag is
#: one of its multiples)
SEASON_PEAK_SHARE = 0.9


def fundamental_lag(autocorrelation: np.ndarray, first: int = 2) -> int:
    """The index of the season in ``autocorrelation [lags]`` (entry ``i`` for lag ``first + i``): the lag with the
    largest value, or the shortest ``1/j`` of it (``j <= 6``, to a step) whose value is within
    :data:`SEASON_PEAK_SHARE` of it: a yearly season of weekly data correlates about as much at 52, 104 and 156
    weeks, and 52 is its period."""
    best = int(autocorrelation.argmax())
    lag, top = best + first, float(autocorrelation[best])
    for parts in range(6, 1, -1):
        near = [d - first for d in range(round(lag / parts) - 1, round(lag / parts) + 2) if d >= first]
        if near and top > 0 and max(autocorrelation[i] for i in near) >= SEASON_PEAK_SHARE * top:
            return max(near, key=lambda i: autocorrelation[i])
    return best

"""The Theta method (Assimakopoulos and Nikolopoulos 2000) in its dynamic state-space forms, per feature of each row.

``theta`` is statsforecast's Theta model of Fiorucci et al. (2016), restricted to the *dynamic* forms: the standard
(``DSTM``, theta = 2) or optimised (``DOTM``) dynamic Theta model, the one of the two with the lower mean square
error statsforecast reports on the history (its own criterion); a step's one-step variance is that of the fit's
residuals (:func:`residual_variance`), as statsforecast's prediction intervals take it. Their trend line is
re-estimated at each step from the steps before it, so a step's one-step mean reads only the past; the static
forms fit one trend line to the whole series they are given, which would make a scored step's mean read the steps
after it.

A season ``m`` (at most :data:`~ppl_models.classical.automatic.MAX_SEASON`) is taken out first when the history's
autocorrelation at lag ``m`` passes the Theta method's 90 % test: the classical decomposition of the history (one
index per phase, multiplicative for positive data whose indices stay above 0.01, else additive) adjusts every step
of the row by its phase's index, and the Theta means and forecasts are put back by the same index. The indices
come from the history alone (the row's context), never from its scored steps.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .automatic import AutoFit, _Automatic
from .base import normal_quantile

__all__ = ["Theta", "Season", "seasonal_indices", "residual_variance"]

#: the dynamic Theta models tried, in statsforecast's names: standard (theta = 2) and optimised
DYNAMIC_MODELS = ("DSTM", "DOTM")
#: the first one-step residuals of a fit left out of its noise variance (statsforecast's burn-in for its intervals)
BURN_IN = 3


class Season(NamedTuple):
    """The indices ``[m]`` of a season taken out of a series, by phase (step ``t`` has phase ``t mod m``), and
    whether they multiply (else add)."""

    indices: np.ndarray
    multiplicative: bool

    def at(self, start: int, steps: int) -> np.ndarray:
        """``[steps]``: the indices of the steps ``start .. start + steps - 1``."""
        return self.indices[(start + np.arange(steps)) % len(self.indices)]

    def remove(self, series: np.ndarray, start: int = 0) -> np.ndarray:
        index = self.at(start, len(series))
        return series / index if self.multiplicative else series - index

    def restore(self, series: np.ndarray, start: int = 0) -> np.ndarray:
        index = self.at(start, len(series))
        return series * index if self.multiplicative else series + index


def residual_variance(residuals) -> float:
    """The variance of a Theta fit's one-step residuals after their first :data:`BURN_IN` (all of them where fewer
    than two are left), as statsforecast's own prediction intervals take its noise: not the fit's reported ``mse``,
    which on some series is far from the residuals' (189 against 0.65 on the log of daily PM2.5)."""
    residuals = np.asarray(residuals, dtype=np.float64)
    tail = residuals[BURN_IN:] if len(residuals) - BURN_IN >= 2 else residuals
    return float(np.var(tail, ddof=1)) if len(tail) >= 2 else float("nan")


def seasonal_indices(history: np.ndarray, m: int) -> Season | None:
    """The season of ``history [L]`` at lag ``m`` (``None``: no season, as the Theta method tests it: ``m >= 4``,
    ``L >= 2 m`` and the lag-``m`` autocorrelation beyond the 90 % band of the lower lags')."""
    from statsmodels.tsa.seasonal import seasonal_decompose
    from statsmodels.tsa.stattools import acf

    if m < 4 or len(history) < 2 * m or np.ptp(history) == 0:
        return None
    r = acf(history, nlags=m, fft=False)[1:]
    if abs(r[-1]) <= normal_quantile(0.95) * np.sqrt((1 + 2 * np.sum(r[:-1] ** 2)) / len(history)):
        return None
    for multiplicative in (True, False):
        if multiplicative and history.min() <= 0:
            continue
        seasonal = seasonal_decompose(history, model="multiplicative" if multiplicative else "additive", period=m)
        indices = np.asarray(seasonal.seasonal[:m], dtype=np.float64)
        if not multiplicative or indices.min() >= 0.01:
            return Season(indices, multiplicative)
    return None


class ThetaFit(NamedTuple):
    """A feature's dynamic Theta model on the season-adjusted series, and the season taken out (or ``None``)."""

    model: object
    season: Season | None


class Theta(_Automatic):
    """The dynamic Theta models per feature (see the module docstring)."""

    name = "theta"
    family = "Theta"

    def _fit_feature(self, series: np.ndarray) -> AutoFit | None:
        from statsforecast.models import AutoTheta

        season = seasonal_indices(series, self._season)
        adjusted = series if season is None else season.remove(series)
        best = None
        for kind in DYNAMIC_MODELS:
            try:
                model = AutoTheta(season_length=1, model=kind).fit(adjusted)
            except (ArithmeticError, ValueError, NotImplementedError, np.linalg.LinAlgError):
                continue
            mse = float(model.model_["mse"])
            if np.isfinite(mse) and mse > 0 and (best is None or mse < best[0]):
                best = (mse, kind, model)
        if best is None:
            return None
        _, kind, model = best
        theta = float(model.model_["par"]["theta"])
        seasonal = "" if season is None else f", {'multiplicative' if season.multiplicative else 'additive'} season"
        form = f"Theta ({'standard' if kind == 'DSTM' else 'optimised'} dynamic, theta {theta:.3g}{seasonal})"
        sigma2 = residual_variance(model.model_["residuals"])
        return AutoFit(ThetaFit(model, season), sigma2, form, 0) if np.isfinite(sigma2) and sigma2 > 0 else None

    def _one_step_means(self, fit: AutoFit, series: np.ndarray) -> np.ndarray | None:
        theta = fit.model
        adjusted = series if theta.season is None else theta.season.remove(series)
        try:
            fitted = np.asarray(theta.model.forward(y=adjusted, h=1, fitted=True)["fitted"], dtype=np.float64)
        except (ArithmeticError, ValueError, NotImplementedError, np.linalg.LinAlgError):
            return None
        fitted = fitted if theta.season is None else theta.season.restore(fitted)
        return fitted if np.isfinite(fitted).all() else None

    def _variance(self, fit: AutoFit, mean: np.ndarray) -> np.ndarray:
        """The adjusted series' one-step residual variance (:func:`residual_variance`), scaled back by a
        multiplicative season's index (``mean``: the row's steps from 0, as a Theta fit predicts every step)."""
        season = fit.model.season
        if season is None or not season.multiplicative:
            return np.full_like(mean, fit.sigma2)
        return fit.sigma2 * season.at(0, len(mean)) ** 2

    def _marginal(self, fit: AutoFit, series: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray] | None:
        theta = fit.model
        adjusted = series if theta.season is None else theta.season.remove(series)
        level = 80
        try:
            out = theta.model.forward(y=adjusted, h=horizon, level=[level])
        except (ArithmeticError, ValueError, NotImplementedError, np.linalg.LinAlgError):
            return None
        mean = np.asarray(out["mean"], dtype=np.float64)
        sd = (np.asarray(out[f"hi-{level}"]) - np.asarray(out[f"lo-{level}"])) / (
            2 * normal_quantile(0.5 + level / 200)
        )
        if theta.season is not None:
            mean = theta.season.restore(mean, len(series))
            if theta.season.multiplicative:
                sd = sd * theta.season.at(len(series), horizon)
        return (mean, sd) if np.isfinite(mean).all() and np.isfinite(sd).all() else None

    def _count_parameters(self) -> int:
        """Per feature: the initial level, the smoothing weight, theta and the noise, and a season's indices."""
        return sum(
            1 if fit is None else 4 + (0 if fit.model.season is None else len(fit.model.season.indices))
            for fit in self.pooled
        )

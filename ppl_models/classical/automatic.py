"""statsforecast's automatic ARIMA and ETS, and Croston's method for intermittent counts, per feature of each row.

``arima`` is statsforecast's ``AutoARIMA`` (Hyndman and Khandakar's stepwise search: differencing by unit-root tests,
a drift where differenced once, seasonal terms with the season ``m``, orders by AICc), ``ets`` its ``AutoETS``
(error, trend (damped or not) and season additive or multiplicative, chosen by AICc). A row's model is fitted on its
own history (its context) where that holds at least :data:`MIN_HISTORY` steps, else it is the model fitted on the
longest training row; either way its parameters (coefficients, smoothing weights, initial states, noise variance)
stay fixed while the row's valid steps are filtered (statsforecast's ``forward``): the one-step mean of a step is the
model's fitted value there and its variance the fit's ``sigma2`` (times the squared mean for a multiplicative error).
The steps before an ARIMA has its differences take the last value.

``croston`` is Croston's method with the classic smoothing weight :data:`CROSTON_ALPHA` (statsforecast's
``CrostonClassic``): the one-step mean is the smoothed size of the non-zero values over their smoothed interval, its
noise the mean square of the context's one-step errors. It suits counts with zeros, and a board adds it only there.

Forecasts draw each step ahead from the model's own ``h``-step Gaussian predictive (statsforecast's intervals), each
step independently: the marginal laws of the paths are the model's, their correlation across steps is not kept.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np
import torch

from .base import ClassicalForecaster, normal_quantile
from .naive import LastValue
from .statespace_fits import quiet

__all__ = ["AutoArima", "AutoEts", "Croston", "MIN_HISTORY", "MAX_SEASON", "CROSTON_ALPHA", "croston_means"]

#: the fewest steps of a history that get a model of their own
MIN_HISTORY = 12
#: the longest season given to the models (longer ones are left to seasonal naive; statsforecast's ETS has the same
#: bound)
MAX_SEASON = 24
#: Croston's classic smoothing weight of the sizes and of the intervals
CROSTON_ALPHA = 0.1
#: the central level (percent) whose interval gives a forecast step's spread
_LEVEL = 80


class AutoFit(NamedTuple):
    """A feature's fitted model: the statsforecast ``model``, its noise variance ``sigma2``, its ``form`` in words
    and the first step it predicts (earlier ones take the last value)."""

    model: object
    sigma2: float
    form: str
    start: int


class _Automatic(ClassicalForecaster):
    """One statsforecast model per feature of each row (see the module docstring). A subclass writes ``_new`` (the
    unfitted statsforecast model), ``_describe`` (``(sigma2, form, start)`` of a fit) and, where the noise grows
    with the mean, ``_variance``."""

    family: ClassVar[str] = ""

    def _new(self, series: np.ndarray):
        raise NotImplementedError

    def _describe(self, model, series: np.ndarray) -> tuple[float, str, int]:
        raise NotImplementedError

    def _variance(self, fit: AutoFit, mean: np.ndarray) -> np.ndarray:
        return np.full_like(mean, fit.sigma2)

    @property
    def _season(self) -> int:
        return self.period if 1 < self.period <= MAX_SEASON else 1

    def _fit(self, rows: list[np.ndarray]) -> None:
        self._naive = LastValue()._fit_rows(rows, self.training)
        longest = max(rows, key=len)
        self._report("fits", 0)
        self.pooled = []
        for d in range(longest.shape[1]):
            self.pooled.append(self._fit_feature(longest[:, d]) if len(longest) >= 3 else None)
            self._report("fits", d + 1)

    def _estimate(self, history: np.ndarray):
        if len(history) < MIN_HISTORY:
            return None
        fits = [self._fit_feature(history[:, d]) for d in range(history.shape[1])]
        for fit in fits:
            self._rows[fit.form if fit is not None else "a feature on the pooled fit"] += 1
        return [own if own is not None else pooled for own, pooled in zip(fits, self.pooled)]

    def _fit_feature(self, series: np.ndarray) -> AutoFit | None:
        """statsforecast's fit on ``series [L]``, ``None`` where it fails or its noise is not a positive number."""
        with quiet():
            try:
                model = self._new(series).fit(series)
                sigma2, form, start = self._describe(model, series)
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):
                return None
        return AutoFit(model, sigma2, form, start) if np.isfinite(sigma2) and sigma2 > 0 else None

    def _predict(self, parameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, cov = self._naive._predict(self._naive.pooled, row)
        for d, fit in enumerate(parameters):
            start = len(row) if fit is None else min(fit.start, len(row))
            if start >= len(row):
                continue
            fitted = self._one_step_means(fit, row[:, d])
            if fitted is None:
                continue
            mean[start:, d] = fitted[start:]
            cov[start:, d, d] = self._variance(fit, fitted[start:])
        return mean, cov

    def _one_step_means(self, fit: AutoFit, series: np.ndarray) -> np.ndarray | None:
        """``[L]``: the one-step means of ``series`` under ``fit``'s model, its parameters fixed (``None``: it cannot
        filter the series)."""
        with quiet():
            try:
                fitted = np.asarray(fit.model.forward(y=series, h=1, fitted=True)["fitted"], dtype=np.float64)
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):
                return None
        return fitted if np.isfinite(fitted).all() else None

    def _draw(self, parameters, row: np.ndarray, horizon: int, num_samples: int, generator) -> torch.Tensor:
        paths = []
        for d, fit in enumerate(parameters):
            marginal = None if fit is None or len(row) <= fit.start else self._marginal(fit, row[:, d], horizon)
            if marginal is None:
                noise = tuple(v[d : d + 1] for v in self._naive.pooled)
                paths.append(self._naive._draw(noise, row[:, d : d + 1], horizon, num_samples, generator)[..., 0])
                continue
            mean, sd = (torch.from_numpy(v) for v in marginal)
            paths.append(mean + sd * torch.randn((num_samples, horizon), generator=generator, dtype=torch.float64))
        return torch.stack(paths, -1)

    def _marginal(self, fit: AutoFit, series: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(mean [H], sd [H])`` of the model's ``h``-step predictive after ``series`` (from its central
        :data:`_LEVEL` % interval), ``None`` where it has none."""
        with quiet():
            try:
                out = fit.model.forward(y=series, h=horizon, level=[_LEVEL])
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):
                return None
        mean = np.asarray(out["mean"], dtype=np.float64)
        sd = (np.asarray(out[f"hi-{_LEVEL}"]) - np.asarray(out[f"lo-{_LEVEL}"])) / (
            2 * normal_quantile(0.5 + _LEVEL / 200)
        )
        return (mean, sd) if np.isfinite(mean).all() and np.isfinite(sd).all() else None

    def _choices(self) -> dict:
        return {
            "pooled": [f.form if f is not None else "the last value (no fit)" for f in self.pooled],
            "pooled_choice": "the model fitted on the longest training row",
            "per_row": f"a model searched on each row's own history of at least {MIN_HISTORY} steps, else the pooled "
            "one; its parameters fixed over the row's steps",
            "engine": "statsforecast",
        }

    @property
    def source(self) -> str:
        return f"{self.family} chosen per series (statsforecast)"

    def _count_parameters(self) -> int:
        return sum(_parameter_count(f) for f in self.pooled)


class AutoArima(_Automatic):
    """statsforecast's ``AutoARIMA`` per feature, seasonal with the season ``m`` (at most :data:`MAX_SEASON`)."""

    name = "arima"
    family = "ARIMA"

    def _new(self, series: np.ndarray):
        from statsforecast.models import AutoARIMA

        return AutoARIMA(season_length=self._season)

    def _describe(self, model, series: np.ndarray) -> tuple[float, str, int]:
        p, q, P, Q, m, d, D = model.model_["arma"]
        coef = model.model_["coef"]
        seasonal = f"({P},{D},{Q}){m}" if P + D + Q else ""
        extra = " with drift" if "drift" in coef else " with mean" if "intercept" in coef else ""
        return float(model.model_["sigma2"]), f"ARIMA({p},{d},{q}){seasonal}{extra}", d + D * m


class AutoEts(_Automatic):
    """statsforecast's ``AutoETS`` per feature (every error, trend, damping and season its data allows)."""

    name = "ets"
    family = "ETS"

    def _new(self, series: np.ndarray):
        from statsforecast.models import AutoETS

        return AutoETS(season_length=self._season, model="ZZZ", damped=None)

    def _describe(self, model, series: np.ndarray) -> tuple[float, str, int]:
        error, trend, season, damped = model.model_["components"]
        form = f"ETS({error},{trend}{'d' if damped == 'D' else ''},{season})"
        return float(model.model_["sigma2"]), form, 0

    def _variance(self, fit: AutoFit, mean: np.ndarray) -> np.ndarray:
        """A multiplicative error ``y = mu (1 + e)`` has variance ``mu^2 sigma2``."""
        multiplicative = fit.model.model_["components"][0] == "M"
        return fit.sigma2 * (mean**2 if multiplicative else np.ones_like(mean))


def croston_means(series: np.ndarray, alpha: float = CROSTON_ALPHA) -> np.ndarray:
    """``[L]``: Croston's one-step means of ``series [L]`` (non-negative): the sizes of its non-zero values and the
    intervals between them smoothed with weight ``alpha`` (each started at its first value), their ratio predicting
    the next step; ``nan`` until the first non-zero value."""
    means = np.full(len(series), np.nan)
    size = interval = None
    gap = 1
    for t, value in enumerate(series):
        if size is not None:
            means[t] = size / interval
        if value != 0:
            size = value if size is None else size + alpha * (value - size)
            interval = gap if interval is None else interval + alpha * (gap - interval)
            gap = 1
        else:
            gap += 1
    return means


class Croston(_Automatic):
    """Croston's method per feature, classic weight :data:`CROSTON_ALPHA` (no parameter fitted); its noise is the
    mean square of a history's one-step errors."""

    name = "croston"
    family = "Croston"
    uses_season = False

    def _estimate(self, history: np.ndarray):
        if len(history) < MIN_HISTORY:
            return None
        fits = [self._fit_feature(history[:, d]) for d in range(history.shape[1])]
        return [own if own is not None else pooled for own, pooled in zip(fits, self.pooled)]

    def _fit_feature(self, series: np.ndarray) -> AutoFit | None:
        errors = series - croston_means(series)
        errors = errors[np.isfinite(errors)]
        if len(errors) < 2 or not (errors**2).mean() > 0:
            return None
        return AutoFit(None, float((errors**2).mean()), f"Croston (alpha {CROSTON_ALPHA})", 0)

    def _predict(self, parameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, cov = self._naive._predict(self._naive.pooled, row)
        for d, fit in enumerate(parameters):
            means = croston_means(row[:, d]) if fit is not None else None
            if means is None:
                continue
            known = np.isfinite(means)
            mean[known, d] = means[known]
            cov[known, d, d] = fit.sigma2
        return mean, cov

    def _marginal(self, fit: AutoFit, series: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Croston's forecast is flat: every step ahead has the next step's mean and the one-step noise."""
        last = croston_means(np.append(series, 0.0))[-1] if (series != 0).any() else np.nan
        if not np.isfinite(last):
            return None
        return np.full(horizon, last), np.full(horizon, np.sqrt(fit.sigma2))

    def _choices(self) -> dict:
        return {
            "pooled": [f.form if f is not None else "the last value (no fit)" for f in self.pooled],
            "per_row": f"the noise from each row's own history of at least {MIN_HISTORY} steps, else the longest "
            "training row's",
        }


def _parameter_count(fit: AutoFit | None) -> int:
    """The parameters of a fit: its coefficients or smoothing weights and initial states, and its noise."""
    if fit is None or fit.model is None:
        return 1
    model = fit.model.model_
    if "coef" in model:
        return len(model["coef"]) + 1
    return int(model["n_params"]) + 1

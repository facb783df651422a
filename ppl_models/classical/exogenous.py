"""ARIMA with exogenous regressors (ARIMAX): statsforecast's ``AutoARIMA`` of each target on the known covariates.

The data come in the covariate layout of :mod:`ppl_models.inference.data.covariates`: a row ``[T, D]`` holds
``[y_t, c_{t+1}, p_t]``. The regressors of ``y_t`` are the known covariates of the same step, ``c_t``, read from row
``t - 1``; the first step has none and is left out of the fit. Past-only covariates would enter only as lagged
regressors whose future values a forecast of more than one step lacks, so they are refused here.

A forecast of ``H`` steps after a history needs the known covariates of those steps (``future [H, C]``), as
statsforecast's ``X`` of the future; its draws are the model's ``h``-step Gaussian marginals, each step drawn
independently (as the other statsforecast rows do).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.stats import norm

from ppl_models.inference.data.covariates import CovariateLayout

from .statespace_fits import quiet

__all__ = ["ArimaX", "PAST_REFUSAL"]

#: why an ARIMAX row takes no past-only covariate
PAST_REFUSAL = (
    "past_covariates: arimax takes future-known covariates only (a past-only one would be a lagged regressor whose "
    "values a forecast of more than one step does not have)"
)
#: the central level (percent) whose interval gives a forecast step's spread
_LEVEL = 80


class ArimaX:
    """One statsforecast ``AutoARIMA`` per target, with the known covariates of each step as regressors.

    Args:
        layout: the data's columns (targets, known covariates; no past-only ones).
        season: the season ``m`` of the search (1: none).
    """

    def __init__(self, layout: CovariateLayout, *, season: int = 1):
        if not isinstance(layout, CovariateLayout):
            raise TypeError(f"layout: expected a CovariateLayout, got {type(layout).__name__}")
        if layout.past:
            raise ValueError(PAST_REFUSAL)
        if not layout.known:
            raise ValueError("layout: arimax needs at least one future-known covariate (covariates)")
        self.layout, self.season = layout, int(season)
        self.fits: list = []

    def regressors(self, row: np.ndarray) -> np.ndarray:
        """``[L - 1, C]``: the known covariates of steps ``1 .. L - 1`` of ``row [L, D]`` (each step's ``c_t``)."""
        return np.asarray(row, dtype=np.float64)[:-1, self.layout.known_slice]

    def fit(self, row: np.ndarray) -> ArimaX:
        """Fit each target of ``row [L, D]`` (one series in the covariate layout) on its regressors."""
        from statsforecast.models import AutoARIMA

        row = np.asarray(row, dtype=np.float64)
        exog = self.regressors(row)
        with quiet():
            self.fits = [
                AutoARIMA(season_length=self.season).fit(row[1:, d], X=exog) for d in range(self.layout.modelled)
            ]
        return self

    @property
    def forms(self) -> list[str]:
        """Each target's chosen form with the covariates it used (``ARIMA(1,0,0) + price``)."""
        from statsforecast.arima import arima_string

        names = " + ".join(self.layout.known)
        return [f"{arima_string(fit.model_)} + {names}" for fit in self._fitted()]

    def forecast(self, row: np.ndarray, future: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """``(mean [H, O], sd [H, O])`` of the ``H`` steps after ``row [L, D]``, given the known covariates of those
        steps ``future [>= H, C]``, by the fitted models (parameters fixed, filtered through ``row``)."""
        row, future = np.asarray(row, dtype=np.float64), np.asarray(future, dtype=np.float64)
        if future.ndim != 2 or future.shape[1] != len(self.layout.known) or len(future) < horizon:
            raise ValueError(
                f"future: expected the {horizon} next values of the covariates {list(self.layout.known)} "
                f"([{horizon}, {len(self.layout.known)}]), got shape {list(future.shape)}"
            )
        if not np.isfinite(future[:horizon]).all():
            raise ValueError(f"future: a covariate of {list(self.layout.known)} has no value in the forecast window")
        means, sds = [], []
        z = norm.ppf(0.5 + _LEVEL / 200)
        with quiet():
            for d, fit in enumerate(self._fitted()):
                out = fit.forward(
                    y=row[1:, d], h=horizon, X=self.regressors(row), X_future=future[:horizon], level=[_LEVEL]
                )
                means.append(np.asarray(out["mean"], dtype=np.float64))
                sds.append((np.asarray(out[f"hi-{_LEVEL}"]) - np.asarray(out[f"lo-{_LEVEL}"])) / (2 * z))
        return np.stack(means, -1), np.stack(sds, -1)

    def draws(
        self, row: np.ndarray, future: np.ndarray, horizon: int, num_samples: int, generator=None
    ) -> torch.Tensor:
        """``[S, H, O]`` draws of :meth:`forecast`'s Gaussian marginals (float64)."""
        mean, sd = (torch.from_numpy(v) for v in self.forecast(row, future, horizon))
        return mean + sd * torch.randn((num_samples, *mean.shape), generator=generator, dtype=torch.float64)

    def _fitted(self) -> list:
        if not self.fits:
            raise RuntimeError("ArimaX: call fit(row) first")
        return self.fits

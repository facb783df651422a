"""ARIMA with exogenous regressors (ARIMAX): statsforecast's ``AutoARIMA`` of each target on the known covariates.

The data come in the covariate layout of :mod:`ppl_models.inference.data.covariates`: a row ``[T, D]`` holds
``[y_t, c_{t+1}, p_t]``. The regressors of ``y_t`` are the known covariates of the same step, ``c_t``, read from row
``t - 1``; the first step has none and is left out of the fit. Past-only covariates would enter only as lagged
regressors whose future values a forecast of more than one step lacks, so they are refused here.

A forecast of ``H`` steps after a history needs the known covariates of those steps (``future [H, C]``), as
statsforecast's ``X`` of the future; its draws are the model's ``h``-step Gaussian marginals, each step drawn
independently (as the other statsforecast rows do).

:class:`ArimaxForecaster` is the board's ``arimax`` row: a
:class:`~ppl_models.classical.base.ClassicalForecaster` of data in that layout whose parameters come from each row's
history (its context; the fit on the longest training row where the history is short), filtered through the row's
steps with the known covariates of each: the one-step predictive of the targets given their earlier steps and the
known covariates up to the step predicted. The covariate columns are inputs, held as read, and take no part in its
likelihood (``modelled_features``).
"""

from __future__ import annotations

import numpy as np
import torch

from ppl_models.inference.data.covariates import CovariateLayout
from ppl_models.inference.protocol import check_num_samples
from ppl_models.inference.validation import check_positive_int

from .automatic import MAX_SEASON, MIN_HISTORY
from .base import ClassicalForecaster, normal_quantile, rows_of
from .naive import LastValue
from .statespace_fits import quiet

__all__ = ["ArimaX", "ArimaxForecaster", "PAST_REFUSAL"]

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
        z = normal_quantile(0.5 + _LEVEL / 200)
        with quiet():
            for d, fit in enumerate(self._fitted()):
                out = fit.forward(
                    y=row[1:, d], h=horizon, X=self.regressors(row), X_future=future[:horizon], level=[_LEVEL]
                )
                means.append(np.asarray(out["mean"], dtype=np.float64))
                sds.append((np.asarray(out[f"hi-{_LEVEL}"]) - np.asarray(out[f"lo-{_LEVEL}"])) / (2 * z))
        return np.stack(means, -1), np.stack(sds, -1)

    def one_step_means(self, row: np.ndarray) -> np.ndarray:
        """``[L - 1, O]``: the one-step means of the targets of steps ``1 .. L - 1`` of ``row [L, D]`` under the fitted
        models, their parameters fixed (each step's mean reads the targets before it and the known covariates up to
        it)."""
        row = np.asarray(row, dtype=np.float64)
        exog, following = self.regressors(row), row[-1:, self.layout.known_slice]
        with quiet():
            fitted = [
                fit.forward(y=row[1:, d], h=1, X=exog, X_future=following, fitted=True)["fitted"]
                for d, fit in enumerate(self._fitted())
            ]
        return np.stack([np.asarray(f, dtype=np.float64) for f in fitted], -1)

    @property
    def first_steps(self) -> list[int]:
        """Per target, the first step of a row whose one-step mean is the model's: ``1 + d + D m`` (the step before
        has no regressor, the differences need their first values)."""
        return [1 + fit.model_["arma"][5] + fit.model_["arma"][6] * fit.model_["arma"][4] for fit in self._fitted()]

    @property
    def noise_variances(self) -> list[float]:
        """Per target, the fit's one-step noise variance ``sigma2``."""
        return [float(fit.model_["sigma2"]) for fit in self._fitted()]

    @property
    def num_parameters(self) -> int:
        """The coefficients (ARMA terms, regressors, mean or drift) and the noise variance of every target's fit."""
        return sum(len(fit.model_["coef"]) + 1 for fit in self._fitted())

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


class ArimaxForecaster(ClassicalForecaster):
    """The ``arimax`` row: :class:`ArimaX` fitted on each row's history, as a classical forecaster of data in the
    covariate ``layout`` (see the module docstring). The season ``m`` of its search is found as the other rows find
    theirs (at most :data:`~ppl_models.classical.automatic.MAX_SEASON`); with ``log`` it models the log of the
    targets (the covariates are read as they are)."""

    name = "arimax"

    def __init__(self, layout: CovariateLayout, *, season: int | None = None, log: bool = False):
        super().__init__(season=season, log=log)
        ArimaX(layout)  # the layout's checks
        self.layout = layout
        self.modelled_features = layout.modelled

    @property
    def source(self) -> str:
        return f"ARIMA with the covariates {list(self.layout.known)} as regressors, chosen per series (statsforecast)"

    def forecast(self, x, mask=None, horizon: int = 1, num_samples: int = 100, generator=None) -> torch.Tensor:
        """Refused: a forecast of the targets needs the known covariates of the steps ahead (:meth:`forecast_given`)."""
        raise ValueError(
            f"horizon: arimax forecasts the targets given the covariates {list(self.layout.known)} of the steps "
            "ahead, which this call does not give (forecast_given)"
        )

    @torch.no_grad()
    def forecast_given(
        self, x: torch.Tensor, mask, future: torch.Tensor, horizon: int, num_samples: int = 100, generator=None
    ) -> torch.Tensor:
        """``[S, N, H, D]`` draws of the ``horizon`` steps after each row's last valid step of ``x [N, T, D]`` given
        the known covariates of those steps ``future [N, >= H, C]`` (``future[:, h]`` in the row before step ``h``),
        with the model searched on the row's valid steps (the pooled fit where they are too few, the last value
        where there is none): the targets' ``h``-step Gaussian marginals, the covariate columns 0 (inputs)."""
        x, mask = self._checked(x, mask)
        horizon = check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        ahead = torch.as_tensor(future).detach().cpu().double().numpy()
        width = len(self.layout.known)
        if ahead.ndim != 3 or ahead.shape[0] != x.shape[0] or ahead.shape[1] < horizon or ahead.shape[2] != width:
            raise ValueError(f"future: expected [{x.shape[0]}, {horizon}, {width}], got {list(ahead.shape)}")
        if not np.isfinite(ahead[:, :horizon]).all():
            raise ValueError(f"future: a value of {list(self.layout.known)} is missing in the forecast window")
        rows = rows_of(self._modelled(x, mask), mask)
        if not all(len(row) for row in rows):
            raise ValueError("mask marks no valid step in a row of x: a forecast needs a history")
        self._rows["rows"] += len(rows)
        out = torch.zeros(num_samples, len(rows), horizon, x.shape[-1], dtype=torch.float64)
        for i, row in enumerate(rows):
            row = row.copy()
            row[-1, self.layout.known_slice] = ahead[i, 0]  # the last row holds the first step's covariates
            out[:, i, :, : self.modelled_features] = self._row_draws(row, ahead[i], horizon, num_samples, generator)
        if self.log:
            out[..., : self.modelled_features] = out[..., : self.modelled_features].exp()
        return out.to(dtype=x.dtype, device=x.device)

    def _row_draws(self, row: np.ndarray, future: np.ndarray, horizon: int, num_samples: int, generator):
        """``[S, H, O]``: the row's ARIMAX draws, else (no model for it) the last value's."""
        fit = self._parameters(row)
        if fit is not None:
            try:
                return fit.draws(row, future, horizon, num_samples, generator)
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):
                pass
        noise = tuple(v[: self.modelled_features] for v in self._naive.pooled)
        return self._naive._draw(noise, row[:, : self.modelled_features], horizon, num_samples, generator)

    def _check_features(self, features: int) -> None:
        if features != len(self.layout.features):
            raise ValueError(
                f"x: expected the {len(self.layout.features)} columns {self.layout.features} (targets, then "
                f"covariates), got {features}"
            )

    def _fit(self, rows: list[np.ndarray]) -> None:
        self._naive = LastValue()._fit_rows(rows, self.training)
        self._report("fits", 0)
        self.pooled = self._fit_row(max(rows, key=len))
        self._report("fits", 1)

    def _fit_row(self, row: np.ndarray) -> ArimaX | None:
        """:class:`ArimaX` fitted on ``row [L, D]``, ``None`` where it is too short or the fit fails."""
        if len(row) < 3:
            return None
        season = self.period if 1 < self.period <= MAX_SEASON else 1
        try:
            fit = ArimaX(self.layout, season=season).fit(row)
            usable = all(np.isfinite(v) and v > 0 for v in fit.noise_variances)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            return None
        return fit if usable else None

    def _estimate(self, history: np.ndarray) -> ArimaX | None:
        fit = self._fit_row(history) if len(history) > MIN_HISTORY else None
        for form in fit.forms if fit is not None else ():
            self._rows[form] += 1
        return fit

    def _predict(self, parameters: ArimaX | None, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last value's predictive, the covariates held as read and, from each target's first step of its own
        (:attr:`ArimaX.first_steps`), the ARIMAX one-step mean and noise variance."""
        mean, cov = self._naive._predict(self._naive.pooled, row)
        mean[:, self.modelled_features :] = row[:, self.modelled_features :]
        if parameters is None or len(row) < 2:
            return mean, cov
        with quiet():
            try:
                fitted = parameters.one_step_means(row)
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):
                return mean, cov
        for d, (start, sigma2) in enumerate(zip(parameters.first_steps, parameters.noise_variances)):
            if start < len(row) and np.isfinite(fitted[start - 1 :, d]).all():
                mean[start:, d] = fitted[start - 1 :, d]
                cov[start:, d, :] = cov[start:, :, d] = 0.0
                cov[start:, d, d] = sigma2
        return mean, cov

    def _choices(self) -> dict:
        return {
            "pooled": self.pooled.forms if self.pooled is not None else "the last value (no fit)",
            "pooled_choice": "the model fitted on the longest training row",
            "per_row": f"a model searched on each row's own history of more than {MIN_HISTORY} steps, else the "
            "pooled one; its parameters fixed over the row's steps",
            "covariates": list(self.layout.known),
            "engine": "statsforecast",
        }

    def _count_parameters(self) -> int:
        return self.pooled.num_parameters if self.pooled is not None else self.modelled_features

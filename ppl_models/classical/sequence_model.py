"""A classical forecaster behind the collection's protocol: :class:`ClassicalSequenceModel`.

It wraps a fitted :class:`~ppl_models.classical.ClassicalForecaster` as a
:class:`~ppl_models.inference.protocol.SequenceModel` with an exact one-step predictive and forecasts, so
that :func:`ppl_models.inference.evaluate` (and a backtest) judge it exactly as they judge the collection's models:
the same scored steps, the same figures, the same units. Its parameters come from each row's context
(``fits_context``): :func:`~ppl_models.inference.evaluate` tells its ``predictive`` which steps are scored. A
forecaster of targets that reads covariates (``arimax``) is a :class:`ClassicalCovariateModel`: a model of those
targets, scored on them alone, whose forecasts need the covariates of the steps ahead.
"""

from __future__ import annotations

import torch

from ppl_models.inference.protocol import OneStepPredictive, SequenceModel

from .base import ClassicalForecaster
from .exogenous import ArimaxForecaster

__all__ = ["ClassicalSequenceModel", "ClassicalCovariateModel"]

_NOT_PYRO = "a classical forecaster fitted with statsmodels, not a Pyro model"


class ClassicalSequenceModel(SequenceModel):
    """A fitted classical ``forecaster`` as a sequence model of ``x [B, T, D]`` (exact, predictive, forecast)."""

    capabilities = frozenset({"exact", "predictive", "forecast"})
    limitations = {
        "programs": f"{_NOT_PYRO}: it has no Pyro model or guide",
        "latent": f"{_NOT_PYRO}: its likelihood is exact, with no latent sites to bound",
        "particles": f"{_NOT_PYRO}: its Kalman filter is exact, so it needs no particle filter",
        "generate": f"{_NOT_PYRO}: forecast continues each row of its data instead",
    }
    description = "a classical forecaster (last value, seasonal naive, ARIMA, ETS, VAR) behind the protocol"
    fits_context = True

    def __init__(self, forecaster: ClassicalForecaster):
        super().__init__()
        if not isinstance(forecaster, ClassicalForecaster):
            raise TypeError(f"forecaster must be a ClassicalForecaster, got {type(forecaster).__name__}")
        self.forecaster = forecaster

    def parameter_count(self) -> int:
        return self.forecaster.num_parameters

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[B]`` exact log density of every valid step (no context: the training split's pooled fit)."""
        return self.forecaster.one_step(x, mask).log_density.sum(1)

    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        scored: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        num_particles: int | None = None,
    ) -> OneStepPredictive:
        """The forecaster's Gaussian one-step predictive, parameters estimated on each row's context (the valid
        steps before ``scored``); exact, so ``num_particles`` is not used."""
        return self.forecaster.one_step(x, mask, scored, num_samples, generator)

    def forecast(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        horizon: int = 1,
        num_samples: int = 100,
        *,
        generator: torch.Generator | None = None,
        num_particles: int | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, D]`` joint draws of the ``horizon`` steps after each row, fitted on its valid steps (exact:
        ``num_particles`` is not used)."""
        return self.forecaster.forecast(x, mask, horizon, num_samples, generator)

    def forecast_given(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        future: torch.Tensor,
        horizon: int,
        num_samples: int = 100,
        *,
        generator: torch.Generator | None = None,
        num_particles: int | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, D]`` draws of the ``horizon`` steps after each row given the known covariates of those steps
        ``future [B, >= H, C]``: the forecaster takes none, so they are :meth:`forecast`'s, from the rows before (a
        univariate forecaster ignores the covariate columns, the VAR reads them as lagged series)."""
        return self.forecast(x, mask, horizon, num_samples, generator=generator)


class ClassicalCovariateModel(ClassicalSequenceModel):
    """A fitted classical ``forecaster`` of the targets that reads covariates (an
    :class:`~ppl_models.classical.exogenous.ArimaxForecaster`), as a sequence model of its data's targets: its
    ``modelled_features`` leading columns are scored, and a forecast needs the covariates of the steps ahead."""

    capabilities = ClassicalSequenceModel.capabilities - {"forecast"}
    limitations = {
        **ClassicalSequenceModel.limitations,
        "forecast": "it reads covariates: a forecast needs their values in the steps ahead (forecast_given)",
    }

    def __init__(self, forecaster: ArimaxForecaster):
        if not isinstance(forecaster, ArimaxForecaster):
            raise TypeError(f"forecaster must be an ArimaxForecaster, got {type(forecaster).__name__}")
        super().__init__(forecaster)
        self.arimax = forecaster
        #: the leading columns forecast and scored, the others read as inputs
        self.modelled_features = forecaster.layout.modelled

    def forecast_given(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        future: torch.Tensor,
        horizon: int,
        num_samples: int = 100,
        *,
        generator: torch.Generator | None = None,
        num_particles: int | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, D]`` draws of the ``horizon`` steps after each row given the known covariates of those steps
        ``future [B, >= H, C]`` (``future[:, h]`` in the row before step ``h``): the targets' draws, the other
        columns 0 (inputs, not forecast); exact, so ``num_particles`` is not used."""
        return self.arimax.forecast_given(x, mask, future, horizon, num_samples, generator)

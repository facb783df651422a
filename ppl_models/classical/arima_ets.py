"""ARIMA and exponential smoothing: one univariate statsmodels state-space model per feature
(:class:`~ppl_models.classical.univariate_state_space.UnivariateStateSpace`: the choice by AIC, the pooled and
per-row fits, filtering and simulating), with the candidates of each family."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .univariate_state_space import (
    CHOICE_STEPS,
    FINALISTS,
    MAX_STATE_SEASON,
    MIN_HISTORY,
    SCREEN_ROWS,
    UnivariateStateSpace,
)

__all__ = [
    "Arima",
    "Ets",
    "ArimaSpec",
    "EtsSpec",
    "MIN_HISTORY",
    "MAX_STATE_SEASON",
    "CHOICE_STEPS",
    "SCREEN_ROWS",
    "FINALISTS",
]


class ArimaSpec(NamedTuple):
    """``ARIMA(p, d, q)(P, D, Q)m``; ``burn``: the first steps left out of the likelihood (the same for every
    candidate of a choice, so that their AICs score the same steps)."""

    p: int
    d: int
    q: int
    P: int = 0
    D: int = 0
    Q: int = 0
    burn: int = 1


class Arima(UnivariateStateSpace):
    """statsmodels ``SARIMAX`` per feature, fitted with its defaults: ``(p, d, q)`` in ``0..3 x 0..1 x 0..2``, with a
    constant when undifferenced, then (a season known and three of them in the history) ``(P, D, Q)`` in
    ``{0, 1}^3`` with the best ``(p, d, q)``. Every candidate of a choice leaves the same first steps out of its
    likelihood (``burn``: 1, or ``1 + m`` with seasonal candidates), so that their AICs score the same steps."""

    name = "statsmodels-arima"
    family = "ARIMA"

    def _make(self, series: np.ndarray, spec: ArimaSpec, *, fitting: bool = False):
        from statsmodels.tsa.statespace.sarimax import SARIMAX  # where a row is fitted: a kept board never pays it

        seasonal = (spec.P, spec.D, spec.Q, self.period) if self._seasonal(spec) else (0, 0, 0, 0)
        return SARIMAX(
            series,
            order=(spec.p, spec.d, spec.q),
            seasonal_order=seasonal,
            trend="c" if spec.d + spec.D == 0 else "n",
            loglikelihood_burn=spec.burn,
        )

    def _stages(self, seasonal: bool) -> list[Callable]:
        burn = 1 + (self.period if seasonal else 0)
        orders = [ArimaSpec(p, d, q, burn=burn) for p in range(4) for d in range(2) for q in range(3)]
        stages = [lambda best: orders]
        if seasonal:
            seasonal_orders = [(P, D, Q) for P in range(2) for D in range(2) for Q in range(2) if P + D + Q]
            stages.append(
                lambda best: [] if best is None else [best._replace(P=P, D=D, Q=Q) for P, D, Q in seasonal_orders]
            )
        return stages

    def _seasonal(self, spec: ArimaSpec) -> bool:
        return bool(spec.P + spec.D + spec.Q)

    def _diffuse_steps(self, spec: ArimaSpec) -> int:
        return spec.d + spec.D * self.period

    def _label(self, spec: ArimaSpec) -> str:
        seasonal = f"({spec.P},{spec.D},{spec.Q}){self.period}" if self._seasonal(spec) else ""
        return f"ARIMA({spec.p},{spec.d},{spec.q}){seasonal}"


class EtsSpec(NamedTuple):
    """Additive-error exponential smoothing: ``trend`` ``N`` (none), ``A`` (additive) or ``Ad`` (damped), and an
    additive season or none."""

    trend: str
    seasonal: bool = False


class Ets(UnivariateStateSpace):
    """statsmodels' state-space ``ExponentialSmoothing`` per feature, initial states estimated: trend none, additive
    or damped, and (a season known and three of them in the history) an additive season or none. It is fitted with
    the noise variance concentrated out (statsmodels' default), then filters with that variance as a parameter, so
    that the steps filtered do not re-estimate it."""

    name = "statsmodels-ets"
    family = "ETS"
    retry_stalled = True

    def _make(self, series: np.ndarray, spec: EtsSpec, *, fitting: bool = False):
        from statsmodels.tsa.statespace.exponential_smoothing import ExponentialSmoothing  # where a row is fitted

        seasonal = self.period if spec.seasonal else None
        return ExponentialSmoothing(
            series,
            trend=spec.trend != "N",
            damped_trend=spec.trend == "Ad",
            seasonal=seasonal,
            concentrate_scale=fitting,
        )

    def _optimizer(self, spec: EtsSpec) -> str:
        """Powell's method for the models without a season: their smoothing parameters often sit on a bound, where
        L-BFGS stalls (tens of nats below Powell's optimum on trended series); L-BFGS for the seasonal ones, whose
        many initial states make Powell's line searches slow."""
        return "lbfgs" if spec.seasonal else "powell"

    def _parameters_of(self, result) -> np.ndarray:
        """The fit's parameters with its noise variance, concentrated out while fitting, before the initial states."""
        names = result.model.param_names
        return np.insert(result.params, next(i for i, n in enumerate(names) if n.startswith("initial_")), result.scale)

    def _stages(self, seasonal: bool) -> list[Callable]:
        specs = [
            EtsSpec(trend, season) for season in ((False, True) if seasonal else (False,)) for trend in ("N", "A", "Ad")
        ]
        return [lambda best: specs]

    def _seasonal(self, spec: EtsSpec) -> bool:
        return spec.seasonal

    def _label(self, spec: EtsSpec) -> str:
        return f"ETS(A,{spec.trend},{'A' if spec.seasonal else 'N'})"

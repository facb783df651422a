"""ARIMA and exponential smoothing: one univariate statsmodels state-space model per feature.

Each feature's model is chosen by AIC among candidates (``_stages``), compared on the last :data:`CHOICE_STEPS`
steps of each history. With a training split of at most :data:`~ppl_models.classical.base.CHOICE_ROWS` rows (a
few long series) each row's model is chosen on its own history; with more (a panel) every row takes the training
split's choice (the AIC summed over at most that many of its rows, the candidates screened on :data:`SCREEN_ROWS` of
them) and only its parameters are estimated per row. The pooled
parameters maximise the likelihood summed over those training rows; a history shorter than :data:`MIN_HISTORY`
steps takes them. A fit that fails (a singular matrix, a likelihood that is not the sum of its steps' densities) is
skipped, its warnings kept quiet; a feature that no candidate fits is predicted by the last value.

A row's steps are filtered with its parameters fixed: the model's one-step forecasts and their error variances. The
steps before a differenced ARIMA has its differences (its diffuse start) take the last value, with the training
split's noise. Forecasts simulate the state-space model from its filtered state after the last step. Seasonal terms
need a season of at most :data:`MAX_STATE_SEASON` steps (a longer one makes the state too large to fit quickly: the
seasonal-naive forecaster serves it) and histories of three seasons.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import minimize
from statsmodels.tsa.statespace.exponential_smoothing import ExponentialSmoothing
from statsmodels.tsa.statespace.sarimax import SARIMAX

from .base import CHOICE_ROWS, ClassicalForecaster, gaussian_draws
from .naive import LastValue

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

#: the fewest steps of a history that get parameters of their own
MIN_HISTORY = 12
#: the longest season given seasonal terms
MAX_STATE_SEASON = 24
#: the steps of a history (its last ones) on which candidates are compared
CHOICE_STEPS = 500
#: the histories on which a choice screens every candidate
SCREEN_ROWS = 8
#: the screened candidates then fitted on every history of the choice
FINALISTS = 4
#: the pooled fit's loss where a likelihood is not finite
_NOT_FINITE = 1e300


@contextlib.contextmanager
def _quiet():
    """statsmodels' warnings (convergence, starting parameters, overflow in a trial) silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


class Trial(NamedTuple):
    """A fit of a candidate: its ``params`` (as the filtering model takes them) and ``aic``."""

    params: np.ndarray
    aic: float


@dataclass(frozen=True)
class Fitted:
    """A feature's model: its ``spec`` and statsmodels' (constrained) ``params`` of it."""

    spec: tuple
    params: np.ndarray


def joint_mle(models: list, params: list[np.ndarray]) -> np.ndarray:
    """The parameters shared by ``models`` (one spec, one row each) that maximise their summed log-likelihood, from
    the median of their own fits ``params`` (in the unconstrained space)."""
    with _quiet():
        starts = [model.untransform_params(p) for model, p in zip(models, params)]
        starts = [start for start in starts if np.isfinite(start).all()]  # a fit on a bound has none
    if len(models) == 1 or not starts:
        return params[0]
    start = np.median(starts, 0)

    def loss(unconstrained):
        try:
            total = -sum(model.loglike(unconstrained, transformed=False) for model in models)
        except (np.linalg.LinAlgError, ValueError):
            return _NOT_FINITE
        return total if np.isfinite(total) else _NOT_FINITE

    with _quiet():
        best = minimize(loss, start, method="L-BFGS-B", options={"maxiter": 200})
        return models[0].transform_params(best.x if best.fun < loss(start) else start)


def simulate(model, result, horizon: int, num_samples: int, generator) -> torch.Tensor:
    """``[S, H]`` draws of a univariate state-space ``model``'s next ``horizon`` observations after its filter
    ``result``, with its matrices of the last step (the models here have constant ones; SARIMAX keeps its constant
    in a time-varying state intercept)."""
    matrices = {
        name: _last_step(model.ssm[name], dims)
        for name, dims in (
            ("design", 2),
            ("obs_intercept", 1),
            ("obs_cov", 2),
            ("transition", 2),
            ("state_intercept", 1),
            ("selection", 2),
            ("state_cov", 2),
        )
    }
    state_noise = matrices["selection"] @ matrices["state_cov"] @ matrices["selection"].T
    mean, cov = result.predicted_state[:, -1].copy(), result.predicted_state_cov[:, :, -1].copy()
    state = gaussian_draws(torch.from_numpy(mean), torch.from_numpy(cov), num_samples, generator)
    zeros = torch.zeros(len(state_noise), dtype=torch.float64)
    path = []
    for _ in range(horizon):
        observation = matrices["obs_intercept"] + state @ matrices["design"].T
        path.append(
            observation
            + gaussian_draws(torch.zeros(1, dtype=torch.float64), matrices["obs_cov"], num_samples, generator)
        )
        state = matrices["state_intercept"] + state @ matrices["transition"].T
        state = state + gaussian_draws(zeros, state_noise, num_samples, generator)
    return torch.cat(path, 1)


def _sound(result) -> bool:
    """Whether a fit's log-likelihood is the sum of its one-step Gaussian log densities (after the burn) with
    positive variances: a fit whose filter broke down (a stationary start that could not be solved) is not."""
    variance, error = result.forecasts_error_cov[0, 0], result.forecasts_error[0]
    if not (np.isfinite(result.llf) and np.isfinite(variance).all() and (variance > 0).all()):
        return False
    burn = result.loglikelihood_burn
    total = -0.5 * float(np.sum(np.log(2 * np.pi * variance[burn:]) + error[burn:] ** 2 / variance[burn:]))
    return bool(np.isclose(total, result.llf, rtol=1e-6, atol=1e-6))


def _last_step(matrix, dims: int) -> torch.Tensor:
    """A state-space matrix (``dims`` dimensions, a last one more where it varies with time) at the last step."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return torch.from_numpy(np.ascontiguousarray(matrix[..., -1] if matrix.ndim > dims else matrix))


class UnivariateStateSpace(ClassicalForecaster):
    """One statsmodels state-space model per feature, chosen by AIC (see the module docstring).

    A subclass writes ``_make`` (the statsmodels model of a spec on a series), ``_stages`` (the candidates, stage by
    stage, each stage a function of the best spec so far), ``_label`` and, where it has one, ``_diffuse_steps``.
    Parameters: a list over features of :class:`Fitted` (``None``: the last value).
    """

    family = ""

    def _make(self, series: np.ndarray, spec, *, fitting: bool = False):
        raise NotImplementedError

    def _stages(self, seasonal: bool) -> list[Callable[[tuple | None], list[tuple]]]:
        raise NotImplementedError

    def _label(self, spec) -> str:
        raise NotImplementedError

    def _seasonal(self, spec) -> bool:
        raise NotImplementedError

    def _diffuse_steps(self, spec) -> int:
        """The first steps whose predictive is diffuse (no history to difference)."""
        return 0

    # --- fitting -------------------------------------------------------------------------------------------------
    def _fit(self, rows: list[np.ndarray]) -> None:
        self._naive = LastValue()._fit_rows(rows, self.training)
        long = [row for row in rows if len(row) >= MIN_HISTORY] or [row for row in rows if len(row) >= 3]
        picked = np.unique(np.linspace(0, len(long) - 1, min(len(long), CHOICE_ROWS)).round().astype(int))
        search = [long[i] for i in picked] if long else []
        self._per_row, self._search_rows, self._kept = len(rows) <= CHOICE_ROWS, len(search), {}
        self._keeping = True  # the training split's fits, kept for the contexts that repeat its rows
        self.pooled = [
            self._pooled_feature([row[:, feature] for row in search]) for feature in range(len(self.training.mean))
        ]
        self._keeping = False

    def _pooled_feature(self, histories: list[np.ndarray]) -> Fitted | None:
        if not histories:
            return None
        spec, fits = self._choose(histories)
        if spec is None:
            return None
        return Fitted(spec, joint_mle([self._make(h, spec) for h in histories], [fit.params for fit in fits]))

    def _choose(self, histories: list[np.ndarray]) -> tuple[tuple | None, list[Trial]]:
        """The spec of least AIC summed over ``histories`` (their last :data:`CHOICE_STEPS` steps) and its fits on
        them (whole), or ``None, []`` where no candidate fits.

        Each stage's candidates are screened on at most :data:`SCREEN_ROWS` of the histories, spread over them; the
        :data:`FINALISTS` best are then fitted on the rest and compared over all of them (with no rest, every
        candidate is compared)."""
        recent = [history[-CHOICE_STEPS:] for history in histories]
        seasonal = 1 < self.period <= MAX_STATE_SEASON and min(len(h) for h in recent) >= 3 * self.period
        step = -(-len(recent) // SCREEN_ROWS)
        screen, rest = recent[::step], [h for i, h in enumerate(recent) if i % step]
        best, best_aic, best_fits = None, np.inf, []
        for stage in self._stages(seasonal):
            screened = [
                (sum(fit.aic for fit in fits), spec, fits)
                for spec in stage(best)
                if (fits := self._fits(screen, spec)) is not None
            ]
            for _, spec, fits in sorted(screened, key=lambda s: s[0])[: FINALISTS if rest else None]:
                more = self._fits(rest, spec)
                aic = np.inf if more is None else sum(fit.aic for fit in fits + more)
                if aic < best_aic:
                    best, best_aic, best_fits = spec, aic, fits + more
        if best is not None and any(len(h) > CHOICE_STEPS for h in histories):
            best_fits = self._fits(histories, best) or best_fits
        return best, best_fits

    def _fits(self, histories: list[np.ndarray], spec) -> list[Trial] | None:
        """The fits of ``spec`` on each of ``histories``, ``None`` where one fails."""
        fits = []
        for history in histories:
            fit = self._fit_one(history, spec)
            if fit is None:
                return None
            fits.append(fit)
        return fits

    def _fit_one(self, series: np.ndarray, spec) -> Trial | None:
        """statsmodels' fit of ``spec`` on ``series`` (from its own starting parameters), ``None`` where it fails."""
        key = (spec, hashlib.blake2b(series.tobytes(), digest_size=16).digest())
        if key in self._kept:
            return self._kept[key]
        with _quiet():
            try:
                result = self._make(series, spec, fitting=True).fit(
                    disp=False, cov_type="none", method=self._optimizer(spec)
                )
                trial = Trial(self._parameters_of(result), float(result.aic)) if _sound(result) else None
            except (np.linalg.LinAlgError, ValueError):
                trial = None
        if self._keeping:
            self._kept[key] = trial
        return trial

    def _parameters_of(self, result) -> np.ndarray:
        """The parameters of a fit as :meth:`_make`'s model (not fitting) takes them."""
        return result.params

    def _optimizer(self, spec) -> str:
        """statsmodels' ``fit`` method for ``spec``."""
        return "lbfgs"

    def _estimate(self, history: np.ndarray):
        if len(history) < MIN_HISTORY:
            return None
        return [self._own(history[:, feature], pooled) for feature, pooled in enumerate(self.pooled)]

    def _own(self, series: np.ndarray, pooled: Fitted | None) -> Fitted | None:
        """A feature's model on its own history ``series``: chosen there (few rows) or the pooled spec's."""
        own = None
        if self._per_row:
            spec, fits = self._choose([series])
            own = Fitted(spec, fits[0].params) if spec is not None else None
        elif pooled is not None and (not self._seasonal(pooled.spec) or len(series) >= 3 * self.period):
            fit = self._fit_one(series, pooled.spec)
            own = Fitted(pooled.spec, fit.params) if fit is not None else None
        self._rows[self._label(own.spec) if own is not None else "a feature on the pooled fit"] += 1
        return pooled if own is None else own

    # --- filtering and simulating ----------------------------------------------------------------------------------
    def _predict(self, parameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, cov = self._naive._predict(self._naive.pooled, row)
        for feature, fitted in enumerate(parameters):
            if fitted is None:
                continue
            with _quiet():
                result = self._make(row[:, feature], fitted.spec).filter(fitted.params, cov_type="none")
            start = min(self._diffuse_steps(fitted.spec), len(row))
            mean[start:, feature] = result.forecasts[0, start:]
            cov[start:, feature, feature] = result.forecasts_error_cov[0, 0, start:]
        return mean, cov

    def _draw(self, parameters, row: np.ndarray, horizon: int, num_samples: int, generator) -> torch.Tensor:
        paths = []
        for feature, fitted in enumerate(parameters):
            if fitted is None or len(row) <= self._diffuse_steps(fitted.spec):
                noise = tuple(v[feature : feature + 1] for v in self._naive.pooled)
                paths.append(
                    self._naive._draw(noise, row[:, feature : feature + 1], horizon, num_samples, generator)[..., 0]
                )
                continue
            with _quiet():
                model = self._make(row[:, feature], fitted.spec)
                result = model.filter(fitted.params, cov_type="none")
            paths.append(simulate(model, result, horizon, num_samples, generator))
        return torch.stack(paths, -1)

    # --- reports ---------------------------------------------------------------------------------------------------
    def _pooled_labels(self) -> list[str]:
        return [self._label(f.spec) if f is not None else "the last value (no candidate fits)" for f in self.pooled]

    def _choices(self) -> dict:
        per_row = (
            f"each row's model chosen by AIC on its own history (the training split has at most {CHOICE_ROWS} rows)"
            if self._per_row
            else "the pooled model's spec, its parameters fitted on each history"
        )
        return {
            "pooled": self._pooled_labels(),
            "pooled_choice": "AIC summed over the training rows searched",
            "rows_searched": self._search_rows,
            "per_row": f"{per_row} of at least {MIN_HISTORY} steps, else the pooled fit",
        }

    @property
    def source(self) -> str:
        if self._per_row:
            return f"{self.family} chosen by AIC per series"
        return f"{', '.join(dict.fromkeys(self._pooled_labels()))} per series"

    def _count_parameters(self) -> int:
        return sum(len(f.params) if f is not None else 1 for f in self.pooled)


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

    name = "arima"
    family = "ARIMA"

    def _make(self, series: np.ndarray, spec: ArimaSpec, *, fitting: bool = False):
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

    name = "ets"
    family = "ETS"

    def _make(self, series: np.ndarray, spec: EtsSpec, *, fitting: bool = False):
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

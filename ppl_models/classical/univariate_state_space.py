"""One univariate statsmodels state-space model per feature, chosen by AIC: :class:`UnivariateStateSpace`, the base
of :class:`~ppl_models.classical.arima_ets.Arima` and :class:`~ppl_models.classical.arima_ets.Ets`.

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

import hashlib
from collections.abc import Callable

import numpy as np
import torch

from .base import CHOICE_ROWS, ClassicalForecaster
from .naive import LastValue
from .statespace_fits import Fitted, Trial, joint_mle, quiet, simulate, sound_fit

__all__ = [
    "UnivariateStateSpace",
    "MIN_HISTORY",
    "MAX_STATE_SEASON",
    "CHOICE_STEPS",
    "SCREEN_ROWS",
    "FINALISTS",
    "RETRY_METHODS",
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
#: the optimisers that fit a candidate again where the first reports no convergence
RETRY_METHODS = ("powell", "nm")
#: the iterations of a retry
RETRY_ITERATIONS = 5000


def _converged(result) -> bool:
    """Whether statsmodels' optimiser reports convergence (a method that does not report it counts as converged)."""
    return bool(result.mle_retvals.get("converged", True)) if isinstance(result.mle_retvals, dict) else True


class UnivariateStateSpace(ClassicalForecaster):
    """One statsmodels state-space model per feature, chosen by AIC (see the module docstring).

    A subclass writes ``_make`` (the statsmodels model of a spec on a series), ``_stages`` (the candidates, stage by
    stage, each stage a function of the best spec so far), ``_label`` and, where it has one, ``_diffuse_steps``.
    Parameters: a list over features of :class:`Fitted` (``None``: the last value).
    """

    family = ""
    #: whether a fit whose optimiser reports no convergence is fitted again (:meth:`_settled_fit`)
    retry_stalled = False

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
        with quiet():
            try:
                result = self._settled_fit(self._make(series, spec, fitting=True), spec)
                trial = Trial(self._parameters_of(result), float(result.aic)) if sound_fit(result) else None
            except (np.linalg.LinAlgError, ValueError):
                trial = None
        if self._keeping:
            self._kept[key] = trial
            self._report("fits", len(self._kept))
        return trial

    def _settled_fit(self, model, spec):
        """statsmodels' fit of ``model`` by :meth:`_optimizer`; where that optimiser reports no convergence (L-BFGS
        stalls where a smoothing weight sits on its bound) and :attr:`retry_stalled` is set, fitted again by each of
        :data:`RETRY_METHODS` and the highest likelihood kept. The counts of :meth:`describe` say how often
        (``optimiser: ...``)."""
        method = self._optimizer(spec)
        result = model.fit(disp=False, cov_type="none", method=method)
        if _converged(result) or not self.retry_stalled:
            return result
        self._rows["optimiser: retried"] += 1
        retries = [
            model.fit(disp=False, cov_type="none", method=m, maxiter=RETRY_ITERATIONS)
            for m in RETRY_METHODS
            if m != method
        ]
        best = max([result, *retries], key=lambda r: r.llf if np.isfinite(r.llf) else -np.inf)
        if best is not result and best.llf > result.llf + 1e-6:
            self._rows["optimiser: improved by a retry"] += 1
        if not any(_converged(r) for r in (result, *retries)):
            self._rows["optimiser: not converged"] += 1
        return best

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
            with quiet():
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
            with quiet():
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

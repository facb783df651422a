"""The classical forecasters a user would otherwise reach for, judged beside the collection's models.

``last-value``, ``seasonal-naive``, ``arima``, ``ets``, ``theta``, ``croston``, ``var``, ``statsmodels-arima``,
``statsmodels-ets`` and ``logistic-ar`` (:data:`CLASSICAL`; :func:`classical_model` makes one) are one small family of
:class:`ClassicalForecaster`: :meth:`~ClassicalForecaster.fit` on the training split (the pooled fit, the season),
then :meth:`~ClassicalForecaster.one_step` (the one-step predictive ``p(x_t | x_<t)`` of every valid step, parameters
estimated on each row's context, never on a scored step) and :meth:`~ClassicalForecaster.forecast` (draws of the
steps after each row). They are not Pyro models and hold no torch parameters; every figure is in the units of the
tensors given. With ``log=True`` a forecaster models ``log x`` (Gaussian there, log-normal in the data's units: its
densities carry the Jacobian).

``arima`` and ``ets`` are statsforecast's automatic searches (:mod:`~ppl_models.classical.automatic`: seasonal
AutoARIMA with drift, AutoETS with damped trends and multiplicative parts), ``theta`` its dynamic Theta models
(:mod:`~ppl_models.classical.theta`: a season taken out by the history's decomposition) and ``croston`` Croston's
method for intermittent counts; ``logistic-ar`` is the row of binary (0/1) data, a logistic regression of each
feature on the previous frame (:mod:`~ppl_models.classical.logistic_ar`). ``var`` and the ``statsmodels-*`` rows
are fitted with statsmodels: its VAR is the multivariate model statsforecast lacks, and its state-space models give
exact Gaussian likelihoods that pool one model over a panel of short series (:mod:`~ppl_models.classical.arima_ets`).

The season ``m`` of ``seasonal-naive``, ``arima``, ``ets`` and ``theta`` is ``season`` where given (``1``: none), else
the lag of ``2..min(T/2, 400)`` where the autocorrelation of the training split's first differences, pooled over rows
and features, is largest, kept where it is above :data:`~ppl_models.classical.base.SEASON_THRESHOLD` (else none).
"""

from __future__ import annotations

from .arima_ets import Arima, Ets
from .automatic import AutoArima, AutoEts, Croston
from .base import ClassicalForecaster
from .logistic_ar import LogisticAR
from .naive import LastValue, SeasonalNaive
from .theta import Theta
from .var import VectorAutoregression

__all__ = [
    "CLASSICAL",
    "DEFAULT_CLASSICAL",
    "classical_model",
    "ClassicalForecaster",
    "LastValue",
    "SeasonalNaive",
    "AutoArima",
    "AutoEts",
    "Croston",
    "Theta",
    "LogisticAR",
    "Arima",
    "Ets",
    "VectorAutoregression",
]

_CLASSES = {
    cls.name: cls
    for cls in (
        LastValue,
        SeasonalNaive,
        AutoArima,
        AutoEts,
        Theta,
        Croston,
        VectorAutoregression,
        Arima,
        Ets,
        LogisticAR,
    )
}
#: the registry's names of the classical forecasters
CLASSICAL = tuple(_CLASSES)
#: the forecasters a board fits when none are named (those that suit its data)
DEFAULT_CLASSICAL = ("last-value", "seasonal-naive", "arima", "ets", "theta", "croston", "var")


def classical_model(name: str, *, season: int | None = None, log: bool = False) -> ClassicalForecaster:
    """The unfitted classical forecaster ``name`` (one of :data:`CLASSICAL`), with ``season`` (``None``: detected on
    the training split; ``1``: none; unused by ``last-value``, ``croston`` and ``var``) and ``log`` (model
    ``log x``)."""
    if not isinstance(name, str) or name not in _CLASSES:
        raise ValueError(f"classical model must be one of {list(CLASSICAL)}, got {name!r}")
    return _CLASSES[name](season=season, log=log)

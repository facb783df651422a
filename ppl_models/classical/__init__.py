"""The classical forecasters a user would otherwise reach for, judged beside the collection's models.

``last-value``, ``seasonal-naive``, ``arima``, ``ets`` and ``var`` (:data:`CLASSICAL`; :func:`classical_model`
makes one) are one small family of :class:`ClassicalForecaster`: :meth:`~ClassicalForecaster.fit` on the training
split (the pooled fit, the season), then :meth:`~ClassicalForecaster.one_step` (the Gaussian one-step predictive
``p(x_t | x_<t)`` of every valid step, parameters estimated on each row's context, never on a scored step) and
:meth:`~ClassicalForecaster.forecast` (joint draws after each row). They are not Pyro models and hold no torch
parameters; every figure is in the units of the tensors given.

The models are fitted with statsmodels: it is well kept, its state-space models give exact Gaussian likelihoods,
``apply``/``extend`` (and ``filter`` with given parameters) run a fitted model over new data with its parameters
fixed, which keeps scored steps out of the estimates, and it installs from pure wheels.

The season ``m`` of ``seasonal-naive``, ``arima`` and ``ets`` is ``season`` where given (``1``: none), else the lag
of ``2..min(T/2, 400)`` where the autocorrelation of the training split's first differences, pooled over rows and
features, is largest, kept where it is above :data:`~ppl_models.classical.base.SEASON_THRESHOLD` (else none).
"""

from __future__ import annotations

from .arima_ets import Arima, Ets
from .base import ClassicalForecaster
from .naive import LastValue, SeasonalNaive
from .var import VectorAutoregression

__all__ = [
    "CLASSICAL",
    "classical_model",
    "ClassicalForecaster",
    "LastValue",
    "SeasonalNaive",
    "Arima",
    "Ets",
    "VectorAutoregression",
]

_CLASSES = {cls.name: cls for cls in (LastValue, SeasonalNaive, Arima, Ets, VectorAutoregression)}
#: the registry's names of the classical forecasters
CLASSICAL = tuple(_CLASSES)


def classical_model(name: str, *, season: int | None = None) -> ClassicalForecaster:
    """The unfitted classical forecaster ``name`` (one of :data:`CLASSICAL`), with ``season`` (``None``: detected on
    the training split; ``1``: none; unused by ``last-value`` and ``var``)."""
    if not isinstance(name, str) or name not in _CLASSES:
        raise ValueError(f"classical model must be one of {list(CLASSICAL)}, got {name!r}")
    return _CLASSES[name](season=season)

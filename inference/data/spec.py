"""How to read and cut a user's file: :class:`FileSpec`, its columns, its split and its training windows, checked in
one place. Each refusal is a :class:`~ppl_models.inference.validation.SettingError` naming its setting's key, which a
caller spells in its own terms (the command line's flags)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..defaults import SPLIT_FRACTIONS
from ..validation import InputTypeError, SettingError, check_positive_int

__all__ = [
    "FileSpec",
    "SettingTypeError",
    "MISSING",
    "TIME_ORDERS",
    "DEGENERATE",
    "SPLIT_BY",
    "setting_count",
    "setting_choice",
    "setting_fractions",
]

#: what to do with a NaN or infinite value inside a series
MISSING = ("error", "drop-series")
#: how the rows of a series are put in time order: by the time column's values (numbers, dates, numbered labels;
#: :func:`~ppl_models.inference.data.time_order.time_keys`) or in the file's order (the time column is then only
#: checked for duplicates)
TIME_ORDERS = ("values", "file")
#: what a file reader does with real-valued features that carry no series of their own
#: (:func:`~ppl_models.inference.data.degenerate.degenerate_features`): leave them out with a warning, or keep them
DEGENERATE = ("drop", "keep")
#: how held-out data is cut: whole series, or each series' last steps
SPLIT_BY = ("series", "time")
#: train, valid and test shares where no fractions are given


class SettingTypeError(SettingError, InputTypeError):
    """A :class:`~ppl_models.inference.validation.SettingError` for a setting of the wrong type (also a
    ``TypeError``)."""


@dataclass(frozen=True)
class FileSpec:
    """A long-format file's columns, its split and its training windows.

    Columns: ``series`` (the id column; ``None``: one series), ``time`` (the ordering column; ``None``: the file's
    order), ``features`` (``None``: every other numeric column), ``targets`` (a conditional model's ``y``),
    ``covariates`` and ``past_covariates`` (columns read as inputs of the forecast of the features, known in the future
    or only up to now: :mod:`~ppl_models.inference.data.covariates`) and ``split`` (a column of ``train`` / ``valid``
    / ``test`` labels). Reading: ``missing`` (:data:`MISSING`),
    ``time_order`` (:data:`TIME_ORDERS`), ``degenerate`` (:data:`DEGENERATE`), ``sep`` (a CSV's separator).
    Splitting, unless a ``split`` column decides: ``split_by`` (:data:`SPLIT_BY`), ``fractions`` (train, valid,
    test; ``None``: :data:`SPLIT_FRACTIONS`) and ``split_seed``. Training windows: ``window`` steps (>= 2) every
    ``stride`` (default ``window``; needs ``window``).
    """

    series: str | None = None
    time: str | None = None
    features: tuple[str, ...] | None = None
    targets: tuple[str, ...] | None = None
    covariates: tuple[str, ...] = ()
    past_covariates: tuple[str, ...] = ()
    split: str | None = None
    split_by: str = "series"
    fractions: tuple[float, float, float] | None = None
    split_seed: int = 0
    window: int | None = None
    stride: int | None = None
    missing: str = "error"
    time_order: str = "values"
    degenerate: str = "drop"
    sep: str = ","

    def __post_init__(self):
        for key in ("features", "targets", "covariates", "past_covariates"):
            if getattr(self, key) is not None:
                object.__setattr__(self, key, tuple(getattr(self, key)))
        if (self.covariates or self.past_covariates) and self.targets:
            raise SettingError(
                "covariates",
                "{covariates} and {past_covariates} are inputs of a forecast of the file's other columns; {targets} "
                "(a conditional model's y) does not take them",
            )
        setting_choice(self.missing, "missing", MISSING)
        setting_choice(self.time_order, "time_order", TIME_ORDERS)
        setting_choice(self.degenerate, "degenerate", DEGENERATE)
        setting_choice(self.split_by, "split_by", SPLIT_BY, expected="'series' or 'time'")
        if self.fractions is not None:
            object.__setattr__(self, "fractions", setting_fractions(self.fractions))
        object.__setattr__(self, "split_seed", setting_count(self.split_seed, "split_seed", minimum=0))
        if self.window is not None:
            object.__setattr__(self, "window", setting_count(self.window, "window", minimum=2))
        if self.stride is not None:
            if self.window is None:
                raise SettingError("stride", "{stride}: needs {window} (training windows of window steps every stride)")
            object.__setattr__(self, "stride", setting_count(self.stride, "stride"))
        if self.split is not None and (self.split_by != "series" or self.fractions is not None):
            other = "{split_by}" if self.split_by != "series" else "{fractions}"
            raise SettingError(
                "split",
                f"{{split}} {self.split!r} decides where each row goes, so {other} would not be used: give one or "
                "the other",
            )

    @classmethod
    def of(cls, spec: FileSpec | None = None, **settings) -> FileSpec:
        """``spec`` (default: a :class:`FileSpec` of the defaults) with ``settings`` (its fields) replaced."""
        if spec is None:
            return cls(**settings)
        return dataclasses.replace(spec, **settings) if settings else spec

    @property
    def split_fractions(self) -> tuple[float, float, float]:
        """The train, valid and test shares: :attr:`fractions`, else :data:`SPLIT_FRACTIONS`."""
        return self.fractions or SPLIT_FRACTIONS

    def reading(self) -> dict:
        """The settings a reader of the file uses (its columns, ``missing``, ``time_order``, ``degenerate``,
        ``sep``), by name."""
        names = (
            *("series", "time", "features", "targets", "covariates", "past_covariates", "split"),
            *("missing", "time_order", "degenerate", "sep"),
        )
        return {name: getattr(self, name) for name in names}


def setting_count(value, key: str, *, minimum: int = 1) -> int:
    """``value`` of setting ``key`` as an ``int`` >= ``minimum``; a :class:`SettingError` (:class:`SettingTypeError`
    for a non-integer) otherwise."""
    try:
        return check_positive_int(value, name=f"{{{key}}}", minimum=minimum)
    except InputTypeError as error:
        raise SettingTypeError(key, str(error)) from None
    except ValueError as error:
        raise SettingError(key, str(error)) from None


def setting_choice(value, key: str, choices, *, expected: str | None = None) -> str:
    """``value`` of setting ``key`` if it is one of ``choices``; a :class:`SettingError` otherwise."""
    if value not in choices:
        raise SettingError(key, f"{{{key}}}: expected {expected or f'one of {list(choices)}'}, got {value!r}")
    return value


def setting_fractions(fractions, key: str = "fractions") -> tuple[float, float, float]:
    """``fractions`` (train, valid, test) as three positive floats summing to 1; a :class:`SettingError` naming
    ``key`` otherwise."""
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise SettingError(key, f"{{{key}}}: expected three numbers (train, valid, test), got {fractions!r}") from None
    if len(values) != 3 or any(not math.isfinite(f) or f <= 0 for f in values) or abs(sum(values) - 1) > 1e-6:
        raise SettingError(key, f"{{{key}}}: expected three positive numbers summing to 1, got {fractions!r}")
    return values

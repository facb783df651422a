"""How an hourly table is cut into regression windows: :class:`HourlyWindowSpec`, its settings checked in one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ppl_models.inference.defaults import WINDOW_SHARES
from ppl_models.inference.validation import check_positive_int

__all__ = ["HourlyWindowSpec"]


@dataclass(frozen=True)
class HourlyWindowSpec:
    """The window settings of :func:`~ppl_models.experiments.tasks.hourly_windows.build_windows`.

    ``window`` steps per window; ``stride`` hours between training-window starts (``None``: ``window``);
    ``fractions`` the ``(train, valid)`` shares of the hours (the rest is the test split), kept as two floats;
    ``lagged_target`` adds the last observed target before each hour (and its missing flag) as inputs;
    ``max_windows`` keeps only the first this many windows of each split (``None``: all; quick runs, tests).
    A bad setting is a ``ValueError`` (``TypeError`` for the wrong type) naming it.
    """

    window: int = 24
    stride: int | None = None
    fractions: Sequence[float] = WINDOW_SHARES
    lagged_target: bool = True
    max_windows: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "window", check_positive_int(self.window, name="window"))
        if self.stride is not None:
            object.__setattr__(self, "stride", check_positive_int(self.stride, name="stride"))
        object.__setattr__(self, "fractions", _shares(self.fractions))
        if not isinstance(self.lagged_target, bool):
            raise TypeError(f"lagged_target must be true or false, got {self.lagged_target!r}")
        if self.max_windows is not None:
            object.__setattr__(self, "max_windows", check_positive_int(self.max_windows, name="max_windows"))

    @classmethod
    def of(cls, spec: HourlyWindowSpec | None = None, **settings) -> HourlyWindowSpec:
        """``spec`` (default: a :class:`HourlyWindowSpec` of the defaults) with ``settings`` (its fields) replaced."""
        if spec is None:
            return cls(**settings)
        if not isinstance(spec, cls):
            raise TypeError(f"spec must be a {cls.__name__} or None, got {type(spec).__name__}")
        return dataclasses.replace(spec, **settings) if settings else spec

    @property
    def train_stride(self) -> int:
        """Hours between training-window starts: :attr:`stride`, else :attr:`window`."""
        return self.window if self.stride is None else self.stride


def _shares(fractions) -> tuple[float, float]:
    """``fractions`` as two positive floats (train, valid) summing below 1; raise naming ``fractions`` otherwise."""
    if not isinstance(fractions, (list, tuple)) or len(fractions) != 2:
        raise ValueError(f"fractions must be two shares (train, valid), got {fractions!r}")
    if any(isinstance(f, bool) or not isinstance(f, (int, float)) for f in fractions):
        raise TypeError(f"fractions must hold numbers, got {fractions!r}")
    train_share, valid_share = (float(f) for f in fractions)
    if not (train_share > 0 and valid_share > 0 and train_share + valid_share < 1):
        raise ValueError(f"fractions must be two positive shares summing below 1, got {fractions!r}")
    return train_share, valid_share

"""Our figures of a claim: each model's values over seeds (:class:`Stat`) and training budget (:class:`Budget`),
together a :class:`Reading` that a verdict rule decides on."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Stat", "Budget", "Reading"]


@dataclass(frozen=True)
class Stat:
    """One model's figure over seeds (or folds): ``values`` in seed order, their mean and sample sd."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def sd(self) -> float | None:
        """Sample standard deviation; ``None`` for one value."""
        if len(self.values) < 2:
            return None
        return math.sqrt(sum((v - self.mean) ** 2 for v in self.values) / (len(self.values) - 1))


@dataclass(frozen=True)
class Budget:
    """One compared model's training budget, as far as the file records it (``None``: not recorded)."""

    model: str
    epochs: tuple[int, ...] = ()
    best_epochs: tuple[int, ...] = ()
    trials: int | None = None
    wall_s: float | None = None

    @property
    def still_improving(self) -> bool:
        """Whether some seed's best epoch is the last one it trained (the model was stopped while improving)."""
        return any(best >= last for best, last in zip(self.best_epochs, self.epochs))


@dataclass(frozen=True)
class Reading:
    """Our figures of a claim: ``figures`` ``{model: Stat}`` and the budgets of the compared models."""

    figures: dict[str, Stat]
    budgets: tuple[Budget, ...] = ()

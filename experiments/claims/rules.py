"""The verdict rules of the claims: each turns a :class:`~ppl_models.experiments.claims.figures.Reading` into
``met``, ``missed by ...``, ``tie with ...``, ``not met: ...`` or ``undecided: ...``.

:class:`Within` compares one model with the paper's figure, :class:`Beats` one model with others, :class:`Matches`
an implementation with a reference one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .figures import Reading

__all__ = ["Rule", "Within", "Beats", "Matches"]


class Rule(Protocol):
    """Decides a verdict from a :class:`Reading`: ``text`` says the rule in words, ``models`` the labels it reads."""

    @property
    def text(self) -> str: ...

    @property
    def models(self) -> tuple[str, ...]: ...

    def decide(self, reading: Reading) -> str: ...


@dataclass(frozen=True)
class Within:
    """Ours (``model``'s mean) within ``tolerance`` of the paper's ``paper`` figure, or better than it.

    ``two_sided``: a figure with no better side (a coverage, a share of samples in an interval) must be within
    ``tolerance`` on either side; beyond it, too high is missed as much as too low.
    """

    model: str
    paper: float
    tolerance: float
    higher_is_better: bool = True
    two_sided: bool = False

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model,)

    @property
    def text(self) -> str:
        if self.two_sided:
            return f"met when {self.model} is within {self.tolerance:g} of {self.paper:g} on either side"
        better = "above" if self.higher_is_better else "below"
        return f"met when {self.model} is within {self.tolerance:g} of {self.paper:g} or {better} it"

    def decide(self, reading: Reading) -> str:
        mean = reading.figures[self.model].mean
        if self.two_sided:
            off = abs(mean - self.paper) - self.tolerance
            return "met" if off <= 0 else f"missed by {off:.3g} ({'above' if mean > self.paper else 'below'})"
        gain = (mean - self.paper) if self.higher_is_better else (self.paper - mean)
        if gain >= -self.tolerance:
            return "met"
        return f"missed by {-gain:.3g}"


@dataclass(frozen=True)
class Beats:
    """``model`` better than each of ``others`` by more than the seeds' spread (the larger sd); within it, a tie.

    Fewer than ``min_seeds`` seeds, or a compared model whose best epoch is its last, leave it undecided.
    """

    model: str
    others: tuple[str, ...]
    lower_is_better: bool = True
    min_seeds: int = 3

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model, *self.others)

    @property
    def text(self) -> str:
        side = "below" if self.lower_is_better else "above"
        return (f"met when {self.model} is {side} each of {', '.join(self.others)} by more than the larger sd "
                f"over >= {self.min_seeds} seeds, with every best epoch before the last; within the sd: tie")

    def decide(self, reading: Reading) -> str:
        names = (self.model, *self.others)
        few = [name for name in names if len(reading.figures[name].values) < self.min_seeds]
        if few:
            return f"undecided: {', '.join(few)} on fewer than {self.min_seeds} seeds"
        budgets = [b for b in reading.budgets if b.model in names]
        unknown = [b.model for b in budgets if not b.best_epochs]
        if unknown:
            return f"undecided: best epoch of {', '.join(unknown)} not recorded"
        improving = [b.model for b in budgets if b.still_improving]
        if improving:
            return f"undecided: {', '.join(improving)} still improving at its last epoch"
        ours = reading.figures[self.model]
        outcomes = []
        for other in self.others:
            theirs = reading.figures[other]
            spread = max(ours.sd or 0.0, theirs.sd or 0.0)
            lead = (theirs.mean - ours.mean) if self.lower_is_better else (ours.mean - theirs.mean)
            outcomes.append("met" if lead > spread else ("tie" if lead >= -spread else "not met"))
        if all(o == "met" for o in outcomes):
            return "met"
        if "not met" in outcomes:
            return "not met: " + ", ".join(o for o, out in zip(self.others, outcomes) if out == "not met") + " better"
        return "tie with " + ", ".join(o for o, out in zip(self.others, outcomes) if out == "tie")


@dataclass(frozen=True)
class Matches:
    """``model`` learns as ``reference`` does: their means differ by no more than the seeds' spread (the larger sd).

    For an implementation against its paper's official code at an equal budget; fewer than ``min_seeds`` seeds
    leave it undecided. The budget need not reach convergence: equal curves are the point, so unlike
    :class:`Beats` a best epoch at the last one does not leave it undecided.
    """

    model: str
    reference: str
    lower_is_better: bool = True
    min_seeds: int = 3

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model, self.reference)

    @property
    def text(self) -> str:
        return (f"met when {self.model} and {self.reference} differ by no more than the larger sd over >= "
                f"{self.min_seeds} seeds at the same budget")

    def decide(self, reading: Reading) -> str:
        ours, theirs = reading.figures[self.model], reading.figures[self.reference]
        few = [name for name, stat in ((self.model, ours), (self.reference, theirs))
               if len(stat.values) < self.min_seeds]  # fmt: skip
        if few:
            return f"undecided: {', '.join(few)} on fewer than {self.min_seeds} seeds"
        difference = ours.mean - theirs.mean
        if abs(difference) <= max(ours.sd or 0.0, theirs.sd or 0.0):
            return "met"
        better = (difference < 0) == self.lower_is_better
        return f"not met: {self.model} {'better' if better else 'worse'} by {abs(difference):.3g}"

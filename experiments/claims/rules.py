"""The verdict rules of the claims: each turns a :class:`~ppl_models.experiments.claims.readings.Reading` into
``met``, ``missed by ...``, ``tie with ...``, ``not met: ...`` or ``undecided: ...``.

:class:`Within` compares one model with the paper's figure, :class:`Beats` one model with others, :class:`Matches`
an implementation with a reference one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .readings import Reading

__all__ = ["Rule", "RELATIVE_TOLERANCE", "Within", "Beats", "Matches", "MatchesBelowBaseline", "undecided_budget"]


class Rule(Protocol):
    """Decides a verdict from a :class:`Reading`: ``text`` says the rule in words, ``models`` the labels it reads."""

    @property
    def text(self) -> str: ...

    @property
    def models(self) -> tuple[str, ...]: ...

    def decide(self, reading: Reading) -> str: ...


#: the one rule for every comparison with a paper's figure: ours within this share of the figure's magnitude, or
#: better. The papers report no uncertainty of their means (a spread they give is over steps or examples), so the
#: rule is relative; 5 % is wider than the seed-to-seed sd of our figures compared so (at most 4 % of the mean, the
#: dropout LSTM's predictive MSE) and narrow enough that a figure 10 % off the paper's is missed.
RELATIVE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Within:
    """Ours (``model``'s mean) within a tolerance of the paper's ``paper`` figure, or better than it.

    The tolerance is :data:`RELATIVE_TOLERANCE` of ``|paper|`` (the same rule for every claim) unless ``tolerance``
    gives the paper's own reported uncertainty of its figure. ``two_sided``: a figure with no better side (a
    coverage, a share of samples in an interval) must be within the tolerance on either side; beyond it, too high
    is missed as much as too low.
    """

    model: str
    paper: float
    tolerance: float | None = None
    higher_is_better: bool = True
    two_sided: bool = False

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model,)

    @property
    def margin(self) -> float:
        """The tolerance in the figure's units."""
        return RELATIVE_TOLERANCE * abs(self.paper) if self.tolerance is None else self.tolerance

    @property
    def text(self) -> str:
        share = f"{RELATIVE_TOLERANCE * 100:g} % ({self.margin:.3g})"
        within = (
            f"within {share} of {self.paper:g}"
            if self.tolerance is None
            else f"within {self.tolerance:g} (the paper's reported uncertainty) of {self.paper:g}"
        )
        if self.two_sided:
            return f"met when {self.model} is {within} on either side"
        return f"met when {self.model} is {within} or {'above' if self.higher_is_better else 'below'} it"

    def decide(self, reading: Reading) -> str:
        mean = reading.figures[self.model].mean
        if self.two_sided:
            off = abs(mean - self.paper) - self.margin
            return "met" if off <= 0 else f"missed by {off:.3g} ({'above' if mean > self.paper else 'below'})"
        gain = (mean - self.paper) if self.higher_is_better else (self.paper - mean)
        if gain >= -self.margin:
            return "met"
        return f"missed by {-gain:.3g}"


def undecided_budget(reading: Reading, names: tuple[str, ...]) -> str:
    """Why a comparison of ``names`` is undecided by their budgets: a best epoch not recorded, or one at the last
    epoch trained (still improving); ``""`` when every one is before its last."""
    budgets = [b for b in reading.budgets if b.model in names]
    unknown = [name for name in names if not any(b.best_epochs for b in budgets if b.model == name)]
    if unknown:
        return f"undecided: best epoch of {', '.join(unknown)} not recorded"
    improving = [b.model for b in budgets if b.still_improving]
    if improving:
        return f"undecided: {', '.join(improving)} still improving at its last epoch"
    return ""


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
        return (
            f"met when {self.model} is {side} each of {', '.join(self.others)} by more than the larger sd "
            f"over >= {self.min_seeds} seeds, with every best epoch before the last; within the sd: tie"
        )

    def decide(self, reading: Reading) -> str:
        names = (self.model, *self.others)
        few = [name for name in names if len(reading.figures[name].values) < self.min_seeds]
        if few:
            return f"undecided: {', '.join(few)} on fewer than {self.min_seeds} seeds"
        undecided = undecided_budget(reading, names)
        if undecided:
            return undecided
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

    For an implementation against its paper's official code at an equal budget. Fewer than ``min_seeds`` seeds, or a
    side whose best epoch is its last (still improving) or not recorded, leave it undecided, as for :class:`Beats`:
    two curves still falling may agree at one epoch by chance.
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
        return (
            f"met when {self.model} and {self.reference} differ by no more than the larger sd over >= "
            f"{self.min_seeds} seeds at the same budget, with each best epoch before the last"
        )

    def decide(self, reading: Reading) -> str:
        ours, theirs = reading.figures[self.model], reading.figures[self.reference]
        few = [
            name for name, stat in ((self.model, ours), (self.reference, theirs)) if len(stat.values) < self.min_seeds
        ]
        if few:
            return f"undecided: {', '.join(few)} on fewer than {self.min_seeds} seeds"
        undecided = undecided_budget(reading, self.models)
        if undecided:
            return undecided
        difference = ours.mean - theirs.mean
        if abs(difference) <= max(ours.sd or 0.0, theirs.sd or 0.0):
            return "met"
        better = (difference < 0) == self.lower_is_better
        return f"not met: {self.model} {'better' if better else 'worse'} by {abs(difference):.3g}"


@dataclass(frozen=True)
class MatchesBelowBaseline(Matches):
    """:class:`Matches`, and each of ``model`` and ``reference`` better than ``baseline`` (a figure of the reading)
    by more than the larger sd of the two; otherwise ``not met: near the <baseline>``."""

    baseline: str = "constant predictor"

    @property
    def text(self) -> str:
        side = "below" if self.lower_is_better else "above"
        return f"{super().text}, and both {side} the {self.baseline} by more than that sd"

    def decide(self, reading: Reading) -> str:
        verdict = super().decide(reading)
        if verdict != "met":
            return verdict
        stats = {name: reading.figures[name] for name in (self.model, self.reference)}
        spread = max(stat.sd or 0.0 for stat in stats.values())
        floor = reading.figures[self.baseline].mean
        near = [
            name
            for name, stat in stats.items()
            if (floor - stat.mean if self.lower_is_better else stat.mean - floor) <= spread
        ]
        return f"not met: near the {self.baseline} ({', '.join(near)})" if near else "met"

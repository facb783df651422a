"""The verdict rules of the claims: each turns a :class:`~ppl_models.experiments.claims.readings.Reading` into
``met``, ``missed by ...`` (always the distance beyond the allowed edge), ``tie ...``, ``not met: ...`` or
``undecided: ...``; a difference counts only where it holds across seeds (the tests of :mod:`.seed_tests`).

:class:`Within` compares one model with the paper's figure, :class:`Beats` one model with others, :class:`Matches`
an implementation with a reference one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .readings import Reading
from .seed_tests import LEVEL, edge_p, welch_p

__all__ = ["Rule", "RELATIVE_TOLERANCE", "Within", "Beats", "Matches", "MatchesBelowBaseline", "undecided_budget"]


class Rule(Protocol):
    """Decides a verdict from a :class:`Reading`: ``text`` says the rule in words, ``models`` the labels it reads."""

    @property
    def text(self) -> str: ...

    @property
    def models(self) -> tuple[str, ...]: ...

    def decide(self, reading: Reading) -> str: ...


#: the allowance of every comparison with a paper's figure that ranks no neighbours: ours within this share of the
#: figure's magnitude, or better. The papers report no uncertainty of their means (a spread they give is over steps or
#: examples); 5 % is narrow enough that a figure 10 % off the paper's is missed. Where the paper's table ranks other
#: models beside the figure (``neighbours``), half the gap to the nearest one is the allowance when it is tighter:
#: a figure within it would not change the paper's ranking.
RELATIVE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Within:
    """Ours (``model``'s figures over seeds) within an allowance of the paper's ``paper`` figure, or better than it.

    The allowance (:attr:`margin`) is ``tolerance`` where the paper reports an uncertainty of its figure, else the
    tighter of :data:`RELATIVE_TOLERANCE` of ``|paper|`` and half the gap to the nearest of ``neighbours`` (the other
    models' figures in the paper's ranking of the same column). ``two_sided``: a figure with no better side (a
    coverage) must be within the allowance on either side. The verdict is tested over seeds (one-sample t-tests at
    :data:`~.seed_tests.LEVEL` against the allowance's edge): met when ours is on the allowed side of the edge (both
    edges, two-sided) beyond the seeds' noise, missed when beyond the edge so (by the mean's distance to that edge),
    otherwise a tie with the edge; on one seed, by the mean alone.
    """

    model: str
    paper: float
    tolerance: float | None = None
    higher_is_better: bool = True
    two_sided: bool = False
    neighbours: tuple[float, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model,)

    @property
    def margin(self) -> float:
        """The allowance in the figure's units."""
        if self.tolerance is not None:
            return self.tolerance
        relative = RELATIVE_TOLERANCE * abs(self.paper)
        return min([relative, *(0.5 * abs(self.paper - other) for other in self.neighbours)])

    @property
    def _allowance_text(self) -> str:
        if self.tolerance is not None:
            return f"{self.tolerance:g} (the paper's reported uncertainty)"
        nearest = min(self.neighbours, key=lambda other: abs(self.paper - other), default=None)
        if nearest is not None and 0.5 * abs(self.paper - nearest) < RELATIVE_TOLERANCE * abs(self.paper):
            return f"{self.margin:.3g} (half the gap to the nearest model the paper ranks, {nearest:g})"
        return f"{RELATIVE_TOLERANCE * 100:g} % ({self.margin:.3g})"

    @property
    def text(self) -> str:
        test = "beyond the seeds' noise (one-sample t-test, p < 0.05; one seed: its figure)"
        if self.two_sided:
            return (
                f"met when {self.model} is within {self._allowance_text} of {self.paper:g} on either side {test}; "
                "missed when outside it so, by the distance to its edge; otherwise tie"
            )
        side = "above" if self.higher_is_better else "below"
        return (
            f"met when {self.model} is within {self._allowance_text} of {self.paper:g} or {side} it, {test}; "
            "missed when beyond that edge so, by the distance to it; otherwise tie"
        )

    def decide(self, reading: Reading) -> str:
        figure = reading.figures[self.model]
        if self.two_sided:
            return self._decide_band(figure)
        edge = self.paper - self.margin if self.higher_is_better else self.paper + self.margin
        beyond = (edge - figure.mean) if self.higher_is_better else (figure.mean - edge)
        if len(figure.values) < 2:
            return "met" if beyond <= 0 else f"missed by {beyond:.3g}"
        if edge_p(figure, edge, above=self.higher_is_better) < LEVEL:
            return "met"
        if edge_p(figure, edge, above=not self.higher_is_better) < LEVEL:
            return f"missed by {beyond:.3g}"
        # the p-value of the side the mean is on: the test that did not carry it past the edge
        p = edge_p(figure, edge, above=(beyond <= 0) == self.higher_is_better)
        return f"tie with the edge {edge:.4g} (t-test p = {p:.2g})"

    def _decide_band(self, figure) -> str:
        low, high = self.paper - self.margin, self.paper + self.margin
        side, edge = ("above", high) if figure.mean > self.paper else ("below", low)
        beyond = max(figure.mean - high, low - figure.mean, 0.0)
        if len(figure.values) < 2:
            return "met" if beyond == 0 else f"missed by {beyond:.3g} ({side})"
        if max(edge_p(figure, low, above=True), edge_p(figure, high, above=False)) < LEVEL:
            return "met"
        p = edge_p(figure, edge, above=side == "above")
        if p < LEVEL:
            return f"missed by {beyond:.3g} ({side})"
        return f"tie with the edge {edge:.4g} (t-test p = {p:.2g})"


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
            f"met when {self.model} is {side} each of {', '.join(self.others)} beyond the seeds' noise (Welch's "
            f"t-test, one-sided p < 0.05, >= {self.min_seeds} seeds each), with every best epoch before the last; "
            "not met when one of them leads so; otherwise tie"
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
            if welch_p(ours, theirs, lower_is_better=self.lower_is_better) < LEVEL:
                outcomes.append("met")
            elif welch_p(theirs, ours, lower_is_better=self.lower_is_better) < LEVEL:
                outcomes.append("not met")
            else:
                outcomes.append("tie")
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
            f"{self.min_seeds} seeds at the same budget, with each best epoch before the last; not met when one leads "
            "beyond the seeds' noise (Welch's t-test, two-sided p < 0.05); otherwise tie"
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
        better = (difference < 0) == self.lower_is_better
        leader, follower = (ours, theirs) if better else (theirs, ours)
        p = 2 * welch_p(leader, follower, lower_is_better=self.lower_is_better)
        if p < LEVEL:
            return f"not met: {self.model} {'better' if better else 'worse'} by {abs(difference):.3g} (p = {p:.2g})"
        if abs(difference) <= max(ours.sd or 0.0, theirs.sd or 0.0):
            return "met"
        return f"tie: {self.model} {'better' if better else 'worse'} by {abs(difference):.3g} (p = {p:.2g})"


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

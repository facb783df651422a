"""The registry of the papers' headline claims and how each is tested here (``ppl-models reproduce``).

A :class:`Claim` names the paper's figure and metric, the registered experiments or suites that test it
(:data:`ppl_models.experiments.registry.EXPERIMENTS`, :data:`~ppl_models.experiments.registry.SUITES`), the seeds,
the results file
under ``docs/results/`` holding our figures, how to read them (:class:`Reading`: mean, sd and each compared
model's budget) and the :class:`Rule` that turns them into a verdict. A claim not run says why (``not_run``);
one whose figures have no file with their command and seeds is marked ``evidence incomplete``.

Results files come in two shapes: those of earlier studies (read by the claim's own ``reader``) and the
claim's reproduction written by ``ppl-models reproduce`` (``docs/results/reproduce_<claim>.json``,
``"format": "reproduce/1"``: per label a list of per-seed runs, read by :func:`seed_runs`), which, once it
exists, is the claim's evidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["Stat", "Budget", "Reading", "Rule", "Within", "Beats", "Matches", "Claim", "CLAIMS", "PAPERS",
           "REPRODUCE_FORMAT", "seed_runs", "provenance_problems", "read_results_file", "results_destination"]

#: the ``format`` field of a results file written by ``ppl-models reproduce``
REPRODUCE_FORMAT = "reproduce/1"
#: the papers, in the order of the rendered page: key and title
PAPERS = {
    "srnn": "Sequential Neural Models with Stochastic Layers (SRNN)",
    "smc-transformer": "The Monte Carlo Transformer (SMC Transformer)",
    "pf-rnn": "Particle Filter Recurrent Neural Networks (PF-RNN)",
    "pf-lstm-workshop": "PF-LSTM: Belief State Particle Filter for LSTM (workshop)",
    "psrnn": "Predictive State Recurrent Neural Networks (PSRNN)",
}


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
    leave it undecided. The budget need not reach convergence: equal curves are the point.
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


@dataclass(frozen=True)
class Claim:
    """One headline claim of a paper and how it is tested here.

    Attributes:
        paper: key of :data:`PAPERS`.
        claim: the claim in one sentence.
        paper_figure: the paper's figure, with its metric definition.
        metric: our metric, and how it differs from the paper's where it does.
        tests: registered experiment or suite names that test it.
        seeds: the seeds the claim asks for.
        members: what ``reproduce`` trains for each seed: ``(label, experiment, overrides)``, labels as in the file.
        results: earlier studies' results files under ``docs/results/`` (``()``: none).
        reader: reads those files ``{name: data}`` into a :class:`Reading`.
        metric_key: the per-run key :func:`seed_runs` reads from the claim's reproduction.
        rule: decides the verdict.
        not_run: why the claim is not run, with its cost (empty when it is run).
        incomplete: why there is no evidence yet, shown until the claim has results (empty when it has).
        manual: how to rerun a claim whose figure ``reproduce`` cannot make (e.g. it needs ``ppl-models forecast``).
        rerun_cost: what settling an undecided verdict would cost on these machines (shown beside it).
    """

    paper: str
    claim: str
    paper_figure: str
    metric: str
    tests: tuple[str, ...]
    seeds: tuple[int, ...]
    rule: Rule
    members: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    results: tuple[str, ...] = ()
    reader: Callable[[dict], Reading] | None = None
    metric_key: str = "test_mse"
    not_run: str = ""
    incomplete: str = ""
    manual: str = ""
    rerun_cost: str = ""

    def read(self, files: dict[str, dict]) -> Reading:
        """Our figures from the loaded files ``{name: data}``: the claim's reproduction if given, else its results."""
        reproduction = [data for data in files.values() if data.get("format") == REPRODUCE_FORMAT]
        if reproduction:
            return seed_runs(self.metric_key)(reproduction[0])
        return self.reader({name: files[name] for name in self.results})


def seed_runs(metric: str, labels: dict[str, str] | None = None, epochs: int | None = None,
              last_key: str | None = None) -> Callable[[dict], Reading]:  # fmt: skip
    """A reader of ``results[label]["runs"]`` (one dict per seed with ``metric``, ``best_epoch``, maybe ``epochs``).

    ``labels``: ``{label in file: model name shown}`` (default: every label, as is); ``epochs``: the budget when
    the runs do not record it; ``last_key``: read this key instead of ``metric`` (a fixed budget's figure).
    """

    def read(data: dict) -> Reading:
        data = data if "results" in data else next(iter(data.values()))
        results = data["results"]
        chosen = labels or {label: label for label in results}
        figures, budgets = {}, []
        for label, name in chosen.items():
            runs = results[label]["runs"]
            figures[name] = Stat(tuple(float(run[last_key or metric]) for run in runs))
            budgets.append(Budget(name, epochs=tuple(int(run.get("epochs", epochs)) for run in runs
                                                     if run.get("epochs", epochs) is not None),
                                  best_epochs=tuple(int(run["best_epoch"]) for run in runs if "best_epoch" in run),
                                  trials=1, wall_s=_total(run.get("seconds") for run in runs)))  # fmt: skip
        return Reading(figures, tuple(budgets))

    return read


def _total(values) -> float | None:
    values = list(values)
    return None if not values or any(v is None for v in values) else float(sum(values))


def provenance_problems(name: str, data: dict) -> list[str]:
    """What a results file lacks of its provenance: its command(s) and its seed(s)."""
    problems = []
    if not any(key in data for key in ("commands", "command")):
        problems.append(f"docs/results/{name}: no 'commands' (or 'command') field")
    if not any(key in data for key in ("seeds", "seed")):
        problems.append(f"docs/results/{name}: no 'seeds' (or 'seed') field")
    return problems


def read_results_file(path: Path):
    """The JSON data of the results file at ``path``; one ``ValueError`` naming the file if it is not readable JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON (truncated or edited by hand?): {error}; restore it or rerun "
                         "what wrote it") from None


def results_destination(path: Path, seeds, elsewhere: Path) -> Path:
    """Where a rerun on ``seeds`` writes its results file: ``path``, unless the file there holds seeds the rerun
    lacks or cannot be read (it is never replaced by less evidence); then ``elsewhere``, said in one printed line."""
    path, seeds = Path(path), [int(seed) for seed in seeds]
    if not path.is_file():
        return path
    try:
        data = read_results_file(path)
        held = data.get("seeds") if isinstance(data, dict) else None
        held = sorted(int(seed) for seed in held) if isinstance(held, list) else None
    except (ValueError, TypeError):  # unreadable, or seeds that are not numbers
        held = None
    if held is not None and set(held) <= set(seeds):
        return path
    what = f"holds seeds {held}" if held is not None else "has no readable list of seeds"
    print(f"{path} {what}, more than this rerun on seeds {seeds}: it is kept; the results go to {elsewhere}")
    return Path(elsewhere)


# ---- readers of the earlier studies' files --------------------------------------------------------------------

def _jsb(files: dict) -> Reading:
    """srnn_jsb_seeds.json: the three seeds of srnn-jsb (runs base-s0..2), test ELBO per step of best.pt."""
    runs = [files["srnn_jsb_seeds.json"]["runs"][f"base-s{seed}"] for seed in (0, 1, 2)]
    budget = Budget("SRNN", epochs=tuple(r["epochs"] for r in runs), best_epochs=tuple(r["best_epoch"] for r in runs),
                    trials=1, wall_s=float(sum(r["train_seconds"] for r in runs)))  # fmt: skip
    return Reading({"SRNN": Stat(tuple(r["runner_test_per_step"]["elbo"] for r in runs))}, (budget,))


def _maze10(files: dict) -> Reading:
    """pfrnn_paper_maze10_cpu.json: PF-LSTM-P30, LSTM-80, GRU-86 at 30 epochs, seed 0, test last-step MSE."""
    runs = files["pfrnn_paper_maze10_cpu.json"]["runs"]
    figures = {name: Stat((runs[name]["test_at_epoch_30"]["last_step_mse"],)) for name in ("PF-LSTM-P30", "LSTM-80",
                                                                                           "GRU-86")}
    budgets = tuple(Budget(name, epochs=(30,), trials=1,
                           best_epochs=(int(runs[name]["best_epoch"]),) if "best_epoch" in runs[name] else ())
                    for name in figures)  # fmt: skip
    return Reading(figures, budgets)


def _official(files: dict) -> Reading:
    """pfrnn_official_side_by_side.json: test last-step MSE after the last epoch, per seed, of each code."""
    data = files["pfrnn_official_side_by_side.json"]
    figures, budgets = {}, []
    for code, name in (("ours", "ours"), ("official", "official code")):
        runs = data["runs"][code]
        figures[name] = Stat(tuple(run["test_final"]["last_step_mse"] for run in runs))
        budgets.append(Budget(name, epochs=(data["budget"]["epochs"],) * len(runs), trials=1,
                              wall_s=float(sum(run["train_wall_seconds"] for run in runs))))
    return Reading(figures, tuple(budgets))


def _smct_share(files: dict) -> Reading:
    """SMC-T's share of samples in the true 80 % interval (fold 0) against the full-dropout LSTM's (5 folds)."""
    smct = files["smct_synthetic_coverage.json"]["results"]["Model I"]
    lstm = files["smct_mcdropout_full.json"]["results"]
    per_fold = lstm["input per step + recurrent per sequence + output (new 'full') | Model 1"]["per_fold"]
    return Reading({"SMC-T M=10": Stat((smct["share_in_true_80"],)),
                    "LSTM d=64 dropout 0.5": Stat(tuple(f["share_in_80"] for f in per_fold.values()))},
                   (Budget("SMC-T M=10", epochs=(50,), trials=1),
                    Budget("LSTM d=64 dropout 0.5", epochs=(50,) * 5, trials=1)))


def _smct_mse(files: dict) -> Reading:
    """The full-dropout LSTM's predictive MSE on Model I over 5 folds (the paper: 0.223, far below sigma^2 0.5)."""
    per_fold = files["smct_mcdropout_full.json"]["results"][
        "input per step + recurrent per sequence + output (new 'full') | Model 1"]["per_fold"]
    smct = files["smct_synthetic_coverage.json"]["results"]["Model I"]
    return Reading({"LSTM d=64 dropout 0.5": Stat(tuple(f["predictive_mse"] for f in per_fold.values())),
                    "SMC-T M=10": Stat((smct["predictive_mse"],))},
                   (Budget("LSTM d=64 dropout 0.5", epochs=(50,) * 5, trials=1),
                    Budget("SMC-T M=10", epochs=(50,), trials=1)))


def _covid(files: dict) -> Reading:
    """smct_covid_calibration.json: 80 % coverage of the 20-day forecasts, no transform, no EM, not recalibrated."""
    row = next(r for r in files["smct_covid_calibration.json"]["rows"]
               if (r["transform"], r["em_iterations"], r["recalibration"]) == ("none", 0, "none"))
    values = tuple(row["per_seed"][str(seed)]["coverage_0.8"] for seed in row["training_seeds"])
    return Reading({"SMC-T M=10": Stat(values)}, (Budget("SMC-T M=10", trials=1),))


def _regimes(files: dict) -> Reading:
    """pfrnn_regimes.json: exact NLPD (nats/step) of PF-LSTM and LSTM-43 per seed on the regime-switching source."""
    runs = files["pfrnn_regimes.json"]["runs"]
    figures, budgets = {}, []
    for name, prefix in (("PF-LSTM", "pflstm_s"), ("LSTM-43", "lstm43_s"), ("GRU-46", "gru46_s")):
        chosen = [runs[key] for key in sorted(runs) if key.startswith(prefix) and key[len(prefix):].isdigit()]
        figures[name] = Stat(tuple(r["metrics"]["nlpd"] for r in chosen))
        budgets.append(Budget(name, epochs=tuple(r["metrics"]["epochs"] for r in chosen), trials=1,
                              wall_s=float(sum(r["metrics"]["seconds"] for r in chosen))))
    return Reading(figures, tuple(budgets))


def _two_files(first: str, first_labels: dict, second: str, second_labels: dict, epochs: int | None = None,
               last_key: str | None = None) -> Callable[[dict], Reading]:  # fmt: skip
    """A reader joining :func:`seed_runs` readings of two files (e.g. 1-layer runs in one, 2-layer in another)."""

    def read(files: dict) -> Reading:
        a = seed_runs("test_mse", first_labels, epochs, last_key)(files[first])
        b = seed_runs("test_mse", second_labels, epochs, last_key)(files[second])
        return Reading({**a.figures, **b.figures}, a.budgets + b.budgets)

    return read


def _only(name: str, labels: dict, epochs: int | None = None, last_key: str | None = None):
    """A :func:`seed_runs` reader of the one file ``name`` (test MSE, or ``last_key``)."""
    reader = seed_runs("test_mse", labels, epochs, last_key)
    return lambda files: reader(files[name])


# ---- the claims -----------------------------------------------------------------------------------------------

_PSRNN_MODELS = {"psrnn": "PSRNN", "rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}
_SEEDS3 = (0, 1, 2)
_SWIMMER_MSE = ("one-step test MSE on Swimmer (standardised observations); the paper plots the same MSE against "
                "epochs. Ours: test file of another policy mix than training (0.8 vs 0.5)")


#: training to convergence for srnn-hmm: its recipe (weight decay 1e-3) with early stopping, patience 20 within 200
#: epochs (a patience of 10 stopped on the one-sample validation ELBO's noise)
_HMM_CONVERGE = ("train.epochs=200", "train.patience=20")
#: training to convergence for the PF-RNN regressions and the SMC Transformer's comparison: early stopping on the
#: validation loss or bound with patience 10 epochs within a cap of 100
_PATIENCE_10 = ("train.epochs=100", "train.patience=10")
#: training to convergence for the PSRNN comparisons: early stopping on the validation likelihood (or loss) with
#: patience 100 epochs within a cap of 3000 (Swimmer's 25 training sequences make an epoch 5 small steps)
_SWIMMER_CONVERGE = ("train.epochs=3000", "train.patience=100")


def _psrnn_members(*extra: str) -> tuple:
    """PSRNN, RNN, GRU and LSTM of the PSRNN paper's comparison on Swimmer, with ``extra`` overrides."""
    return (("PSRNN", "psrnn-swimmer", extra),
            *((label, "recurrent-swimmer", (f'model.cell="{label.lower()}"', *extra))
              for label in ("RNN", "GRU", "LSTM")))  # fmt: skip


CLAIMS: dict[str, Claim] = {
    # ---- SRNN -------------------------------------------------------------------------------------------------
    "srnn-jsb": Claim(
        "srnn", "SRNN (smooth + Res_q) reaches a test ELBO of -4.74 nats per step on JSB chorales",
        "Table 2: ELBO >= -4.74 nats per time step on the JSB test set",
        "test ELBO per step of the best-validation checkpoint (1 sample), as the paper's; ours adds dropout 0.5 "
        "on d_t and weight decay 1e-3", ("srnn-jsb",), _SEEDS3, Within("SRNN", -4.74, 0.1),
        members=(("SRNN", "srnn-jsb", ()),), results=("srnn_jsb_seeds.json",), reader=_jsb,
        metric_key="elbo_per_step"),
    **{f"srnn-{key}": Claim(
        "srnn", f"SRNN (smooth + Res_q) reaches a test ELBO of {figure} nats per step on {title}",
        f"Table 2: ELBO >= {figure} nats per time step on the {title} test set", "test ELBO per step of best.pt",
        (f"srnn-{key}",), _SEEDS3, Within("SRNN", figure, 0.1), members=(("SRNN", f"srnn-{key}", ()),),
        metric_key="elbo_per_step",
        incomplete=f"the {title} figures in the SRNN development notes have no results file with their command and "
                   f"seeds; rerun with ppl-models reproduce srnn-{key} ({hours} CPU hours per seed)")
       for key, title, figure, hours in (("nottingham", "Nottingham", -2.94, "about 2"),
                                         ("musedata", "MuseData", -6.28, "about 4"),
                                         ("piano", "Piano-midi.de", -8.20, "about 1"))},  # fmt: skip
    "srnn-ablation": Claim(
        "srnn", "the smoothing guide with Res_q gives the best bound (smooth + Res_q > smooth > filter)",
        "Table 1 (Blizzard, TIMIT): ELBO of filter / smooth, with and without Res_q",
        "test ELBO per step on HMM rolls of a known source (srnn-hmm, trained with its recipe and early stopping); "
        "the speech sets are not available offline and the same four guides on JSB cost about 1 CPU hour per run "
        "(12 runs for 3 seeds)", ("srnn-hmm", "hmm-gap"), _SEEDS3,
        Beats("SRNN smooth + Res_q", ("SRNN smooth", "SRNN filter + Res_q", "SRNN filter"), lower_is_better=False),
        members=tuple((f"SRNN {guide}{' + Res_q' if residual else ''}", "srnn-hmm",
                       (f'model.inference="{guide}"', f"model.residual={str(residual).lower()}", *_HMM_CONVERGE))
                      for guide in ("smooth", "filter") for residual in (True, False)),
        metric_key="elbo_per_step",
        incomplete="no results file yet; rerun with ppl-models reproduce srnn-ablation (12 runs of a few minutes)"),
    "srnn-speech": Claim(
        "srnn", "SRNN improves the state of the art on Blizzard and TIMIT by a large margin",
        "Table 1: average log-likelihood >= 11991 per half-second (Blizzard), >= 60550 per sequence (TIMIT)", "-",
        (), _SEEDS3, Within("SRNN", 11991.0, 0.0),
        not_run="Blizzard and TIMIT are not available offline; the paper's training took 18 GPU hours (Blizzard)"),
    # ---- SMC Transformer ------------------------------------------------------------------------------------
    "smct-coverage": Claim(
        "smc-transformer", "the SMC Transformer's predictive samples cover the true law: about 80 % of them fall "
                           "in the true 80 % interval, where MC-dropout LSTMs put too many there",
        "section 4.1 and Figure 2, Model I: 78.4 % of SMC-T (M=30) samples in the true 80 % interval, 93.6 % of "
        "the LSTM's (d=64, dropout 0.5)",
        "share of 1000 predictive samples in the true 80 % interval, test split; ours: SMC-T with M=10, fold 0 "
        "only; the LSTM's over 5 folds (the paper's sd is over steps and examples)",
        ("smct-ar1", "mcdropout-ar1", "smct-ar1-folds"), (0,), Within("SMC-T M=10", 0.784, 0.03, two_sided=True),
        members=(("SMC-T M=10", "smct-ar1", ()),),
        results=("smct_synthetic_coverage.json", "smct_mcdropout_full.json"), reader=_smct_share,
        metric_key="truth_share_in_80"),
    "smct-dropout-mse": Claim(
        "smc-transformer", "MC-dropout LSTMs underestimate the predictive variance: their predictive MSE is far "
                           "below the true sigma^2 (0.5 on Model I)",
        "Table 2, Model I, LSTM d=64 full dropout 0.5: 0.223 (0.338); true value 0.5",
        "E[(X_{t+1} - alpha X_t)^2 | X_t] over 1000 samples on the test split, as the paper's; our sd is over 5 "
        "folds, the paper's over steps and examples", ("mcdropout-ar1", "smct-ar1-folds"), (0,),
        Within("LSTM d=64 dropout 0.5", 0.223, 0.15, higher_is_better=False),
        members=(("LSTM d=64 dropout 0.5", "mcdropout-ar1", ("model.dropout=0.5", 'model.where="full"',
                                                            "evaluate.predictive_samples=1000")),
                 ("SMC-T M=10", "smct-ar1", ())), metric_key="truth_predictive_mse",
        results=("smct_mcdropout_full.json", "smct_synthetic_coverage.json"), reader=_smct_mse),
    "smct-folds": Claim(
        "smc-transformer", "Tables 1-2 over 5 folds: SMC-T (M=30) against MC-dropout LSTMs and a Transformer",
        "Tables 1-2: losses and predictive MSE, mean (sd) over 5 folds", "one-step test MSE on fold 0 over 3 "
        "training seeds (the paper's sd is over folds)", ("smct-ar1-folds", "smct-ar2-folds"), _SEEDS3,
        Beats("SMC-T M=30", ("Transformer",)),
        members=(("SMC-T M=30", "smct-ar1", ("objective.num_particles=30", "evaluate.num_particles=30",
                                             *_PATIENCE_10)),
                 ("Transformer", "transformer-ar1", _PATIENCE_10)),
        incomplete="the five-fold table in the SMC Transformer development notes has no results file; rerun with "
                   "ppl-models reproduce smct-folds (fold 0, 3 seeds; the five folds are ppl-models suite "
                   "smct-ar1-folds, 20 members)"),
    "smct-covid": Claim(
        "smc-transformer", "on COVID-19 daily deaths the SMC Transformer's 20-day intervals cover the truth",
        "Figure 6 (qualitative): 20-day forecast intervals of 2 cities", "80 % coverage of 20-day forecasts on 13 "
        "test counties (the paper gives no number; the rule asks for 80 % within 0.1)", ("smct-covid",), _SEEDS3,
        Within("SMC-T M=10", 0.8, 0.1, two_sided=True), results=("smct_covid_calibration.json",), reader=_covid,
        manual="the figure comes from ppl-models forecast after training: rerun the commands in "
               "docs/results/smct_covid_calibration.json"),
    # ---- PF-RNN -----------------------------------------------------------------------------------------------
    "pfrnn-maze10": Claim(
        "pf-rnn", "PF-LSTM beats LSTM and GRU of the same size in robot localization (10 x 10 maze)",
        "Figure 5 / Table 4: last-step loss 0.103 for PF-LSTM-P30 on maze 10 (800 epochs)",
        "last-step MSE of (x, y) in cells^2 on 1000 test trajectories; the paper's loss also weighs the heading",
        ("pfrnn-paper-maze10", "rnn-paper-maze10", "pfrnn-paper-mazes"), _SEEDS3,
        Beats("PF-LSTM-P30", ("LSTM-80", "GRU-86")),
        members=(("PF-LSTM-P30", "pfrnn-paper-maze10", ("train.epochs=30",)),
                 ("LSTM-80", "rnn-paper-maze10", ("train.epochs=30",)),
                 ("GRU-86", "rnn-paper-maze10", ('model.cell="gru"', "model.hidden_size=86", "train.epochs=30"))),
        results=("pfrnn_paper_maze10_cpu.json",), reader=_maze10, metric_key="last_step_mse",
        rerun_cost="3 seeds trained to convergence are not affordable here: at epoch 30 of the paper's 800 the LSTM "
                   "and GRU were still improving; a paper-budget PF-LSTM run takes about 38 minutes on an H100 with "
                   "CUDA graphs (cuda_graphs_pf_rnn_h100.json) and days on these CPUs"),
    "pfrnn-official": Claim(
        "pf-rnn", "our PF-LSTM learns as the paper's official code does (the anchor of our implementation)",
        "the official code (github Yusufma03/pfrnns, commit 0a76d52) trained here on the same data",
        "test last-step MSE of (x, y) in cells^2 after 8 epochs on 1,024 maze-10 trajectories (the paper: 800 "
        "epochs on 10,000), same data, epochs and seeds; the official network also encodes the map and uses dropout "
        "0.5; always predicting the mean position scores 9.69", ("pfrnn-paper-maze10",), _SEEDS3,
        Matches("ours", "official code"), results=("pfrnn_official_side_by_side.json",), reader=_official,
        manual="python -m ppl_models.experiments.studies.pfrnn_official with the command in "
               "docs/results/pfrnn_official_side_by_side.json (it runs the official code from a snapshot)"),
    "pfrnn-mazes-18-27": Claim(
        "pf-rnn", "PF-RNNs beat LSTM and GRU on the 18 x 18 and 27 x 27 mazes",
        "Figure 5: last-step loss 0.51 (maze 18), 2.862 (maze 27) for PF-LSTM-P30", "last-step MSE of (x, y)",
        ("pfrnn-paper-mazes",), _SEEDS3, Beats("PF-LSTM", ("LSTM-80", "GRU-86")),
        not_run="26 to 78 CPU hours per PF run at the paper's 800 epochs on these machines"),
    "pfrnn-ablation": Claim(
        "pf-rnn", "each part of PF-LSTM (particles, resampling, BN + ReLU, ELBO) helps on the maze",
        "Table 4: maze-10 loss 0.41 (P1) ... 0.103 (P30); no resampling 0.14, no BNReLU 0.19",
        "last-step MSE of (x, y)", ("pfrnn-paper-ablation", "pfrnn-maze10-ablation"), _SEEDS3,
        Beats("PF-LSTM-P30", ("PF-LSTM-P1",)),
        not_run="11 members at 26 to 78 CPU hours per PF run on the paper's protocol; the own-maze variant's "
                "figures in the PF-RNN development notes have no results file"),
    **{f"pfrnn-{key}": Claim(
        "pf-rnn", f"PF-LSTM beats an LSTM of the same size on {title}",
        f"Table 3: RMSE {paper}", f"test RMSE of hourly {target} (our split: chronological 70/10/20, the paper's is "
        "not stated)", (f"pfrnn-{key}",), _SEEDS3, Beats("PF-LSTM", ("LSTM-66",)),
        members=(("PF-LSTM", f"pfrnn-{key}", _PATIENCE_10),
                 ("LSTM-66", f"pfrnn-{key}", ('model.cell="lstm"', "model.hidden_size=66", *_PATIENCE_10))),
        metric_key="rmse",
        incomplete=f"the {title} figures in the PF-RNN development notes have no results file; rerun with ppl-models "
                   f"reproduce pfrnn-{key}{cost}")
       for key, title, paper, target, cost in (
           ("air", "air quality (AIR)", "13.12 (PF-LSTM) vs 18.34 (LSTM)", "NO2", ""),
           ("pm25", "Beijing PM2.5 (PM)", "21.23 (PF-LSTM) vs 26.14 (LSTM)", "PM2.5",
            " (a PF-LSTM epoch takes about 15 s here and seed 0 was still improving at epoch 51 of 100: about 2 "
            "CPU hours for the 3 seeds of both models, not run)"))},  # fmt: skip
    "pfrnn-classification": Claim(
        "pf-rnn", "PF-RNNs beat gated RNNs on 10 real-world sets (NASDAQ, AEP, UID, LPA, AREM, GAS, R52, MR)",
        "Table 3: regression loss and accuracy per set", "-", ("pfrnn-vowels",), _SEEDS3,
        Beats("PF-LSTM", ("LSTM",), lower_is_better=False),
        not_run="the sets are not available offline (JapaneseVowels needs sktime's download)"),
    # ---- PF-LSTM workshop --------------------------------------------------------------------------------------
    "pflstm-multimodal": Claim(
        "pf-lstm-workshop", "the PF-LSTM's belief of particles models multi-modal sequences better than an LSTM",
        "section 1 (argument; the paper's tests are R52, MR and visual odometry)",
        "exact NLPD (nats/step) of the one-step predictive on our regime-switching source (known law); the "
        "paper has no such figure", ("pfrnn-regimes",), _SEEDS3, Beats("PF-LSTM", ("LSTM-43", "GRU-46")),
        members=(("PF-LSTM", "pfrnn-regimes", _PATIENCE_10),
                 ("LSTM-43", "pfrnn-regimes", ('model.cell="lstm"', "model.hidden_size=43", *_PATIENCE_10)),
                 ("GRU-46", "pfrnn-regimes", ('model.cell="gru"', "model.hidden_size=46", *_PATIENCE_10))),
        results=("pfrnn_regimes.json",), reader=_regimes, metric_key="nlpd"),
    "pflstm-text-vo": Claim(
        "pf-lstm-workshop", "PF-LSTM beats LSTM and KimCNN on R52 and MR text classification and LSTM on visual "
                            "odometry", "Tables 1-3: accuracy on R52 and MR, error on KITTI 100 m", "-", (), _SEEDS3,
        Beats("PF-LSTM", ("LSTM",)), not_run="R52, MR and the visual-odometry data are not available offline"),
    # ---- PSRNN ------------------------------------------------------------------------------------------------
    "psrnn-swimmer": Claim(
        "psrnn", "PSRNN (2SR start + BPTT) predicts Swimmer better than RNN, GRU and LSTM",
        "Figure 4 (Swimmer): test MSE against epochs, PSRNN lowest",
        _SWIMMER_MSE + "; best-validation checkpoint, every model trained until its validation likelihood stops "
        "improving", ("psrnn-swimmer",), _SEEDS3, Beats("PSRNN", ("RNN", "GRU", "LSTM")),
        members=_psrnn_members(*_SWIMMER_CONVERGE), results=("psrnn_swimmer_300_epochs_seeds.json",),
        reader=_only("psrnn_swimmer_300_epochs_seeds.json", _PSRNN_MODELS, 300)),
    "psrnn-swimmer-paper-protocol": Claim(
        "psrnn", "PSRNN predicts Swimmer better than RNN, GRU and LSTM under the paper's training protocol",
        "Figure 4 (Swimmer)", "one-step test MSE on our split, trained as the paper states (MSE loss, plain SGD at "
        "learning rate 1; the paper's 150 epochs replaced by early stopping on the validation loss), best validation "
        "checkpoint", ("psrnn-swimmer",), _SEEDS3,
        Beats("PSRNN", ("RNN", "GRU", "LSTM")),
        members=_psrnn_members(*_SWIMMER_CONVERGE, "objective.name=mse", 'train.optimizer="sgd"', "train.lr=1.0"),
        results=("psrnn_paper_protocol_seeds.json",),
        reader=_only("psrnn_paper_protocol_seeds.json", _PSRNN_MODELS, 150)),
    "psrnn-layers": Claim(
        "psrnn", "a 2-layer PSRNN beats a 1-layer one", "Figure 3b (PTB): perplexity, 2 layers lower",
        "one-step test MSE on Swimmer, trained to convergence (PTB is not available offline)", ("psrnn-layers",),
        _SEEDS3, Beats("2 layers", ("1 layer",)),
        members=(("1 layer", "psrnn-swimmer", _SWIMMER_CONVERGE),
                 ("2 layers", "psrnn-swimmer", ("model.num_layers=2", *_SWIMMER_CONVERGE))),
        results=("psrnn_layers_rank_seeds.json", "psrnn_ablation_swimmer.json"),
        reader=_two_files("psrnn_layers_rank_seeds.json", {"layers2": "2 layers"}, "psrnn_ablation_swimmer.json",
                          {"psrnn": "1 layer"}, 150)),
    "psrnn-rank": Claim(
        "psrnn", "the full PSRNN beats factorized ones of any rank, and higher ranks beat lower",
        "Figure 3c (PTB): perplexity against rank", "one-step test MSE on Swimmer, trained to convergence "
        "(PTB is not available offline)", ("psrnn-rank",), _SEEDS3,
        Beats("PSRNN", ("rank 5", "rank 10", "rank 20", "rank 40")),
        members=(("PSRNN", "psrnn-swimmer", _SWIMMER_CONVERGE),
                 *((f"rank {r}", "psrnn-swimmer", (f"model.rank={r}", *_SWIMMER_CONVERGE)) for r in (5, 10, 20, 40))),
        results=("psrnn_layers_rank_seeds.json", "psrnn_ablation_swimmer.json"),
        reader=_two_files("psrnn_layers_rank_seeds.json", {f"rank{r}": f"rank {r}" for r in (5, 10, 20, 40)},
                          "psrnn_ablation_swimmer.json", {"psrnn": "PSRNN"}, 150)),
    "psrnn-ring": Claim(
        "psrnn", "PSRNN beats RNN, GRU and LSTM where its predictive state fits the source (ring HMM, 20 "
                 "training sequences)", "section 6's argument; the paper has no synthetic source",
        "one-step test MSE on our ring HMM (8 states), trained to convergence", ("psrnn-ring",), _SEEDS3,
        Beats("PSRNN", ("RNN", "GRU", "LSTM")), results=("psrnn_ring_seeds.json",),
        members=_psrnn_members('data.name="ring-hmm"', "data.num_train=20", "model.state_dim=8", "train.batch_size=10",
                               *_SWIMMER_CONVERGE),
        reader=_only("psrnn_ring_seeds.json", {"psrnn-n20": "PSRNN", "rnn-n20": "RNN", "gru-n20": "GRU",
                                               "lstm-n20": "LSTM"}, 60)),
    "psrnn-2sr-start": Claim(
        "psrnn", "the 2SR start converges to a better optimum than a random start",
        "section 3.1: 2SR initialisation (no figure of the random start)", "one-step test MSE on Swimmer",
        ("psrnn-swimmer",), _SEEDS3, Beats("PSRNN", ("PSRNN random init",)),
        members=(("PSRNN", "psrnn-swimmer", _SWIMMER_CONVERGE),
                 ("PSRNN random init", "psrnn-swimmer", ('model.init="random"', *_SWIMMER_CONVERGE))),
        incomplete="the 2SR speed-up and random-start figures in the PSRNN development notes have no results file; "
                   "rerun with ppl-models reproduce psrnn-2sr-start"),
    "psrnn-mocap-handwriting-ptb": Claim(
        "psrnn", "PSRNNs outperform the alternatives on Mocap, Handwriting and PTB",
        "Figures 3a and 4: perplexity (PTB) and MSE (Mocap, Handwriting)", "-", (), _SEEDS3,
        Beats("PSRNN", ("LSTM",)), not_run="Mocap, Handwriting and PTB are not available offline"),
}

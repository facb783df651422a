"""Readers of results files into a claim's :class:`~ppl_models.experiments.claims.readings.Reading`.

A reader takes the JSON data of a claim's results files, one argument per file in the order of the claim's
``results``, and never names a file itself. :func:`seed_runs` reads the shape that ``ppl-models reproduce``
writes (:data:`REPRODUCE_FORMAT`: per label a list of per-seed runs), which some earlier studies share; the
others each read one earlier study's own layout.
"""

from __future__ import annotations

from collections.abc import Callable

from ..compare import best_epoch
from .readings import Budget, Reading, Stat

__all__ = [
    "REPRODUCE_FORMAT",
    "seed_runs",
    "joined",
    "jsb_seeds",
    "maze10_at_epoch_30",
    "official_side_by_side",
    "psrnn_official_side_by_side",
    "smct_coverage_share",
    "smct_dropout_mse",
    "covid_paper_coverage",
    "regimes_nlpd",
]

#: the ``format`` field of a results file written by ``ppl-models reproduce``
REPRODUCE_FORMAT = "reproduce/1"
#: the full-dropout LSTM on Model I in ``smct_mcdropout_full.json``
_FULL_DROPOUT_MODEL_1 = "input per step + recurrent per sequence + output (new 'full') | Model 1"


def seed_runs(
    metric: str, labels: dict[str, str] | None = None, epochs: int | None = None
) -> Callable[[dict], Reading]:
    """A reader of ``results[label]["runs"]`` (one dict per seed with ``metric``, ``best_epoch``, maybe ``epochs``).

    ``labels``: ``{label in file: model name shown}`` (default: every label, as is); ``epochs``: the budget when
    the runs do not record it.
    """

    def read(data: dict) -> Reading:
        results = data["results"]
        chosen = labels or {label: label for label in results}
        figures, budgets = {}, []
        for label, name in chosen.items():
            runs = results[label]["runs"]
            figures[name] = Stat(tuple(float(run[metric]) for run in runs))
            budgets.append(
                Budget(
                    name,
                    epochs=tuple(
                        int(run.get("epochs", epochs)) for run in runs if run.get("epochs", epochs) is not None
                    ),
                    best_epochs=tuple(int(run["best_epoch"]) for run in runs if "best_epoch" in run),
                    trials=1,
                    wall_s=_total(run.get("seconds") for run in runs),
                )
            )
        return Reading(figures, tuple(budgets))

    return read


def _total(values) -> float | None:
    values = list(values)
    return None if not values or any(v is None for v in values) else float(sum(values))


def joined(*readers: Callable[[dict], Reading]) -> Callable[..., Reading]:
    """A reader of as many files as ``readers``, each file read by its reader, the figures and budgets joined."""

    def read(*files: dict) -> Reading:
        if len(files) != len(readers):
            raise ValueError(f"files must be {len(readers)} results files, one per reader, got {len(files)}")
        readings = [reader(data) for reader, data in zip(readers, files)]
        return Reading(
            {name: stat for reading in readings for name, stat in reading.figures.items()},
            tuple(budget for reading in readings for budget in reading.budgets),
        )

    return read


# ---- the earlier studies' own layouts ----------------------------------------------------------------------------


def jsb_seeds(data: dict) -> Reading:
    """The three seeds of srnn-jsb (runs base-s0..2): test ELBO per step of best.pt."""
    runs = [data["runs"][f"base-s{seed}"] for seed in (0, 1, 2)]
    budget = Budget(
        "SRNN",
        epochs=tuple(r["epochs"] for r in runs),
        best_epochs=tuple(r["best_epoch"] for r in runs),
        trials=1,
        wall_s=float(sum(r["train_seconds"] for r in runs)),
    )
    return Reading({"SRNN": Stat(tuple(r["runner_test_per_step"]["elbo"] for r in runs))}, (budget,))


def maze10_at_epoch_30(data: dict) -> Reading:
    """PF-LSTM-P30, LSTM-80, GRU-86 on maze 10 at 30 epochs, seed 0: test last-step MSE."""
    runs = data["runs"]
    figures = {
        name: Stat((runs[name]["test_at_epoch_30"]["last_step_mse"],)) for name in ("PF-LSTM-P30", "LSTM-80", "GRU-86")
    }
    budgets = tuple(
        Budget(
            name,
            epochs=(30,),
            trials=1,
            best_epochs=(int(runs[name]["best_epoch"]),) if "best_epoch" in runs[name] else (),
        )
        for name in figures
    )
    return Reading(figures, budgets)


def _best_curve_epoch(run: dict) -> int:
    """The epoch of a run's lowest validation last-step MSE in its per-epoch curve."""
    return min(run["curve"], key=lambda row: row["valid_last_step_mse"])["epoch"]


def official_side_by_side(data: dict) -> Reading:
    """Our PF-LSTM and the official code: test last-step MSE per seed, of each side's best-validation model with its
    best epoch and epochs run where the file records them (early stopping), else after the last of the fixed epochs,
    with the best epoch read from the run's per-epoch validation curve; beside them the constant predictor's test
    figure."""
    figures, budgets = {}, []
    for code, name in (("ours", "ours"), ("official", "official code")):
        runs = data["runs"][code]
        stopped = all("best_epoch" in run for run in runs)
        figure = "test_best_valid" if stopped else "test_final"
        figures[name] = Stat(tuple(run[figure]["last_step_mse"] for run in runs))
        epochs = tuple(run["epochs_run"] for run in runs) if stopped else (data["budget"]["epochs"],) * len(runs)
        budgets.append(
            Budget(
                name,
                epochs=epochs,
                best_epochs=tuple(run["best_epoch"] if stopped else _best_curve_epoch(run) for run in runs),
                trials=1,
                wall_s=float(sum(run["train_wall_seconds"] for run in runs)),
            )
        )
    figures["constant predictor"] = Stat((data["constant_predictor"]["test"],) * len(data["runs"]["ours"]))
    return Reading(figures, tuple(budgets))


def psrnn_official_side_by_side(data: dict) -> Reading:
    """Our PSRNN and the PSRNN authors' code on the PTB characters: test bits per character per seed after the same
    epochs (:mod:`ppl_models.experiments.studies.psrnn_official`), each side's best epoch that of the weights it
    tested where the run records it, else that of its lowest validation BPC."""
    figures, budgets = {}, []
    for code, name in (("ours", "ours"), ("official", "official code")):
        runs = data["runs"][code]
        figures[name] = Stat(tuple(run["test_final"]["test_bpc"] for run in runs))
        best = tuple(run.get("best_epoch") or min(run["curve"], key=lambda c: c["valid_bpc"])["epoch"] for run in runs)
        budgets.append(_side_budget(name, runs, best))
    return Reading(figures, tuple(budgets))


def _side_budget(name: str, runs: list[dict], best: tuple[int, ...]) -> Budget:
    """The budget of one side of an official-code study: its runs' epochs (their curves), ``best`` epochs and
    training wall time."""
    return Budget(
        name,
        epochs=tuple(len(run["curve"]) for run in runs),
        best_epochs=best,
        trials=1,
        wall_s=float(sum(run["train_wall_seconds"] for run in runs)),
    )


def smct_official_side_by_side(data: dict) -> Reading:
    """Our SMC Transformer and the authors' code on Model I or II: the test predictive MSE per seed after the same
    epochs (:mod:`ppl_models.experiments.studies.smct_official`); the official best epoch that of its lowest
    validation loss, ours that of its best checkpoint (:func:`~ppl_models.experiments.compare.best_epoch`)."""
    figures, budgets = {}, []
    for code, name in (("ours", "ours"), ("official", "official code")):
        runs = data["runs"][code]
        figures[name] = Stat(tuple(smct_test_figure(run["test"], "predictive_mse") for run in runs))
        if code == "ours":
            best = tuple(
                best_epoch([c["record"] for c in run["curve"] if c["record"].get("valid_bound_per_step") is not None])
                for run in runs
            )
        else:
            best = tuple(run["best_epoch"] for run in runs)
        budgets.append(_side_budget(name, runs, best))
    return Reading(figures, tuple(budgets))


def smct_test_figure(test: dict, name: str) -> float | None:
    """A test figure of one side of the SMC Transformer side by side: the official log's, or our run's (its
    ``metrics.json``, where the figures against the true law sit under ``truth_metrics``); None where absent."""
    value = test.get(name, (test.get("truth_metrics") or {}).get(name))
    return float(value) if isinstance(value, (int, float)) else None


def smct_coverage_share(coverage: dict, mcdropout: dict) -> Reading:
    """SMC-T's share of samples in the true 80 % interval (fold 0, ``coverage``) against the full-dropout LSTM's
    (5 folds, ``mcdropout``)."""
    smct = coverage["results"]["Model I"]
    per_fold = mcdropout["results"][_FULL_DROPOUT_MODEL_1]["per_fold"]
    return Reading(
        {
            "SMC-T M=10": Stat((smct["share_in_true_80"],)),
            "LSTM d=64 dropout 0.5": Stat(tuple(f["share_in_80"] for f in per_fold.values())),
        },
        (Budget("SMC-T M=10", epochs=(50,), trials=1), Budget("LSTM d=64 dropout 0.5", epochs=(50,) * 5, trials=1)),
    )


def smct_dropout_mse(mcdropout: dict, coverage: dict) -> Reading:
    """The full-dropout LSTM's predictive MSE on Model I over 5 folds (``mcdropout``; the paper: 0.223, far below
    sigma^2 0.5) beside SMC-T's (``coverage``)."""
    per_fold = mcdropout["results"][_FULL_DROPOUT_MODEL_1]["per_fold"]
    smct = coverage["results"]["Model I"]
    return Reading(
        {
            "LSTM d=64 dropout 0.5": Stat(tuple(f["predictive_mse"] for f in per_fold.values())),
            "SMC-T M=10": Stat((smct["predictive_mse"],)),
        },
        (Budget("LSTM d=64 dropout 0.5", epochs=(50,) * 5, trials=1), Budget("SMC-T M=10", epochs=(50,), trials=1)),
    )


def covid_paper_coverage(data: dict) -> Reading:
    """80 % coverage of the 20-day COVID-19 forecasts on the paper's 80/20 split, per training seed, of the SMC
    Transformer and the MC-dropout LSTM (:mod:`ppl_models.experiments.studies.covid_forecasts`)."""
    figures, budgets = {}, []
    for label, name in (("SMC-T", "SMC-T M=10"), ("LSTM MC-dropout", "LSTM MC-dropout")):
        runs = [data["per_seed"][str(seed)][label] for seed in data["seeds"]]
        figures[name] = Stat(tuple(run["coverage_0.8"] for run in runs))
        budgets.append(
            Budget(
                name,
                epochs=tuple(run["epochs"] for run in runs),
                best_epochs=tuple(run["best_epoch"] for run in runs if "best_epoch" in run),
                trials=1,
                wall_s=sum(run["seconds"] for run in runs),
            )
        )
    return Reading(figures, tuple(budgets))


def regimes_nlpd(data: dict) -> Reading:
    """Exact NLPD (nats/step) of PF-LSTM, LSTM-43 and GRU-46 per seed on the regime-switching source."""
    runs = data["runs"]
    figures, budgets = {}, []
    for name, prefix in (("PF-LSTM", "pflstm_s"), ("LSTM-43", "lstm43_s"), ("GRU-46", "gru46_s")):
        chosen = [runs[key] for key in sorted(runs) if key.startswith(prefix) and key[len(prefix) :].isdigit()]
        figures[name] = Stat(tuple(r["metrics"]["nlpd"] for r in chosen))
        budgets.append(
            Budget(
                name,
                epochs=tuple(r["metrics"]["epochs"] for r in chosen),
                trials=1,
                wall_s=float(sum(r["metrics"]["seconds"] for r in chosen)),
            )
        )
    return Reading(figures, tuple(budgets))

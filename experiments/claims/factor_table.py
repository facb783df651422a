"""The table of a one-factor-at-a-time study (``<!-- factors:NAME -->`` blocks of the docs pages): each factor's
test figures over seeds and its differences from the first factor and from the row ``all`` (every option of the
authors' protocol), read from ``docs/results/<NAME>.json`` (written by
:mod:`ppl_models.experiments.studies.psrnn_factors`), beside the authors' own code's figures where results files
hold them."""

from __future__ import annotations

import statistics

from .readings import Stat

__all__ = ["STUDY_FILES", "factor_table"]

#: study -> (its results file, the authors' code's results files: at the study's budget, then to convergence with
#: our side as the study's row ``all`` and with their model's extras, then at a constant learning rate)
_STUDIES = {
    "psrnn-protocol": (
        "psrnn_protocol_factors.json",
        (
            "psrnn_official_10_epochs.json",
            "psrnn_official.json",
            "psrnn_official_their_model.json",
            "psrnn_official_constant.json",
        ),
    ),
}
#: the row the others are set beside, and the row of every option at once
_BASE, _ALL = "ours", "all"
#: the results files the studies' tables read
STUDY_FILES = tuple(file for study, officials in _STUDIES.values() for file in (study, *officials))


def _mean_sd(values: list[float]) -> str:
    """``mean ± sd (n)`` of a figure over seeds (:class:`~.readings.Stat`), to three decimals."""
    stat = Stat(tuple(values))
    sd = "" if stat.sd is None else f" ± {stat.sd:.3f}"
    return f"{stat.mean:.3f}{sd} (n={len(stat.values)})"


def _official_rows(record: dict, file: str, bases: tuple[float, float | None], shown: list) -> list[str]:
    """The side-by-side file's rows: the authors' code, and beside it our side where the file holds one, with their
    own budget (a fixed number of epochs, or early stopping within a cap). Runs of their code already in ``shown``
    (an earlier file's, reused) are not repeated; those rendered here are added to it."""
    budget = record["budget"]
    if budget.get("patience") is None:
        trained = f"{budget['epochs']} epochs"
    else:
        trained = f"to convergence (patience {budget['patience']}, within {budget['epochs']} epochs"
        if budget.get("lr_gamma") is not None:
            trained += f", learning rate x{budget['lr_gamma']:g} per epoch after {budget['lr_delay']}"
        trained += ")"
    sides = [("official", "the authors' code", "their TF1 code")]
    if budget.get("patience") is not None and record["runs"].get("ours"):
        sides.insert(0, ("ours", "ours, converged", _our_settings(record["commands"]["ours_train_seed0"])))
    rows = []
    for side, label, what in sides:
        runs = record["runs"][side]
        if side == "official":
            if runs in shown:
                continue
            shown.append(runs)
        bpc = [run["test_final"]["test_bpc"] for run in runs]
        accuracy = _mean_sd([run["test_final"]["test_accuracy"] for run in runs])
        epochs = ", ".join(f"{run['best_epoch']}/{len(run['curve'])}" for run in runs)
        first = _first_epoch([[point["valid_bpc"] for point in run["curve"]] for run in runs])
        rows.append(
            f"| {label} | {what}, {trained} ([{file}](results/{file})) | {_mean_sd(bpc)} | "
            f"{_differences(bpc, bases)} | {accuracy} | {first} | {epochs} | - |"
        )
    return rows


def _our_settings(command: list[str]) -> str:
    """Our side's experiment and its model settings (``--set model.*``) from its training command."""
    sets = [value for flag, value in zip(command, command[1:]) if flag == "--set" and value.startswith("model.")]
    return command[2] + "".join(f" `{value}`" for value in sets)


def _first_epoch(curves: list[list[float]]) -> str:
    """The validation BPC after the first epoch over seeds (``-`` where a run has no curve)."""
    return _mean_sd([curve[0] for curve in curves]) if all(curves) else "-"


def _differences(bpc: list[float], bases: tuple[float, float | None]) -> str:
    """The cells ``minus ours | minus all`` of a row's mean (``-`` where there is no row ``all``)."""
    mean = statistics.fmean(bpc)
    return " | ".join("-" if base is None else f"{mean - base:+.3f}" for base in bases)


def factor_table(name: str, files: dict) -> list[str]:
    """The Markdown table of study ``name`` (or how to make it): its factors in the study's order (``factors``; the
    row ``ours`` first where the file predates it), each row's difference from ``ours`` and from ``all``, then the
    authors' code."""
    if name not in _STUDIES:
        raise ValueError(f"<!-- factors:{name} --> names no study; expected one of {list(_STUDIES)}")
    file, officials = _STUDIES[name]
    if file not in files:
        return [f"Not run yet: `python -m ppl_models.experiments.studies.psrnn_factors --out docs/results/{file}`."]
    record = files[file]
    order = record.get("factors") or sorted(record["results"], key=lambda factor: factor != _BASE)
    results = {factor: record["results"][factor] for factor in order}
    bases = tuple(
        statistics.fmean(run["test_bpc"] for run in results[row]["runs"]) if row in results else None
        for row in (_BASE, _ALL)
    )
    lines = [
        f"| factor | settings | test BPC | minus {_BASE} | minus {_ALL} | test accuracy | validation BPC after epoch 1 "
        "| best epoch / epochs | updates |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for factor, entry in results.items():
        runs = entry["runs"]
        bpc = [run["test_bpc"] for run in runs]
        shown = [o for o in entry["overrides"] if not o.startswith(("train.epochs=", "train.patience="))]
        settings = entry["experiment"] + "".join(f" `{o}`" for o in shown)
        cells = [
            factor,
            settings,
            _mean_sd(bpc),
            _differences(bpc, bases),
            _mean_sd([run["test_accuracy"] for run in runs]),
            _first_epoch([run.get("valid_bpc_curve") or [] for run in runs]),
            ", ".join(f"{run.get('best_epoch', '-')}/{run.get('epochs', '-')}" for run in runs),
            ", ".join(str(run.get("updates", "-")) for run in runs),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    trained = sum(run.get("seconds") or 0.0 for entry in results.values() for run in entry["runs"])
    shown: list = []
    for official in officials:
        if official in files:
            lines += _official_rows(files[official], official, bases, shown)
    return [
        *lines,
        "",
        f"Seeds {', '.join(map(str, record['seeds']))}; commit {record['commit']} (of the call that wrote the file: "
        f"finished runs are kept); {trained / 60:.0f} min of training in the study's runs (their own timings), one "
        f"thread per run. File: [{file}](results/{file}).",
    ]

"""Suites of runs compared side by side: held-out MSE against epochs, predictions before and after
training, and one table (the PSRNN paper's Figures 3 and 4).

A suite is a list of ``(label, experiment, overrides)`` members (:data:`ppl_models.experiments.suites.SUITES`).
:func:`run_suite` trains each member into ``<root>/<label>`` (a finished member is kept, an
interrupted one resumes), then :func:`compare` writes into ``<root>``:

* ``comparison.md`` / ``comparison.json``: per member the parameter count, the test MSE
  before training and of the best checkpoint, the calibration of its predictive and, on data
  with a known generating law, its ``truth_metrics``; members whose labels differ only in a
  trailing ``" / fold K"`` or ``" / seed K"`` also get a row of means and standard deviations over them;
  on data with a known source, each estimate's gap to the exact log-likelihood per step
  (``gap_<estimate>``) and its standard error (``gap_<estimate>_se``);
* ``mse_vs_epoch.png``: test one-step MSE against epochs (epoch 0 is the initialisation);
* ``predictions.png``: one test sequence's feature against each model's one-step
  predictions, before (top row) and after (bottom row) training.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from matplotlib.figure import Figure

from ppl_models.inference.atomic_files import read_jsonl, write_json, write_text

from . import runner, supervised
from .own_data import load_experiment
from .run_folder import config_differences, is_finished
from .run_plots import save_png

__all__ = ["run_suite", "compare", "member_folder", "member_command", "run_budget", "fold_means"]

#: a member labelled ``"<group> / fold <k>"`` or ``"<group> / seed <k>"`` is one repetition of ``<group>``
REPETITION = re.compile(r" / (?:fold|seed) \d+$")


def member_folder(root: str | Path, label: str) -> Path:
    """``<root>/<label>`` with the label made a safe folder name."""
    return Path(root) / re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-").lower()


def member_command(experiment: str, overrides: tuple, folder: Path) -> str:
    """The ``ppl-models train`` command line of one member's run (as the results files record it)."""
    sets = " ".join(f"--set '{override}'" for override in overrides)
    return f"ppl-models train {experiment} --run-dir {folder} {sets}".strip()


def best_epoch(records: list[dict]) -> int:
    """The epoch of a run's best checkpoint among its validated ``metrics.jsonl`` records: the last one marked
    ``best`` (a rise beyond the run's ``min_delta``), or for runs that predate the mark, that of the highest
    validation bound."""
    marked = [r["epoch"] for r in records if r.get("best")]
    return marked[-1] if marked else max(records, key=lambda r: r["valid_bound_per_step"])["epoch"]


def run_budget(folder: Path) -> dict:
    """A finished run's budget from its ``metrics.jsonl``: ``epochs`` run, training ``seconds`` and ``best_epoch``
    (that of its best checkpoint, :func:`best_epoch`; absent without validation); ``{}`` without the file."""
    epochs = read_jsonl(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []
    if not epochs:
        return {}
    budget = {"epochs": epochs[-1]["epoch"], "seconds": sum(r.get("seconds", 0.0) for r in epochs)}
    validated = [r for r in epochs if r.get("valid_bound_per_step") is not None]
    if validated:
        budget["best_epoch"] = best_epoch(validated)
    return budget


def run_suite(
    members,
    root: str | Path,
    overrides: list[str] = (),
    device: str | None = None,
    only: list[str] | None = None,
    *,
    data: str | Path | None = None,
) -> dict:
    """Train every member (skipping finished ones, resuming interrupted ones), then :func:`compare`.

    Members may be likelihood experiments (:mod:`ppl_models.experiments.runner`) or supervised ones
    (:mod:`ppl_models.experiments.supervised`). ``data`` (a user's file, ``--data``) replaces every member's
    ``[data]`` after its own settings, and ``overrides`` apply after that
    (:func:`~ppl_models.experiments.own_data.load_experiment`); members they make the same run (e.g. folds or
    data sizes, once ``data`` replaces the data) are refused before any training. ``only``: train just these
    labels (so that one suite can be split over processes or machines sharing ``root``); the comparison then
    covers every member finished so far.
    """
    labels = [label for label, _, _ in members]
    unknown = sorted(set(only or ()) - set(labels))
    if unknown:
        raise ValueError(f"only must name members of the suite {labels}, got {unknown}")
    chosen = [member for member in members if only is None or member[0] in only]
    configs = {label: load_experiment(experiment, overrides, data=data, own=sets) for label, experiment, sets in chosen}
    _check_distinct(chosen, configs, [*([f"--data {data}"] if data is not None else []), *overrides])
    folders = {label: member_folder(root, label) for label in labels}
    for label, experiment, member_overrides in chosen:
        folder = folders[label]
        if is_finished(folder):
            print(f"{label}: finished earlier, kept ({folder})")
            continue
        config = configs[label]
        config["name"] = label
        if device:
            config["device"] = device
        shown = (*member_overrides, *([f"--data {data}"] if data is not None else []), *overrides)
        print(f"{label}: training ({experiment} {' '.join(shown)})")
        train = supervised.train if config.get("kind") == "supervised" else runner.train
        train(config, folder, resume=True)  # a folder without a complete last.pt starts afresh
    if only is not None:
        folders = {label: folder for label, folder in folders.items() if is_finished(folder)}
    return compare(folders, root)


def _check_distinct(members, configs: dict, overrides: list[str]) -> None:
    """Refuse ``members`` of which two are the same run under ``overrides`` (``configs``: ``{label: config}``),
    naming the settings of theirs that the overrides replace."""
    seen, same = {}, []
    for label, _, _ in members:
        key = json.dumps({k: v for k, v in configs[label].items() if k != "name"}, sort_keys=True)
        if key in seen:
            same.append((seen[key], label))
        seen.setdefault(key, label)
    if not same:
        return
    first, second = same[0]
    own = {label: load_experiment(experiment, own=sets) for label, experiment, sets in members if label in same[0]}
    replaced = sorted(key for key in config_differences(own[first], own[second]) if key != "name")
    why = (
        f"they differ only in {', '.join(replaced)}, which the overrides replace"
        if replaced
        else "they have the same settings"
    )
    more = f" (and {len(same) - 1} more such pairs)" if len(same) > 1 else ""
    raise ValueError(
        f"suite members {first!r} and {second!r} become the same run under the overrides "
        f"{list(overrides)}{more}: {why}; drop the override (e.g. --data) or train distinct members "
        "only (--only LABEL)"
    )


#: the test metrics a supervised member's row shows, where its task reports them
SUPERVISED_COLUMNS = (
    "num_parameters",
    "num_particles",
    "last_step_mse",
    "last_step_position_mse",
    "mse",
    "rmse",
    "crps",
    "accuracy",
    "epochs",
    "seconds",
)


def _member_summary(folder: Path) -> dict:
    metrics = json.loads((folder / "metrics.json").read_text())
    if "cell" in metrics:  # a supervised run
        return {column: metrics[column] for column in SUPERVISED_COLUMNS if column in metrics}
    predictions = folder / "predictions.json"
    initial = json.loads(predictions.read_text()).get("initial_mse", {}) if predictions.is_file() else {}
    calibration = metrics.get("calibration", {})
    return {
        "num_parameters": metrics.get("num_parameters"),
        **{f"{name}_per_step": value["per_step"] for name, value in metrics.get("loglik", {}).items()},
        **{
            f"{name}_per_sequence_step": value["per_sequence_step"]
            for name, value in metrics.get("loglik", {}).items()
            if "per_sequence_step" in value
        },
        "initial_test_mse": initial.get("test_mse"),
        "test_mse": metrics.get("mse"),
        "nlpd": calibration.get("nlpd"),
        "crps": calibration.get("crps"),
        "coverage_0.5": calibration.get("coverage_0.5"),
        "coverage_0.8": calibration.get("coverage_0.8"),
        "coverage_0.9": calibration.get("coverage_0.9"),
        "coverage_0.95": calibration.get("coverage_0.95"),
        "pit_ks": calibration.get("pit_ks"),
        "brier": calibration.get("brier"),
        **{f"truth_{name}": value for name, value in metrics.get("truth_metrics", {}).items()},
        **{f"gap_{name}": gap["gap_per_step"] for name, gap in metrics.get("gap_to_truth", {}).items()},
        **{f"gap_{name}_se": gap["standard_error_per_step"] for name, gap in metrics.get("gap_to_truth", {}).items()},
    }


def fold_means(summary: dict[str, dict]) -> dict[str, dict]:
    """Mean and sample standard deviation over folds or seeds: ``{group: {column: (mean, sd)}}``.

    Members labelled ``"<group> / fold <k>"`` (or ``/ seed <k>``) form a group; groups of one
    member and columns some member lacks are left out.
    """
    groups: dict[str, list[dict]] = {}
    for label, row in summary.items():
        if REPETITION.search(label):
            groups.setdefault(REPETITION.sub("", label), []).append(row)
    means = {}
    for group, rows in groups.items():
        if len(rows) < 2:
            continue
        columns = [c for c in rows[0] if all(isinstance(r.get(c), (int, float)) for r in rows)]
        means[group] = {c: _mean_sd([float(r[c]) for r in rows]) for c in columns}
    return means


def _mean_sd(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def compare(folders: dict[str, str | Path], out_dir: str | Path, feature: int = 0) -> dict:
    """Compare finished run folders ``{label: folder}``; write the table and the two figures into ``out_dir``."""
    folders = {label: Path(folder) for label, folder in folders.items()}
    missing = [str(f) for f in folders.values() if not (f / "metrics.json").is_file()]
    if missing:
        raise ValueError(f"not finished run folders (no metrics.json): {missing}")
    _check_feature(folders, feature)
    out_dir = Path(out_dir)
    summary = {label: _member_summary(folder) for label, folder in folders.items()}
    means = fold_means(summary)
    write_json(out_dir / "comparison.json", {**summary, **({"fold means (mean, sd)": means} if means else {})})
    write_text(out_dir / "comparison.md", _table(summary) + (_means_table(means) if means else ""))
    _mse_curves(folders, out_dir / "mse_vs_epoch.png")
    _prediction_grid(folders, out_dir / "predictions.png", feature)
    return summary


def _table(summary: dict) -> str:
    columns = list(dict.fromkeys(column for row in summary.values() for column in row))
    lines = ["| model | " + " | ".join(c.replace("_", " ") for c in columns) + " |", "|---|" + "---:|" * len(columns)]

    def cell(value):
        if value is None:
            return "-"
        return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"

    lines += [f"| {label} | " + " | ".join(cell(row.get(c)) for c in columns) + " |" for label, row in summary.items()]
    return "\n".join(lines) + "\n"


def _means_table(means: dict[str, dict]) -> str:
    columns = list(next(iter(means.values())))
    lines = [
        "",
        "Mean (standard deviation) over folds or seeds:",
        "",
        "| model | " + " | ".join(c.replace("_", " ") for c in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    lines += [
        f"| {group} | " + " | ".join(f"{m:.4g} ({sd:.2g})" for m, sd in (row[c] for c in columns)) + " |"
        for group, row in means.items()
    ]
    return "\n".join(lines) + "\n"


def _mse_curves(folders: dict[str, Path], path: Path) -> None:
    figure = Figure(figsize=(6.5, 4))
    ax = figure.subplots()
    for label, folder in folders.items():
        points = []
        predictions = folder / "predictions.json"
        if predictions.is_file():
            initial = json.loads(predictions.read_text()).get("initial_mse", {})
            if "test_mse" in initial:
                points.append((0, initial["test_mse"]))
        if (folder / "metrics.jsonl").is_file():
            points += [
                (r["epoch"], r["monitor"]["test_mse"])
                for r in read_jsonl(folder / "metrics.jsonl")
                if "test_mse" in r.get("monitor", {})
            ]
        if points:
            ax.plot(*zip(*points), label=label)
    if not ax.lines:  # supervised members: their test metrics are in the table only
        return
    ax.set(xlabel="epoch", ylabel="test one-step MSE", yscale="log", title="MSE vs epoch")
    ax.legend(fontsize="small")
    save_png(figure, path)


def _check_feature(folders: dict[str, Path], feature: int) -> None:
    """Raise ``ValueError`` unless every run's recorded predictions have feature ``feature``."""
    for folder in folders.values():
        path = folder / "predictions.json"
        observed = json.loads(path.read_text()).get("observed") if path.is_file() else None
        if observed and not 0 <= feature < len(observed[0]):
            raise ValueError(f"--feature must be in [0, {len(observed[0])}) for {path}, got {feature}")


def _prediction_grid(folders: dict[str, Path], path: Path, feature: int) -> None:
    records = {
        label: json.loads((f / "predictions.json").read_text())
        for label, f in folders.items()
        if (f / "predictions.json").is_file()
    }
    records = {k: v for k, v in records.items() if "observed" in v and "final" in v}
    if not records:
        return
    figure = Figure(figsize=(2.6 * len(records), 4.4), layout="constrained")
    axes = figure.subplots(2, len(records), squeeze=False, sharex=True)
    for column, (label, record) in enumerate(records.items()):
        observed = [row[feature] for row in record["observed"]]
        for row, key in enumerate(("initial", "final")):
            ax = axes[row][column]
            ax.plot(observed, color="black", linewidth=1, label="test data")
            ax.plot([step[feature] for step in record[key]], color="tab:red", linewidth=1, label="prediction")
            ax.set_title(f"{label}\n{'before' if key == 'initial' else 'after'} training", fontsize="small")
            ax.tick_params(labelsize="x-small")
    axes[0][0].legend(fontsize="x-small")
    figure.suptitle(f"one-step predictions of feature {feature} on the first test sequence", fontsize="small")
    save_png(figure, path)

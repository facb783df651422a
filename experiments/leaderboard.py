"""``ppl-models leaderboard --data PATH``: which model suits my data, and are its uncertainties right?

Every model trains at its default recipe (:mod:`ppl_models.experiments.recipes`) on the same splits of the
file, each in ``OUT/runs/<model>`` (a finished run made on the same data with the same settings is
kept, an interrupted one resumes; see :func:`run_leaderboard`), and the board is written from their
``metrics.json``:

* ``leaderboard.json`` / ``leaderboard.md``: per model, the held-out log-likelihood in nats per
  step with the estimator named (the exact one where the model has it, else its tightest bound),
  CRPS, coverage at 50 / 80 / 95 %, PIT KS (real-valued data; Brier score and ECE for binary
  data), the one-step MSE, wall time of training and evaluation, best and last epoch, and parameter count;
* ``calibration.png``: coverage against nominal level and the PIT ECDF of every model side by side;
* ``fan_chart.png``: a forecast of one test series per model (median, 50 % and 90 % bands), in the
  data's units.

Of the default models, those that cannot represent the data are listed under the board with the
reason (``not run: MODEL: reason``; ``not_run`` in ``leaderboard.json``).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ppl_models.inference.io import folder_lock, read_jsonl, remove_stale_temporaries, write_json, write_text
from ppl_models.inference.training import load_checkpoint

from . import board_figures, own_data, runner
from .recipes import RECIPES, DataNotRepresentable
from .run_folder import FINISHED, check_writable, is_finished, read_config_json, run_differences

__all__ = ["DEFAULT_MODELS", "BOARD_FILES", "run_leaderboard", "leaderboard_rows"]

#: the models a board compares when ``--models`` is not given: every density model of the registry
DEFAULT_MODELS = tuple(RECIPES)

#: what a board writes into ``out`` besides its ``runs/`` folder
BOARD_FILES = ("leaderboard.json", "leaderboard.md", "calibration.png", "fan_chart.png")


def run_leaderboard(path: str | Path, out: str | Path, models: list[str] | None = None, overrides: list[str] = (),
                    device: str | None = None, *, retrain: bool = False) -> list[dict]:  # fmt: skip
    """Train each of ``models`` (default :data:`DEFAULT_MODELS`) on the file at ``path``; write the board to ``out``.

    ``overrides`` (``section.key=value``) apply to every model after its recipe (``data.series=...``
    name the file's columns); ``MODEL:section.key=value`` applies to that model only. Every
    configuration is built, and so checked, before any training; of the default models, those that
    cannot represent the data are left out and listed with the reason. ``out`` is locked while the
    board runs. A rerun into the same ``out`` keeps each finished run, resumes an interrupted one
    and starts again one that has not trained an epoch; a run made on other data (the file's content
    hash) or with other settings is refused by name before anything trains, or, with ``retrain``,
    trained again. Returns the rows of ``leaderboard.json``.
    """
    configs, not_run = _configs(path, models, overrides, device)
    _check_board_folder(Path(out))
    out = check_writable(out, "out")
    with folder_lock(out, "out"):
        remove_stale_temporaries(out)
        folders = {model: out / "runs" / model for model in configs}
        plans = _plans(folders, configs, retrain)
        for model, config in configs.items():
            _bring_up_to_date(model, folders[model], config, plans[model])
        rows = leaderboard_rows(folders)
        write_json(out / "leaderboard.json", {"data": str(path), "overrides": list(overrides), "rows": rows,
                                              "not_run": not_run})  # fmt: skip
        write_text(out / "leaderboard.md", _markdown(rows, path, not_run))
        board_figures.calibration_figure(folders, out / "calibration.png")
        board_figures.fan_chart(folders, out / "fan_chart.png", device or "cpu")
    return rows


def _configs(path, models: list[str] | None, overrides, device) -> tuple[dict[str, dict], dict[str, str]]:
    """``({model: its checked configuration}, {model: why it is not run})``; ``models`` ``None`` is the default list,
    whose models that cannot represent the data are left out (a model named in ``models`` raises instead)."""
    named = models is not None
    models = list(DEFAULT_MODELS if models is None else models)
    if not models:
        raise ValueError(f"models: expected at least one model name, got none (leave --models out to compare all of "
                         f"{list(DEFAULT_MODELS)})")  # fmt: skip
    unknown = [m for m in models if m not in RECIPES]
    if unknown:
        raise ValueError(f"models: {unknown} are not density models of the collection; expected names from "
                         f"{list(RECIPES)} (pf-lstm and pf-gru predict targets: train them with ppl-models train)")
    if len(set(models)) != len(models):
        raise ValueError(f"models: each model once, got {models}")
    own = [item.split(":", 1) for item in overrides if item.split(":", 1)[0] in RECIPES]
    unknown = sorted({name for name, _ in own} - set(models))
    if unknown:
        raise ValueError(f"--set {unknown[0]}:...: {unknown[0]!r} is not among the models {models}")
    shared = [item for item in overrides if item.split(":", 1)[0] not in RECIPES]
    configs, not_run = {}, {}
    for model in models:
        try:
            config = own_data.model_config(model, path, [*shared, *(item for name, item in own if name == model)])
        except DataNotRepresentable as error:
            if named:
                raise
            not_run[model] = " ".join(str(error).split())
            print(f"not run: {not_run[model]}")  # the reason starts with the model's name
            continue
        config["name"] = f"{model} (leaderboard)"
        if device:
            config["device"] = device
        configs[model] = config
    if not configs:
        raise ValueError(f"data {path}: none of the models can represent it ({next(iter(not_run.values()))})")
    return configs, not_run


def _check_board_folder(out: Path) -> None:
    """Refuse an ``out`` that holds anything but a board's files (a run folder of ``train``, an evaluation, ...)."""
    if not out.is_dir():
        return  # missing (made anew) or a file (refused by run_folder.check_writable)
    other = sorted(p.name for p in out.iterdir() if p.name not in ("runs", *BOARD_FILES) and p.name[0] != ".")
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise ValueError(f"out {out} is not a leaderboard folder (it holds {shown}; a run or evaluation folder?): "
                         "pick a new or empty --out")  # fmt: skip


def _plans(folders: dict[str, Path], configs: dict[str, dict], retrain: bool) -> dict[str, str]:
    """``{model: "kept" | "resume" | "start" | "retrain"}`` for the run folders; a run made on other data or with
    other settings is one ``ValueError`` naming its folder and what differs, unless ``retrain``."""
    plans, refused = {}, {}
    for model, folder in folders.items():
        checkpoint = _last_checkpoint(folder)
        differences = [] if checkpoint is None else run_differences(folder, configs[model],
                                                                   checkpoint.get("experiment"))
        if differences:
            refused[model] = differences
        plans[model] = ("start" if checkpoint is None else "retrain" if differences else
                        "kept" if is_finished(folder) else "resume")  # fmt: skip
    if refused and not retrain:
        model, differences = next(iter(refused.items()))
        others = [folders[m].name for m in refused if m != model]
        also = f" (and {', '.join(others)} likewise)" if others else ""
        raise ValueError(f"{folders[model]} holds a run made on other data or with other settings "
                         f"({'; '.join(differences[:3])}){also}: pick another --out, or pass --retrain to train "
                         f"{'them' if others else 'it'} again (the old results are deleted)")  # fmt: skip
    return plans


def _last_checkpoint(folder: Path) -> dict | None:
    """The run's ``checkpoints/last.pt``, or ``None`` where there is no complete one (it has not trained an epoch)."""
    path = folder / "checkpoints" / "last.pt"
    try:
        return load_checkpoint(path) if path.is_file() else None
    except ValueError:  # cut short (a full disk, a lost write): as good as none
        return None


def _bring_up_to_date(model: str, folder: Path, config: dict, plan: str) -> None:
    """Carry out ``plan`` (:func:`_plans`) for ``model``'s run folder: keep it, resume it, or train it from scratch."""
    if plan == "kept":
        print(f"{model}: finished earlier, kept ({folder})")
        return
    if plan == "retrain":
        shutil.rmtree(folder)
    if plan == "start":  # no complete last.pt: what a new run would refuse or trip over goes, the wall time stays
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
        for name in ("config.json", "resume.jsonl", FINISHED):
            (folder / name).unlink(missing_ok=True)
    if plan == "resume" and (folder / "config.json").is_file():  # the run's own settings (the same, defaults aside)
        config = {**read_config_json(folder / "config.json"), "device": config["device"]}
    print(f"{model}: {'resuming' if plan == 'resume' else 'training'} ({folder})")
    with _wall_clock(folder / "wall_time.json") as seconds:
        runner.train(config, folder, resume=plan == "resume")
    print(f"{model}: done in {seconds():.0f} s")


@contextmanager
def _wall_clock(path: Path, every: float = 1.0) -> Iterator[Callable[[], float]]:
    """Count the block's wall time into ``path`` (``seconds``, all sessions together), rewritten every ``every``
    seconds while the block runs and at its end, so that a session killed on the way counts too (all but the
    last ``every`` seconds). Yields a function that gives the seconds so far."""
    earlier = json.loads(path.read_text())["seconds"] if path.is_file() else 0.0
    started, stop = time.perf_counter(), threading.Event()

    def seconds() -> float:
        return earlier + time.perf_counter() - started

    def record() -> None:
        if path.parent.is_dir():  # written by the run's own start
            write_json(path, {"seconds": seconds(), "what": "wall time of training and evaluation, all sessions"})

    def beat() -> None:
        while not stop.wait(every):
            with suppress(OSError):  # a full disk, a temporary file swept by the run's start: the next beat writes
                record()

    thread = threading.Thread(target=beat, name=f"wall clock of {path.parent.name}", daemon=True)
    thread.start()
    try:
        yield seconds
    finally:
        stop.set()
        thread.join()
        record()


def leaderboard_rows(folders: dict[str, Path]) -> list[dict]:
    """One row per finished run folder, from its ``metrics.json`` and training log, best held-out fit first; a
    folder without ``finished.json`` (its outputs incomplete) is a ``ValueError``."""
    rows = []
    for model, folder in folders.items():
        if not is_finished(folder):
            raise ValueError(f"run {folder} is not finished (no {FINISHED}): rerun the leaderboard to finish it")
        metrics = json.loads((folder / "metrics.json").read_text())
        estimator, loglik = _held_out(metrics["loglik"])
        calibration = metrics.get("calibration", {})
        log = [r for r in read_jsonl(folder / "metrics.jsonl") if "epoch" in r]
        validated = [r for r in log if r.get("valid_bound_per_step") is not None]
        best = max(validated, key=lambda r: r["valid_bound_per_step"])["epoch"] if validated else None
        config = json.loads((folder / "config.json").read_text())
        rows.append({
            "model": model, "estimator": estimator, "nats_per_step": loglik,
            **{key: calibration.get(key) for key in ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95", "pit_ks",
                                                     "brier", "ece")},
            "mse": metrics.get("mse"), "train_seconds": _wall_time(folder, log),
            "best_epoch": best, "epochs_run": log[-1]["epoch"] if log else 0,
            "epochs_cap": config["train"]["epochs"], "num_parameters": metrics["num_parameters"],
            "run": str(folder),
        })  # fmt: skip
    return sorted(rows, key=lambda row: -row["nats_per_step"])


def _wall_time(folder: Path, log: list[dict]) -> float:
    """Seconds of training and evaluation as the board measured them, else the training log's epoch times."""
    clock = folder / "wall_time.json"
    return json.loads(clock.read_text())["seconds"] if clock.is_file() else sum(r.get("seconds", 0.0) for r in log)


def _held_out(loglik: dict) -> tuple[str, float]:
    """The estimate a row shows: the exact log-likelihood where there is one, else the tightest (largest) bound."""
    if "exact" in loglik:
        return "exact", loglik["exact"]["per_step"]
    bounds = {name: v["per_step"] for name, v in loglik.items() if name.split("-")[0] in ("smc", "iwae", "elbo")}
    name = max(bounds, key=bounds.get)
    return name, bounds[name]


def _markdown(rows: list[dict], path, not_run: dict[str, str]) -> str:
    binary = all(row["crps"] is None for row in rows)
    spread = ("Brier", "ECE") if binary else ("CRPS", "cov. 50%", "cov. 80%", "cov. 95%", "PIT KS")
    keys = ("brier", "ece") if binary else ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95", "pit_ks")
    head = ("model", "held-out nats / step", "estimator", *spread, "one-step MSE", "train + eval s",
            "best / last epoch", "parameters")
    lines = [f"# Leaderboard: {path}", "",
             "Held-out (test split) figures in the data's own units, each model at its default recipe on the same "
             "splits; higher nats per step is better (a bound where the model has no exact likelihood). Coverage "
             "is the share of test values inside the central interval of that level (ideal: the level); PIT KS "
             "is 0 for a calibrated predictive. A best epoch equal to the last means the model was still "
             "improving when its epoch cap stopped it.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for row in rows:
        still = " (still improving)" if row["best_epoch"] == row["epochs_run"] == row["epochs_cap"] else ""
        epochs = f"{row['best_epoch']} / {row['epochs_run']}{still}"
        cells = (row["model"], f"{row['nats_per_step']:.4f}", row["estimator"], *(_number(row[k]) for k in keys),
                 _number(row["mse"]), f"{row['train_seconds']:.0f}", epochs, f"{row['num_parameters']:,}")
        lines.append("| " + " | ".join(cells) + " |")
    if not_run:
        lines += ["", "Models that cannot represent the data:", "",
                  *(f"- not run: {reason}" for reason in not_run.values())]
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    return "-" if value is None else f"{value:.4f}"

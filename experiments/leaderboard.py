"""``ppl-models leaderboard --data PATH``: which model suits my data, and are its uncertainties right?

Every model trains at its default recipe (:mod:`experiments.recipes`) on the same splits of the
file, each in ``OUT/runs/<model>`` (a finished run is kept, an interrupted one resumes), and the
board is written from their ``metrics.json``:

* ``leaderboard.json`` / ``leaderboard.md``: per model, the held-out log-likelihood in nats per
  step with the estimator named (the exact one where the model has it, else its tightest bound),
  CRPS, coverage at 50 / 80 / 95 %, PIT KS (real-valued data; Brier score and ECE for binary
  data), the one-step MSE, wall time of training and evaluation, best and last epoch, and parameter count;
* ``calibration.png``: coverage against nominal level and the PIT ECDF of every model side by side;
* ``fan_chart.png``: a forecast of one test series per model (median, 50 % and 90 % bands), in the
  data's units.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from inference.io import read_jsonl, write_json, write_text

from . import board_figures, own_data, runner
from .recipes import RECIPES

__all__ = ["DEFAULT_MODELS", "run_leaderboard", "leaderboard_rows"]

#: the models a board compares when ``--models`` is not given: every density model of the registry
DEFAULT_MODELS = tuple(RECIPES)


def run_leaderboard(path: str | Path, out: str | Path, models: list[str] | None = None, overrides: list[str] = (),
                    device: str | None = None) -> list[dict]:  # fmt: skip
    """Train each of ``models`` (default :data:`DEFAULT_MODELS`) on the file at ``path``; write the board to ``out``.

    ``overrides`` (``section.key=value``) apply to every model after its recipe (``data.series=...``
    name the file's columns); ``MODEL:section.key=value`` applies to that model only. Every
    configuration is built, and so checked, before any training.
    Returns the rows of ``leaderboard.json``.
    """
    models = list(models or DEFAULT_MODELS)
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
    configs = {}
    for model in models:
        config = own_data.model_config(model, path, [*shared, *(item for name, item in own if name == model)])
        config["name"] = f"{model} (leaderboard)"
        if device:
            config["device"] = device
        configs[model] = config
    out = runner.check_writable(out, "out")
    for model, config in configs.items():
        folder = out / "runs" / model
        if (folder / "metrics.json").is_file():
            print(f"{model}: finished earlier, kept ({folder})")
            continue
        print(f"{model}: training ({folder})")
        started, clock = time.perf_counter(), folder / "wall_time.json"
        earlier = json.loads(clock.read_text())["seconds"] if clock.is_file() else 0.0  # before an interruption
        runner.train(config, folder, resume=(folder / "checkpoints" / "last.pt").exists())
        seconds = earlier + time.perf_counter() - started
        write_json(clock, {"seconds": seconds, "what": "wall time of training and evaluation, all sessions"})
        print(f"{model}: done in {seconds:.0f} s")
    rows = leaderboard_rows({model: out / "runs" / model for model in models})
    write_json(out / "leaderboard.json", {"data": str(path), "overrides": list(overrides), "rows": rows})
    write_text(out / "leaderboard.md", _markdown(rows, path))
    board_figures.calibration_figure({model: out / "runs" / model for model in models}, out / "calibration.png")
    board_figures.fan_chart({model: out / "runs" / model for model in models}, out / "fan_chart.png", device or "cpu")
    return rows


def leaderboard_rows(folders: dict[str, Path]) -> list[dict]:
    """One row per finished run folder, from its ``metrics.json`` and training log, best held-out fit first."""
    rows = []
    for model, folder in folders.items():
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


def _markdown(rows: list[dict], path) -> str:
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
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    return "-" if value is None else f"{value:.4f}"

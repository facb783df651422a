"""The scale a user's own file needs: each figure beside its goal.

* ``load``: :meth:`~ppl_models.inference.data.datasets.SequenceDataset.from_file` of a long-format CSV of 10,000
  series x 100 steps x 3 features (goal <= 20 s, median of ``--repeats``);
* ``reads``: how many times a one-epoch ``ppl-models train lgssm --data FILE`` and a one-epoch 3-model ``ppl-models
  leaderboard`` read the file (``SequenceDataset.from_file`` calls, counted in every process of the command; goal
  1), on a 300-step series in windows of 50 (the count does not depend on the size);
* ``lgssm epoch``: the LGSSM's seconds per epoch on a 2,000-step univariate series split by time with training
  windows of 100 steps (the held-out splits scored after their history: validation filters sequences of up to
  2,000 steps), as ``ppl-models train lgssm`` runs it: the difference of two runs' wall times over the difference
  of their epochs (training, validation, the monitor and the checkpoints; goal <= 0.5 s);
* ``models``: each default recipe's (:data:`~ppl_models.experiments.recipes.RECIPES`) ``ppl-models train MODEL --data
  FILE`` on that series, train and evaluate, in a subprocess with ``--threads`` threads (goal <= 120 s each;
  stopped at ``--cap`` seconds and recorded as timed out).

The files are made from ``--seed`` in a temporary folder. The load average is recorded at the start, as each command
ends and at the end: other processes on the machine slow every figure, and with ``--threads 2`` on two cores an
operation split across threads waits for a core another process holds.

Usage::

    python -m ppl_models.experiments.benchmarks.own_data_scale --out docs/results/own_data_scale_cpu.json
    python -m ppl_models.experiments.benchmarks.own_data_scale --quick      # smoke configuration (a few minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.experiments.recipes import RECIPES
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.data.datasets import SequenceDataset

__all__ = ["GOALS", "FULL", "QUICK", "main"]

#: goal name -> the largest measured value that meets it
GOALS = {"load_s": 20.0, "reads_train": 1, "reads_board": 1, "lgssm_epoch_s": 0.5, "model_total_s": 120.0}

#: sizes of the full run and of ``--quick``
FULL = {
    "panel": (10_000, 100, 3),
    "steps": 2000,
    "window": 100,
    "epochs": (5, 45),
    "models": tuple(RECIPES),
    "model_overrides": (),
    "reads_steps": 300,
    "board": ("lgssm", "gru", "kf"),
}
QUICK = {
    "panel": (300, 20, 3),
    "steps": 300,
    "window": 50,
    "epochs": (1, 3),
    "models": ("lgssm", "kf"),
    "model_overrides": ("train.epochs=2",),
    "reads_steps": 300,
    "board": ("lgssm", "gru", "kf"),
}

#: counts ``SequenceDataset.from_file`` calls of every Python process started with the hook folder on PYTHONPATH
_READ_HOOK = textwrap.dedent("""
    import os

    if os.environ.get("OWN_DATA_SCALE_READS"):
        from ppl_models.inference.data.datasets import SequenceDataset

        _read = SequenceDataset.from_file.__func__

        def _counted(cls, path, *args, **options):
            with open(os.environ["OWN_DATA_SCALE_READS"], "a") as log:
                log.write(f"{os.getpid()} {path}\\n")
            return _read(cls, path, *args, **options)

        SequenceDataset.from_file = classmethod(_counted)
""")


def panel_file(folder: Path, series: int, steps: int, features: int, seed: int) -> Path:
    """A long-format CSV of ``series`` random walks of ``steps`` steps and ``features`` features (``series``,
    ``time`` and ``f0``... columns)."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(series, steps, features)).cumsum(1).reshape(-1, features)
    table = pd.DataFrame(values, columns=[f"f{i}" for i in range(features)])
    table.insert(0, "time", np.tile(np.arange(steps), series))
    table.insert(0, "series", np.repeat([f"s{i}" for i in range(series)], steps))
    path = folder / "panel.csv"
    table.to_csv(path, index=False)
    return path


def weekly_file(folder: Path, steps: int, seed: int) -> Path:
    """``weekly-<steps>.csv``: one univariate weekly series of ``steps`` steps, trend, yearly season and AR(1) noise
    (``week``, ``value``)."""
    rng = np.random.default_rng(seed)
    week = np.arange(steps)
    noise = np.zeros(steps)
    for t in range(1, steps):
        noise[t] = 0.7 * noise[t - 1] + rng.normal(scale=0.5)
    value = 10 + 0.01 * week + 2 * np.sin(2 * np.pi * week / 52.18) + noise
    path = folder / f"weekly-{steps}.csv"
    pd.DataFrame({"week": week, "value": value}).to_csv(path, index=False)
    return path


def series_overrides(window: int) -> list[str]:
    """The ``--set`` items that read :func:`weekly_file`'s series split by time, in training windows of ``window``."""
    return ['data.time="week"', 'data.split_by="time"', f"data.window={window}"]


def _cli(arguments: list[str], threads: int, timeout: float | None = None, env: dict | None = None) -> dict:
    """Run ``ppl-models ARGUMENTS`` in a subprocess with ``threads`` threads: wall seconds, exit status, the tail of
    its output, whether it was stopped at ``timeout``, and the load average when it ended."""
    env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [sys.executable, "-m", "ppl_models.experiments.cli", *arguments]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        status, output, timed_out = done.returncode, done.stdout + done.stderr, False
    except subprocess.TimeoutExpired as stopped:
        status, timed_out = None, True
        output = "".join(
            part.decode() if isinstance(part, bytes) else (part or "") for part in (stopped.stdout, stopped.stderr)
        )
    return {
        "seconds": time.perf_counter() - start,
        "exit_status": status,
        "timed_out": timed_out,
        "output_tail": output.strip().splitlines()[-5:],
        "load_average": load_average(),
    }


def load_section(folder: Path, size: tuple[int, int, int], repeats: int, seed: int) -> dict:
    """Seconds of ``SequenceDataset.from_file`` on :func:`panel_file` of ``size`` (series, steps, features)."""
    path = panel_file(folder, *size, seed)
    times, data = time_repeats(lambda: SequenceDataset.from_file(path, series="series", time="time"), repeats)
    return {
        **stats(times),
        "series": size[0],
        "steps": size[1],
        "features": size[2],
        "sequences_read": len(data),
        "file_mb": path.stat().st_size / 1e6,
    }


def reads_section(
    folder: Path, path: Path, overrides: list[str], board: tuple[str, ...], threads: int, cap: float
) -> dict:
    """``SequenceDataset.from_file`` calls of a one-epoch ``train lgssm --data`` and a one-epoch board of ``board``
    (each stopped at ``cap`` seconds: the file is read before anything trains)."""
    hook = folder / "read_hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_READ_HOOK)
    sets = [item for o in [*overrides, "train.epochs=1"] for item in ("--set", o)]
    commands = {
        "train": ["train", "lgssm", "--data", str(path), "--run-dir", str(folder / "reads-train"), *sets],
        "board": [
            "leaderboard",
            "--data",
            str(path),
            "--models",
            ",".join(board),
            "--out",
            str(folder / "reads-board"),
            *sets,
        ],
    }
    out = {}
    for name, arguments in commands.items():
        log = folder / f"reads-{name}.log"
        log.touch()
        python_path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
        run = _cli(arguments, threads, cap, env={"PYTHONPATH": python_path, "OWN_DATA_SCALE_READS": str(log)})
        reads = log.read_text().splitlines()
        out[name] = {
            "reads": len(reads),
            "processes": len({line.split()[0] for line in reads}),
            "command": "ppl-models " + " ".join(arguments),
            **run,
        }
    return out


def lgssm_epoch_section(folder: Path, path: Path, overrides: list[str], epochs: tuple[int, int], threads: int) -> dict:
    """The LGSSM's seconds per epoch: two ``train lgssm`` runs of ``epochs`` epochs (early stopping off), the
    difference of their wall times over that of their epochs; and the trainer's own epoch seconds (training and
    validation only) of the longer run."""
    runs = {}
    for count in epochs:
        run_dir = folder / f"lgssm-{count}-epochs"
        sets = [item for o in [*overrides, f"train.epochs={count}", f"train.patience={count}"] for item in ("--set", o)]
        runs[count] = _cli(["train", "lgssm", "--data", str(path), "--run-dir", str(run_dir), *sets], threads)
        records = _records(run_dir)
        runs[count].update(epochs_run=len(records), trainer_epoch_s=[r["seconds"] for r in records])
    short, long = epochs
    ran = all(run["exit_status"] == 0 and run["epochs_run"] == count for count, run in runs.items())
    per_epoch = (runs[long]["seconds"] - runs[short]["seconds"]) / (long - short) if ran else None
    trainer = runs[long]["trainer_epoch_s"]
    return {
        "seconds_per_epoch": per_epoch,
        "trainer_epoch_median_s": float(np.median(trainer)) if trainer else None,
        "runs": {str(k): v for k, v in runs.items()},
    }


def _records(run_dir: Path) -> list[dict]:
    """The epoch records of a run folder's ``metrics.jsonl`` (none if it has none)."""
    log = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []


def models_section(
    folder: Path, path: Path, overrides: list[str], models: tuple[str, ...], threads: int, cap: float
) -> dict:
    """Each model's ``train MODEL --data`` (its default recipe) in a subprocess stopped at ``cap`` seconds: wall
    seconds, epochs run, the best validation epoch and the median epoch seconds (training and validation)."""
    out = {}
    for model in models:
        run_dir = folder / f"model-{model}"
        sets = [item for o in overrides for item in ("--set", o)]
        run = _cli(["train", model, "--data", str(path), "--run-dir", str(run_dir), *sets], threads, timeout=cap)
        records = _records(run_dir)
        valid = [r["valid_bound_per_step"] for r in records if r.get("valid_bound_per_step") is not None]
        out[model] = {
            **run,
            "epochs_run": len(records),
            "best_epoch": int(np.argmax(valid)) + 1 if valid else None,
            "epoch_median_s": float(np.median([r["seconds"] for r in records])) if records else None,
            "training_s": float(sum(r["seconds"] for r in records)),
        }
        print(f"  {model:<24}{_shown(run)}, {len(records)} epochs", flush=True)
    return out


def _shown(run: dict) -> str:
    if run["timed_out"]:
        return f"timed out at {run['seconds']:.0f} s"
    return f"{run['seconds']:.1f} s" + ("" if run["exit_status"] == 0 else f" (exit status {run['exit_status']})")


#: how a docs page names each measurement of :func:`goals` (``{}``: the model's run), and its unit
LABELS = {
    "load_s": ("read the 10,000-series CSV", "s"),
    "reads_train": ("file reads of `train lgssm --data`", ""),
    "reads_board": ("file reads of a 3-model board", ""),
    "lgssm_epoch_s": ("LGSSM, seconds per epoch", "s"),
}


def goals(results: dict) -> dict:
    """Each goal's bound, measured value, whether it is met (a run that failed or timed out misses it), its label and
    unit (:data:`LABELS`; a model's: its name and the epochs it ran)."""
    measured = {
        "load_s": results["load"]["median_s"],
        "reads_train": results["reads"]["train"]["reads"],
        "reads_board": results["reads"]["board"]["reads"],
        "lgssm_epoch_s": results["lgssm_epoch"]["seconds_per_epoch"],
    }
    out = {
        name: {
            "bound": GOALS[name],
            "measured": value,
            "met": value is not None and value <= GOALS[name],
            "label": LABELS[name][0],
            "unit": LABELS[name][1],
        }
        for name, value in measured.items()
    }
    for model, run in results["models"].items():
        ok = run["exit_status"] == 0 and not run["timed_out"]
        out[f"model_total_s {model}"] = {
            "bound": GOALS["model_total_s"],
            "measured": run["seconds"],
            "met": ok and run["seconds"] <= GOALS["model_total_s"],
            "label": f"`{model}` ({run['epochs_run']} epochs)",
            "unit": "s",
            **({} if ok else {"failed": "timed out" if run["timed_out"] else f"exit status {run['exit_status']}"}),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed reads of the panel file")
    parser.add_argument("--threads", type=int, default=2, help="threads of every timed process (OMP_NUM_THREADS)")
    parser.add_argument("--cap", type=float, default=300.0, help="seconds after which a model's run is stopped")
    parser.add_argument("--seed", type=int, default=0, help="seed of the files' values")
    parser.add_argument("--quick", action="store_true", help="small files, two models, few epochs")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1 or args.cap <= 0:
        parser.error("--repeats and --threads must be >= 1 and --cap > 0")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    results = {
        "seed": args.seed,
        "threads": args.threads,
        "quick": args.quick,
        "sizes": sizes,
        "machine": machine_info("cpu"),
        "load_average_start": load_average(),
    }
    with tempfile.TemporaryDirectory(prefix="own_data_scale_") as tmp:
        folder = Path(tmp)
        series = weekly_file(folder, sizes["steps"], args.seed)
        overrides = series_overrides(sizes["window"])
        results["series"] = {"steps": sizes["steps"], "window": sizes["window"], "overrides": overrides}
        results["load"] = load_section(folder, sizes["panel"], args.repeats, args.seed)
        print(f"load: {results['load']['median_s']:.2f} s", flush=True)
        small = weekly_file(folder, sizes["reads_steps"], args.seed)
        results["reads"] = reads_section(folder, small, series_overrides(50), sizes["board"], args.threads, args.cap)
        print(
            f"reads: train {results['reads']['train']['reads']}, board {results['reads']['board']['reads']}", flush=True
        )
        results["lgssm_epoch"] = lgssm_epoch_section(folder, series, overrides, sizes["epochs"], args.threads)
        print(f"lgssm: {results['lgssm_epoch']['seconds_per_epoch']} s per epoch", flush=True)
        results["models"] = models_section(
            folder, series, [*overrides, *sizes["model_overrides"]], sizes["models"], args.threads, args.cap
        )
    results["load_average_end"] = load_average()
    results["wall_s"] = time.perf_counter() - started
    results["goals"] = goals(results)
    for name, goal in results["goals"].items():
        shown = "failed" if goal["measured"] is None else f"{goal['measured']:.3f}"
        print(f"  {name:<34}{shown:>10}   goal <= {goal['bound']}: {'met' if goal['met'] else 'missed'}")
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.own_data_scale"
        write_json(args.out, {**results, **script_provenance(module, argv, (args.seed,))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

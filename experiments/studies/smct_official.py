"""The SMC Transformer paper's official code and our SMC Transformer, side by side on Models I and II.

``python -m ppl_models.experiments.studies.smct_official --official-git-dir GIT_DIR --out FILE --model {1,2}
[--epochs E --seeds N --particles M --work-dir DIR --python PY --sides official,ours]``

* Data: our ``ar-model-1`` / ``ar-model-2`` sequences (fold 0, data seed 0: 800 / 100 / 100 sequences of 25
  values). The official generator (``src/preprocessing/create_synthetic_dataset.py``) draws the same law (``X_0 ~
  N(0, 1)``, 24 steps; Model I ``alpha = 0.8``, ``sigma^2 = 0.5``; Model II coefficient ``alpha = 0.9`` w.p. 0.7 else
  ``0.6 alpha``, ``sigma^2 = 0.3``), so both codes read the same numbers, written in the official layout
  ``DATA/{train,val,test}/synthetic.npy`` (:func:`write_official_data`).
* Official: commit :data:`OFFICIAL_REV` of github:AMDonati/SMC-T-v2 (the last commit of its time-series line; the
  default branch ``nlp22`` holds the language code) is extracted into ``DIR/official-s<seed>`` (``src`` only), given
  the run-time edits of :data:`EDITS` and run with the README's SMC Transformer command (d_model 8, dff 8, batch 32,
  ``M`` particles, ``-smc True``), ``E`` epochs, 1000 predictive samples. Its log gives the per-epoch train / val
  losses and seconds and the test loss and predictive MSE (:func:`official_figures`).
* Ours: ``ppl-models train smct-ar1`` (``--set data.name="ar-model-2"`` for Model II) with the same epochs and seeds.

Each finished seed run leaves ``result.json`` in its folder and is skipped when the study runs again.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ppl_models.inference.atomic_files import write_json

from ..claims.provenance import git_state
from ..claims.results_files import write_results
from ..tasks.synthetic_ar import ar_model_one_data, ar_model_two_data
from .official_code import (
    apply_edits,
    edits_record,
    environment,
    extract_snapshot,
    mean_sd,
    portable,
    relative,
    run_logged,
    run_timed_lines,
    snapshot_commit,
)

__all__ = ["EDITS", "OFFICIAL_REV", "write_official_data", "official_figures", "official_command", "main"]

OFFICIAL_REV = "18cf59048e764051eb8f18f9c9608c4f5609619d"
DATA = {1: ar_model_one_data, 2: ar_model_two_data}
#: run.py's -alpha / -beta / -p of each model (its predictive MSE uses them)
TRUTH_FLAGS = {1: ["-alpha", "0.8"], 2: ["-alpha", "0.9", "-beta", "0.54", "-p", "0.7"]}
#: the run-time edits to the extracted official copy: (file, old text, new text, why); each old text occurs once
EDITS = [
    (
        "src/scripts/run.py",
        "from src.algos.run_Bayesian_rnn import BayesianRNNAlgo\n",
        "BayesianRNNAlgo = None\n",
        "the Bayesian LSTM baseline imports torch and blitz, not installed in the TensorFlow environment; unused here",
    ),
    (
        "src/scripts/run.py",
        "    args = parser.parse_args()\n    run(args)",
        "    args = parser.parse_args()\n    import os, random, tensorflow\n    _seed = int(os.environ['SMCT_SEED'])\n"
        "    random.seed(_seed); np.random.seed(_seed); tensorflow.random.set_seed(_seed)\n    run(args)",
        "the official script sets no seed; the study seeds Python, NumPy and TensorFlow from SMCT_SEED",
    ),
    (
        "src/algos/run_SMC_T.py",
        "tf.keras.optimizers.Adam(self.lr,",
        "tf.keras.optimizers.legacy.Adam(self.lr,",
        "TensorFlow 2.2's Adam (now keras.optimizers.legacy.Adam) calls the learning-rate schedule with a float step; "
        "the new Adam passes the integer step, which the official CustomSchedule's rsqrt refuses",
    ),
]

_NUMBER = r"(-?[\d.]+(?:e[-+]?\d+)?|nan|inf)"
_PATTERNS = {
    "epoch": re.compile(r"Epoch (\d+)/\d+$"),
    "losses": re.compile(rf"train loss: {_NUMBER} - val loss: {_NUMBER}$"),
    "metrics": re.compile(
        rf"train mse metric from avg particule: {_NUMBER} - val mse metric from avg particule: "
        rf"{_NUMBER}$"
    ),
    "seconds": re.compile(rf"Time taken for 1 epoch: {_NUMBER} secs$"),
    "test_loss": re.compile(rf"test loss at the end of training: {_NUMBER}$"),
    "predictive_mse": re.compile(rf"mse of predictive distribution: {_NUMBER}$"),
}


def write_official_data(x: torch.Tensor, folder: Path, name: str) -> Path:
    """Write ``x`` ``[N, T, F]`` as the official ``folder/name/synthetic.npy`` (float32); returns the file."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a [N, T, F] tensor, got {getattr(x, 'shape', type(x).__name__)}")
    path = folder / name / "synthetic.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, x.float().numpy())
    return path


def official_figures(lines: list[str]) -> dict:
    """Per-epoch ``curve`` and final ``test`` figures from the official log lines.

    Returns ``{"curve": [{epoch, train_loss, val_loss, train_mse_avg_particle, val_mse_avg_particle, seconds}],
    "test": {test_loss, predictive_mse}}``; a figure the log lacks is missing from its record.
    """
    curve, test = [], {}
    for line in lines:
        for key, pattern in _PATTERNS.items():
            match = pattern.search(line.strip())
            if not match:
                continue
            if key == "epoch":
                curve.append({"epoch": int(match[1])})
            elif key in ("test_loss", "predictive_mse"):
                test[key] = float(match[1])
            elif not curve:
                raise ValueError(f"official log: {line.strip()!r} before any 'Epoch e/E' line")
            elif key == "losses":
                curve[-1].update(train_loss=float(match[1]), val_loss=float(match[2]))
            elif key == "metrics":
                curve[-1].update(train_mse_avg_particle=float(match[1]), val_mse_avg_particle=float(match[2]))
            else:
                curve[-1]["seconds"] = float(match[1])
    return {"curve": curve, "test": test}


def official_command(model: int, epochs: int, particles: int, data_dir: str, out_dir: str) -> list[str]:
    return [
        "python",
        "src/scripts/run.py",
        "-dataset",
        "synthetic",
        "-dataset_model",
        str(model),
        "-data_path",
        data_dir,
        "-algo",
        "smc_t",
        "-d_model",
        "8",
        "-dff",
        "8",
        "-bs",
        "32",
        "-ep",
        str(epochs),
        "-particles",
        str(particles),
        "-smc",
        "True",
        "-mc_samples",
        "1000",
        "-save_plot",
        "False",
        "-output_path",
        out_dir,
        *TRUTH_FLAGS[model],
    ]


def run_official(
    git_dir: Path, folder: Path, splits: dict, model: int, seed: int, epochs: int, particles: int, python: Path
) -> dict:
    """Train and test the official code for one seed in ``folder`` (made afresh); returns its result record."""
    shutil.rmtree(folder, ignore_errors=True)
    extract_snapshot(git_dir, folder, OFFICIAL_REV, ("src",))
    apply_edits(folder, EDITS)
    for name, x in splits.items():
        write_official_data(x, folder / "data", name)
    command = official_command(model, epochs, particles, "data", "out")
    env = environment(
        SMCT_SEED=str(seed),
        PYTHONPATH=f"src:{folder}",
        TF_USE_LEGACY_KERAS="1",
        MPLBACKEND="Agg",
        TF_CPP_MIN_LOG_LEVEL="2",
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
    )
    wall, lines = run_timed_lines([str(python), *command[1:]], folder, folder / "train.log", env)
    figures = official_figures([text for _, text in lines])
    result = {
        "command": " ".join(command),
        "seed": seed,
        "train_wall_seconds": wall,
        **figures,
        "best_epoch": _best_epoch(figures["curve"], "val_loss"),
    }
    write_json(folder / "result.json", result)
    return result


def _best_epoch(curve: list[dict], key: str) -> int | None:
    scored = [r for r in curve if r.get(key) is not None]
    return min(scored, key=lambda r: r[key])["epoch"] if scored else None


def our_command(model: int, epochs: int, seed: int, particles: int, run_dir: Path) -> list[str]:
    sets = [
        f"train.epochs={epochs}",
        f"seed={seed}",
        f"objective.num_particles={particles}",
        f"evaluate.num_particles={particles}",
    ] + (['data.name="ar-model-2"'] if model == 2 else [])
    return ["ppl-models", "train", "smct-ar1", "--device", "cpu", "--run-dir", str(run_dir)] + [
        a for s in sets for a in ("--set", s)
    ]


def run_ours(folder: Path, model: int, seed: int, epochs: int, particles: int) -> dict:
    """Train our ``smct-ar1`` for one seed in ``folder/run``; returns its result record."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    run_dir = folder / "run"
    command = our_command(model, epochs, seed, particles, relative(run_dir))
    wall = run_logged(
        [sys.executable, "-m", "ppl_models.experiments.cli", *command[1:]],
        Path.cwd(),
        folder / "train.log",
        environment(),
    )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [{"epoch": r["epoch"], "seconds": r.get("seconds"), "record": r} for r in records]
    test = json.loads((run_dir / "metrics.json").read_text())
    result = {"command": " ".join(command), "seed": seed, "train_wall_seconds": wall, "curve": curve, "test": test}
    write_json(folder / "result.json", result)
    return result


def _summary(runs: list[dict]) -> dict:
    out = {
        "seconds_per_epoch": mean_sd([c["seconds"] for r in runs for c in r["curve"] if c.get("seconds")]),
        "train_wall_seconds": mean_sd([r["train_wall_seconds"] for r in runs]),
    }
    for name in ("predictive_mse", "test_loss", "share_in_80", "share_in_95"):
        values = [r["test"][name] for r in runs if isinstance(r["test"].get(name), (int, float))]
        if values:
            out[name] = mean_sd(values)
    return out


NOTES = {
    "predictive_mse": "both: the paper's Table 2 figure, mean over test sequences, the 24 transitions and the "
    "draws of sum_k w_k (draw - c_k x_t)^2 (Model I: alpha = 0.8; Model II: 0.7 x alpha = 0.9 and 0.3 x beta = "
    "0.54); official: 1000 draws per step from its particle mixture with its noise sigma_obs, over the first 96 "
    "test sequences (its test batches of 32 drop the remainder); ours: evaluate.predictive_samples draws",
    "test_loss": "official only: the MSE between the particle-average one-step prediction and the next value on "
    "the test set (the kind of loss of the paper's Table 1)",
    "val_loss": "official: its SMC loss of the resampled particles per epoch (the validation half of Table 1); "
    "val_mse_avg_particle: the MSE of the particle average",
    "seconds": "official: its 'Time taken for 1 epoch' (training pass, validation pass, checkpoint); ours: the "
    "Trainer's epoch seconds",
    "settings": "official: the README's SMC Transformer (d_model 8, dff 8, 1 layer, 1 head, batch 32, Adam with "
    "the Transformer schedule, warmup 4000 steps, sigma init 0.5); ours: smct-ar1 (d_model 16, warmup 250, peak "
    "lr 1e-3, Fisher-identity gradient); both M particles",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ppl_models.experiments.studies.smct_official", description=__doc__)
    parser.add_argument(
        "--official-git-dir", type=Path, required=True, help="git directory of a snapshot of github:AMDonati/SMC-T-v2"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", type=int, choices=(1, 2), required=True)
    parser.add_argument("--work-dir", type=Path, default=None, help="default runs/smct_official/model<M>")
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--particles", type=int, default=10)
    parser.add_argument(
        "--python",
        type=Path,
        required=True,
        help="the Python of a TensorFlow 2 environment (pip install tensorflow-cpu tf-keras)",
    )
    parser.add_argument("--sides", default="official,ours", help="comma-separated: official, ours")
    args = parser.parse_args(argv)
    for name in ("epochs", "seeds", "particles"):
        if getattr(args, name) < 1:
            parser.exit(2, f"--{name} must be a positive integer, got {getattr(args, name)}\n")
    if not (args.official_git_dir / "HEAD").is_file():
        parser.exit(2, f"--official-git-dir {args.official_git_dir}: not a git directory (no HEAD file)\n")
    sides = [s for s in args.sides.split(",") if s]
    if not sides or set(sides) - {"official", "ours"}:
        parser.exit(2, f"--sides must name official and/or ours, got {args.sides!r}\n")
    work_dir = (args.work_dir or Path("runs/smct_official") / f"model{args.model}").resolve()
    start = time.perf_counter()
    data = DATA[args.model](fold=0, seed=0)
    splits = {"train": data.train[0], "val": data.valid[0], "test": data.test[0]}
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side in sides:
            folder = work_dir / f"{side}-s{seed}"
            done = folder / "result.json"
            record = json.loads(done.read_text()) if done.is_file() else None
            if record is None or len(record["curve"]) != args.epochs:
                print(f"training {side}, seed {seed}", flush=True)
                record = (
                    run_official(
                        args.official_git_dir.resolve(),
                        folder,
                        splits,
                        args.model,
                        seed,
                        args.epochs,
                        args.particles,
                        args.python,
                    )
                    if side == "official"
                    else run_ours(folder, args.model, seed, args.epochs, args.particles)
                )
            results[side].append(record)
    write_results(
        args.out,
        {
            "study": f"SMC Transformer official code (Martin et al.) against ours on Model {'I' * args.model}",
            "commands": {
                "study": "python -m ppl_models.experiments.studies.smct_official "
                + " ".join(portable(sys.argv[1:] if argv is None else argv)),
                "official_train": official_command(args.model, args.epochs, args.particles, "DATA", "OUT"),
                "ours_train_seed0": our_command(args.model, args.epochs, 0, args.particles, Path("RUN_DIR")),
            },
            "seeds": list(range(args.seeds)),
            "data": data.description,
            "commit": git_state()["git_commit"],
            "official_commit": snapshot_commit(args.official_git_dir, OFFICIAL_REV),
            "official_repository": "AMDonati/SMC-T-v2",
            "official_git_dir": "OFFICIAL_GIT_DIR in the commands: the git folder of a snapshot of "
            "github:AMDonati/SMC-T-v2 (holding official_commit)",
            "machine": {
                "platform": platform.platform(),
                "processor": platform.machine(),
                "threads": 1,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
            "wall_seconds": time.perf_counter() - start,
            "runs_wall_seconds": sum(r["train_wall_seconds"] for runs in results.values() for r in runs),
            "budget": {"epochs": args.epochs, "particles": args.particles, "paper_epochs": 50},
            "official_edits": edits_record(EDITS),
            "metrics": NOTES,
            "summary": {side: _summary(runs) for side, runs in results.items()},
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()

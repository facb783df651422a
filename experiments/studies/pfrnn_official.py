"""The PF-RNN paper's official code and our PF-LSTM, side by side on the same maze data.

``python -m ppl_models.experiments.studies.pfrnn_official --official-git-dir GIT_DIR --out FILE [--epochs E --patience P
--seeds N --train-trajectories M --valid-trajectories V --test-trajectories T --work-dir DIR --sides official,ours]``

* Data: our ``localization-paper`` task (10 x 10 maze, data seed 0) made once; the official code reads the same
  trajectories from its own pickle format (:func:`official_dataset`).
* Official: the snapshot in ``GIT_DIR`` (a clone of the authors' repository) is extracted into
  ``DIR/official-s<seed>``, given the small run-time edits of :data:`EDITS` (recorded in the results file) and
  trained with ``main.py`` and its maze-10 settings (``configs/train.conf`` passed as flags) for ``E`` epochs; its
  per-epoch validation figures come from its own logger calls. Its final and best models are then scored on the
  test split by a small driver (:data:`TEST_DRIVER`) that calls the official ``Localizer.step``.
* Ours: ``ppl-models train pfrnn-paper-maze10`` with the same data sizes, epochs and seeds, validating every epoch.
* Early stopping (``--patience P``): each side stops once its validation figure has not improved for ``P`` epochs
  in a row (within the cap ``E``), on the figure it keeps its best model by: the official code its validation
  last-step MSE (``eval/loss_last``, which picks its ``model_best``; the stop is one recorded edit of its loop),
  ours its validation loss (``train.patience``, which also picks ``best.pt``). The test figure is each side's
  best-validation model's; :func:`seed_record` records per seed its best epoch, the epochs run, the seconds and
  the constant predictor's figure.

Each finished seed run leaves ``result.json`` in its folder and is skipped when the study runs again; an
interrupted one goes on from its last finished epoch (both sides save their state after each epoch). ``--sides``
runs one side only (its own ``FILE``), so that two processes on two cores can train the sides at once in one
``DIR``; a later call with both sides reads back every finished run. A (seed, side) run is locked while it runs: a
second process that reaches it stops with a ValueError naming it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import pickle
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ppl_models.inference.atomic_files import folder_lock, write_json
from ppl_models.inference.training import load_checkpoint

from ..claims.provenance import git_state
from ..claims.results_files import write_results
from ..supervised import build_supervised
from ..tasks.localization_paper import evaluate_localization_paper, layout_grid, localization_paper_data
from .official_code import (
    apply_edits,
    environment,
    extract_snapshot,
    mean_sd,
    portable,
    relative,
    run_logged,
    snapshot_commit,
)

__all__ = [
    "EDITS",
    "official_dataset",
    "from_official",
    "official_curve",
    "constant_last_step_mse",
    "convergence",
    "seed_record",
    "main",
]

MAZE, STEPS, DATA_SEED = 10, 80, 0
#: the official maze-10 settings: configs/train.conf plus the argument defaults it relies on
OFFICIAL_FLAGS = {
    "batch_size": 128,
    "lr": 5e-4,
    "clip": 3,
    "bp_length": 10,
    "h": 64,
    "emb_map": 64,
    "emb_act": 32,
    "emb_obs": 32,
    "dropout": 0.5,
    "optim": "RMSProp",
    "num_particles": 30,
    "resamp_alpha": 0.5,
    "sl": STEPS,
    "model": "PFLSTM",
    "map_size": MAZE,
    "bpdecay": 0.1,
    "h_weight": 0.1,
    "l2_weight": 1.0,
    "l1_weight": 0.0,
    "elbo_weight": 1.0,
    "obs_num": 5,
}
#: the run-time edits to the extracted official copy: (file, old text, new text, why); each old text occurs once
EDITS = [
    (
        "arguments.py",
        "import configargparse",
        "import argparse as configargparse",
        "configargparse is not installed; every value of configs/train.conf is passed as a flag instead",
    ),
    (
        "arguments.py",
        "configargparse.ArgumentParser(default_config_files=[])",
        "configargparse.ArgumentParser()",
        "argparse has no default_config_files",
    ),
    (
        "arguments.py",
        "parser.add('-c', '--config', required=True, default='./configs/train.conf',\n"
        "               is_config_file=True, help='load the config file')",
        "parser.add_argument('-c', '--config', default='./configs/train.conf', help='load the config file')",
        "argparse has no add(..., is_config_file=True); the flag is kept and ignored",
    ),
    (
        "main.py",
        "from torch.utils.tensorboard import SummaryWriter",
        "import json, time, random\n"
        "class SummaryWriter:  # stand-in: tensorboard is not installed; scalars go to scalars.jsonl\n"
        "    def __init__(self, path):\n"
        "        os.makedirs(path, exist_ok=True)\n"
        "        self.path = os.path.join(path, 'scalars.jsonl')\n"
        "        self.add_scalar('start', 0.0, 0)\n"
        "    def add_scalar(self, tag, value, step):\n"
        "        with open(self.path, 'a') as out:\n"
        "            out.write(json.dumps({'tag': tag, 'value': float(value), 'step': step, 'time': time.time()})"
        " + '\\n')",
        "tensorboard is not installed; the same scalars are written as JSON lines with a wall-clock time",
    ),
    (
        "main.py",
        "num_workers=8, pin_memory=True, shuffle=True",
        "num_workers=0, pin_memory=False, shuffle=True",
        "one process on a shared 2-core machine (training batches unchanged)",
    ),
    (
        "main.py",
        "num_workers=8, pin_memory=True, shuffle=False",
        "num_workers=0, pin_memory=False, shuffle=False",
        "one process on a shared 2-core machine (validation batches unchanged)",
    ),
    (
        "main.py",
        "    args = parse_args()\n",
        "    args = parse_args()\n"
        "    _seed = int(os.environ['PFRNN_SEED']); random.seed(_seed); np.random.seed(_seed); "
        "torch.manual_seed(_seed)\n",
        "the official script sets no seed; the study seeds Python, NumPy and torch from PFRNN_SEED",
    ),
    (
        "main.py",
        "    best_eval = 1000\n",
        "    best_eval = 1000\n    _stale = 0\n",
        "early stopping: counts the epochs since the validation last-step MSE last improved",
    ),
    (
        "main.py",
        "        if log_eval_last < best_eval:\n",
        "        _stale = 0 if log_eval_last < best_eval else _stale + 1\n"
        "        if _stale >= int(os.environ['PFRNN_PATIENCE']):\n"
        "            break\n"
        "        if log_eval_last < best_eval:\n",
        "early stopping: leave the epoch loop once the validation last-step MSE (the figure model_best is kept by) "
        "has not improved for PFRNN_PATIENCE epochs; model_final is then the last epoch's weights",
    ),
    (
        "main.py",
        "    cnt = str(len(existings))\n",
        "    cnt = '0'\n",
        "resumption: the copy is made afresh for one run, which the script numbers 0; a resumed process writes to that "
        "run instead of starting run 1",
    ),
    (
        "main.py",
        "    os.mkdir(os.path.join('logs', run_id, 'models'))\n",
        "    os.makedirs(os.path.join('logs', run_id, 'models'), exist_ok=True)\n",
        "resumption: a resumed process finds the models folder made",
    ),
    (
        "main.py",
        "    _stale = 0\n    from tqdm import tqdm\n\n    for epoch in tqdm(range(args.epochs)):\n",
        "    _stale = 0\n    from tqdm import tqdm\n"
        "    _start, _resume = 0, os.path.join('logs', run_id, 'models', 'resume.pt')\n"
        "    if os.path.isfile(_resume):\n"
        "        _state = torch.load(_resume, weights_only=False)\n"
        "        model.load_state_dict(_state['model']); optimizer.load_state_dict(_state['optimizer'])\n"
        "        cnt, best_eval, _stale = _state['cnt'], _state['best_eval'], _state['stale']\n"
        "        random.setstate(_state['python_rng']); np.random.set_state(_state['numpy_rng'])\n"
        "        torch.set_rng_state(_state['torch_rng'])\n"
        "        _start = _state['epoch'] + 1\n"
        "        with open(logger.path) as handle:\n"
        "            _kept = [json.loads(line) for line in handle]\n"
        "        _kept = _kept[:1] + [r for r in _kept[1:] if r['tag'] != 'start' and r['step'] <= cnt]\n"
        "        with open(logger.path + '.tmp', 'w') as out:\n"
        "            out.writelines(json.dumps(r) + '\\n' for r in _kept)\n"
        "        os.replace(logger.path + '.tmp', logger.path)\n"
        "        logger.add_scalar('resume', 0.0, cnt)\n"
        "\n    for epoch in tqdm(range(_start, args.epochs)):\n",
        "resumption: a process finding resume.pt (written after each epoch) restores the weights, optimizer, counters "
        "and every RNG, drops the logged scalars of the unfinished epoch and goes on from the next epoch",
    ),
    (
        "main.py",
        "                'logs', run_id, 'models', 'optim_best'))\n",
        "                'logs', run_id, 'models', 'optim_best'))\n"
        "        torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'epoch': epoch, "
        "'cnt': cnt, 'best_eval': best_eval, 'stale': _stale, 'python_rng': random.getstate(), "
        "'numpy_rng': np.random.get_state(), 'torch_rng': torch.get_rng_state()}, _resume + '.tmp')\n"
        "        os.replace(_resume + '.tmp', _resume)\n",
        "resumption: the state after each finished epoch, written atomically (the epoch of an early stop is redone on "
        "resumption, its figures the same)",
    ),
]

#: scores a trained official model on the test pickle: last-step (x, y) MSE in cells from the official Localizer.step
TEST_DRIVER = """\
import json, os, pickle, torch
from torch.utils.data import DataLoader
from arguments import parse_args
from dataset import LocalizationDataset
from model import Localizer

args = parse_args()
results = {}
for name in ('model_final', 'model_best'):
    model = Localizer(args)
    model.load_state_dict(torch.load(os.path.join(os.environ['SIDE_MODELS'], name), map_location='cpu'))
    model.eval()
    torch.manual_seed(int(os.environ['PFRNN_SEED']))
    with open(os.environ['SIDE_TEST'], 'rb') as handle:
        loader = DataLoader(LocalizationDataset(pickle.load(handle)), batch_size=args.batch_size, shuffle=False)
    total, count = 0.0, 0
    with torch.no_grad():
        for env_map, obs, pos, action in loader:
            _, loss_last, _ = model.step(env_map, obs, action, pos, args)
            total, count = total + loss_last.item() * len(obs), count + len(obs)
    results[name] = {'last_step_mse': total / count, 'test_sequences': count}
with open(os.environ['SIDE_OUT'], 'w') as out:
    json.dump(results, out)
"""


def official_dataset(x: torch.Tensor, y: torch.Tensor, maze_size: int) -> dict:
    """Our trajectories in the official pickle format: ``{"trajs": [[T, 11] arrays], "map": [N, N] layout}``.

    ``x`` ``[n, T, 8]`` (action dx, dy, dheading; 5 beacon distances), ``y`` ``[n, T, 3]`` (x / N, y / N,
    heading / 2 pi). Each row is ``(x, y, heading in degrees, action 3, distances 5)`` in cells, as the official
    ``dataset.py`` reads it; the map is the layout, top row first (the official ``maze.csv``).
    """
    if x.ndim != 3 or x.shape[-1] != 8 or y.shape != (*x.shape[:2], 3):
        raise ValueError(f"x must be [n, T, 8] and y [n, T, 3], got {tuple(x.shape)} and {tuple(y.shape)}")
    pose = y.double().numpy() * np.array([maze_size, maze_size, 360.0])
    rows = np.concatenate([pose, x.double().numpy()], -1)
    return {"trajs": list(rows), "map": layout_grid(maze_size).astype(float)}


def from_official(data: dict, maze_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of :func:`official_dataset`: ``(x [n, T, 8], y [n, T, 3])`` as float32 tensors."""
    rows = np.stack(data["trajs"])
    y = rows[..., :3] / np.array([maze_size, maze_size, 360.0])
    return torch.from_numpy(rows[..., 3:]).float(), torch.from_numpy(y).float()


def official_curve(records: list[dict]) -> list[dict]:
    """Per-epoch ``{epoch, valid_last_step_mse, valid_loss, seconds}`` from the official logger's scalar records.

    ``records``: ``{"tag", "value", "step", "time"}`` in write order, starting with the writer's ``start``; each epoch
    logs ``eval/loss_last`` then ``eval/loss``; a resumed process logs ``resume`` first. ``seconds`` is the wall time
    since the previous epoch's record, the start or the resumption.
    """
    last, curve, mse = records[0]["time"], [], None
    for record in records:
        if record["tag"] == "resume":
            last = record["time"]
        elif record["tag"] == "eval/loss_last":
            mse = record["value"]
        elif record["tag"] == "eval/loss":
            if mse is None:
                raise ValueError(f"official scalars: eval/loss at step {record['step']} without its eval/loss_last")
            curve.append(
                {
                    "epoch": len(curve) + 1,
                    "valid_last_step_mse": mse,
                    "valid_loss": record["value"],
                    "seconds": record["time"] - last,
                }
            )
            last, mse = record["time"], None
    return curve


def resumable_folder(folder: Path, budget: dict, prepare=None) -> bool:
    """Whether ``folder`` holds a run of the same ``budget`` (its ``budget.json``) to go on with.

    Otherwise the folder is emptied, ``prepare(folder)`` fills it and only then is the budget recorded, so that a
    folder interrupted while being prepared is prepared again.
    """
    marker = folder / "budget.json"
    if marker.is_file() and json.loads(marker.read_text()) == budget:
        return True
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if prepare is not None:
        prepare(folder)
    write_json(marker, budget)
    return False


def constant_last_step_mse(train_y: torch.Tensor, y: torch.Tensor, maze_size: int) -> float:
    """Last-step (x, y) MSE in cells of always predicting the training split's mean last-step position.

    ``train_y``, ``y``: normalised poses ``[n, T, 3]``.
    """
    mean = train_y[:, -1, :2].double().mean(0)
    return ((y[:, -1, :2].double() - mean) * maze_size).square().mean().item()


def convergence(values: list[float], cap: int) -> dict:
    """``{best_epoch, epochs_run, stopped_early}`` of a validation curve ``values`` (one per epoch, lower is better;
    the best is the first lowest, as both codes keep it) trained under a cap of ``cap`` epochs."""
    if not values or len(values) > cap:
        raise ValueError(f"values must hold 1 to cap={cap} validation figures, got {len(values)}")
    best = min(range(len(values)), key=lambda i: (values[i], i))
    return {"best_epoch": best + 1, "epochs_run": len(values), "stopped_early": len(values) < cap}


#: the validation figure each side stops on and keeps its best model by (a key of its curve's epochs)
STOPPED_ON = {"official": "valid_last_step_mse", "ours": "valid_loss"}


def seed_record(result: dict, code: str, cap: int, constant: float) -> dict:
    """``result`` of one side's seed run with its :func:`convergence` on its :data:`STOPPED_ON` curve, its training
    ``seconds`` and the constant predictor's test figure ``constant`` beside it."""
    curve = [epoch[STOPPED_ON[code]] for epoch in result["curve"]]
    return {
        **result,
        **convergence(curve, cap),
        "seconds": result["train_wall_seconds"],
        "constant_predictor_test": constant,
    }


def official_command(epochs: int, num_train: int) -> list[str]:
    flags = {**OFFICIAL_FLAGS, "epochs": epochs, "num_trajs": num_train}
    return ["python", "main.py", "-c", "./configs/train.conf"] + [f"--{k}={v}" for k, v in flags.items()]


def run_official(git_dir: Path, folder: Path, splits: dict, seed: int, budget: dict) -> dict:
    """Train and test the official code for one seed in ``folder``; returns its result record.

    An unfinished run of the same ``budget`` goes on from its last finished epoch (the ``resume.pt`` of :data:`EDITS`);
    ``train_wall_seconds`` then adds the logged seconds of the epochs run before to this process's wall time.
    """
    num_train = len(splits["train"][0])

    def prepare(folder: Path) -> None:
        extract_snapshot(git_dir, folder)
        apply_edits(folder, EDITS)
        (folder / "data").mkdir()
        for split, name in (
            ("train", f"train_data_trajs{num_train}_sl{STEPS}.pkl"),
            ("valid", f"eval_data_trajs{num_train}_sl{STEPS}.pkl"),
            ("test", "test_data.pkl"),
        ):
            with open(folder / "data" / name, "wb") as out:
                pickle.dump(official_dataset(splits[split][0], splits[split][2], MAZE), out, pickle.HIGHEST_PROTOCOL)

    resumable_folder(folder, budget, prepare)
    epochs, patience = budget["epochs"], budget["patience"]
    command = official_command(epochs, num_train)
    env = {**environment(), "PFRNN_SEED": str(seed), "PFRNN_PATIENCE": str(patience or epochs)}
    wall = run_logged([sys.executable, *command[1:]], folder, folder / "train.log", env, append=True)
    scalars = (folder / "logs" / "0" / "tflogs" / "scalars.jsonl").read_text()
    records = [json.loads(line) for line in scalars.splitlines()]
    resumed = [i for i, r in enumerate(records) if r["tag"] == "resume"]
    earlier = official_curve(records[: resumed[-1]]) if resumed else []
    (folder / "side_test.py").write_text(TEST_DRIVER)
    test_env = {
        **env,
        "SIDE_MODELS": str(folder / "logs" / "0" / "models"),
        "SIDE_TEST": str(folder / "data" / "test_data.pkl"),
        "SIDE_OUT": str(folder / "test.json"),
    }
    run_logged([sys.executable, "side_test.py", *command[2:]], folder, folder / "test.log", test_env)
    test = json.loads((folder / "test.json").read_text())
    result = {
        "command": f"PFRNN_SEED={seed} PFRNN_PATIENCE={env['PFRNN_PATIENCE']} " + " ".join(command),
        "seed": seed,
        "train_wall_seconds": wall + sum(epoch["seconds"] for epoch in earlier),
        "curve": official_curve(records),
        "test_final": test["model_final"],
        "test_best_valid": test["model_best"],
    }
    write_json(folder / "result.json", result)
    return result


def our_command(epochs: int, sizes: dict, seed: int, run_dir: Path, patience: int | None = None) -> list[str]:
    sets = {
        "seed": seed,
        "train.epochs": epochs,
        "train.valid_every": 1,
        "data.seed": DATA_SEED,
        **({"train.patience": patience} if patience else {}),
        **{f"data.{k}": v for k, v in sizes.items()},
    }
    return ["ppl-models", "train", "pfrnn-paper-maze10", "--device", "cpu", "--run-dir", str(run_dir)] + [
        a for k, v in sets.items() for a in ("--set", f"{k}={v}")
    ]


def run_ours(folder: Path, splits: dict, sizes: dict, seed: int, budget: dict) -> dict:
    """Train and test our PF-LSTM for one seed in ``folder/run``; returns its result record.

    An unfinished run of the same ``budget`` goes on from its ``last.pt`` (``--resume``); ``train_wall_seconds`` then
    adds the logged seconds of the epochs run before to this process's wall time.
    """
    run_dir = folder / "run"
    command = our_command(budget["epochs"], sizes, seed, relative(run_dir), budget["patience"])
    last = run_dir / "checkpoints" / "last.pt"
    resume, earlier = [], []
    if resumable_folder(folder, budget) and last.is_file():
        resume, earlier = ["--resume"], load_checkpoint(last)["history"]
    wall = run_logged(
        [sys.executable, "-m", "ppl_models.experiments.cli", *command[1:], *resume],
        Path.cwd(),
        folder / "train.log",
        environment(),
        append=True,
    )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [
        {
            "epoch": r["epoch"],
            "valid_last_step_mse": r["monitor"]["valid_last_step_mse"],
            "valid_loss": -r["valid_bound_per_step"],
            "seconds": r["seconds"],
        }
        for r in records
    ]
    best = json.loads((run_dir / "metrics.json").read_text())
    result = {
        "command": " ".join(command),
        "seed": seed,
        "train_wall_seconds": wall + sum(r["seconds"] for r in earlier),
        "curve": curve,
        "test_final": _score_last(run_dir, splits["test"], seed),
        "test_best_valid": {"last_step_mse": best["last_step_mse"], "test_sequences": best["test_sequences"]},
    }
    write_json(folder / "result.json", result)
    return result


def _score_last(run_dir: Path, test, seed: int) -> dict:
    """Our test metric of the run's final weights (``checkpoints/last.pt``)."""
    config = json.loads((run_dir / "config.json").read_text())
    config["data"] = {**config["data"], "num_train": 1, "num_valid": 1, "num_test": 1}  # the model only
    maze, _, predictor, objective = build_supervised(config)
    load_checkpoint(run_dir / "checkpoints" / "last.pt", objective)
    metrics = evaluate_localization_paper(predictor, maze, test, device=torch.device("cpu"), seed=seed)
    return {"last_step_mse": metrics["last_step_mse"], "test_sequences": metrics["test_sequences"]}


def _digest(splits: dict) -> str:
    hasher = hashlib.sha256()
    for name in ("train", "valid", "test"):
        x, _, y = splits[name]
        hasher.update(x.numpy().tobytes())
        hasher.update(y.numpy().tobytes())
    return hasher.hexdigest()


def _seed_run(args, folder: Path, code: str, seed: int, splits: dict, sizes: dict, budget: dict) -> dict:
    """The result record of side ``code``'s run of ``seed`` in ``folder``: read back when finished under ``budget``,
    else trained (or gone on with) and recorded."""
    done = folder / "result.json"
    record = json.loads(done.read_text()) if done.is_file() else None
    if record is not None and record.get("budget") == budget:
        return record
    print(f"training {code}, seed {seed}", flush=True)
    if code == "official":
        record = run_official(args.official_git_dir.resolve(), folder, splits, seed, budget)
    else:
        record = run_ours(folder, splits, sizes, seed, budget)
    record["budget"] = budget
    write_json(done, record)
    return record


def _summary(results: list[dict]) -> dict:
    epochs = min(len(r["curve"]) for r in results)
    return {
        "valid_last_step_mse_by_epoch": [
            mean_sd([r["curve"][e]["valid_last_step_mse"] for r in results]) for e in range(epochs)
        ],
        "test_final": mean_sd([r["test_final"]["last_step_mse"] for r in results]),
        "test_best_valid": mean_sd([r["test_best_valid"]["last_step_mse"] for r in results]),
        "seconds_per_epoch": mean_sd([c["seconds"] for r in results for c in r["curve"]]),
        "train_wall_seconds": mean_sd([r["train_wall_seconds"] for r in results]),
        "best_epoch": mean_sd([r["best_epoch"] for r in results]),
        "epochs_run": mean_sd([r["epochs_run"] for r in results]),
    }


NOTES = {
    "valid_last_step_mse": "both codes: mean over the validation trajectories of the last-step squared error of "
    "(x, y) in cells, averaged over the two coordinates (the paper's metric); official: its eval/loss_last, a mean "
    "of per-batch means (equal to the overall mean when the split is a multiple of the batch, 128), model in eval "
    "mode; ours: the monitor valid_last_step_mse, after re-estimating the per-step batch-norm statistics "
    "(train.norm_refresh_batches = 8)",
    "valid_loss": "each code's own training objective on the validation split; not comparable: the official loss "
    "sums the time-weighted squared error over the batch and the steps (weights exp(0.1 t) normalised to sum 1 "
    "over the sequence) for (x/N, y/N) plus 0.1 x heading/2pi, and adds the mean over the batch, steps and "
    "coordinates of -log mean_k exp(-weighted squared error) of the particles (x, y plus 0.1 x heading); ours is "
    "the negated valid_bound_per_step of DiscriminativeLoss (L_pred + L_ELBO with the same step weights and "
    "output weights (1, 1, 0.1)), per step",
    "test_final": "the same last-step (x, y) MSE in cells on the test split, of the weights after the last epoch",
    "test_best_valid": "the same on the test split, of each code's own best checkpoint: official model_best (lowest "
    "validation eval/loss_last), ours best.pt (highest validation bound per step, i.e. lowest valid_loss)",
    "seconds": "per seed: train_wall_seconds; in a curve: official: wall time of one epoch (training pass and one "
    "validation pass); ours: the Trainer's "
    "epoch seconds (training pass, norm refresh and the validation loss pass; the monitor's second validation "
    "pass for the MSE is not counted)",
    "best_epoch": "per seed: the epoch (1-based) of the lowest validation figure the side stops on and keeps its "
    "best model by (budget.stopped_on: official valid_last_step_mse, ours valid_loss); its test figure is "
    "test_best_valid, the claim's figure",
    "epochs_run": "per seed: epochs trained before early stopping (patience budget.patience) or the cap "
    "(budget.epochs); stopped_early is whether it stopped before the cap",
    "constant_predictor_test": "per seed: the constant predictor's test figure (constant_predictor.test), beside "
    "the run's",
    "constant_predictor": "the same last-step (x, y) MSE of predicting the training split's mean last-step "
    "position for every trajectory: the level a model that has not localized sits at",
    "wall_seconds": "this invocation of the study; finished seed runs are read back from the work folder, not "
    "retrained (runs_wall_seconds sums the runs' training commands, whichever invocation ran them)",
    "train_wall_seconds": "wall time of a run's training command (ours: with its own test evaluation and plots)",
    "inputs": "both codes read the same numbers: our localization-paper trajectories (action leading to pose t in "
    "the world frame with the heading change in radians, and the 5 sorted noisy beacon distances at t); the "
    "official generator would instead give the move made after step t with the heading change in degrees",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.pfrnn_official", description=__doc__
    )
    parser.add_argument(
        "--official-git-dir",
        type=Path,
        required=True,
        help="git directory of a clone of the official PF-RNN repository (Yusufma03/pfrnns)",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=Path("runs/pfrnn_official"))
    parser.add_argument("--epochs", type=int, default=5, help="the cap on the epochs of each side")
    parser.add_argument(
        "--patience",
        type=int,
        default=None,
        help="stop each side once its validation figure has not improved for this many epochs",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--train-trajectories", type=int, default=2000)
    parser.add_argument("--valid-trajectories", type=int, default=512)
    parser.add_argument("--test-trajectories", type=int, default=1000)
    parser.add_argument("--sides", default="official,ours", help="comma-separated: official, ours")
    args = parser.parse_args(argv)
    sides = [side for side in args.sides.split(",") if side]
    if not sides or set(sides) - {"official", "ours"}:
        parser.exit(2, f"--sides must name official and/or ours, got {args.sides!r}\n")
    for name in ("epochs", "patience", "seeds", "train_trajectories", "valid_trajectories", "test_trajectories"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.exit(2, f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}\n")
    if not (args.official_git_dir / "HEAD").is_file():
        parser.exit(2, f"--official-git-dir {args.official_git_dir}: not a git directory (no HEAD file)\n")
    start = time.perf_counter()
    sizes = {
        "num_train": args.train_trajectories,
        "num_valid": args.valid_trajectories,
        "num_test": args.test_trajectories,
    }
    _, splits = localization_paper_data(MAZE, STEPS, seed=DATA_SEED, **sizes)
    constant = {name: constant_last_step_mse(splits["train"][2], splits[name][2], MAZE) for name in ("valid", "test")}
    budget = {"epochs": args.epochs, "patience": args.patience, **sizes}
    results: dict[str, list[dict]] = {side: [] for side in ("official", "ours") if side in sides}
    for seed in range(args.seeds):
        for code in results:
            folder = args.work_dir.resolve() / f"{code}-s{seed}"
            lock = args.work_dir.resolve() / f".lock-{code}-s{seed}"  # beside the folder, which a fresh run empties
            lock.mkdir(parents=True, exist_ok=True)
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(folder_lock(lock, f"the {code} run of seed {seed}:"))
                except ValueError as error:  # another process runs it
                    parser.exit(2, f"{error}\n")
                record = _seed_run(args, folder, code, seed, splits, sizes, budget)
            results[code].append(seed_record(record, code, args.epochs, constant["test"]))
    write_results(
        args.out,
        {
            "study": "PF-RNN official code (Ma et al. 2020) against ours on the same localization-paper maze-10 data",
            "commands": {
                "study": "python -m ppl_models.experiments.studies.pfrnn_official "
                + " ".join(portable(sys.argv[1:] if argv is None else argv)),
                "official_train": [
                    "PFRNN_SEED=SEED",
                    f"PFRNN_PATIENCE={args.patience or args.epochs}",
                    *official_command(args.epochs, args.train_trajectories),
                ],
                "ours_train_seed0": our_command(args.epochs, sizes, 0, Path("RUN_DIR"), args.patience),
            },
            "seeds": list(range(args.seeds)),
            "data_seed": DATA_SEED,
            "commit": git_state()["git_commit"],
            "official_commit": snapshot_commit(args.official_git_dir),
            "official_repository": "Yusufma03/pfrnns",
            "official_git_dir": "OFFICIAL_GIT_DIR in the commands: the git folder of a snapshot of "
            "github:Yusufma03/pfrnns at official_commit",
            "machine": {
                "platform": platform.platform(),
                "processor": platform.machine(),
                "threads": 1,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
            "wall_seconds": time.perf_counter() - start,
            "runs_wall_seconds": sum(r["train_wall_seconds"] for runs in results.values() for r in runs),
            "budget": {
                **budget,
                "stopped_on": STOPPED_ON,
                "maze_size": MAZE,
                "steps": STEPS,
                "paper_epochs": 800,
                "paper_train_trajectories": 10_000,
            },
            "data_sha256": _digest(splits),
            "official_settings": OFFICIAL_FLAGS,
            "official_edits": [{"file": f, "old": old, "new": new, "why": why} for f, old, new, why in EDITS],
            "metrics": NOTES,
            "summary": {code: _summary(runs) for code, runs in results.items()},
            "constant_predictor": constant,
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()

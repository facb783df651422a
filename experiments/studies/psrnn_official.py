"""The PSRNN paper's official code and our PSRNN, side by side on the PTB characters.

``python -m ppl_models.experiments.studies.psrnn_official --official-git-dir GIT_DIR --out FILE [--epochs E --seeds N
--python PY --work-dir DIR --skip-ours --set KEY=VALUE ...]``

* Data: the authors' own character split of PTB, ``../shared/data/ptb_chars/ptb.{train,valid,test}.txt`` (the same
  bytes as their repository's ``ptb_data/``), read by both codes; the training file holds 44 distinct characters
  (the official ``Config`` sizes its output for ``vocab_size`` 49).
* Official: the snapshot in ``GIT_DIR`` (github:cmdowney/psrnn) is extracted into ``DIR/official-s<seed>``, given
  the run-time edits of :data:`EDITS` (TensorFlow 1 / ``tf.contrib`` to TensorFlow 2's ``compat.v1``, recorded in the
  results file) and run as ``ptb_word_lm.py --data_path=...`` with its own ``Config`` (2000 random Fourier features,
  20 states, window 5, BPTT 20, batch 20, SGD lr 1, gradient norm 0.25; ``E`` epochs instead of its 10) under the
  Python of ``--python`` (a TensorFlow 2 environment). Its printed lines give the
  per-epoch validation perplexity, BPC and accuracy (:func:`official_curve`) and the final test figures; each line
  is timed as it arrives. With ``--patience P`` both sides stop after ``P`` epochs in a row without a lower
  validation BPC and test their best-validation weights (the official code through :data:`EARLY_STOP_EDITS`); with
  ``--lr-gamma G --lr-delay D`` both learning rates are multiplied by ``G`` each epoch after the first ``D``
  (:data:`DECAY_EDITS`; ours by its exponential schedule).
* Ours: ``ppl-models train EXPERIMENT`` (``--experiment``, default ``psrnn-ptb``; ``psrnn-ptb-authors`` follows
  their protocol) with the same epochs and seeds.

Each finished seed run leaves ``result.json`` in its folder and is skipped when the study runs again with the same
budget (and, for ours, the same experiment and settings); otherwise it is trained again in place.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import shutil
import sys
import time
from pathlib import Path

from ppl_models.inference.atomic_files import write_json

from ..claims.provenance import git_state
from ..claims.results_files import write_results
from ..compare import best_epoch
from ..data import resolve_data_dir
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

__all__ = ["EDITS", "OFFICIAL_CONFIG", "official_curve", "official_test", "bpc", "main"]

#: the official Config of ptb_word_lm.py (read from the snapshot; recorded in the results file)
OFFICIAL_CONFIG = {
    "nRFF_Obs": 2000,
    "nRFF_P": 2000,
    "nRFF_F": 2000,
    "dim_Obs": 20,
    "dim_P": 20,
    "dim_F": 20,
    "reg_rate": 1e-3,
    "obs_window": 5,
    "kernel_width_Obs": 2,
    "kernel_width_P": 0.2,
    "kernel_width_F": 0.2,
    "init_scale": 0.0,
    "learning_rate": 1,
    "max_grad_norm": 0.25,
    "num_layers": 1,
    "num_steps": 20,
    "max_epoch": 10,
    "keep_prob": 1.0,
    "lr_decay": 1.0,
    "batch_size": 20,
    "vocab_size": 49,
    "seed": 0,
    "test_batch_size": 1,
    "test_num_steps": 1,
}
_TF2 = "TensorFlow 2.21 has no tf.contrib, tf.flags or tf.logging at the top level; compat.v1 has them"
#: the run-time edits to the extracted official copy: (file, old text, new text, why); each old text occurs once
EDITS = [
    (
        "ptb_word_lm.py",
        "import tensorflow as tf\n",
        "import os\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"
        "np.random.seed(int(os.environ['PSRNN_SEED']))\n",
        _TF2 + "; the study seeds NumPy (scipy's svds start vector in the two-stage regression) from PSRNN_SEED",
    ),
    (
        "ptb_word_lm.py",
        "inspect.getargspec(\n          tf.contrib.rnn.BasicLSTMCell.__init__)",
        "inspect.getfullargspec(\n          tf.nn.rnn_cell.BasicLSTMCell.__init__)",
        "inspect.getargspec is gone in Python 3.11; tf.contrib.rnn cells live in tf.nn.rnn_cell",
    ),
    ("ptb_word_lm.py", "tf.contrib.rnn.MultiRNNCell(", "tf.nn.rnn_cell.MultiRNNCell(", _TF2),
    ("ptb_word_lm.py", "tf.contrib.rnn.static_rnn(", "tf.nn.static_rnn(", _TF2),
    (
        "ptb_word_lm.py",
        "    loss = tf.contrib.seq2seq.sequence_loss(\n        logits,\n        input_.targets,\n"
        "        tf.ones([batch_size, num_steps], dtype=data_type()),\n        average_across_timesteps=False,\n"
        "        average_across_batch=True\n    )",
        "    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(\n"
        "        labels=input_.targets, logits=logits), axis=0)",
        "tf.contrib.seq2seq is gone; with unit weights, average_across_batch=True and average_across_timesteps=False "
        "sequence_loss is the per-step cross-entropy averaged over the batch, which this computes",
    ),
    (
        "ptb_word_lm.py",
        "tf.contrib.framework.get_or_create_global_step()",
        "tf.train.get_or_create_global_step()",
        _TF2,
    ),
    (
        "ptb_word_lm.py",
        "  seed = 0\n",
        "  seed = int(os.environ['PSRNN_SEED'])\n",
        "the random Fourier features of the two-stage regression are drawn with Config.seed: the study's seed",
    ),
    (
        "ptb_word_lm.py",
        "  max_epoch = 10\n",
        "  max_epoch = int(os.environ['PSRNN_EPOCHS'])\n",
        "the number of epochs (10 in the official Config) is the study's --epochs",
    ),
    ("reader.py", "import tensorflow as tf\n", "import tensorflow.compat.v1 as tf\n", _TF2),
    ("psrnn_cell_impl.py", "import tensorflow as tf\n", "import tensorflow.compat.v1 as tf\n", _TF2),
    (
        "psrnn_cell_impl.py",
        "class PSRNNCell(tf.contrib.rnn.RNNCell):",
        "class PSRNNCell(tf.nn.rnn_cell.RNNCell):",
        _TF2,
    ),
    (
        "two_stage_regression.py",
        "    ridge = Ridge(fit_intercept=True, alpha=lr, random_state=0, normalize=True, tol=1e-20)\n"
        "    ridge.fit(Y.T,X.T)\n    W = ridge.coef_\n",
        "    scale = np.linalg.norm(Y - Y.mean(axis=1, keepdims=True), axis=1)\n    scale[scale == 0] = 1\n"
        "    ridge = Ridge(fit_intercept=True, alpha=lr, random_state=0, tol=1e-20)\n"
        "    ridge.fit(Y.T / scale, X.T)\n    W = ridge.coef_ / scale\n",
        "scikit-learn 1.2 removed Ridge(normalize=True); this is what it did: centre each regressor and divide it by "
        "its L2 norm, fit, and divide the coefficients by the norms (the intercept is unchanged)",
    ),
]

_EARLY_STOP = (
    "early stopping as our trainer's (--patience P, --min-delta): after each epoch's validation pass the weights are "
    "saved when its validation BPC is lower than the best so far by more than the study's min delta, training stops "
    "after P epochs in a row without such a fall, and the test pass reads the saved weights (the official code runs "
    "max_epoch epochs and tests the last weights)"
)
#: the edits that give the official code early stopping on its validation BPC (applied with ``--patience``)
EARLY_STOP_EDITS = [
    (
        "ptb_word_lm.py",
        "    sv = tf.train.Supervisor()\n",
        "    best_saver = tf.train.Saver(max_to_keep=1)\n"
        "    best_path = os.path.abspath(os.path.join('best', 'model'))\n"
        "    os.makedirs(os.path.dirname(best_path), exist_ok=True)\n"
        "    patience = int(os.environ['PSRNN_PATIENCE'])\n"
        "    best_valid_bpc, bad_epochs, best_epoch = float('inf'), 0, 0\n"
        "    min_delta = float(os.environ['PSRNN_MIN_DELTA_BPC'])\n"
        "    sv = tf.train.Supervisor()\n",
        _EARLY_STOP,
    ),
    (
        "ptb_word_lm.py",
        "        valid_acc_all.append(valid_acc)\n",
        "        valid_acc_all.append(valid_acc)\n"
        "        if valid_bpc < best_valid_bpc - min_delta:\n"
        "          best_valid_bpc, bad_epochs, best_epoch = valid_bpc, 0, i + 1\n"
        "          best_saver.save(session, best_path)\n"
        "        else:\n"
        "          bad_epochs += 1\n"
        "        if bad_epochs >= patience:\n"
        "          print('Early stop after epoch %d' % (i + 1))\n"
        "          break\n",
        _EARLY_STOP,
    ),
    (
        "ptb_word_lm.py",
        "      test_perplexity, test_bpc, test_acc = run_epoch(session, mtest, save_params=True)\n",
        "      print('Best epoch: %d' % best_epoch)\n"
        "      best_saver.restore(session, best_path)\n"
        "      test_perplexity, test_bpc, test_acc = run_epoch(session, mtest, save_params=True)\n",
        _EARLY_STOP,
    ),
]

#: the edit that decays the official learning rate as our exponential schedule with a delay does (``--lr-gamma G
#: --lr-delay D``): epoch ``i`` (0-based) runs at ``learning_rate * G ** max(0, i - D)``
DECAY_EDITS = [
    (
        "ptb_word_lm.py",
        "        m.assign_lr(session, config.learning_rate * config.lr_decay)\n",
        "        m.assign_lr(session, config.learning_rate * config.lr_decay\n"
        "                    * float(os.environ['PSRNN_LR_GAMMA']) ** max(0, i - int(os.environ['PSRNN_LR_DELAY'])))\n",
        "a learning rate that decays after the official budget, as ours does (--lr-gamma, --lr-delay), so that both "
        "sides converge within the study's epochs (the official code keeps learning rate 1 throughout: after 60 "
        "epochs its validation BPC still fell by 0.002 per epoch here)",
    ),
]

_VALID = re.compile(
    r"^Epoch: (\d+) Valid Perplexity: ([\d.naninf]+) Valid BPC: ([\d.naninf]+) "
    r"Valid Accuracy: ([\d.naninf]+)$"
)
_BEST = re.compile(r"^Best epoch: (\d+)$")
_TEST = re.compile(r"^Test Perplexity: ([\d.naninf]+) Test BPC: ([\d.naninf]+) Test Accuracy: ([\d.naninf]+)$")


def bpc(nats_per_char: float) -> float:
    """Bits per character of a mean negative log-likelihood in nats per character."""
    return nats_per_char / math.log(2)


def official_curve(lines: list[tuple[float, str]]) -> list[dict]:
    """Per-epoch ``{epoch, valid_perplexity, valid_bpc, valid_accuracy, seconds}`` from the official printed lines.

    ``lines``: ``(seconds since start, text)``. The official script prints ``Epoch: 0 Valid ...`` before training
    (the two-stage regression's model) and ``Epoch: e Valid ...`` after each epoch's training and validation pass;
    epoch ``e``'s seconds run from the previous such line. Epoch 0 is returned too (``seconds`` None).
    """
    curve, last = [], None
    for seconds, text in lines:
        match = _VALID.match(text.strip())
        if match:
            epoch = int(match[1])
            curve.append(
                {
                    "epoch": epoch,
                    "valid_perplexity": float(match[2]),
                    "valid_bpc": float(match[3]),
                    "valid_accuracy": float(match[4]),
                    "seconds": None if last is None else seconds - last,
                }
            )
            last = seconds
    if [r["epoch"] for r in curve] != list(range(len(curve))):
        raise ValueError(
            f"official output: expected validation lines for epochs 0, 1, ..., got {[r['epoch'] for r in curve]}"
        )
    return curve


def official_test(lines: list[tuple[float, str]]) -> dict:
    """``{test_perplexity, test_bpc, test_accuracy}`` from the official ``Test Perplexity: ...`` line."""
    for _, text in lines:
        match = _TEST.match(text.strip())
        if match:
            return {"test_perplexity": float(match[1]), "test_bpc": float(match[2]), "test_accuracy": float(match[3])}
    raise ValueError("official output: no 'Test Perplexity: ... Test BPC: ... Test Accuracy: ...' line")


def official_command(data_dir: Path) -> list[str]:
    return ["python", "-u", "ptb_word_lm.py", f"--data_path={data_dir}/"]


def official_edits(budget: dict) -> list[tuple[str, str, str, str]]:
    """The run-time edits for ``budget``: early stopping with a ``patience``, a decaying learning rate with an
    ``lr_gamma`` (None: the official fixed epochs and learning rate)."""
    return (
        EDITS
        + (EARLY_STOP_EDITS if budget.get("patience") is not None else [])
        + (DECAY_EDITS if budget.get("lr_gamma") is not None else [])
    )


def run_official(git_dir: Path, folder: Path, seed: int, budget: dict, python: Path, data_dir: Path) -> dict:
    """Run the official code for one seed in ``folder`` (made afresh) within ``budget`` (``{"epochs", "patience",
    "lr_gamma", "lr_delay"}``, None for the official fixed epochs and learning rate); returns its result record."""
    shutil.rmtree(folder, ignore_errors=True)
    extract_snapshot(git_dir, folder)
    apply_edits(folder, official_edits(budget))
    command = official_command(data_dir)
    env = environment(
        PSRNN_SEED=str(seed),
        PSRNN_EPOCHS=str(budget["epochs"]),
        PSRNN_PATIENCE=str(budget["patience"] or 0),
        PSRNN_MIN_DELTA_BPC=str(bpc(budget["min_delta"] or 0.0)),
        PSRNN_LR_GAMMA=str(budget["lr_gamma"] or 1.0),
        PSRNN_LR_DELAY=str(budget["lr_delay"] or 0),
        TF_USE_LEGACY_KERAS="1",
        MPLBACKEND="Agg",
        TF_CPP_MIN_LOG_LEVEL="2",
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
    )
    wall, lines = run_timed_lines([str(python), *command[1:]], folder, folder / "train.log", env)
    curve = official_curve(lines)
    test_end = next(s for s, t in lines if _TEST.match(t.strip()))
    result = {
        "command": " ".join(official_command(Path("DATA_DIR"))),
        "seed": seed,
        "budget": budget,
        "train_wall_seconds": wall,
        "setup_seconds": _valid_line_time(lines, 0),
        "initial": curve[0],
        "curve": curve[1:],
        "best_epoch": official_best_epoch(lines) or _best_epoch(curve[1:]),
        "test_final": official_test(lines),
        "test_seconds": test_end - _valid_line_time(lines, len(curve) - 1),
    }
    write_json(folder / "result.json", result)
    return result


def official_best_epoch(lines: list[tuple[float, str]]) -> int | None:
    """The epoch of the weights the official test read, from the ``Best epoch: e`` line of the early-stop edits
    (None without it: the official code tests its last weights)."""
    for _, text in lines:
        match = _BEST.match(text.strip())
        if match:
            return int(match[1])
    return None


def _valid_line_time(lines: list[tuple[float, str]], epoch: int) -> float:
    """Seconds from the start to the official ``Epoch: <epoch> Valid ...`` line."""
    return next(s for s, t in lines if t.strip().startswith(f"Epoch: {epoch} Valid Perplexity"))


def _best_epoch(curve: list[dict]) -> int | None:
    """The epoch of the lowest ``valid_bpc`` in ``curve`` (None when empty)."""
    return min(curve, key=lambda r: r["valid_bpc"])["epoch"] if curve else None


def our_command(experiment: str, budget: dict, seed: int, run_dir: Path, sets: list[str]) -> list[str]:
    schedule = [] if budget["patience"] is None else ["--set", f"train.patience={budget['patience']}"]
    if budget.get("min_delta"):
        schedule += ["--set", f"train.min_delta={budget['min_delta']}"]
    if budget["lr_gamma"] is not None:
        schedule += ["--set", 'train.lr_schedule="exponential"', "--set", f"train.lr_gamma={budget['lr_gamma']}"]
        schedule += ["--set", f"train.lr_delay_epochs={budget['lr_delay']}"]
    return [
        "ppl-models",
        "train",
        experiment,
        "--device",
        "cpu",
        "--run-dir",
        str(run_dir),
        "--set",
        f"train.epochs={budget['epochs']}",
        *schedule,
        "--set",
        f"seed={seed}",
        "--set",
        f"train.seed={seed}",
    ] + [a for s in sets for a in ("--set", s)]


def _same_settings(record: dict, wanted: list[str] | None) -> bool:
    """Whether a finished run of ours (``record``) was trained by the command ``wanted`` up to its run folder
    (``None``: the official side, whose command the budget fixes)."""
    if wanted is None:
        return True

    def settings(words: list[str]) -> list[str]:
        at = words.index("--run-dir")
        return words[:at] + words[at + 2 :]

    return settings(record["command"].split()) == settings(" ".join(wanted).split())


def run_ours(folder: Path, seed: int, experiment: str, budget: dict, sets: list[str]) -> dict:
    """Train our ``experiment`` for one seed in ``folder/run`` within ``budget``; returns its result record (curve
    from metrics.jsonl).

    Each epoch record's ``valid_*`` figures in nats per character are also given in bits (``valid_bpc``).
    """
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    run_dir = folder / "run"
    command = our_command(experiment, budget, seed, relative(run_dir), sets)
    wall = run_logged(
        [sys.executable, "-m", "ppl_models.experiments.cli", *command[1:]],
        Path.cwd(),
        folder / "train.log",
        environment(),
    )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [_our_epoch(r) for r in records]
    result = {
        "command": " ".join(command),
        "seed": seed,
        "budget": budget,
        "train_wall_seconds": wall,
        "curve": curve,
        "best_epoch": best_epoch([r for r in records if r.get("valid_bound_per_step") is not None]),
        "test_final": json.loads((run_dir / "metrics.json").read_text()),
    }
    write_json(folder / "result.json", result)
    return result


def _our_epoch(record: dict) -> dict:
    """``{epoch, valid_bpc, seconds, record}`` of one metrics.jsonl record (``valid_bpc`` from the monitor or the
    validation bound per step in nats per character, None when neither is there)."""
    monitor = record.get("monitor", {})
    if "valid_bpc" in monitor:
        valid_bpc = monitor["valid_bpc"]
    elif "valid_bound_per_step" in record:
        valid_bpc = bpc(-record["valid_bound_per_step"])
    else:
        valid_bpc = None
    return {"epoch": record["epoch"], "valid_bpc": valid_bpc, "seconds": record.get("seconds"), "record": record}


def _summary(runs: list[dict]) -> dict:
    epochs = min(len(r["curve"]) for r in runs)
    out = {
        "valid_bpc_by_epoch": [
            mean_sd([r["curve"][e]["valid_bpc"] for r in runs])
            for e in range(epochs)
            if all(r["curve"][e]["valid_bpc"] is not None for r in runs)
        ],
        "seconds_per_epoch": mean_sd([c["seconds"] for r in runs for c in r["curve"] if c["seconds"] is not None]),
        "train_wall_seconds": mean_sd([r["train_wall_seconds"] for r in runs]),
    }
    for name in ("test_bpc", "test_accuracy"):
        values = [r["test_final"][name] for r in runs if name in r["test_final"]]
        if values:
            out[name] = mean_sd(values)
    return out


NOTES = {
    "valid_bpc": "official: its printed Valid BPC = log2(exp(mean cross-entropy in nats per character)) = nats / "
    "ln 2, over the validation characters in batches of 20 x 20 steps (the state carried across batches, the "
    "last partial batch dropped); ours: nats per character / ln 2",
    "test_final": "official: Test BPC and Test Accuracy (argmax of the one-step predictive equals the next "
    "character) of the weights after the last epoch (with --patience: of the best-validation epoch's weights), "
    "run with batch 1 and 1 step over the whole test file; ours: the test metrics of the run (metrics.json, "
    "its best-validation checkpoint)",
    "seconds": "official: wall time between successive 'Epoch: e Valid ...' lines (one training pass and one "
    "validation pass); ours: the Trainer's epoch seconds",
    "setup_seconds": "official: start to the epoch-0 validation line (reading, two-stage regression of the "
    "initial weights, graph building, one validation pass)",
    "data": "both read ../shared/data/ptb_chars (the authors' ptb_data bytes); the official reader drops valid and "
    "test characters absent from the training file",
    "logistic_regression": "the official initial softmax layer is fitted by scikit-learn's LogisticRegression() "
    "with today's default solver (lbfgs, multinomial); the code dates from scikit-learn 0.19 (liblinear, "
    "one-vs-rest), which scikit-learn 1.9 no longer allows for more than 2 classes",
    "seed": "official: Config.seed (random Fourier features) and NumPy's seed; TensorFlow draws nothing "
    "(every variable starts from the regression or zero)",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.psrnn_official", description=__doc__
    )
    parser.add_argument(
        "--official-git-dir", type=Path, required=True, help="git directory of a snapshot of github:cmdowney/psrnn"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=Path("runs/psrnn_official"))
    parser.add_argument("--epochs", type=int, default=10, help="epochs (the cap, with --patience)")
    parser.add_argument(
        "--patience",
        type=int,
        help="stop each side after this many epochs in a row without a lower validation BPC and test its best "
        "weights (the official code through EARLY_STOP_EDITS); default: the fixed --epochs",
    )
    parser.add_argument(
        "--min-delta",
        type=float,
        help="with --patience: a validation fall counts only beyond this many nats per character (the official code "
        "gets it in bits); default 0",
    )
    parser.add_argument(
        "--lr-gamma",
        type=float,
        help="decay both sides' learning rate by this factor per epoch after --lr-delay epochs (the official code "
        "through DECAY_EDITS; ours: the exponential schedule); default: constant",
    )
    parser.add_argument("--lr-delay", type=int, default=0, help="epochs at the full learning rate before it decays")
    parser.add_argument("--experiment", default="psrnn-ptb", help="our side's experiment (e.g. psrnn-ptb-authors)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--python",
        type=Path,
        required=True,
        help="the Python of a TensorFlow 2 environment (pip install tensorflow-cpu tf-keras)",
    )
    parser.add_argument(
        "--data-dir", type=Path, help="the PTB character files (default: ptb_chars in the shared data folder)"
    )
    parser.add_argument("--sides", default="official,ours", help="comma-separated: official, ours")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra settings for our side (e.g. model.rank=R)",
    )
    args = parser.parse_args(argv)
    for name in ("epochs", "seeds", "patience"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.exit(2, f"--{name} must be a positive integer, got {getattr(args, name)}\n")
    if not (args.official_git_dir / "HEAD").is_file():
        parser.exit(2, f"--official-git-dir {args.official_git_dir}: not a git directory (no HEAD file)\n")
    sides = [s for s in args.sides.split(",") if s]
    if not sides or set(sides) - {"official", "ours"}:
        parser.exit(2, f"--sides must name official and/or ours, got {args.sides!r}\n")
    if args.lr_gamma is not None and not 0 < args.lr_gamma <= 1:
        parser.exit(2, f"--lr-gamma must be in (0, 1], got {args.lr_gamma}\n")
    if args.lr_delay < 0:
        parser.exit(2, f"--lr-delay must be >= 0, got {args.lr_delay}\n")
    if args.min_delta is not None and (args.min_delta < 0 or args.patience is None):
        parser.exit(2, f"--min-delta must be >= 0 and needs --patience, got {args.min_delta}\n")
    budget = {
        "epochs": args.epochs,
        "patience": args.patience,
        "min_delta": args.min_delta,
        "lr_gamma": args.lr_gamma,
        "lr_delay": args.lr_delay if args.lr_gamma is not None else None,
    }
    start = time.perf_counter()
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side in sides:
            folder = args.work_dir.resolve() / f"{side}-s{seed}"
            done = folder / "result.json"
            record = json.loads(done.read_text()) if done.is_file() else None
            wanted = None if side == "official" else our_command(args.experiment, budget, seed, Path("X"), args.sets)
            if record is None or record.get("budget") != budget or not _same_settings(record, wanted):
                print(f"training {side}, seed {seed}", flush=True)
                record = (
                    run_official(
                        args.official_git_dir.resolve(),
                        folder,
                        seed,
                        budget,
                        args.python,
                        (args.data_dir or resolve_data_dir() / "ptb_chars").resolve(),
                    )
                    if side == "official"
                    else run_ours(folder, seed, args.experiment, budget, args.sets)
                )
            results[side].append(record)
    write_results(
        args.out,
        {
            "study": "PSRNN official code (Downey et al. 2017) against ours on the PTB characters",
            "commands": {
                "study": "python -m ppl_models.experiments.studies.psrnn_official "
                + " ".join(portable(sys.argv[1:] if argv is None else argv)),
                "official_train": official_command(Path("DATA_DIR")),
                "ours_train_seed0": our_command(args.experiment, budget, 0, Path("RUN_DIR"), args.sets),
            },
            "seeds": list(range(args.seeds)),
            "commit": git_state()["git_commit"],
            "official_commit": snapshot_commit(args.official_git_dir),
            "official_repository": "cmdowney/psrnn",
            "official_git_dir": "OFFICIAL_GIT_DIR in the commands: the git folder of a snapshot of "
            "github:cmdowney/psrnn",
            "machine": {
                "platform": platform.platform(),
                "processor": platform.machine(),
                "threads": 1,
                "python": platform.python_version(),
            },
            "wall_seconds": time.perf_counter() - start,
            "runs_wall_seconds": sum(r["train_wall_seconds"] for runs in results.values() for r in runs),
            "budget": {**budget, "paper_epochs": OFFICIAL_CONFIG["max_epoch"]},
            "official_settings": OFFICIAL_CONFIG,
            "official_edits": edits_record(official_edits(budget)),
            "metrics": NOTES,
            "summary": {side: _summary(runs) for side, runs in results.items()},
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()

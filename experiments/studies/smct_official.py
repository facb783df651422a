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
* Speed: the edits also run their training step and validation step as ``tf.function`` graphs with the same maths
  (same seed, batches and random draws: over one Model I epoch the 25 training losses, the validation losses and the
  noise variances agree with their eager code to 4e-7 relative). At one thread (M = 10) a Model I epoch takes about
  11 s instead of about 3 minutes eager; the first epoch adds about 1 minute of tracing, and their eager test phase
  (1000 predictive draws per step) about 3.5 minutes per run.
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

from ..claims.evidence_readers import smct_test_figure
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
    # the edits below run their training and validation steps as TensorFlow graphs (tf.function) with the same maths:
    # eager, a Model I epoch took about 3 minutes on one shared core, most of it in the gradients of resample's gathers
    (
        "src/models/SMC_Transformer/SMC_Transformer.py",
        "        last_output, outputs, new_states = tf.keras.backend.rnn(step_function=step_function,\n"
        "                                                                inputs=inputs_for_rnn,\n"
        "                                                                initial_states=initial_state)\n",
        "        new_states, steps = tuple(initial_state), []\n"
        "        for t in range(x.shape[1]):\n"
        "            output_t, new_states = step_function(NestedInput(x=x[:, t], y=targets[:, t]), tuple(new_states))\n"
        "            steps.append(output_t)\n"
        "        outputs = tf.nest.map_structure(lambda *o: tf.stack(o, axis=1), *steps)\n",
        "tf.keras.backend.rnn's loop written out over the 24 time steps (outputs stacked on axis 1, as rnn returns "
        "them): rnn's graph form is a while loop whose body is traced once, which would freeze the cell's Python "
        "time-step counter, and its unrolled form cannot stack the cell's nested outputs",
    ),
    (
        "src/models/SMC_Transformer/SMC_TransformerCell.py",
        "        self.cell_count += 1\n        if self.cell_count > 1:\n            self.dec_timestep += 1\n",
        "        self.dec_timestep += 1\n",
        "rnn called the cell once more at time 0 to learn its output shapes and discarded the result (cell_count "
        "skipped that call); the written-out loop makes no such call, so every call is the next time step",
    ),
    (
        "src/models/SMC_Transformer/SMC_TransformerCell.py",
        "        has_nan = tf.math.reduce_any(bool_tens).numpy()\n        assert has_nan == False\n",
        "        tf.debugging.assert_equal(tf.math.reduce_any(bool_tens), False)\n",
        "the same no-NaN check on the resampling weights as a graph assertion (.numpy() exists only in eager mode)",
    ),
    (
        "src/models/SMC_Transformer/SMC_TransformerCell.py",
        "            self.list_weights.append(w.numpy())\n            self.list_indices.append(i_t.numpy())\n",
        "",
        "the cell kept every resampling weight and index as NumPy arrays in lists that nothing reads (and that grew "
        "over the whole training); .numpy() exists only in eager mode",
    ),
    (
        "src/models/SMC_Transformer/transformer_utils.py",
        "    num_particles = tf.shape(params)[1]\n"
        "    past_params = params[:, :, :t + 1, :]  # (B,P,t,D)\n"
        "    future_params = params[:, :, t + 1:, :]  # (B,P,S-t,D)\n"
        "    rows_new_params = []\n"
        "    for m in range(num_particles):\n"
        "        i_t_m = i_t[:, m]  # shape B\n"
        "        # reshaping to (B,1)\n"
        "        i_t_m = tf.expand_dims(i_t_m, axis=-1)\n"
        "        row_m_new_params = tf.gather(past_params, i_t_m, axis=1, batch_dims=1)  # shape (B,1,t-1,D)\n"
        "        # squeezing on 2nd dim:\n"
        "        row_m_new_params = tf.squeeze(row_m_new_params, axis=1)\n"
        "        rows_new_params.append(row_m_new_params)\n"
        "    # stacking the new rows in the a new tensor\n"
        "    new_params = tf.stack(rows_new_params, axis=1)  # add a tf.expand_dims? # (B,P,t-1,D)\n",
        "    past_params = params[:, :, :t + 1, :]  # (B,P,t,D)\n"
        "    future_params = params[:, :, t + 1:, :]  # (B,P,S-t,D)\n"
        "    new_params = tf.gather(past_params, i_t, axis=1, batch_dims=1)  # (B,P,t+1,D)\n",
        "resample gathers all particles' ancestors at once (their TODO: 'avoid the for loop on the number of "
        "particles'); the same tensor as the Python loop of one gather per particle and tf.stack, whose 720 gathers "
        "per forward pass (and their gradients) made most of the graph",
    ),
    (
        "src/models/SMC_Transformer/SMC_Transformer.py",
        "        if tf.shape(inputs)[1] == 1:\n",
        "        if inputs.shape[1] == 1:\n",
        "the same test on the static shape, so that the graph keeps the particle count static",
    ),
    (
        "src/models/SMC_Transformer/SMC_Transformer.py",
        "        if tf.shape(targets)[1] == 1:\n",
        "        if targets.shape[1] == 1:\n",
        "the same test on the static shape, so that the graph keeps the particle count static",
    ),
    (
        "src/train/train_step_functions.py",
        "            if it >= sigma_obs_update:\n"
        "                it_obs = it - sigma_obs_update\n"
        "                # EM estimation of Sigma_obs:\n"
        "                err_obs = tf.cast(targets_tiled, tf.float32) - tf.cast(preds_resampl, tf.float32)\n"
        "                new_sigma_obs = err_obs * err_obs\n"
        "                new_sigma_obs = tf.reduce_mean(new_sigma_obs, axis=[1,2,3])\n"
        "\n"
        "            for j in range(err_v.shape[0]):\n"
        "                smc_transformer.cell.attention_smc.sigma_v = (1 - it ** (-0.6)) * "
        "smc_transformer.cell.attention_smc.sigma_v + it ** (-0.6) * err_v[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_k = (1 - it ** (-0.6)) * "
        "smc_transformer.cell.attention_smc.sigma_k + it ** (-0.6) * err_k[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_q = (1 - it ** (-0.6)) * "
        "smc_transformer.cell.attention_smc.sigma_q + it ** (-0.6) * err_q[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_z = (1 - it ** (-0.6)) * "
        "smc_transformer.cell.attention_smc.sigma_z + it ** (-0.6) * err_z[j]\n"
        "                if it >= sigma_obs_update:\n"
        "                    smc_transformer.cell.Sigma_obs = (1 - it_obs ** (-0.6)) * smc_transformer.cell.Sigma_obs "
        "+ it_obs ** (-0.6) * new_sigma_obs[j]\n",
        "            it_obs = it - sigma_obs_update\n"
        "            # EM estimation of Sigma_obs:\n"
        "            err_obs = tf.cast(targets_tiled, tf.float32) - tf.cast(preds_resampl, tf.float32)\n"
        "            new_sigma_obs = err_obs * err_obs\n"
        "            new_sigma_obs = tf.reduce_mean(new_sigma_obs, axis=[1,2,3])\n"
        "            rate, keep = tf.cast(it ** (-0.6), tf.float32), tf.cast(1 - it ** (-0.6), tf.float32)\n"
        "            rate_obs, keep_obs = tf.cast(it_obs ** (-0.6), tf.float32), tf.cast(1 - it_obs ** (-0.6), "
        "tf.float32)\n"
        "            for j in range(err_v.shape[0]):\n"
        "                smc_transformer.cell.attention_smc.sigma_v = keep * "
        "smc_transformer.cell.attention_smc.sigma_v + rate * err_v[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_k = keep * "
        "smc_transformer.cell.attention_smc.sigma_k + rate * err_k[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_q = keep * "
        "smc_transformer.cell.attention_smc.sigma_q + rate * err_q[j]\n"
        "                smc_transformer.cell.attention_smc.sigma_z = keep * "
        "smc_transformer.cell.attention_smc.sigma_z + rate * err_z[j]\n"
        "                smc_transformer.cell.Sigma_obs = keep_obs * smc_transformer.cell.Sigma_obs + rate_obs * "
        "new_sigma_obs[j]\n",
        "the same EM updates of the noise variances with the step number it as a float64 tensor (a Python int "
        "would retrace the graph every step): the step sizes it^-0.6 and 1 - it^-0.6 are computed in float64 and "
        "rounded to float32, as Python's floats were when they met the float32 tensors; the two tests it >= "
        "sigma_obs_update always held (train_SMC_transformer counts it from 1, sigma_obs_update is 0)",
    ),
    (
        "src/train/train_step_functions.py",
        "    if smc_transformer.cell.noise:\n        return loss, mse_metric_avg_pred\n    else:\n"
        "        return loss, None\n",
        "    if smc_transformer.cell.noise:\n        return loss, mse_metric_avg_pred\n    else:\n"
        "        return loss, None\n"
        "\n\n"
        "def _noise_variances(smc_transformer):\n"
        "    attention = smc_transformer.cell.attention_smc\n"
        "    return [smc_transformer.cell.Sigma_obs, attention.sigma_k, attention.sigma_q, attention.sigma_v, "
        "attention.sigma_z]\n"
        "\n\n"
        "def _set_noise_variances(smc_transformer, values):\n"
        "    attention = smc_transformer.cell.attention_smc\n"
        "    smc_transformer.cell.Sigma_obs, attention.sigma_k, attention.sigma_q, attention.sigma_v, "
        "attention.sigma_z = values\n"
        "\n\n"
        "@tf.function\n"
        "def _train_step_graph(inputs, targets, smc_transformer, optimizer, it, variances):\n"
        "    _set_noise_variances(smc_transformer, variances)\n"
        "    loss, metric = train_step_SMC_T(inputs, targets, smc_transformer, optimizer, it)\n"
        "    return loss, metric, _noise_variances(smc_transformer)\n"
        "\n\n"
        "def train_step_SMC_T_compiled(inputs, targets, smc_transformer, optimizer, it):\n"
        "    variances = [tf.convert_to_tensor(v, tf.float32) for v in _noise_variances(smc_transformer)]\n"
        "    loss, metric, variances = _train_step_graph(inputs, targets, smc_transformer, optimizer,\n"
        "                                                tf.constant(it, tf.float64), variances)\n"
        "    _set_noise_variances(smc_transformer, variances)\n"
        "    return loss, metric\n"
        "\n\n"
        "@tf.function\n"
        "def _val_step_graph(inputs, targets, smc_transformer, variances):\n"
        "    _set_noise_variances(smc_transformer, variances)\n"
        "    (preds_val, preds_val_resampl), _, _ = smc_transformer(inputs=inputs, targets=targets)\n"
        "    tar_tiled = tf.tile(targets, multiples=[1, smc_transformer.cell.num_particles, 1, 1])\n"
        "    val_loss_batch = smc_transformer.compute_SMC_loss(targets=tar_tiled, predictions=preds_val_resampl)\n"
        "    val_metric_avg_pred = tf.keras.losses.MSE(targets, tf.reduce_mean(preds_val, axis=1, keepdims=True))\n"
        "    return val_loss_batch, tf.reduce_mean(val_metric_avg_pred)\n"
        "\n\n"
        "def val_step_SMC_T(inputs, targets, smc_transformer):\n"
        "    variances = [tf.convert_to_tensor(v, tf.float32) for v in _noise_variances(smc_transformer)]\n"
        "    losses = _val_step_graph(inputs, targets, smc_transformer, variances)\n"
        "    _set_noise_variances(smc_transformer, variances)\n"
        "    return losses\n",
        "their training step, and their validation lines of train_SMC_transformer, run as tf.function graphs (each "
        "traced once); the five noise variances, Python attributes that each step replaces, enter and leave the "
        "graph as tensors and are set back on the model, so the loss still differentiates through their in-step "
        "EM updates as in eager mode",
    ),
    (
        "src/train/train_functions.py",
        "from src.train.train_step_functions import train_step_SMC_T\n",
        "from src.train.train_step_functions import train_step_SMC_T, train_step_SMC_T_compiled, val_step_SMC_T\n",
        "import the compiled steps",
    ),
    (
        "src/train/train_functions.py",
        "            train_loss_batch, train_metric_avg_pred = train_step_SMC_T(inputs=inp, targets=tar,\n",
        "            train_loss_batch, train_metric_avg_pred = train_step_SMC_T_compiled(inputs=inp, targets=tar,\n",
        "the training loop calls the compiled training step",
    ),
    (
        "src/train/train_functions.py",
        "            (preds_val, preds_val_resampl), _, _ = smc_transformer(inputs=inp, targets=tar)  "
        "# shape (B,1,S,F_y)\n"
        "            if smc_transformer.cell.noise:\n"
        "                tar_tiled = tf.tile(tar, multiples=[1, smc_transformer.cell.num_particles, 1, 1])\n"
        "                val_loss_batch = smc_transformer.compute_SMC_loss(targets=tar_tiled, "
        "predictions=preds_val_resampl)\n"
        "                val_metric_avg_pred = tf.keras.losses.MSE(tar, tf.reduce_mean(preds_val, axis=1, "
        "keepdims=True))\n"
        "                val_metric_avg_pred = tf.reduce_mean(val_metric_avg_pred)\n",
        "            if smc_transformer.cell.noise:\n"
        "                val_loss_batch, val_metric_avg_pred = val_step_SMC_T(inp, tar, smc_transformer)\n"
        "            else:\n"
        "                (preds_val, preds_val_resampl), _, _ = smc_transformer(inputs=inp, targets=tar)\n"
        "            if smc_transformer.cell.noise:\n",
        "the validation loop calls the compiled validation step (the same lines, moved into val_step_SMC_T) with SMC "
        "on; without SMC it runs as before",
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
        f"train.seed={seed}",
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
        values = [v for v in (smct_test_figure(r["test"], name) for r in runs) if v is not None]
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
    "seconds": "official: its 'Time taken for 1 epoch' (training pass, validation pass, checkpoint; the first epoch "
    "also traces the compiled training and validation steps, about a minute); ours: the Trainer's epoch seconds",
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
        help="the Python of a TensorFlow 2 environment (pip install tensorflow-cpu tf-keras pandas statsmodels "
        "scikit-learn h5py matplotlib: their run.py imports them all)",
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

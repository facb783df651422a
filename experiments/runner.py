"""Train and evaluate from a configuration, writing a run folder (:mod:`ppl_models.experiments.run_folder`).

:func:`train` builds the experiment (:mod:`ppl_models.experiments.build`), trains it in its locked run
folder and evaluates the best checkpoint on the test split; :func:`evaluate` re-evaluates a finished run
beside it. Both write the evaluation's files and plots through :mod:`ppl_models.experiments.outputs`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyro
import torch

from ppl_models.inference import evaluation
from ppl_models.inference.atomic_files import recover_staged, staged_folder, write_json
from ppl_models.inference.training import TrainConfig, Trainer

from .build import build_experiment, check_trainable, resolve_device
from .classical_rows import refuse_classical_folder
from .config import check_config, evaluate_section, evaluation_options
from .memory_guard import check_memory, evaluation_memory
from .outputs import mse_monitor, write_outputs
from .run_folder import (
    check_evaluation_folder,
    check_run_folder,
    experiment_record,
    load_run_checkpoint,
    read_config_json,
    run_session,
    timestamped,
)

__all__ = ["train", "evaluate", "evaluate_model", "validation_figures"]


def train(config: dict, run_dir: str | Path, *, resume: bool = False, change_epochs: bool = False) -> dict:
    """Train the configured model, then evaluate its best checkpoint on the test split.

    ``resume`` continues the run in ``run_dir`` (see :func:`~ppl_models.experiments.run_folder.prepare_run_dir`;
    ``change_epochs`` lets ``config``'s ``train.epochs`` differ from the run's). The folder is locked for the whole
    session (:func:`~ppl_models.experiments.run_folder.run_session`: a second process on it is refused) and gets
    its finished marker last. Returns the final metrics table (also written to the run folder).
    """
    pyro.set_rng_seed(config["seed"])
    device = resolve_device(config["device"])
    data, model, objective = build_experiment(config)  # bad settings and data files fail before the folder is touched
    check_trainable(config, data, model)
    experiment = experiment_record(config, data)
    with run_session(run_dir, config, resume=resume, change_epochs=change_epochs, experiment=experiment) as run_dir:
        fresh = not (run_dir / "checkpoints" / "last.pt").exists()
        if fresh:
            model.initialize(*data.train)
        trainer = Trainer(
            objective,
            data.train,
            data.valid,
            TrainConfig.from_dict(config["train"]),
            run_dir,
            device,
            monitor=mse_monitor(model, data, run_dir, fresh=fresh),
            experiment=experiment,
            valid_scored=data.scored_mask("valid"),
        )
        trainer.fit(resume=resume)
        if (run_dir / "checkpoints" / "best.pt").exists():
            load_run_checkpoint(run_dir, objective, config)
        return evaluate_model(model, data, evaluation_options(config["evaluate"]), run_dir, config["seed"])


def evaluate(
    run_dir: str | Path,
    overrides: dict | None = None,
    device: str | None = None,
    *,
    out: str | Path | None = None,
    force: bool = False,
) -> dict:
    """Re-evaluate a finished run folder's best checkpoint (``overrides`` update ``[evaluate]``).

    The outputs go to ``out`` (default ``run_dir/evaluations/evaluate-<time>-<pid>``), with a
    ``config.json`` holding the settings used. They are written to a hidden folder beside ``out``
    and renamed into place whole (:func:`ppl_models.inference.atomic_files.staged_folder`), so a failed or interrupted
    evaluation leaves ``out`` as it was; a folder that already holds an evaluation is refused
    unless ``force`` (then replaced whole), and so is a run folder or one holding other files. A board's classical
    row is refused by name (its figures are in its ``metrics.json``).
    """
    refuse_classical_folder(
        run_dir,
        "run_dir",
        "its test figures are in its metrics.json, and "
        "ppl_models.experiments.classical_rows.run_classical(name, data, folder) judges it again "
        "(ppl-models backtest takes the folder)",
    )
    run_dir = check_run_folder(run_dir)
    config = read_config_json(run_dir / "config.json")
    if config.get("kind") == "supervised":
        raise ValueError(
            f"run_dir {run_dir} is a supervised run: its test metrics are in metrics.json; "
            "evaluate re-evaluates likelihood runs only"
        )
    config = check_config(config)
    evaluate_config = evaluation_options({**config["evaluate"], **(overrides or {})})
    out = Path(out) if out is not None else run_dir / "evaluations" / timestamped("evaluate").name
    recover_staged(out)  # an evaluation killed in its last step leaves out whole again
    check_evaluation_folder(out, run_dir, force)
    device = resolve_device(device or config["device"])
    data, model, objective = build_experiment(config)
    load_run_checkpoint(run_dir, objective, config)
    check_memory(evaluation_memory(model, data, evaluate_config))
    model.to(device)
    try:
        with staged_folder(out, replace=force) as staging:
            metrics = evaluate_model(model, data, evaluate_config, staging, config["seed"], records_from=run_dir)
            write_json(staging / "config.json", {**config, "evaluate": evaluate_section(evaluate_config)})
    except PermissionError as error:
        raise ValueError(f"evaluation folder {out} cannot be written to ({error.strerror or error})") from None
    return metrics


@torch.no_grad()
def validation_figures(model, data, config: evaluation.EvaluationOptions, seed: int = 0) -> dict:
    """The one-step predictive's coverage, CRPS and held-out figure on ``data``'s validation split (its scored steps
    given their history), the trained model as it is (no noise refit): what a board reads to flag a model whose
    intervals are far off before it looks at the test split."""
    options = dataclasses.replace(config, noise_refit="none", posterior_draws=0)
    x, mask = data.valid
    metrics = evaluation.evaluate(
        model,
        x,
        mask,
        options,
        seed=seed,
        binary=False,
        description="validation split",
        standardizer=data.units("valid"),
        scored=data.scored_mask("valid"),
    ).metrics
    return {
        "coverage_0.8": metrics["calibration"].get("coverage_0.8"),
        "crps": metrics["calibration"].get("crps"),
        "loglik": metrics["loglik"],
        "steps": metrics["test_steps"],
    }


@torch.no_grad()
def evaluate_model(
    model,
    data,
    config: evaluation.EvaluationOptions,
    run_dir: str | Path | None = None,
    seed: int = 0,
    *,
    records_from: str | Path | None = None,
) -> dict:
    """:func:`ppl_models.inference.evaluate` of ``model`` on ``data``'s test split with the ``[evaluate]`` settings;
    writes the run folder (:func:`~ppl_models.experiments.outputs.write_outputs`).

    The noise of a one-step predictor is first refit on the validation split (``noise_refit``,
    kept only where it improves held-out NLPD); a user's file is judged in its own units. The
    outputs go to ``run_dir``; the training records (``metrics.jsonl``, ``predictions.json``) are
    read from ``records_from`` (default ``run_dir``). Returns the metrics (``metrics.json``).
    """
    validation = (
        validation_figures(model, data, config, seed)  # before a noise refit on the validation split
        if data.split_record is not None and not data.binary and config.predictive_samples
        else None
    )
    x, mask = data.test
    result = evaluation.evaluate(
        model,
        x,
        mask,
        config,
        seed=seed,
        valid=data.valid,
        binary=data.binary,
        truth=data.truth,
        truth_metrics=data.truth_metrics,
        description=data.description,
        standardizer=data.standardizer,
        scored=data.scored_mask("test"),
    )
    if validation is not None:
        result.metrics["validation"] = validation
    if run_dir is not None:
        write_outputs(Path(run_dir), model, data, config, result, seed, Path(records_from or run_dir))
    return result.metrics

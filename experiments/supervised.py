"""Supervised sequence tasks (inputs ``x``, targets ``y``): PF-RNNs and their LSTM/GRU baselines.

A TOML experiment with ``kind = "supervised"`` has the sections ``[data]`` (a task of
:data:`TASKS` and its options), ``[model]`` (:class:`~ppl_models.pf_rnn.PFRNNPredictor`
options), ``[loss]`` (:class:`~ppl_models.inference.discriminative.DiscriminativeLoss` options) and
``[train]`` (:class:`~ppl_models.inference.training.TrainConfig`). ``ppl-models train`` runs it and writes a
run folder: ``config.json``, ``metrics.jsonl`` and ``checkpoints/`` (resumable), ``metrics.json``
(test metrics of the best checkpoint) and ``plots/`` (learning curve; on the localization tasks,
``localization`` (ours) and ``localization-paper`` (the paper's protocol), the position error and
particle spread against time and, for a particle model, the belief over time, the paper's
Figure 6; for the regression tasks ``air``
and ``pm25`` of :mod:`ppl_models.experiments.tasks.uci_regression`, the PIT ECDF and predictive bands; for the
classification task ``vowels`` of :mod:`ppl_models.experiments.tasks.uea_classification`, a reliability diagram;
the synthetic ``regime-switching`` task of :mod:`ppl_models.experiments.tasks.regime_switching` is scored
exactly against its known predictive law; a user's own table, ``file`` of
:mod:`ppl_models.experiments.tasks.file_regression` (``data.path`` and ``data.targets``), is judged in its
targets' units with the PIT ECDF and predictive bands, and its split recorded in ``data_split.json``).

One config serves a PF cell and its baseline: with ``model.cell = "lstm"`` or ``"gru"`` the
particle-only model options (:data:`PF_ONLY_OPTIONS`) are dropped, and ``config.json`` records
the options actually used.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import torch

from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.data import FileSpec
from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.inference.training import TrainConfig, Trainer, load_best
from ppl_models.pf_rnn import PFRNNPredictor

from . import run_plots
from .build import resolve_device
from .config import apply_overrides, check_common
from .run_folder import mark_finished, prepare_run_dir
from .spec_builders import table_parameters
from .tasks.file_regression import FileRegressionData, evaluate_file_regression, file_regression
from .tasks.localization import belief_figure, evaluate_localization, localization_data, plot_belief_over_time
from .tasks.localization_paper import evaluate_localization_paper, localization_paper_data, paper_belief_figure
from .tasks.regime_switching import RegimeSwitchingData, evaluate_regime_switching, regime_switching
from .tasks.uci_regression import RegressionData, air_quality_regression, evaluate_regression, pm25_regression
from .tasks.uea_classification import ClassificationData, evaluate_classification, japanese_vowels

__all__ = [
    "TASKS",
    "PF_ONLY_OPTIONS",
    "METRIC_LABELS",
    "is_supervised",
    "load_supervised_config",
    "check_supervised_config",
    "build_supervised",
    "train",
    "describe_metric",
    "format_table",
]

SECTIONS = ("data", "model", "loss", "train")
TOP_LEVEL = {"kind": "supervised", "name": "experiment", "seed": 0, "device": "auto"}
TASKS = {
    "localization": localization_data,
    "localization-paper": localization_paper_data,
    "air": air_quality_regression,
    "pm25": pm25_regression,
    "vowels": japanese_vowels,
    "regime-switching": regime_switching,
    "file": file_regression,
}
#: the tasks whose loader takes a spec, whose fields a ``[data]`` table gives (:mod:`.spec_builders`)
TASK_SPECS = {"file": FileSpec}
#: model options that only the particle cells take
PF_ONLY_OPTIONS = (
    "num_particles",
    "resampling",
    "alpha",
    "stochastic",
    "activation",
    "norm_steps",
    "eval_randomness",
    "eval_seed",
    "compiled",
)


def is_supervised(path: str | Path) -> bool:
    """Whether the TOML file at ``path`` is a supervised experiment (``kind = "supervised"``)."""
    with open(path, "rb") as handle:
        return tomllib.load(handle).get("kind") == "supervised"


def load_supervised_config(path: str | Path, overrides: list[str] = ()) -> dict:
    """Read a supervised experiment, apply ``section.key=value`` overrides, check sections and fill defaults."""
    with open(path, "rb") as handle:
        return check_supervised_config(apply_overrides(tomllib.load(handle), list(overrides)))


def check_supervised_config(config: dict) -> dict:
    """Check a supervised configuration's sections and fill its defaults."""
    unknown = sorted(set(config) - set(TOP_LEVEL) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown top-level keys {unknown}; known: {sorted(set(TOP_LEVEL) | set(SECTIONS))}")
    config = {**TOP_LEVEL, **config}
    check_common(config)
    if config["data"].get("name") not in TASKS:
        raise ValueError(f"data.name must be one of {sorted(TASKS)}, got {config['data'].get('name')!r}")
    config["train"] = TrainConfig.from_dict(config.get("train", {})).to_dict()
    config.setdefault("model", {})
    config.setdefault("loss", {})
    if config["model"].get("cell") in ("lstm", "gru"):
        config["model"] = {k: v for k, v in config["model"].items() if k not in PF_ONLY_OPTIONS}
    return config


def build_supervised(config: dict):
    """``(context, splits, predictor, loss)`` of a checked supervised configuration: the task's data (``splits[s] =
    (x [N, T, D], mask [N, T] or None, y [N, T, O])``), the :class:`~ppl_models.pf_rnn.PFRNNPredictor` for its
    sizes and its :class:`~ppl_models.inference.discriminative.DiscriminativeLoss`."""
    data_options = {k: v for k, v in config["data"].items() if k != "name"}
    loader = TASKS[config["data"]["name"]]
    allowed = list(table_parameters(loader, TASK_SPECS.get(config["data"]["name"])))
    unknown = sorted(set(data_options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys in [data] for {config['data']['name']!r}: {unknown}; allowed: {allowed}")
    context, splits = loader(**data_options)
    x, _, y = splits["train"]
    output_size = context.num_classes if isinstance(context, ClassificationData) else y.shape[-1]
    predictor = PFRNNPredictor(x.shape[-1], output_size, **config["model"])
    return context, splits, predictor, DiscriminativeLoss(predictor, **config["loss"])


def train(config: dict, run_dir: str | Path, *, resume: bool = False, change_epochs: bool = False) -> dict:
    """Train, then evaluate the best checkpoint on the test split; returns (and writes) ``metrics.json``.

    ``resume`` and ``change_epochs``: as for :func:`ppl_models.experiments.run_folder.prepare_run_dir`.
    """
    torch.manual_seed(config["seed"])
    context, splits, predictor, objective = build_supervised(config)  # data, model and loss checked before any write
    device = resolve_device(config["device"])
    run_dir = prepare_run_dir(run_dir, config, resume=resume, change_epochs=change_epochs)
    paper_task = config["data"]["name"] == "localization-paper"
    monitor = None
    if paper_task:  # the learning curve in the paper's metric, on the validation split

        def monitor():
            return {
                "valid_last_step_mse": evaluate_localization_paper(predictor, context, splits["valid"], device=device)[
                    "last_step_mse"
                ]
            }

    trainer = Trainer(
        objective,
        splits["train"],
        splits["valid"],
        TrainConfig.from_dict(config["train"]),
        run_dir=run_dir,
        device=device,
        monitor=monitor,
    )
    history = trainer.fit(resume=resume)
    load_best(run_dir, objective, map_location=device)
    if isinstance(context, RegressionData):
        metrics = evaluate_regression(
            predictor, context, "test", device=device, seed=config["seed"], plots_dir=run_dir / "plots"
        )
    elif isinstance(context, FileRegressionData):
        metrics = evaluate_file_regression(
            predictor, context, "test", device=device, seed=config["seed"], plots_dir=run_dir / "plots"
        )
        write_json(run_dir / "data_split.json", context.split_record)
    elif isinstance(context, RegimeSwitchingData):
        metrics = evaluate_regime_switching(predictor, context, "test", device=device, seed=config["seed"])
    elif isinstance(context, ClassificationData):
        metrics = evaluate_classification(
            predictor, context, "test", device=device, seed=config["seed"], plots_dir=run_dir / "plots"
        )
    elif paper_task:
        metrics = evaluate_localization_paper(predictor, context, splits["test"], device=device, seed=config["seed"])
    else:
        metrics = evaluate_localization(predictor, splits["test"], device=device, seed=config["seed"])
    metrics.update(
        experiment=config["name"],
        epochs=len(history),
        seconds=sum(r["seconds"] for r in history),
        num_parameters=sum(p.numel() for p in predictor.parameters() if p.requires_grad),
        num_particles=predictor.num_particles,
        cell=predictor.cell_name,
    )
    write_json(run_dir / "metrics.json", metrics)
    run_plots.learning_curve(run_dir / "metrics.jsonl", run_dir / "plots" / "learning_curve.png")
    if not isinstance(context, (RegressionData, FileRegressionData, RegimeSwitchingData, ClassificationData)):
        plot_belief_over_time(
            metrics["position_mse_by_step"],
            metrics.get("particle_spread_by_step"),
            run_dir / "plots" / "belief_over_time.png",
        )
        if predictor.num_particles > 1:
            figure = paper_belief_figure if paper_task else belief_figure
            figure(predictor, context, splits["test"], run_dir / "plots" / "belief.png", device)
    mark_finished(run_dir)  # last: every output is written
    return metrics


#: what each figure of a supervised run's table is: ``(pattern of its name, description)``, the first that matches
#: the whole name wins; ``{0}``, ``{1}`` are the pattern's groups
METRIC_LABELS = (
    (r"rmse", "RMSE of the predictive mean, in the target's units"),
    (r"rmse_normalized", "RMSE over the target's training standard deviation"),
    (r"mae", "mean absolute error of the predictive mean, in the target's units"),
    (r"mse", "mean squared error of the prediction over all test steps"),
    (r"mean_rmse", "RMSE of predicting the training mean (reference)"),
    (r"persistence_rmse", "RMSE of repeating the last observed value (reference)"),
    (r"coverage_(.+)", "share of outcomes inside the central {0} predictive interval (ideal: {0})"),
    (r"width_(.+)", "mean width of the central {0} predictive interval, in the target's units"),
    (r"crps", "continuous ranked probability score, in the target's units (lower is better)"),
    (r"crps_normalized", "CRPS over the target's training standard deviation"),
    (r"nlpd", "negative log predictive density, nats per step and target"),
    (r"pit_ks", "Kolmogorov-Smirnov distance of the PIT values from uniform (0: calibrated)"),
    (r"sigma", "learned noise scale of the predictive, in the target's units"),
    (r"sigma\.(.+)", "learned noise scale of target {0}, in its units"),
    (r"mean_ess", "mean effective sample size of the particle weights, per step"),
    (r"particle_sd", "mean weighted standard deviation of the particles' predictions"),
    (r"prob_error", "mean absolute error of P(target > 0) against the true law"),
    (r"predictive_samples", "predictive draws per step behind the interval and PIT figures"),
    (r"(train|valid|test)_(sequences|steps|windows|hours)", "{1} scored in the {0} split"),
    (r"target", "the predicted column"),
    (r"units", "the target's units"),
    (r"target_std", "the target's standard deviation on the training split"),
    (r"last_step_mse", "squared error of the prediction at the last step (the paper's metric)"),
    (r"last_step_position_mse", "squared error of the position (x, y) at the last step"),
    (r"last_step_heading_mse", "squared error of the heading at the last step, radians squared"),
    (r"last_step_mirror_share", "share of sequences whose last position is nearer a mirror image of the truth"),
    (r"position_mse_by_step", "squared error of the position per step"),
    (r"particle_spread_by_step", "weighted RMS distance of the particles from the prediction, per step"),
    (r"accuracy", "share of test sequences classified right (from the mean particle)"),
    (r"mixture_accuracy", "share of test sequences classified right by the particles' mixture"),
    (r"nll", "negative log probability of the true class, nats per sequence"),
    (r"brier", "Brier score of the class probabilities"),
    (r"experiment", "the experiment's name"),
    (r"epochs", "epochs trained"),
    (r"seconds", "seconds of training"),
    (r"num_parameters", "trainable parameters"),
    (r"num_particles", "particles of the belief (1: a plain recurrent cell)"),
    (r"cell", "the recurrent cell"),
)
#: nested tables whose figures are those of :data:`METRIC_LABELS` for another predictive: prefix and what it adds
METRIC_GROUPS = (
    (r"by_target\.(.+?)\.", "of target {0} alone"),
    (r"truth\.", "of the true predictive law (reference)"),
    (r"best_gaussian\.", "of the best single Gaussian predictive (reference)"),
)


def describe_metric(name: str) -> str:
    """What the figure ``name`` (a dotted name of a supervised run's ``metrics.json``) is, in words."""
    for pattern, text in METRIC_GROUPS:
        group = re.match(pattern, name)
        inner = describe_metric(name[group.end() :]) if group else ""
        if inner:
            return f"{inner}, {text.format(*group.groups())}"
    for pattern, text in METRIC_LABELS:
        match = re.fullmatch(pattern, name)
        if match:
            return text.format(*match.groups())
    return ""


def format_table(metrics: dict) -> str:
    """A run's ``metrics.json`` as a text table: each figure's name, value and what it is (:func:`describe_metric`).

    Nested tables are flattened to dotted names; a per-step list ``*_by_step`` shows its first
    and last values (``t = 0 -> t = T-1``); other lists are left out.
    """
    rows = []

    def add(prefix: str, values: dict) -> None:
        for key, value in values.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                add(f"{name}.", value)
            elif isinstance(value, list):
                if key.endswith("_by_step") and value:
                    rows.append(
                        (
                            f"{name} (t=0 -> t={len(value) - 1})",
                            f"{value[0]:.4g} -> {value[-1]:.4g}",
                            describe_metric(name),
                        )
                    )
            else:
                rows.append((name, f"{value:.4g}" if isinstance(value, float) else str(value), describe_metric(name)))

    add("", metrics)
    rows.insert(0, ("metric", "value", "what it is"))
    name_width, value_width = (max(len(row[i]) for row in rows) + 2 for i in (0, 1))
    return "\n".join(f"{name:<{name_width}}{value:<{value_width}}{what}".rstrip() for name, value, what in rows)

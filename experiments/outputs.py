"""What a run writes besides its checkpoints: the one-step predictions it records while it trains, and the tables,
files and plots of its evaluation (the run folder's layout: :mod:`ppl_models.experiments.run_folder`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from ppl_models.inference import ParticleFilter, calibration, one_step_mse
from ppl_models.inference.atomic_files import save_torch, write_json, write_text
from ppl_models.inference.defaults import PARTICLE_CLOUD_PARTICLES
from ppl_models.inference.evaluation.data_layout import Units

from . import board_plots, run_plots
from .tables import format_table
from .tasks import music

__all__ = [
    "PARTICLE_CLOUD_PARTICLES",
    "mse_monitor",
    "first_test_prediction",
    "first_test_observed",
    "write_outputs",
    "metrics_coverage",
]

#: the most particles the filter behind ``plots/particles.png`` runs with (fewer where ``evaluate.num_particles``
#: is smaller): the plot draws every particle of every step, and more than this many make an unreadable cloud


def mse_monitor(model, data, run_dir: Path, *, fresh: bool) -> Callable[[], dict] | None:
    """The training loop's monitor of a model with an exact predictive on real-valued data: the held-out one-step
    MSE (:func:`ppl_models.inference.one_step_mse` on validation and test); ``None`` for other models and data. A
    ``fresh`` run first records the first test sequence's one-step predictions and that MSE before training in
    ``predictions.json``."""
    if data.binary or not model.supports("exact"):
        return None

    @torch.no_grad()
    def monitor() -> dict:
        model.eval()
        return {
            f"{name}_mse": one_step_mse(
                model, *getattr(data, name), standardizer=data.units(name), scored=data.scored_mask(name)
            )
            for name in ("valid", "test")
        }

    if fresh:
        write_json(
            run_dir / "predictions.json", {"initial": first_test_prediction(model, data), "initial_mse": monitor()}
        )
    return monitor


@torch.no_grad()
def first_test_prediction(model, data) -> list:
    """The one-step predictive means ``[T, D]`` of the first test sequence, in the data's units (for transformed
    data, each from the level before it: :meth:`~ppl_models.experiments.data.ExperimentData.units`), as lists."""
    x, mask = data.test
    device = next(model.parameters()).device
    first = x[:1][:, mask[0]].to(device)
    mean = model.predictive(first, None, 0).mean.cpu()
    return Units(data.units("test"), x).values(mean, torch.tensor([0]))[0].tolist()


def first_test_observed(data) -> list:
    """The valid steps ``[T, D]`` of the first test sequence in the data's units (for transformed data, as read), as
    lists."""
    x, mask = data.test
    return Units(data.units("test"), x).observed(x[:1][:, mask[0]], torch.tensor([0]))[0].tolist()


def write_outputs(run_dir: Path, model, data, config, result, seed: int, records: Path) -> None:
    """Write the evaluation ``result`` (:func:`ppl_models.inference.evaluate`'s) of ``model`` on ``data``'s test split
    into ``run_dir``: the metrics table, the predictive and PIT files, the split record, the predictions before and
    after training (from ``records``, the folder of the training log) and the plots."""
    metrics, predictive, probabilities = result.metrics, result.predictive, result.probabilities
    write_json(run_dir / "metrics.json", metrics)
    if result.posterior is not None:
        calibration.save_inference_data(result.posterior, run_dir / "posterior.nc")
    if data.split_record is not None:
        write_json(run_dir / "data_split.json", data.split_record)
    if (records / "predictions.json").is_file() and model.supports("exact"):
        record = json.loads((records / "predictions.json").read_text())
        record.update(
            observed=first_test_observed(data), final=first_test_prediction(model, data), final_mse=metrics["mse"]
        )
        write_json(run_dir / "predictions.json", record)
    write_text(run_dir / "metrics.md", format_table(metrics, markdown=True))
    figures = run_dir / "plots"
    run_plots.learning_curve(records / "metrics.jsonl", figures / "learning_curve.png")
    x, mask = result.x, result.mask  # in the data's own units (padded, or packed to the scored steps)
    scored = mask if result.scored is None else result.scored  # the steps judged: each row's context left out
    row, steps = result.steps_of(0)  # the first sequence's scored steps
    if isinstance(predictive, torch.Tensor):
        calibration.save_inference_data(result.predictive_data(), run_dir / "predictive.nc")
        pit_values = calibration.pit(predictive, x, scored)[scored]
        save_torch(run_dir / "pit.pt", pit_values)  # every valid entry's PIT, for comparisons (leaderboard)
        calibration.plot_pit_ecdf(pit_values, figures / "pit_ecdf.png")
        calibration.plot_coverage(metrics_coverage(metrics["calibration"]), figures / "coverage.png")
        _predictive_bands(result, row, steps, figures / "predictive_bands.png")
    if isinstance(probabilities, torch.Tensor):
        curve = calibration.reliability_curve(probabilities, x, scored)
        board_plots.write_reliability(curve, run_dir)  # the leaderboard's reliability curves
        calibration.plot_reliability(curve, figures / "reliability.png")
        music.piano_roll_outputs(model, x[row][steps], probabilities[row][steps], run_dir, seed=seed)
    if "smc" in config.estimators and model.supports("particles") and not data.binary:
        _particle_cloud(model, *data.test, config.num_particles, figures / "particles.png")


def _predictive_bands(result, row: int, steps: torch.Tensor, path: Path) -> None:
    """The predictive bands of the first sequence: its valid steps (padded layout), or its scored steps ``steps`` of
    held row ``row`` from their first time step (packed layout)."""
    if result.positions is None:
        calibration.plot_predictive_bands(result.predictive, result.x, mask=result.mask, path=path)
        return
    if not bool(steps.any()):  # no scored step in the first sequence: no band to draw
        return
    start = int(result.positions[1][steps][0])
    calibration.plot_predictive_bands(
        result.predictive[:, row : row + 1, steps], result.x[row : row + 1, steps], path=path, start=start
    )


def _particle_cloud(model, x: torch.Tensor, mask: torch.Tensor, num_particles: int, path: Path) -> None:
    """The particle cloud of the first sequence of ``x [N, T, D]`` (``mask [N, T]``), filtered anew with
    ``num_particles``, at most :data:`PARTICLE_CLOUD_PARTICLES`."""
    device = next(model.parameters()).device
    first = x[:1].to(device), mask[:1].to(device)
    result = ParticleFilter(min(num_particles, PARTICLE_CLOUD_PARTICLES)).run(model, *first, keep_ancestry=True)
    run_plots.particle_cloud(result, first[0], path)


def metrics_coverage(summary: dict) -> dict[float, float]:
    """``{level: empirical coverage}`` from a calibration summary's ``coverage_<level>`` entries."""
    return {float(k.split("_", 1)[1]): v for k, v in summary.items() if k.startswith("coverage_")}

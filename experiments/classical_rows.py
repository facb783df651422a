"""The classical rows of a leaderboard: last value, seasonal naive, ARIMA, ETS and VAR on the board's own splits.

Each forecaster (:mod:`ppl_models.classical`) is fitted on the training split, wrapped as a sequence model
(:class:`~ppl_models.classical.sequence_model.ClassicalSequenceModel`) and judged by the same
:func:`ppl_models.inference.evaluate` as the collection's models: the same scored test steps (each given its
series' history), the same figures, in the data's units. Its files go to ``OUT/classical/<name>``
(``metrics.json``, ``pit.pt``, ``classical.json``: what was chosen), where the board's figures read them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ppl_models.classical import CLASSICAL, classical_model
from ppl_models.classical.sequence_model import ClassicalSequenceModel
from ppl_models.inference import calibration, evaluation
from ppl_models.inference.io import save_torch, write_json

__all__ = ["CLASSICAL_SAMPLES", "applicable_classical", "run_classical", "classical_forecaster_row"]

#: one-step draws per step of a classical row's predictive (its coverage, CRPS and PIT)
CLASSICAL_SAMPLES = 200


def applicable_classical(data) -> tuple[list[str], dict[str, str]]:
    """``(names, {name: why not})`` of the classical forecasters that suit ``data``
    (:class:`~ppl_models.experiments.data.ExperimentData`): all of them on real-valued data, ``var`` only with two
    features or more; none on binary data (their predictives are Gaussian)."""
    if data.binary:
        why = "the data is binary (0/1) and the classical rows' predictives are Gaussian"
        return [], dict.fromkeys(CLASSICAL, why)
    if data.obs_dim < 2:
        return [n for n in CLASSICAL if n != "var"], {"var": "a VAR needs two features or more; the data has one"}
    return list(CLASSICAL), {}


def run_classical(name: str, data, folder: Path, *, season: int | None = None, seed: int = 0) -> dict:
    """Fit classical forecaster ``name`` on ``data``'s training split and judge it on its test split; write its
    files into ``folder`` and return its metrics (``metrics.json``, with ``train_seconds``)."""
    started = time.perf_counter()
    levels = data.levels  # the data as read (a transform of the collection's models undone): they model it whole
    x, mask = levels.train
    model = ClassicalSequenceModel(classical_model(name, season=season).fit(x.double(), mask))
    test_x, test_mask = levels.test
    options = evaluation.EvaluationOptions(estimators=("exact",), predictive_samples=CLASSICAL_SAMPLES, seed=seed)
    result = evaluation.evaluate(model, test_x.double(), test_mask, options, standardizer=levels.standardizer,
                                 scored=levels.scored["test"], binary=False, description=data.description)
    metrics = {**result.metrics, "train_seconds": time.perf_counter() - started}
    scored = result.mask if result.scored is None else result.scored
    save_torch(folder / "pit.pt", calibration.pit(result.predictive, result.x, scored)[scored])
    write_json(folder / "classical.json", {"name": name, **model.forecaster.describe()})
    write_json(folder / "metrics.json", metrics)
    return metrics


def classical_forecaster_row(name: str, folder: Path) -> dict:
    """The board's row of a classical forecaster from the files :func:`run_classical` wrote into ``folder``."""
    metrics = json.loads((folder / "metrics.json").read_text())
    calibration_figures = metrics.get("calibration", {})
    return {"model": name, "kind": "classical", "estimator": "exact",
            "nats_per_step": metrics["loglik"]["exact"]["per_step"],
            **{key: calibration_figures.get(key) for key in ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95",
                                                             "pit_ks", "brier", "ece")},
            "mse": metrics.get("mse"), "train_seconds": metrics["train_seconds"], "best_epoch": None,
            "epochs_run": None, "epochs_cap": None, "num_parameters": metrics["num_parameters"],
            "run": str(folder)}  # fmt: skip


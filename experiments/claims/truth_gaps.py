"""A run's gap to a known source's truth on its training sequences beside its test sequences.

On a known-truth source (``hmm-rolls``, ``switching-lg``) the held-out ``gap_to_truth`` of a
run's ``metrics.json`` mixes two things: how closely the model fits the sequences it was trained
on, and how much of that fit carries over to new ones. Scoring the best checkpoint, with the
run's own estimators, on the first ``sequences`` training sequences separates them: a model
whose training gap is near 0 but whose test gap is not has overfit (finite data), one short on
both has not fit (capacity, optimisation or the training objective's bias).

:func:`split_gaps` is what ``ppl-models reproduce transfer-NAME``
(:mod:`ppl_models.experiments.claims.transfers`) and the study ``python -m ppl_models.experiments.studies.truth_fit``
call.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ppl_models.inference.training import load_best
from ppl_models.inference.validation import check_positive_int

from ..build import build_experiment
from ..config import check_config, evaluation_options
from ..run_folder import check_run_folder, read_config_json
from ..runner import evaluate_model

__all__ = ["split_gaps"]


def split_gaps(
    run_dir: str | Path, sequences: int = 100, splits: tuple[str, ...] = ("train", "test"), evaluate: dict | None = None
) -> dict:
    """``{"train": gaps, "test": gaps, "truth_per_step": {"train", "test"}}`` of a finished run.

    ``gaps`` is :func:`ppl_models.inference.evaluation.gap_to_truth`'s dictionary for each estimator of
    the run's ``[evaluate]`` table (with ``evaluate``'s settings in place of its own, e.g.
    ``{"num_particles": 100}``), on the first ``sequences`` sequences of each of ``splits`` (all
    of a split if it has fewer); the best checkpoint is scored in evaluation mode (no dropout).
    """
    run_dir = check_run_folder(Path(run_dir))
    check_positive_int(sequences, name="sequences")
    unknown = sorted(set(splits) - {"train", "valid", "test"})
    if unknown or not splits:
        raise ValueError(f"splits must name some of train, valid, test, got {list(splits)}")
    config = check_config(read_config_json(run_dir / "config.json"))
    data, model, objective = build_experiment(config)
    if data.truth is None:
        raise ValueError(
            f"run_dir {run_dir} was trained on {data.description!r}, which has no known truth "
            "(use a hmm-rolls or switching-lg run)"
        )
    load_best(run_dir, objective)
    model.eval()
    evaluate = evaluation_options(
        {**config["evaluate"], **(evaluate or {}), "predictive_samples": 0, "posterior_draws": 0}
    )
    out = {"run": str(run_dir), "sequences": {}, "truth_per_step": {}}
    for split in splits:
        x, mask = getattr(data, split)
        scored = dataclasses.replace(data, test=(x[:sequences], mask[:sequences]))
        metrics = evaluate_model(model, scored, evaluate, None, config["seed"])
        out[split] = metrics["gap_to_truth"]
        out["sequences"][split] = metrics["test_sequences"]
        out["truth_per_step"][split] = metrics["loglik"]["exact (true parameters)"]["per_step"]
    return out

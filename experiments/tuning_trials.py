"""The trials of a tuning search (:mod:`ppl_models.experiments.tuning`): each trained into its run folder and judged
by its best validation bound per step (:func:`run_trial`), and the search's result (:class:`Tuning`,
:func:`search_result`)."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ppl_models.inference.atomic_files import read_jsonl
from ppl_models.inference.training import TrainingDiverged, load_checkpoint

from .run_files import is_finished
from .tuning_search_space import suggest, with_params

__all__ = ["BestTrial", "Tuning", "run_trial", "search_result", "trial_folder"]


@dataclass(frozen=True)
class BestTrial:
    """The trial with the highest validation bound per step (the lowest number among equals)."""

    number: int
    config: dict
    run: Path
    valid_bound_per_step: float


@dataclass(frozen=True)
class Tuning:
    """A finished search: its best trial and a JSON-ready record of each trial (``number``, ``params``, ``state``,
    ``valid_bound_per_step``, ``best_epoch``, ``seconds`` of training and evaluation in the session that finished it,
    ``run``, and ``error`` for a failed one)."""

    best: BestTrial
    trials: list[dict]
    budget: int
    seed: int
    fixed: tuple[str, ...]

    def to_dict(self) -> dict:
        best = {
            "number": self.best.number,
            "config": self.best.config,
            "run": str(self.best.run),
            "valid_bound_per_step": self.best.valid_bound_per_step,
        }
        return {
            "budget": self.budget,
            "seed": self.seed,
            "fixed": list(self.fixed),
            "best": best,
            "trials": self.trials,
        }


def run_trial(
    study: optuna.Study, trial: optuna.Trial, space: dict, config: dict, folder: Path, train: Callable
) -> None:
    """Draw ``trial``'s settings, train them into its run folder and tell the study its validation figure."""
    params = {key: suggest(trial, key, spec) for key, spec in space.items()}
    run = trial_folder(folder, trial.number)
    started = time.perf_counter()
    try:
        if not is_finished(run):  # one killed after its training and before the study heard of it is kept
            train(with_params(config, params), run, resume=_resumable(run))
        value, best_epoch = _validation(run)
    except (TrainingDiverged, ValueError) as error:
        trial.set_user_attr("error", " ".join(str(error).split()))
        study.tell(trial, state=TrialState.FAIL)
        print(f"trial {trial.number}: failed ({trial.user_attrs['error']})")
        return
    trial.set_user_attr("seconds", time.perf_counter() - started)
    trial.set_user_attr("best_epoch", best_epoch)
    study.tell(trial, value)
    print(f"trial {trial.number}: {value:.4f} nats / step on the validation split ({_shown(params)})")


def _resumable(run: Path) -> bool:
    """Whether ``run`` holds a complete ``checkpoints/last.pt`` to resume; where it does not, what it holds (a run
    killed before its first epoch ended) is deleted, so that the trial starts again."""
    path = run / "checkpoints" / "last.pt"
    try:
        load_checkpoint(path)
        return True
    except (OSError, ValueError):  # missing, or cut short
        shutil.rmtree(run, ignore_errors=True)
        return False


def _validation(run: Path) -> tuple[float, int]:
    """``(best validation bound per step, its epoch)`` of the run's ``metrics.jsonl``; ``ValueError`` if none."""
    log = run / "metrics.jsonl"
    records = (
        [r for r in read_jsonl(log) if "epoch" in r and r.get("valid_bound_per_step") is not None]
        if log.is_file()
        else []
    )
    finite = [r for r in records if math.isfinite(r["valid_bound_per_step"])]
    if not finite:
        raise ValueError(f"{log}: no epoch with a finite validation bound (valid_bound_per_step)")
    best = max(finite, key=lambda r: r["valid_bound_per_step"])
    return float(best["valid_bound_per_step"]), int(best["epoch"])


def _shown(params: dict) -> str:
    return (
        ", ".join(
            f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}" for key, value in params.items()
        )
        or "as given"
    )


def search_result(trials: list, config: dict, folder: Path, budget: int, seed: int, fixed: frozenset) -> Tuning:
    """The :class:`Tuning` of ``trials`` (frozen, in number order); ``ValueError`` where none completed."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        first = trials[0]
        raise ValueError(
            f"tuning {folder}: all {len(trials)} trials failed (trial {first.number}: {first.user_attrs.get('error')})"
        )
    best = max(complete, key=lambda t: (t.value, -t.number))
    return Tuning(
        BestTrial(best.number, with_params(config, best.params), trial_folder(folder, best.number), best.value),
        [_record(t, folder) for t in trials],
        budget,
        seed,
        tuple(sorted(fixed)),
    )


def trial_folder(folder: Path, number: int) -> Path:
    return folder / "trials" / f"{number:03d}"


def _record(trial, folder: Path) -> dict:
    """The JSON-ready record of a finished (frozen) trial."""
    failed = trial.state != TrialState.COMPLETE
    return {
        "number": trial.number,
        "params": dict(trial.params),
        "state": "failed" if failed else "complete",
        "valid_bound_per_step": trial.value,
        "best_epoch": trial.user_attrs.get("best_epoch"),
        "seconds": trial.user_attrs.get("seconds"),
        "run": str(trial_folder(folder, trial.number)),
        **({"error": trial.user_attrs.get("error")} if failed else {}),
    }

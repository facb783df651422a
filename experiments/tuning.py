"""A model's recipe tuned on a user's validation split: the same budget of Optuna trials for every model of a board.

:func:`tune` trains a model's checked own-data configuration (:func:`ppl_models.experiments.own_data.model_config`)
``budget`` times, each a full run (early stopping on the validation split, as the recipe) into
``folder/trials/NNN``, and keeps the run with the best validation bound per step. Trial 0 is the configuration as
given; the others draw the sizes and rates of :data:`SEARCH_SPACES` with Optuna's TPE sampler (seeded), holding the
keys the user set. The test split is never read to choose.

The search lives on disk (``folder/study.log``, an Optuna journal): a rerun continues it (finished trials are kept, an
interrupted trial resumes its run folder), a larger budget adds trials, and a search made with another configuration,
fixed set, seed or data is refused by name unless ``retrain``. ``folder/tuning.json`` holds the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ppl_models.inference.atomic_files import folder_lock, write_json

from . import runner
from .run_identity import data_fingerprint
from .tuning_search_space import SEARCH_SPACES, config_value, search_space
from .tuning_study import (
    STUDY_NAME,
    TUNING_FILES,
    clear_search,
    quiet_optuna,
    recover,
    sampler,
    search_study,
    started_trials,
    tuning_folder,
)
from .tuning_trials import BestTrial, Tuning, run_trial, search_result

__all__ = ["SEARCH_SPACES", "STUDY_NAME", "TUNING_FILES", "BestTrial", "Tuning", "search_space", "tune"]


def tune(
    config: dict,
    folder: str | Path,
    *,
    budget: int,
    seed: int = 0,
    fixed: Collection[str] = (),
    train: Callable = runner.train,
    retrain: bool = False,
) -> Tuning:
    """Search ``config``'s model settings over ``budget`` trials on its validation split, in ``folder``.

    ``config`` is a model's checked own-data configuration; ``fixed`` the ``"section.key"`` settings the user gave,
    never drawn. Trial 0 trains ``config`` itself; trials ``1 .. budget - 1`` draw :func:`search_space` with
    ``TPESampler`` (seeded by ``seed`` and the trial's number; random for the first third of the budget, 2 to 10
    trials). Each is ``train(trial_config, folder/"trials"/f"{number:03d}", resume=...)`` and is judged by the best
    ``valid_bound_per_step`` of its ``metrics.jsonl``; one that diverges or raises ``ValueError`` is recorded as
    failed and the search goes on. A model with nothing to draw trains trial 0 alone.

    A rerun resumes the search (see the module); a search of another configuration
    (:data:`~ppl_models.experiments.run_folder.RUNTIME_KEYS` aside), ``fixed`` set, ``seed`` or data content is one
    ``ValueError`` unless ``retrain`` (then it starts again, its trials deleted). The result covers trials
    ``0 .. budget - 1`` and is written to ``folder/tuning.json``; a search whose trials all failed is a
    ``ValueError`` naming the first error.
    """
    config, fixed, budget, seed = _checked(config, fixed, budget, seed, train, retrain)
    space = search_space(config, fixed)
    identity = {"config": config, "fixed": sorted(fixed), "seed": seed, "data_fingerprint": data_fingerprint(config)}
    wanted = budget if space else 1
    folder = tuning_folder(folder)
    with folder_lock(folder, "folder"), quiet_optuna():
        recover(folder)
        if retrain:
            clear_search(folder)
        study = search_study(folder, identity)
        for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if frozen.number < wanted:  # interrupted: no other process holds the folder
                study.sampler = sampler(seed, frozen.number, budget)
                trial = optuna.trial.Trial(study, frozen._trial_id)  # as Study.ask makes it, for a trial begun earlier
                run_trial(study, trial, space, config, folder, train)
        while len(started := started_trials(study)) < wanted:
            if not study.get_trials(deepcopy=False):  # trial 0: the configuration given
                study.enqueue_trial({key: config_value(config, key) for key in space})
            study.sampler = sampler(seed, len(started), budget)
            run_trial(study, study.ask(), space, config, folder, train)
        tuning = search_result(started_trials(study)[:wanted], config, folder, budget, seed, fixed)
        write_json(folder / "tuning.json", tuning.to_dict())
    return tuning


def _checked(config, fixed, budget, seed, train, retrain) -> tuple[dict, frozenset, int, int]:
    """The arguments of :func:`tune` checked: ``config`` as JSON values, ``fixed`` a set of ``section.key`` names."""
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise TypeError(
            f"config: expected a checked configuration (a dict with a [model] table), got {type(config).__name__}"
        )
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget: expected an int >= 1 (the number of trials), got {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed: expected an int in [0, 2**32), got {seed!r}")
    names = isinstance(fixed, Collection) and not isinstance(fixed, str)
    if not names or not all(isinstance(key, str) and "." in key for key in fixed):
        raise ValueError(f"fixed: expected a collection of 'section.key' names, got {fixed!r}")
    if not callable(train):
        raise TypeError(f"train: expected a callable train(config, run_dir, resume=...), got {type(train).__name__}")
    if not isinstance(retrain, bool):
        raise TypeError(f"retrain: expected True or False, got {retrain!r}")
    return json.loads(json.dumps(config)), frozenset(fixed), budget, seed

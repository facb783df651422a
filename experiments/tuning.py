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

import copy
import inspect
import json
import math
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ppl_models.inference.atomic_files import folder_lock, read_jsonl, remove_stale_temporaries, write_json
from ppl_models.inference.training import TrainConfig, TrainingDiverged, load_checkpoint

from . import runner
from .registry import MODELS
from .run_folder import RUNTIME_KEYS, check_writable, config_differences, data_fingerprint, is_finished

try:
    from optuna.storages.journal import JournalFileBackend
except ImportError:  # optuna 3.x names it so
    from optuna.storages import JournalFileStorage as JournalFileBackend

__all__ = ["SEARCH_SPACES", "STUDY_NAME", "TUNING_FILES", "BestTrial", "Tuning", "search_space", "tune"]

_LR = ("log", 3e-4, 3e-2)
_WIDTH = ("int", 16, 128, 16)

#: registry model -> ``{"section.key": spec}`` of the settings its trials draw. A spec is ``("int", low, high)``,
#: ``("int", low, high, step)``, ``("int", low, high, "log")``, ``("float", low, high)``, ``("log", low, high)`` (a
#: float on a log scale) or ``("categorical", choices)``; a ``high`` of ``None`` is the configuration's own value
#: (the sizes two-stage regression fits to the data: ``psrnn`` and ``kf`` need as many windows, the SMC Transformer's
#: window the sequences' length), so that a trial never asks the data for more than the recipe found in it.
SEARCH_SPACES = {
    "lgssm": {"model.latent_dim": ("int", 1, 16), "train.lr": ("log", 1e-3, 1e-1)},
    "gru": {"model.rnn_dim": _WIDTH, "model.hidden_dim": _WIDTH, "train.lr": _LR},
    "recurrent": {
        "model.cell": ("categorical", ("gru", "lstm", "rnn")),
        "model.state_dim": ("int", 8, 64, 8),
        "model.encoder_dim": ("int", 8, 64, 8),
        "train.lr": _LR,
    },
    "vrnn": {
        "model.latent_dim": ("int", 4, 32, "log"),
        "model.rnn_dim": _WIDTH,
        "model.hidden_dim": _WIDTH,
        "train.lr": ("log", 1e-3, 3e-2),
    },
    "srnn": {
        "model.latent_dim": ("int", 4, 32, "log"),
        "model.rnn_dim": _WIDTH,
        "model.hidden_dim": _WIDTH,
        "model.dropout": ("float", 0.0, 0.5),
        "train.lr": ("log", 1e-3, 3e-2),
    },
    "smc-transformer": {
        "model.d_model": ("int", 8, 64, 8),
        "model.window": ("int", 4, None),
        "train.lr": ("log", 3e-4, 3e-2),
    },
    "psrnn": {
        "model.state_dim": ("int", 4, None),
        "model.ridge": ("log", 1e-4, 1e-1),
        "model.bandwidth_scale": ("log", 0.25, 4.0),
        "train.lr": ("log", 1e-4, 1e-2),
    },
    "kf": {"model.state_dim": ("int", 1, None), "model.ridge": ("log", 1e-6, 1e-2), "train.lr": ("log", 1e-4, 1e-2)},
    "mc-dropout-lstm": {"model.hidden_size": _WIDTH, "model.dropout": ("float", 0.0, 0.5), "train.lr": _LR},
    "transformer-forecaster": {
        "model.d_model": ("int", 8, 64, 8),
        "model.num_layers": ("int", 1, 3),
        "model.feedforward_dim": ("int", 16, 256, "log"),
        "model.dropout": ("float", 0.0, 0.3),
        "train.lr": _LR,
    },
}

#: the Optuna study's name in ``study.log``
STUDY_NAME = "tuning"
#: what a tuning folder holds (besides hidden lock and temporary files, and the journal's own lock beside it)
TUNING_FILES = ("study.log", "trials", "tuning.json")
_STUDY_LOCK = "study.log.lock"


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


def search_space(config: dict, fixed: Collection[str] = ()) -> dict[str, tuple]:
    """``{"section.key": spec}`` that trials of ``config``'s model draw: :data:`SEARCH_SPACES` without the ``fixed``
    keys, each bound of ``None`` resolved to the configuration's value. A key whose configuration value lies outside
    its range (or off its step), or whose range holds one value, stays at the configuration's value like a fixed one."""
    model = config["model"].get("name")
    if model not in SEARCH_SPACES:
        raise ValueError(f"config: model.name must be one of {list(SEARCH_SPACES)}, got {model!r}")
    space = {}
    for key, spec in SEARCH_SPACES[model].items():
        given = _value(config, key)
        spec = tuple(given if bound is None else bound for bound in spec)
        narrow = spec[0] != "categorical" and spec[1] >= spec[2]  # a fitted size at or below the range's low end
        if key not in fixed and not narrow and _holds(spec, given):
            space[key] = spec
    return space


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

    A rerun resumes the search (see the module); a search of another configuration (:data:`RUNTIME_KEYS` aside),
    ``fixed`` set, ``seed`` or data content is one ``ValueError`` unless ``retrain`` (then it starts again, its
    trials deleted). The result covers trials ``0 .. budget - 1`` and is written to ``folder/tuning.json``; a search
    whose trials all failed is a ``ValueError`` naming the first error.
    """
    config, fixed, budget, seed = _checked(config, fixed, budget, seed, train, retrain)
    space = search_space(config, fixed)
    identity = {"config": config, "fixed": sorted(fixed), "seed": seed, "data_fingerprint": data_fingerprint(config)}
    wanted = budget if space else 1
    folder = _tuning_folder(folder)
    with folder_lock(folder, "folder"), _quiet_optuna():
        _recover(folder)
        if retrain:
            _clear(folder)
        study = _study(folder, identity)
        for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if frozen.number < wanted:  # interrupted: no other process holds the folder
                study.sampler = _sampler(seed, frozen.number, budget)
                trial = optuna.trial.Trial(study, frozen._trial_id)  # as Study.ask makes it, for a trial begun earlier
                _run_trial(study, trial, space, config, folder, train)
        while len(started := _started(study)) < wanted:
            if not study.get_trials(deepcopy=False):
                study.enqueue_trial({key: _value(config, key) for key in space})  # trial 0: the configuration given
            study.sampler = _sampler(seed, len(started), budget)
            _run_trial(study, study.ask(), space, config, folder, train)
        tuning = _result(_started(study)[:wanted], config, folder, budget, seed, fixed)
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


def _value(config: dict, key: str):
    """The value of ``"section.key"`` in ``config``, else its default (the model's builder, :class:`TrainConfig`)."""
    section, name = key.split(".")
    if name in config.get(section, {}):
        return config[section][name]
    if section == "train":
        return getattr(TrainConfig(), name)
    return inspect.signature(MODELS[config["model"]["name"]].build).parameters[name].default


def _holds(spec: tuple, value) -> bool:
    """Whether ``value`` is one ``spec`` can draw."""
    kind, *bounds = spec
    if kind == "categorical":
        return value in bounds[0]
    if isinstance(value, bool) or not isinstance(value, int if kind == "int" else (int, float)):
        return False
    step = bounds[2] if kind == "int" and len(bounds) == 3 and bounds[2] != "log" else 1
    return bounds[0] <= value <= bounds[1] and (kind != "int" or (value - bounds[0]) % step == 0)


def _suggest(trial: optuna.Trial, key: str, spec: tuple):
    """Draw ``key`` from ``spec`` in ``trial`` (a value drawn before, or enqueued, comes back as it is)."""
    kind, *bounds = spec
    if kind == "categorical":
        return trial.suggest_categorical(key, list(bounds[0]))
    if kind == "int":
        option = bounds[2] if len(bounds) == 3 else 1
        log = option == "log"
        return trial.suggest_int(key, bounds[0], bounds[1], step=1 if log else option, log=log)
    return trial.suggest_float(key, bounds[0], bounds[1], log=kind == "log")


def _with_params(config: dict, params: dict) -> dict:
    """A copy of ``config`` with each ``"section.key": value`` of ``params`` set."""
    config = copy.deepcopy(config)
    for key, value in params.items():
        section, name = key.split(".")
        config[section][name] = value
    return config


def _tuning_folder(folder: str | Path) -> Path:
    """``folder``, made if new; one ``ValueError`` if it holds anything but a search (a run folder, a board, ...)."""
    folder = Path(folder)
    if folder.is_dir():
        other = sorted(
            p.name
            for p in folder.iterdir()
            if p.name not in (*TUNING_FILES, _STUDY_LOCK) and not p.name.startswith(".")
        )
        if other:
            raise ValueError(
                f"folder {folder} is not a tuning folder (it holds {', '.join(other[:3])}"
                f"{' and more' if len(other) > 3 else ''}): pick a new or empty folder"
            )
    return check_writable(folder, "folder")


def _recover(folder: Path) -> None:
    """Undo what a process killed in ``folder`` left (call it holding the folder's lock): temporary files, the
    journal's own lock, and a journal line cut short (the next line would be appended to it)."""
    remove_stale_temporaries(folder)
    (folder / _STUDY_LOCK).unlink(missing_ok=True)
    journal = folder / "study.log"
    text = journal.read_bytes() if journal.is_file() else b""
    if text and not text.endswith(b"\n"):
        with open(journal, "r+b") as handle:
            handle.truncate(text.rfind(b"\n") + 1)


def _clear(folder: Path) -> None:
    """Delete the search in ``folder``: its journal, its trials' run folders, its result."""
    shutil.rmtree(folder / "trials", ignore_errors=True)
    for name in ("study.log", "tuning.json", _STUDY_LOCK):
        (folder / name).unlink(missing_ok=True)


def _study(folder: Path, identity: dict) -> optuna.Study:
    """The study in ``folder/study.log`` (made if new) for the search ``identity``; another search's is refused."""
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(folder / "study.log")))
    study = optuna.create_study(storage=storage, study_name=STUDY_NAME, direction="maximize", load_if_exists=True)
    saved = study.user_attrs.get("search")
    if saved is None:
        study.set_user_attr("search", identity)
        return study
    changes = {
        key: pair
        for key, pair in config_differences(saved, identity).items()
        if key.removeprefix("config.") not in RUNTIME_KEYS
    }
    if changes:
        shown = "; ".join(f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changes.items())[:3])
        raise ValueError(
            f"folder {folder} holds a search made with other settings or data ({shown}): pass --retrain "
            "to search again (its trials are deleted), or pick another folder"
        )
    return study


def _sampler(seed: int, number: int, budget: int) -> optuna.samplers.TPESampler:
    """The sampler of trial ``number``: seeded by ``seed`` and the number, so that an interrupted search resumed
    draws what it would have drawn; random for the first third of the budget (2 to 10 trials)."""
    return optuna.samplers.TPESampler(seed=(seed + number) % 2**32, n_startup_trials=min(10, max(2, budget // 3)))


def _started(study: optuna.Study) -> list:
    """The study's trials that have started (run, running or failed), in number order."""
    return [t for t in study.get_trials(deepcopy=False) if t.state != TrialState.WAITING]


def _run_trial(
    study: optuna.Study, trial: optuna.Trial, space: dict, config: dict, folder: Path, train: Callable
) -> None:
    """Draw ``trial``'s settings, train them into its run folder and tell the study its validation figure."""
    params = {key: _suggest(trial, key, spec) for key, spec in space.items()}
    run = _run_folder(folder, trial.number)
    started = time.perf_counter()
    try:
        if not is_finished(run):  # one killed after its training and before the study heard of it is kept
            train(_with_params(config, params), run, resume=_resumable(run))
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


def _result(trials: list, config: dict, folder: Path, budget: int, seed: int, fixed: frozenset) -> Tuning:
    """The :class:`Tuning` of ``trials`` (frozen, in number order); ``ValueError`` where none completed."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        first = trials[0]
        raise ValueError(
            f"tuning {folder}: all {len(trials)} trials failed (trial {first.number}: {first.user_attrs.get('error')})"
        )
    best = max(complete, key=lambda t: (t.value, -t.number))
    return Tuning(
        BestTrial(best.number, _with_params(config, best.params), _run_folder(folder, best.number), best.value),
        [_record(t, folder) for t in trials],
        budget,
        seed,
        tuple(sorted(fixed)),
    )


def _run_folder(folder: Path, number: int) -> Path:
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
        "run": str(_run_folder(folder, trial.number)),
        **({"error": trial.user_attrs.get("error")} if failed else {}),
    }


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna's per-trial log lines held back while the block runs (each trial prints its own)."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)

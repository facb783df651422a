"""The Optuna study of a tuning search on disk (:mod:`ppl_models.experiments.tuning`): its folder, its journal
(``study.log``), recovered after a killed process and refused when made by another search, and each trial's seeded
sampler."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ppl_models.inference.atomic_files import remove_stale_temporaries

from .run_folder import check_writable
from .run_identity import RUNTIME_KEYS, config_differences

try:
    from optuna.storages.journal import JournalFileBackend
except ImportError:  # optuna 3.x names it so
    from optuna.storages import JournalFileStorage as JournalFileBackend

__all__ = [
    "STUDY_NAME",
    "TUNING_FILES",
    "STUDY_LOCK",
    "tuning_folder",
    "recover",
    "clear_search",
    "search_study",
    "sampler",
    "started_trials",
    "quiet_optuna",
]

#: the Optuna study's name in ``study.log``
STUDY_NAME = "tuning"
#: what a tuning folder holds (besides hidden lock and temporary files, and the journal's own lock beside it)
TUNING_FILES = ("study.log", "trials", "tuning.json")
#: the lock of the journal, beside it
STUDY_LOCK = "study.log.lock"


def tuning_folder(folder: str | Path) -> Path:
    """``folder``, made if new; one ``ValueError`` if it holds anything but a search (a run folder, a board, ...)."""
    folder = Path(folder)
    if folder.is_dir():
        other = sorted(
            p.name for p in folder.iterdir() if p.name not in (*TUNING_FILES, STUDY_LOCK) and not p.name.startswith(".")
        )
        if other:
            raise ValueError(
                f"folder {folder} is not a tuning folder (it holds {', '.join(other[:3])}"
                f"{' and more' if len(other) > 3 else ''}): pick a new or empty folder"
            )
    return check_writable(folder, "folder")


def recover(folder: Path) -> None:
    """Undo what a process killed in ``folder`` left (call it holding the folder's lock): temporary files, the
    journal's own lock, and a journal line cut short (the next line would be appended to it)."""
    remove_stale_temporaries(folder)
    (folder / STUDY_LOCK).unlink(missing_ok=True)
    journal = folder / "study.log"
    text = journal.read_bytes() if journal.is_file() else b""
    if text and not text.endswith(b"\n"):
        with open(journal, "r+b") as handle:
            handle.truncate(text.rfind(b"\n") + 1)


def clear_search(folder: Path) -> None:
    """Delete the search in ``folder``: its journal, its trials' run folders, its result."""
    shutil.rmtree(folder / "trials", ignore_errors=True)
    for name in ("study.log", "tuning.json", STUDY_LOCK):
        (folder / name).unlink(missing_ok=True)


def search_study(folder: Path, identity: dict) -> optuna.Study:
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


def sampler(seed: int, number: int, budget: int) -> optuna.samplers.TPESampler:
    """The sampler of trial ``number``: seeded by ``seed`` and the number, so that an interrupted search resumed
    draws what it would have drawn; random for the first third of the budget (2 to 10 trials)."""
    return optuna.samplers.TPESampler(seed=(seed + number) % 2**32, n_startup_trials=min(10, max(2, budget // 3)))


def started_trials(study: optuna.Study) -> list:
    """The study's trials that have started (run, running or failed), in number order."""
    return [t for t in study.get_trials(deepcopy=False) if t.state != TrialState.WAITING]


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's per-trial log lines held back while the block runs (each trial prints its own)."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)

"""The run folder: its name, its lock, its checks on resumption, the record of its data, its finished marker.

A run folder (:func:`ppl_models.experiments.runner.train`) holds:

* ``config.json``: the resolved configuration (every default filled in);
* ``metrics.jsonl`` and ``checkpoints/{last,best}.pt``: from the training loop;
* ``metrics.json`` and ``metrics.md``: the final table, each log-likelihood estimate
  named (``exact``, ``elbo``, ``iwae-K``, ``smc-K``) per time step and per sequence, in
  nats, beside the calibration metrics of the one-step-ahead predictive distribution;
* ``predictive.nc``: ArviZ ``InferenceData`` with observations and predictive samples, and
  ``pit.pt``, the probability integral transform of every valid test entry (real-valued data);
* ``data_split.json`` (a user's file): what went where, how it was cut, and the standardisation;
* ``predictions.json`` (real-valued data, models with an exact predictive distribution):
  the first test sequence with its one-step predictions before and after training, and the
  held-out MSE before training; the training log then carries the held-out MSE per epoch;
* ``plots/``: learning curve, PIT ECDF, coverage, predictive bands, particle cloud (the first test
  sequence filtered anew with at most :data:`ppl_models.experiments.outputs.PARTICLE_CLOUD_PARTICLES` particles);
* ``resume.jsonl``: one line per ``--resume`` (its time, the epoch it resumed from, the number of
  epochs it trains to, the device, and any change of ``train.epochs``); ``config.json`` keeps the
  first run's settings and is never rewritten;
* ``finished.json`` (:data:`FINISHED`): written last, once every output above is in place (its time and the
  data's content hash); a run folder without it is unfinished, whatever else it holds;
* ``.lock``: there and locked (:func:`.atomic_files.folder_lock`) only while a process trains or evaluates the
  run, so that a second process on the same folder is refused instead of writing beside the first;
* ``evaluations/evaluate-<time>-<pid>/``: each later ``evaluate`` of the run, with its own
  ``config.json`` (the run's, with the ``[evaluate]`` settings used), metrics, ``predictive.nc``
  and plots, written to a hidden folder beside it and renamed into place whole; the run's own
  outputs are never overwritten.

Every file is written atomically (:mod:`ppl_models.inference.atomic_files`). This module names the run folder, locks
it and prepares it for a session (new or resumed); the folder's own files are read and marked in
:mod:`ppl_models.experiments.run_files`, what identifies a run (its experiment, its data's content, its differences
from a configuration) in :mod:`ppl_models.experiments.run_identity`; their names are importable from here too.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ppl_models.inference.atomic_files import (
    append_jsonl,
    folder_lock,
    read_jsonl,
    remove_stale_temporaries,
    write_json,
    write_text,
)
from ppl_models.inference.training import check_experiment, load_checkpoint

from .run_files import (
    FINISHED,
    check_evaluation_folder,
    check_run_folder,
    is_finished,
    mark_finished,
    read_config_json,
)
from .run_identity import (
    RUNTIME_KEYS,
    config_differences,
    data_change,
    data_fingerprint,
    experiment_record,
    fixed_part,
    load_run_checkpoint,
    run_differences,
)

__all__ = [
    "RUNTIME_KEYS",
    "FINISHED",
    "timestamped",
    "check_writable",
    "check_run_folder",
    "read_config_json",
    "is_finished",
    "mark_finished",
    "run_session",
    "prepare_run_dir",
    "run_epochs",
    "experiment_record",
    "data_fingerprint",
    "run_differences",
    "config_differences",
    "load_run_checkpoint",
    "check_evaluation_folder",
]


_NAMES = itertools.count()


def timestamped(prefix: str) -> Path:
    """``runs/<prefix>-YYYYmmdd-HHMMSS-<pid>`` under the working directory, with ``-<n>`` from a process's second
    call on: unique across processes started in the same second and across calls in one process."""
    count = next(_NAMES)
    return Path("runs") / (f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" + (f"-{count}" if count else ""))


def check_writable(folder: str | Path, name: str) -> Path:
    """Create ``folder`` if needed and check that files can be written there, before any work is done."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / ".write-test", "")
        (folder / ".write-test").unlink(missing_ok=True)  # another process may test the same folder
    except OSError as error:
        raise ValueError(f"{name} {folder} cannot be written to ({error.strerror or error})") from None
    return folder


@contextmanager
def run_session(
    run_dir: str | Path, config: dict, *, resume: bool, change_epochs: bool, experiment: dict
) -> Iterator[Path]:
    """Lock ``run_dir`` (a second process on it is refused), prepare it (:func:`prepare_run_dir`) and mark it
    unfinished; yields the folder, which gets :data:`FINISHED` (with the data's content hash) when the block ends
    without an error."""
    with folder_lock(check_writable(run_dir, "run_dir"), "run_dir"):
        run_dir = prepare_run_dir(run_dir, config, resume=resume, change_epochs=change_epochs, experiment=experiment)
        (run_dir / FINISHED).unlink(missing_ok=True)  # unfinished again until this session's outputs are all written
        yield run_dir
        mark_finished(run_dir, data_fingerprint=experiment.get("data_fingerprint"))


def prepare_run_dir(
    run_dir: str | Path,
    config: dict,
    *,
    resume: bool = False,
    change_epochs: bool = False,
    experiment: dict | None = None,
) -> Path:
    """Check ``run_dir`` against ``resume``, write ``config.json`` (a new run) or ``resume.jsonl`` (a resumed one).

    A fresh run refuses a folder that already holds checkpoints. A resumed one never rewrites the
    saved ``config.json``: ``config`` must equal it except for :data:`RUNTIME_KEYS` (recorded) and, with
    ``change_epochs``, ``train.epochs`` (the run's current number, :func:`run_epochs`, otherwise);
    the checkpoint's saved experiment must match too, so a run cannot silently go on with other
    data (a user's file whose content hash, :func:`data_fingerprint`, changed is refused naming
    it), another model, objective or evaluation. Each resumption appends its record to
    ``resume.jsonl``. Stale temporary files of a killed writer are removed first: call it where
    no other process writes to ``run_dir`` (:func:`run_session` holds the folder's lock).
    """
    run_dir = check_writable(run_dir, "run_dir")
    remove_stale_temporaries(run_dir)
    if not resume and (run_dir / "checkpoints").exists():
        raise ValueError(f"run_dir {run_dir} already holds a run: pass --resume to continue it or pick a new folder")
    saved_path, last = run_dir / "config.json", run_dir / "checkpoints" / "last.pt"
    given = json.loads(json.dumps(config))
    if not resume or not (saved_path.is_file() or last.is_file()):  # a new run (--resume of nothing starts one)
        write_json(saved_path, config)
        return run_dir
    epochs = run_epochs(run_dir)
    saved = read_config_json(saved_path) if saved_path.is_file() else None
    if saved is not None:
        _check_unchanged(saved, given, saved_path)
    start = load_checkpoint(last) if last.is_file() else {}  # the checkpoint is the truth, even without config.json
    _check_checkpoints(run_dir, start, given, fixed_part(given) if experiment is None else experiment)
    _check_epochs(epochs, given, saved_path, change_epochs)
    if not saved_path.is_file():
        write_json(saved_path, config)  # restored from the experiment the checkpoint confirmed
    append_jsonl(run_dir / "resume.jsonl", _resumption(start, epochs, given, saved))
    return run_dir


def _check_checkpoints(run_dir: Path, start: dict, given: dict, experiment: dict) -> None:
    """Raise ``ValueError`` unless the checkpoints of ``run_dir`` (``start``: its ``last.pt``) hold ``experiment``,
    the one ``given`` makes, on the same data."""
    last = run_dir / "checkpoints" / "last.pt"
    changed = data_change(start.get("experiment"), experiment, given, last)
    if changed:
        raise ValueError(f"resume: {changed}; train a new run on it (another --run-dir)")
    check_experiment(start.get("experiment"), experiment, last)
    best = run_dir / "checkpoints" / "best.pt"
    if best.is_file():  # e.g. copied from another run
        check_experiment(load_checkpoint(best).get("experiment"), experiment, best)


def _check_epochs(epochs: int | None, given: dict, saved_path: Path, change_epochs: bool) -> None:
    """Raise ``ValueError`` where ``given``'s ``train.epochs`` differs from the run's ``epochs`` without
    ``change_epochs``, or on a cosine schedule (whose length is the run's)."""
    wanted = given["train"]["epochs"]
    if epochs is None or wanted == epochs:
        return
    if not change_epochs:
        raise ValueError(
            f"resume: train.epochs={wanted} differs from the run's {epochs} ({saved_path} is never "
            f"rewritten): resume without it, or pass --epochs {wanted} to change the run's length"
        )
    if given["train"].get("lr_schedule") == "cosine":
        raise ValueError(
            f"resume: train.epochs cannot change on a run with lr_schedule='cosine' (its length is "
            f"the schedule's); the run trains to {epochs} epochs"
        )


def _resumption(start: dict, epochs: int | None, given: dict, saved: dict | None) -> dict:
    """The ``resume.jsonl`` record of a resumption of ``given`` from the checkpoint ``start`` of a run of ``epochs``
    saved as ``saved``: its time, epochs, device, and what changed (``train.epochs``, :data:`RUNTIME_KEYS`)."""
    wanted = given["train"]["epochs"]
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "from_epoch": start.get("epoch", 0),
        "epochs": wanted,
        "device": given.get("device"),
    }
    if epochs is not None and wanted != epochs:
        record["changed"] = {"train.epochs": [epochs, wanted]}
    runtime = {key: list(pair) for key, pair in config_differences(saved or {}, given).items() if key in RUNTIME_KEYS}
    if saved and runtime:
        record["runtime"] = runtime  # differs from config.json, for this resumption only
    return record


def run_epochs(run_dir: str | Path) -> int | None:
    """The number of epochs a run in ``run_dir`` trains to: its ``config.json``'s ``train.epochs``, or the last
    change of it recorded in ``resume.jsonl``; ``None`` where the folder holds no run."""
    run_dir = Path(run_dir)
    log = run_dir / "resume.jsonl"
    changes = [r["epochs"] for r in read_jsonl(log) if "epochs" in r] if log.is_file() else []
    if changes:
        return changes[-1]
    if not (run_dir / "config.json").is_file():
        return None
    return read_config_json(run_dir / "config.json").get("train", {}).get("epochs")


def _check_unchanged(saved: dict, given: dict, path: Path) -> None:
    """Raise ``ValueError`` naming each setting of ``given`` that differs from ``saved`` (:data:`RUNTIME_KEYS` and
    ``train.epochs`` aside)."""
    changed = {
        key: values
        for key, values in config_differences(saved, given).items()
        if key not in (*RUNTIME_KEYS, "train.epochs")
    }
    if changed:
        sections = sorted({key.split(".")[0] for key in changed})
        shown = ", ".join(f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changed.items())[:4])
        raise ValueError(
            f"resume: the configuration differs from the one saved in {path} (in {sections}): {shown}; "
            "pass the same experiment and --set overrides as the first run (config.json is never "
            "rewritten; only --device and --epochs may change)"
        )

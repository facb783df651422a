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

Every file is written atomically (:mod:`ppl_models.inference.atomic_files`).
"""

from __future__ import annotations

import hashlib
import inspect
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
from ppl_models.inference.training import RESUMABLE_CHANGES, check_experiment, load_best, load_checkpoint

from .registry import DATASETS, MODELS, OBJECTIVES

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

#: what a resumption may change without changing the run: where and how fast it runs, whether it prints progress
RUNTIME_KEYS = ("device", "train.progress", "train.cuda_graph")

#: the file a run folder gets last, once every output is in place
FINISHED = "finished.json"

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


def check_run_folder(folder: Path, *, name: str = "run_dir") -> Path:
    """``folder`` if it is a finished run's folder (it holds ``config.json``); else one ``ValueError``."""
    folder = Path(folder)
    if not folder.exists():
        raise ValueError(f"{name} {folder} does not exist")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{name} {folder} has no config.json: is it a run folder?")
    return folder


def read_config_json(path: Path) -> dict:
    """A run folder's ``config.json`` as a dict; one ``ValueError`` naming the file if it is unreadable."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable run configuration: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a run configuration (a JSON object), got {type(config).__name__}")
    return config


def is_finished(run_dir: str | Path) -> bool:
    """Whether the run in ``run_dir`` wrote every output (its :data:`FINISHED` file is written last)."""
    return (Path(run_dir) / FINISHED).is_file()


def mark_finished(run_dir: Path, **record) -> None:
    """Write :data:`FINISHED` into ``run_dir``: its time and ``record``. Call it once every output is in place."""
    write_json(run_dir / FINISHED, {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **record})


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
    experiment = _fixed_part(given) if experiment is None else experiment  # what the checkpoints must hold
    changed = _data_change(start.get("experiment"), experiment, given, last)
    if changed:
        raise ValueError(f"resume: {changed}; train a new run on it (another --run-dir)")
    check_experiment(start.get("experiment"), experiment, last)
    best = run_dir / "checkpoints" / "best.pt"
    if best.is_file():  # e.g. copied from another run
        check_experiment(load_checkpoint(best).get("experiment"), experiment, best)
    wanted = given["train"]["epochs"]
    if epochs is not None and wanted != epochs:
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
    if not saved_path.is_file():
        write_json(saved_path, config)  # restored from the experiment the checkpoint confirmed
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
    append_jsonl(run_dir / "resume.jsonl", record)
    return run_dir


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


def experiment_record(config: dict, data) -> dict:
    """What a run's checkpoints record and a resumption must match: ``config`` without what a resumption may change
    and, for a user's file (``data``: its :class:`~ppl_models.experiments.data.ExperimentData`), the standardisation
    of its training split and :func:`data_fingerprint` (a file changed in any split is refused on resume)."""
    experiment = _fixed_part(config)
    if data.split_record is not None:
        experiment["data_standardizer"] = data.split_record["standardizer"]
        name = data.split_record.get("transform", {}).get("name", "none")
        if name != "none":  # recorded only where there is one: runs made before transforms stay resumable
            experiment["data_transform"] = name
    fingerprint = data_fingerprint(config)
    if fingerprint is not None:
        experiment["data_fingerprint"] = fingerprint
    return experiment


def _fixed_part(config: dict) -> dict:
    """``config`` without what a resumption may change: device, ``[evaluate]``, ``train.epochs``, ``train.progress``."""
    train = {k: v for k, v in config.get("train", {}).items() if k not in RESUMABLE_CHANGES}
    return {**{k: v for k, v in config.items() if k not in ("device", "evaluate")}, "train": train}


def data_fingerprint(config: dict) -> str | None:
    """``'sha256:<hex>'`` of a user's data (``data.name = "file"``): the file's bytes, or the names and bytes of
    every file of a folder (MIDI), in name order; ``None`` for a registered data set."""
    data = config.get("data", {})
    if data.get("name") != "file":
        return None
    path = Path(data["path"])
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        if file != path:
            digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def _data_change(saved: dict | None, given: dict, config: dict, checkpoint: Path) -> str | None:
    """Why the data of ``config`` (its experiment's ``data_*`` records ``given``) is not the data of the experiment
    ``saved`` in ``checkpoint``; ``None`` where it is, or where either records no content hash (a registered data
    set, an old checkpoint)."""
    fingerprint = given.get("data_fingerprint")
    if fingerprint is None or saved is None or saved.get("data_fingerprint") == fingerprint:
        return None
    path = config["data"]["path"]
    if "data_fingerprint" not in saved:
        return (
            f"{checkpoint} holds no record of its data's content (an earlier version wrote it), so the data "
            f"{path} cannot be checked against it"
        )
    also = sorted(k for k in given if k.startswith("data_") and k != "data_fingerprint" and saved.get(k) != given[k])
    return (
        f"the data {path} is not the data the run was trained on (its content changed"
        f"{'; so did ' + ', '.join(also) if also else ''})"
    )


def run_differences(run_dir: str | Path, config: dict, experiment: dict | None) -> list[str]:
    """What differs between the run in ``run_dir`` and a run of ``config`` on its data as it is now, one line each.

    ``experiment`` is the one saved in the run's checkpoint. Each setting of ``config.json`` (or of
    the checkpoint's experiment, without ``config.json``) that differs gives ``'key: old -> new'``
    (:data:`RUNTIME_KEYS` aside); a user's file is matched by its content, not by how its path is spelled: one whose
    content is not the one the run was trained on (:func:`data_fingerprint`) gives a line naming it. Empty where
    the run is ``config``'s.
    """
    run_dir, given = Path(run_dir), _with_defaults(config)
    if (run_dir / "config.json").is_file():
        changes = config_differences(_with_defaults(read_config_json(run_dir / "config.json")), given)
    else:
        recorded = {k: v for k, v in (experiment or {}).items() if not k.startswith("data_")}
        changes = config_differences(_with_defaults(recorded), _fixed_part(given))
    ignored = RUNTIME_KEYS + (("data.path",) if given.get("data", {}).get("name") == "file" else ())
    found = [f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changes.items()) if key not in ignored]
    data = (
        None
        if any(line.startswith("data.") for line in found)
        else _data_change(
            experiment, {"data_fingerprint": data_fingerprint(config)}, given, run_dir / "checkpoints" / "last.pt"
        )
    )
    return found + ([data] if data else [])


def _with_defaults(config: dict) -> dict:
    """A copy of ``config`` whose ``data``, ``model`` and ``objective`` sections hold their builders' defaults too (a
    setting given at its default is then no change)."""
    config = json.loads(json.dumps(config))
    for section, registry in (("data", DATASETS), ("model", MODELS), ("objective", OBJECTIVES)):
        table = config.get(section)
        entry = registry.get(table.get("name")) if isinstance(table, dict) else None
        if entry is None:
            continue
        for key, parameter in inspect.signature(entry.build).parameters.items():
            if parameter.default is not inspect.Parameter.empty and key not in table:
                table[key] = json.loads(json.dumps(parameter.default, default=str))
    return config


def config_differences(saved, given, prefix: str = "") -> dict[str, tuple]:
    """``{dotted key: (saved value, given value)}`` of the leaves where two nested dicts differ."""
    if not (isinstance(saved, dict) and isinstance(given, dict)):
        return {} if saved == given else {prefix: (saved, given)}
    found = {}
    for key in {*saved, *given}:
        found.update(config_differences(saved.get(key), given.get(key), f"{prefix}.{key}" if prefix else key))
    return found


def load_run_checkpoint(run_dir: Path, objective, config: dict) -> dict:
    """:func:`~ppl_models.inference.training.load_best` of a run for the experiment ``config``; a ``best.pt`` of
    another experiment (another model, other data: a file copied from another run) is a ``ValueError`` naming both."""
    path = Path(run_dir) / "checkpoints" / "best.pt"
    if not path.exists():
        raise ValueError(f"{path} does not exist: is the run finished (best.pt is written after a validation)?")
    checkpoint = load_checkpoint(path)
    saved = checkpoint.get("experiment") or {}
    for section in ("model", "data"):
        expected = json.loads(json.dumps(config[section]))
        if section in saved and saved[section] != expected:
            ours, theirs = _describe(saved[section], expected), _describe(expected, saved[section])
            raise ValueError(
                f"{path} is for {section} {ours} but {Path(run_dir) / 'config.json'} expects {section} "
                f"{theirs}: the two files come from different runs"
            )
    try:
        return load_best(run_dir, objective)
    except RuntimeError as error:  # no saved experiment (an older run), and parameters of another shape or name
        first = str(error).split("\n")[1].strip() if "\n" in str(error) else str(error)
        raise ValueError(
            f"{path} does not fit model {config['model'].get('name')!r} of "
            f"{Path(run_dir) / 'config.json'} (the two files come from different runs): {first}"
        ) from None


def _describe(section: dict, other: dict) -> str:
    """``'name'`` of a config section, with the settings where it differs from ``other`` in brackets."""
    differ = [f"{k}={section[k]!r}" for k in section if k != "name" and other.get(k, object()) != section[k]]
    return repr(section.get("name")) + (f" ({', '.join(differ[:4])})" if differ else "")


def check_evaluation_folder(out: Path, run_dir: Path, force: bool) -> None:
    """Refuse an ``out`` that is a file, a run folder (or holds ``run_dir``), a folder of other files, or (without
    ``force``) an evaluation already."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"evaluation folder {out} is a file, not a folder")
    if (
        out.resolve() == run_dir.resolve()
        or out.resolve() in run_dir.resolve().parents
        or (out / "checkpoints").exists()
    ):
        raise ValueError(
            f"evaluation folder {out} is (or holds) a run folder: evaluate writes beside a run, "
            "never over it; pick another --out"
        )
    if (out / "metrics.json").exists() and not force:
        raise ValueError(
            f"{out} already holds an evaluation (metrics.json): pass --force to replace it or --out to write elsewhere"
        )
    if out.is_dir() and any(out.iterdir()) and not (out / "metrics.json").exists():
        raise ValueError(f"evaluation folder {out} holds other files, not an evaluation: pick a new or empty --out")

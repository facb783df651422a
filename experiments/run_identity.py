"""What a run is (:mod:`ppl_models.experiments.run_folder`): the experiment its checkpoints record
(:func:`experiment_record`), the content of its data (:func:`data_fingerprint`), how it differs from a configuration
(:func:`run_differences`, :func:`config_differences`), and its best checkpoint loaded only for its own experiment
(:func:`load_run_checkpoint`)."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from pathlib import Path

from ppl_models.inference.training import RESUMABLE_CHANGES, TrainConfig, load_best, load_checkpoint

from .registry import DATASETS, MODELS, OBJECTIVES
from .run_files import read_config_json
from .spec_builders import table_parameters

__all__ = [
    "RUNTIME_KEYS",
    "experiment_record",
    "fixed_part",
    "data_fingerprint",
    "data_change",
    "run_differences",
    "config_differences",
    "load_run_checkpoint",
]

#: what a resumption may change without changing the run: where and how fast it runs, whether it prints progress
RUNTIME_KEYS = ("device", "train.progress", "train.cuda_graph")


def experiment_record(config: dict, data) -> dict:
    """What a run's checkpoints record and a resumption must match: ``config`` without what a resumption may change
    and, for a user's file (``data``: its :class:`~ppl_models.experiments.data.ExperimentData`), the standardisation
    of its training split and :func:`data_fingerprint` (a file changed in any split is refused on resume)."""
    experiment = fixed_part(config)
    if data.split_record is not None:
        experiment["data_standardizer"] = data.split_record["standardizer"]
        name = data.split_record.get("transform", {}).get("name", "none")
        if name != "none":  # recorded only where there is one: runs made before transforms stay resumable
            experiment["data_transform"] = name
    fingerprint = data_fingerprint(config)
    if fingerprint is not None:
        experiment["data_fingerprint"] = fingerprint
    return experiment


def fixed_part(config: dict) -> dict:
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


def data_change(saved: dict | None, given: dict, config: dict, checkpoint: Path) -> str | None:
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
        changes = config_differences(_with_defaults(recorded), fixed_part(given))
    ignored = RUNTIME_KEYS + (("data.path",) if given.get("data", {}).get("name") == "file" else ())
    found = [f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changes.items()) if key not in ignored]
    data = (
        None
        if any(line.startswith("data.") for line in found)
        else data_change(
            experiment, {"data_fingerprint": data_fingerprint(config)}, given, run_dir / "checkpoints" / "last.pt"
        )
    )
    return found + ([data] if data else [])


def _with_defaults(config: dict) -> dict:
    """A copy of ``config`` whose ``data``, ``model`` and ``objective`` sections hold their builders' defaults too
    (:func:`~ppl_models.experiments.spec_builders.table_parameters`), and its ``train`` section
    :class:`~ppl_models.inference.training.TrainConfig`'s: a setting given at its default, or added since a run at
    the default it ran with, is then no change."""
    config = json.loads(json.dumps(config))
    train = config.get("train")
    if isinstance(train, dict):
        for field in dataclasses.fields(TrainConfig):
            if field.default is not dataclasses.MISSING and field.name not in train:
                train[field.name] = json.loads(json.dumps(field.default, default=str))
    for section, registry in (("data", DATASETS), ("model", MODELS), ("objective", OBJECTIVES)):
        table = config.get(section)
        entry = registry.get(table.get("name")) if isinstance(table, dict) else None
        if entry is None:
            continue
        for key, parameter in table_parameters(entry.build, getattr(entry, "spec", None)).items():
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

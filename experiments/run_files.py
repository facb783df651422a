"""A run folder's own files (:mod:`ppl_models.experiments.run_folder`): its ``config.json`` read, its
:data:`FINISHED` marker, and the folder an evaluation of it writes to."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ppl_models.inference.atomic_files import write_json

__all__ = [
    "FINISHED",
    "check_run_folder",
    "read_config_json",
    "is_finished",
    "mark_finished",
    "check_evaluation_folder",
]

#: the file a run folder gets last, once every output is in place
FINISHED = "finished.json"


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

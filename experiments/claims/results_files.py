"""The results files under ``docs/results/``: read one (:func:`read_results_file`), choose where a rerun writes its
own (:func:`results_destination`) and write it (:func:`write_results`), so that a file is never replaced by less
evidence: by every path, :func:`~ppl_models.experiments.claims.reproductions.reproduce`, the transfers and each
study run on its own."""

from __future__ import annotations

import json
from pathlib import Path

from ppl_models.inference.atomic_files import write_json

__all__ = ["read_results_file", "results_destination", "write_results"]


def read_results_file(path: Path):
    """The JSON data of the results file at ``path``; one ``ValueError`` naming the file if it is not readable JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON (truncated or edited by hand?): {error}; restore it or rerun what wrote it"
        ) from None


def _held_seeds(path: Path) -> list[int] | None | bool:
    """The seeds the file at ``path`` holds (sorted), ``None`` where it holds no list of seeds, ``False`` where it
    cannot be read or its seeds are not numbers."""
    try:
        data = read_results_file(path)
    except (OSError, ValueError):
        return False
    held = data.get("seeds") if isinstance(data, dict) else None
    if held is None:
        return None
    try:
        return sorted(int(seed) for seed in held) if isinstance(held, list) else False
    except (TypeError, ValueError):
        return False


def results_destination(path: Path, seeds, elsewhere: Path) -> Path:
    """Where a rerun on ``seeds`` (``None``: a record without seeds) writes its results file: ``path``, unless the
    file there holds seeds the rerun lacks, holds seeds where the rerun has none, or cannot be read (it is never
    replaced by less evidence); then ``elsewhere``, said in one printed line."""
    path = Path(path)
    if not path.is_file():
        return path
    held = _held_seeds(path)
    seeds = None if seeds is None else sorted(int(seed) for seed in seeds)
    if held is None and seeds is None:
        return path
    if isinstance(held, list) and seeds is not None and set(held) <= set(seeds):
        return path
    if isinstance(held, list):
        what = f"holds seeds {held}, more than this rerun on seeds {seeds}"
    else:
        what = "has no readable list of seeds" if held is False else f"has no list of seeds to set beside seeds {seeds}"
    print(f"{path} {what}: it is kept; the results go to {elsewhere}")
    return Path(elsewhere)


def write_results(path: str | Path, record: dict, elsewhere: str | Path | None = None) -> Path:
    """Write ``record`` (a results file's data; its ``seeds``, if any, say its evidence) atomically at ``path``, or
    at ``elsewhere`` (default ``runs/<file name>``) where the file at ``path`` holds more (:func:`results_destination`);
    the path written."""
    path = Path(path)
    seeds = record.get("seeds") if isinstance(record, dict) else None
    destination = results_destination(path, seeds, Path(elsewhere) if elsewhere else Path("runs") / path.name)
    write_json(destination, record)
    return destination

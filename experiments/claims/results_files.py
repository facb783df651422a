"""The results files under ``docs/results/``: read one (:func:`read_results_file`) and choose where a rerun
writes its own (:func:`results_destination`) so that a file is never replaced by less evidence."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["read_results_file", "results_destination"]


def read_results_file(path: Path):
    """The JSON data of the results file at ``path``; one ``ValueError`` naming the file if it is not readable JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON (truncated or edited by hand?): {error}; restore it or rerun what wrote it"
        ) from None


def results_destination(path: Path, seeds, elsewhere: Path) -> Path:
    """Where a rerun on ``seeds`` writes its results file: ``path``, unless the file there holds seeds the rerun
    lacks or cannot be read (it is never replaced by less evidence); then ``elsewhere``, said in one printed line."""
    path, seeds = Path(path), [int(seed) for seed in seeds]
    if not path.is_file():
        return path
    try:
        data = read_results_file(path)
        held = data.get("seeds") if isinstance(data, dict) else None
        held = sorted(int(seed) for seed in held) if isinstance(held, list) else None
    except (ValueError, TypeError):  # unreadable, or seeds that are not numbers
        held = None
    if held is not None and set(held) <= set(seeds):
        return path
    what = f"holds seeds {held}" if held is not None else "has no readable list of seeds"
    print(f"{path} {what}, more than this rerun on seeds {seeds}: it is kept; the results go to {elsewhere}")
    return Path(elsewhere)

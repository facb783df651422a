"""Atomic writes for run folders: a file is either its old content or its new one, never half.

Each writer writes to a temporary file in the target's folder, flushes it to disk,
then renames it over the target (``os.replace`` is atomic on POSIX and Windows). A failed
write (a full disk, a lost permission) is an ``OSError`` whose ``filename`` is the target.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = ["atomic_write", "write_text", "write_json", "save_torch", "append_jsonl", "read_jsonl",
           "remove_stale_temporaries", "naming"]


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file, then move it onto ``path``.

    An ``OSError`` on the way (``ENOSPC``, ``EACCES``, ...) is raised again naming ``path``.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual mode
        os.replace(tmp, path)
    except BaseException as error:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise naming(error, path) from error
        raise
    return path


def naming(error: OSError, path: str | os.PathLike) -> OSError:
    """``error`` as an ``OSError`` of the same kind (errno, message) whose ``filename`` is ``path``."""
    if error.errno is None:
        return OSError(f"{path}: {error}")
    return OSError(error.errno, error.strerror or str(error), str(path))  # OSError() picks the subclass by errno


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files :func:`atomic_write` left in ``folder`` when killed mid-write.

    Call it where no other writer is at work (a run's start); returns the files removed.
    """
    folder = Path(folder)
    stale = sorted(folder.glob(".*.tmp")) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Atomically write ``obj`` as indented JSON."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


def save_torch(path: str | os.PathLike, obj: Any) -> Path:
    """Atomically ``torch.save`` ``obj`` to ``path``."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # through a file object, a full disk is an OSError (not torch's RuntimeError)
            torch.save(obj, handle)

    return atomic_write(path, write)


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one JSON line (one record per line; a partial last line is ignored by :func:`read_jsonl`)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, default=_jsonable) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise naming(error, path) from error


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read the complete records of a JSON-lines file (a torn last line is dropped)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def _jsonable(value):
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy and torch scalars alike
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")

"""Atomic writes for run folders: a file is either its old content or its new one, never half.

Each writer writes to a temporary file in the target's folder, flushes it to disk,
then renames it over the target (``os.replace`` is atomic on POSIX and Windows). A failed
write (a full disk, a lost permission) is an ``OSError`` whose ``filename`` is the target.
:func:`folder_lock` keeps a folder to one writing process at a time.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

__all__ = [
    "atomic_write",
    "write_text",
    "write_json",
    "save_torch",
    "append_jsonl",
    "read_jsonl",
    "remove_stale_temporaries",
    "naming",
    "staged_folder",
    "recover_staged",
    "folder_lock",
    "LOCK_FILE",
]

#: the file in a folder that :func:`folder_lock` locks
LOCK_FILE = ".lock"


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


@contextmanager
def staged_folder(target: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yield a new empty folder beside ``target`` to write into; when the block ends without error, move it onto
    ``target`` whole. On an error (or Ctrl-C) it is deleted and ``target`` is left as it was.

    ``target`` may be missing or an empty folder; a non-empty one is replaced only with ``replace``
    (it is renamed aside, the new folder renamed into place, then the old one deleted). A process
    killed between those two renames leaves the old folder as ``.<name>.replaced-<pid>-*``, and one
    killed while writing leaves ``.<name>.partial-<pid>-*``: the next call for ``target`` restores
    the first and deletes the second, once their process is gone. If another writer fills
    ``target`` meanwhile (without ``replace``), the new folder is kept under a name of its own,
    given in the ``FileExistsError``.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_staged(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-{os.getpid()}-", dir=target.parent))
    try:
        yield staging
        _publish(staging, target, replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _publish(staging: Path, target: Path, replace: bool) -> None:
    """Rename ``staging`` onto ``target`` (see :func:`staged_folder`)."""
    try:
        os.rename(staging, target)  # atomic; onto a missing target or an empty folder
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise naming(error, target) from error
    if not replace:
        kept = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
        os.rename(staging, kept)
        raise FileExistsError(
            errno.EEXIST, f"another writer filled it meanwhile; these results are in {kept}", str(target)
        )
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-{os.getpid()}-", dir=target.parent))
    os.rename(target, old)  # onto the empty placeholder
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def recover_staged(target: str | os.PathLike) -> None:
    """Undo what a killed :func:`staged_folder` of ``target`` left behind (its process gone): call it before
    looking at ``target``."""
    target = Path(target)
    if not target.parent.is_dir():
        return
    for kind in ("replaced", "partial"):
        prefix = f".{target.name}.{kind}-"
        for path in sorted(p for p in target.parent.iterdir() if p.name.startswith(prefix)):
            pid = path.name[len(prefix) :].split("-", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if kind == "replaced" and not target.exists():
                os.rename(path, target)  # killed between the two renames: the old folder is the only whole one
            else:
                shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (on this machine; where that cannot be known, assume it does)."""
    if pid == os.getpid() or os.name != "posix":  # os.kill(pid, 0) ends the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as another user
        return True
    return True


@contextmanager
def folder_lock(folder: str | os.PathLike, name: str = "folder") -> Iterator[Path]:
    """Hold an exclusive OS lock on the existing ``folder`` (on its :data:`LOCK_FILE`) while the block runs.

    The OS releases the lock when the process ends, however it ends (``kill -9`` too), so a lock
    is never stale. The holder removes :data:`LOCK_FILE` as it lets go (a folder at rest has none; one left by a
    killed process is simply locked again); a process that opened the file before it went locks its own file
    anew. A folder another process holds is a ``ValueError`` naming ``name`` and ``folder``. Where the OS has no
    ``fcntl`` (Windows), the block runs without a lock.
    """
    folder = Path(folder)
    if fcntl is None:
        yield folder
        return
    path = folder / LOCK_FILE
    fd = _locked(path, name, folder)
    try:
        yield folder
    finally:
        try:
            path.unlink(missing_ok=True)  # while held: whoever opened it meanwhile finds it gone (_locked)
        finally:
            os.close(fd)  # releases the lock


def _locked(path: Path, name: str, folder: Path) -> int:
    """A descriptor of the lock file ``path``, exclusively locked; one a holder removed between its opening and its
    locking is let go and the new one locked instead."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:
            raise naming(error, path) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(
                f"{name} {folder} is in use by another process writing to it: wait until it ends, or "
                "pick another folder"
            ) from None
        if _same_file(fd, path):
            return fd
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd``."""
    try:
        held, named = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


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

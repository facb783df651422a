"""Helpers shared by the studies that run a paper's official code beside ours (``*_official.py``).

The official code is never part of this project: a study extracts a snapshot of the authors' repository (a git
directory fetched separately) into a work folder at run time, applies recorded text edits
(``(file, old text, new text, why)``, each old text occurring once) and runs it in its own process.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import tarfile
import time
from pathlib import Path

__all__ = [
    "apply_edits",
    "edits_record",
    "extract_snapshot",
    "snapshot_commit",
    "mean_sd",
    "environment",
    "run_logged",
    "run_timed_lines",
    "relative",
    "portable",
]


#: the flags of the studies whose values are paths of this machine, and the names the results files show instead
PLACEHOLDERS = {"--official-git-dir": "OFFICIAL_GIT_DIR", "--python": "TF_PYTHON", "--work-dir": "WORK_DIR"}


def apply_edits(root: Path, edits: list[tuple[str, str, str, str]]) -> None:
    """Apply each ``(file, old, new, why)`` under ``root``; each ``old`` must occur exactly once in its file.

    Raises ValueError naming the file and the edit (its index and ``why``) when ``old`` is missing or repeated.
    """
    for index, (name, old, new, why) in enumerate(edits):
        path = root / name
        if not path.is_file():
            raise ValueError(f"{path}: no such file for edit {index} ({why})")
        text = path.read_text()
        if text.count(old) != 1:
            raise ValueError(
                f"{path}: edit {index} ({why}): expected the text to edit once, found it "
                f"{text.count(old)} times: {old!r}"
            )
        path.write_text(text.replace(old, new))


def edits_record(edits: list[tuple[str, str, str, str]]) -> list[dict]:
    """The edits as ``{"file", "old", "new", "why"}`` records for a results file."""
    return [{"file": f, "old": old, "new": new, "why": why} for f, old, new, why in edits]


def extract_snapshot(git_dir: Path, folder: Path, rev: str = "HEAD", paths: tuple[str, ...] = ()) -> None:
    """Extract ``rev`` of the git directory ``git_dir`` (only ``paths`` when given) into ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "--format=tar", rev, *paths], capture_output=True)
    if done.returncode:
        raise ValueError(f"{git_dir}: git archive {rev} failed: {done.stderr.decode().strip().splitlines()[-1:]}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(folder, filter="data")


def snapshot_commit(git_dir: Path, rev: str = "HEAD") -> str:
    """The full commit hash of ``rev`` in the git directory ``git_dir``."""
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True, text=True
    )
    if done.returncode:
        raise ValueError(f"{git_dir}: no commit {rev!r}")
    return done.stdout.strip()


def mean_sd(values: list[float]) -> dict:
    """``{"mean", "sd", "n"}`` (sample sd; 0.0 for one value)."""
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def environment(**extra: str) -> dict:
    """This process's environment with one thread per math library, plus ``extra``."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **extra}


def run_logged(command: list[str], cwd: Path, log: Path, env: dict, append: bool = False) -> float:
    """Run ``command`` in ``cwd`` with stdout and stderr to ``log`` (after its old lines if ``append``); its wall
    seconds. RuntimeError on failure."""
    start = time.perf_counter()
    with open(log, "a" if append else "w") as out:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed in {cwd} (exit {done.returncode}); see {log}")
    return time.perf_counter() - start


def run_timed_lines(command: list[str], cwd: Path, log: Path, env: dict) -> tuple[float, list[tuple[float, str]]]:
    """Like :func:`run_logged`, also returning each output line with its arrival, in seconds from the start.

    Returns ``(wall seconds, [(seconds, line)])``; the log holds the lines as they came.
    """
    start = time.perf_counter()
    lines = []
    with (
        open(log, "w") as out,
        subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process,
    ):
        for line in process.stdout:
            lines.append((time.perf_counter() - start, line.rstrip("\n")))
            out.write(line)
            out.flush()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed in {cwd} (exit {process.returncode}); see {log}")
    return time.perf_counter() - start, lines


def relative(path: Path) -> Path:
    """``path`` relative to the working directory where it lies under it (results files name no machine's paths)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def portable(argv: list[str], placeholders: dict[str, str] | None = None) -> list[str]:
    """A study's arguments with the values of the flags naming paths of this machine written as placeholders
    (``{flag: name}``; default: the official snapshot as ``OFFICIAL_GIT_DIR``, a TensorFlow Python as
    ``TF_PYTHON``, the folder of the runs as ``WORK_DIR``)."""
    placeholders = PLACEHOLDERS if placeholders is None else placeholders
    out = list(argv)
    for i, arg in enumerate(out):
        flag = arg.split("=", 1)[0]
        if flag not in placeholders:
            continue
        if "=" in arg:
            out[i] = f"{flag}={placeholders[flag]}"
        elif i + 1 < len(out):
            out[i + 1] = placeholders[flag]
    return out

"""Child processes side by side on the machine's cores (``ppl-models demo``, the leaderboard's models).

:func:`run_processes` runs child commands ``jobs`` at a time, the costliest first, each with
``cores // jobs`` threads (two torch processes with default threads stall each other on two
cores), each one's output kept in a log file of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ppl_models.inference.validation import check_positive_int

__all__ = ["run_processes", "default_jobs", "cli_command", "LOG_TAIL"]

#: the lines of a failed child's log that :func:`run_processes` shows
LOG_TAIL = 20
_CLI = "import sys; from ppl_models.experiments.cli import main; sys.exit(main(sys.argv[1:]))"


def default_jobs() -> int:
    """Children run at once by default: one per core, at most two (each trains a small model; more would share
    cores)."""
    return max(1, min(2, os.cpu_count() or 1))


def cli_command(*arguments: str) -> list[str]:
    """The argv of ``ppl-models ARGUMENTS`` run by this interpreter (the console script need not be on ``PATH``)."""
    return [sys.executable, "-c", _CLI, *arguments]


def run_processes(commands: Sequence[tuple[str, Sequence[str]]], logs: str | Path, *, jobs: int,
                  cost: Mapping[str, float] | None = None, echo: bool = True) -> dict[str, int]:  # fmt: skip
    """Run the child ``commands`` (``(label, argv)``, labels distinct) ``jobs`` at a time; ``{label: exit status}``
    in the order of ``commands`` (a child killed by signal N: ``-N``).

    ``cost`` (``{label: expected time}``): the costliest start first, a label without a cost before them all;
    without it, the order of ``commands``. Each child writes its stdout and stderr to ``logs/<label>.log`` and
    runs with ``max(1, cores // min(jobs, len(commands)))`` threads (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``;
    torch reads them). ``echo``: print a child's log whole when it ends. Each child that fails is reported on
    stderr by its label, its exit status and the last :data:`LOG_TAIL` lines of its log.
    """
    jobs = check_positive_int(jobs, name="jobs")
    files = _log_files([label for label, _ in commands], Path(logs))
    order = sorted(commands, key=lambda item: -cost.get(item[0], float("inf"))) if cost is not None else commands
    threads = max(1, (os.cpu_count() or 1) // max(1, min(jobs, len(commands))))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    Path(logs).mkdir(parents=True, exist_ok=True)
    print(f"running {len(commands)} processes, {jobs} at a time ({threads} thread(s) each); logs in {logs}",
          flush=True)  # fmt: skip
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        ended = dict(zip([label for label, _ in order],
                         pool.map(lambda item: _run(item[1], files[item[0]], env, echo), order)))  # fmt: skip
    codes = {label: ended[label] for label, _ in commands}
    for label, code in codes.items():
        if code != 0:
            print(_failure(label, code, files[label]), file=sys.stderr, flush=True)
    return codes


def _log_files(labels: list[str], folder: Path) -> dict[str, Path]:
    """``{label: folder/<label>.log}``, a label's characters other than letters, digits, ``.``, ``-`` and ``_`` as
    ``_``; labels that give the same file are refused."""
    files = {label: folder / f"{re.sub(r'[^A-Za-z0-9._-]', '_', label)}.log" for label in labels}
    if len(set(files.values())) != len(labels):
        raise ValueError(f"commands: expected labels that name distinct log files, got {labels}")
    return files


def _run(argv: Sequence[str], log: Path, env: dict, echo: bool) -> int:
    """One child, its output into ``log``; its exit status."""
    with open(log, "w") as handle:
        code = subprocess.run(list(argv), stdout=handle, stderr=subprocess.STDOUT, env=env).returncode
    if echo:
        print(log.read_text(errors="replace"), end="", flush=True)
    return code


def _failure(label: str, code: int, log: Path) -> str:
    """The report of a failed child: its label, exit status and the last lines of its log."""
    tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
    return "\n".join([f"{label}: failed with exit status {code} (log {log}); its last lines:",
                      *(f"    {line}" for line in tail or ["(empty)"])])  # fmt: skip

"""Child processes side by side on the machine's cores (``ppl-models demo``, the leaderboard's models).

:func:`run_processes` runs child commands ``jobs`` at a time, the costliest first, each with
``cores // jobs`` threads (two torch processes with default threads stall each other on two
cores), each one's output kept in a log file of its own. On Linux a child dies with the process
that started it (``kill -9`` of a board ends its models' training too). A child, like the command
line, reports a user error (:data:`USER_ERRORS`) in one line (:func:`one_line`).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path

from ppl_models.inference.training import TrainingDiverged
from ppl_models.inference.validation import InputTypeError, check_positive_int

__all__ = ["run_processes", "default_jobs", "cli_command", "LOG_TAIL", "PROGRESS_EVERY", "USER_ERRORS", "one_line"]

#: what a user's input or environment causes (bad settings, files, folders, a diverging run; a TypeError
#: only from the input checks of ppl_models.inference.validation): one line,
#: exit status 2; anything else is a bug and keeps its traceback (the command line's ``--debug`` keeps it for these too)
USER_ERRORS = (ValueError, InputTypeError, OSError, TrainingDiverged)

#: the lines of a failed child's log that :func:`run_processes` shows
LOG_TAIL = 20
#: seconds between :func:`run_processes`' lines on the children still running
PROGRESS_EVERY = 10.0
_PR_SET_PDEATHSIG = 1  # prctl's option: the signal a process gets when its parent dies (<linux/prctl.h>)
_CLI = "import sys; from ppl_models.experiments.cli import main; sys.exit(main(sys.argv[1:]))"


def one_line(error: BaseException) -> str:
    """A user error as one line; an ``OSError`` names its file (``path: No space left on device (errno 28)``)."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror} (errno {error.errno})"
    return " ".join(str(error).split()) or type(error).__name__


def default_jobs() -> int:
    """Children run at once by default: one per core, at most two (each trains a small model; more would share
    cores)."""
    return max(1, min(2, os.cpu_count() or 1))


def cli_command(*arguments: str) -> list[str]:
    """The argv of ``ppl-models ARGUMENTS`` run by this interpreter (the console script need not be on ``PATH``)."""
    return [sys.executable, "-c", _CLI, *arguments]


def run_processes(
    commands: Sequence[tuple[str, Sequence[str]]],
    logs: str | Path,
    *,
    jobs: int,
    cost: Mapping[str, float] | None = None,
    echo: bool = True,
    progress_every: float = PROGRESS_EVERY,
) -> dict[str, int]:
    """Run the child ``commands`` (``(label, argv)``, labels distinct) ``jobs`` at a time; ``{label: exit status}``
    in the order of ``commands`` (a child killed by signal N: ``-N``).

    ``cost`` (``{label: expected time}``): the costliest start first, a label without a cost before them all;
    without it, the order of ``commands``. Each child writes its stdout and stderr to ``logs/<label>.log`` and
    runs with ``max(1, cores // min(jobs, len(commands)))`` threads (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``;
    torch reads them). ``echo``: print a child's log whole when it ends. Each child that fails is reported on
    stderr by its label and its exit status, and, its log not echoed, the last :data:`LOG_TAIL` lines of it. While
    children run, a line every ``progress_every`` seconds says which, for how long, and the last thing each log says.
    Where the OS can (Linux), a child is killed when this process dies, however it dies.
    """
    jobs = check_positive_int(jobs, name="jobs")
    files = _log_files([label for label, _ in commands], Path(logs))
    order = sorted(commands, key=lambda item: -cost.get(item[0], float("inf"))) if cost is not None else commands
    threads = max(1, (os.cpu_count() or 1) // max(1, min(jobs, len(commands))))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    Path(logs).mkdir(parents=True, exist_ok=True)
    print(f"running {len(commands)} processes, {jobs} at a time ({threads} thread(s) each); logs in {logs}", flush=True)
    armed, started = _dies_with_parent(), {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = {
            label: pool.submit(_run, argv, files[label], env, echo, armed, partial(started.__setitem__, label))
            for label, argv in order
        }
        while wait(running.values(), timeout=progress_every).not_done:
            print(_progress(running, started, files), flush=True)
    codes = {label: running[label].result() for label, _ in commands}
    for label, code in codes.items():
        if code != 0:
            print(_failure(label, code, files[label], 0 if echo else LOG_TAIL), file=sys.stderr, flush=True)
    return codes


def _log_files(labels: list[str], folder: Path) -> dict[str, Path]:
    """``{label: folder/<label>.log}``, a label's characters other than letters, digits, ``.``, ``-`` and ``_`` as
    ``_``; labels that give the same file are refused."""
    files = {label: folder / f"{re.sub(r'[^A-Za-z0-9._-]', '_', label)}.log" for label in labels}
    if len(set(files.values())) != len(labels):
        raise ValueError(f"commands: expected labels that name distinct log files, got {labels}")
    return files


def _progress(running: dict, started: dict[str, float], files: dict[str, Path]) -> str:
    """One line: each running child's label, seconds so far and the last thing its log says, and how many ended."""
    now, ended = time.monotonic(), sum(future.done() for future in running.values())
    busy = [
        f"{label} {now - started[label]:.0f} s ({_last_words(files[label])})"
        for label, future in running.items()
        if label in started and not future.done()
    ]
    return f"running: {', '.join(busy) or '-'}; {ended} of {len(running)} ended"


def _last_words(log: Path, width: int = 60) -> str:
    """The last line (or progress-bar update) of ``log``, at most ``width`` characters; ``...`` while it is empty."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return "..."
    pieces = [piece.strip() for piece in re.split(r"[\r\n]", tail) if piece.strip()]
    last = pieces[-1] if pieces else "..."
    return last if len(last) <= width else last[: width - 3] + "..."


def _run(
    argv: Sequence[str], log: Path, env: dict, echo: bool, armed: Callable[[], None] | None, began: Callable
) -> int:
    """One child, its output into ``log``, ``armed`` run in it before its command (:func:`_dies_with_parent`),
    ``began(time)`` called as it starts; its exit status."""
    began(time.monotonic())
    with open(log, "w") as handle:
        code = subprocess.run(list(argv), stdout=handle, stderr=subprocess.STDOUT, env=env, preexec_fn=armed).returncode
    if echo:
        print(log.read_text(errors="replace"), end="", flush=True)
    return code


def _dies_with_parent() -> Callable[[], None] | None:
    """What a child runs before its command so that the OS kills it when this process dies (Linux's
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), or ``None`` where the OS has no such call (the child then outlives a
    killed parent). The signal follows the thread that started the child: :func:`run_processes`' threads outlive
    their children."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no C library to load, or one without prctl
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


def _failure(label: str, code: int, log: Path, lines: int) -> str:
    """The report of a failed child: its label, exit status and the last ``lines`` lines of its log."""
    head = f"{label}: failed with exit status {code} (log {log})"
    if not lines:
        return head
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join([f"{head}; its last lines:", *(f"    {line}" for line in tail or ["(empty)"])])

"""The README's own-data example timed as a new user runs it, each figure beside its goal (:data:`GOALS`).

In a fresh folder: the README's Python block that writes ``my.csv``, then its ``ppl-models leaderboard`` line
(the default threads and ``--jobs``), then the same line again (a rerun keeps every trained model and fitted
classical row). Both lines are read from ``README.md`` itself, so the figures are those of the text a user copies.
The results file gives each wall time, whether the rerun wrote the same ``leaderboard.md``, the machine and its
load; a docs page renders it (``<!-- speed:NAME -->``).

Usage::

    python -m ppl_models.experiments.benchmarks.readme_board --out docs/results/readme_board_cpu.json   # minutes
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ppl_models.experiments.benchmarks.timing import load_average, machine_info
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.experiments.claims.results_files import write_results

__all__ = ["GOALS", "readme_example", "main"]

#: seconds: the board's first run and its rerun on 2 cores
GOALS = {"board_s": 90.0, "rerun_s": 5.0}
LABELS = {"board_s": "README's example board, first run", "rerun_s": "the same command again (a rerun)"}
ROOT = Path(__file__).resolve().parents[2]


def readme_example(readme: str) -> tuple[str, str]:
    """``(python, command)``: the README's Python block that writes ``my.csv`` and its leaderboard line."""
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    writes = [block for block in blocks if '.to_csv("my.csv"' in block]
    lines = [line for line in readme.splitlines() if line.startswith("ppl-models leaderboard --data my.csv")]
    if len(writes) != 1 or len(lines) != 1:
        raise ValueError(
            f"README.md must have one Python block writing my.csv and one 'ppl-models leaderboard --data my.csv' "
            f"line, found {len(writes)} and {len(lines)}"
        )
    return writes[0], lines[0]


def _timed(argv: list[str], folder: Path) -> dict:
    """Run ``argv`` in ``folder``: wall seconds, exit status and the last lines of output."""
    start = time.perf_counter()
    run = subprocess.run(argv, cwd=folder, capture_output=True, text=True)
    return {
        "seconds": time.perf_counter() - start,
        "exit_status": run.returncode,
        "output_tail": (run.stdout + run.stderr).splitlines()[-8:],
    }


def _goal(name: str, run: dict) -> dict:
    ok = run["exit_status"] == 0
    return {
        "bound": GOALS[name],
        "measured": run["seconds"],
        "met": ok and run["seconds"] <= GOALS[name],
        "label": LABELS[name],
        "unit": "s",
        **({} if ok else {"failed": f"exit status {run['exit_status']}"}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    python, command = readme_example((ROOT / "README.md").read_text())
    cli = [sys.executable, "-m", "ppl_models.experiments.cli", *shlex.split(command)[1:]]
    record = {"machine": machine_info("cpu"), "load_average_start": load_average(), "readme_command": command}
    with tempfile.TemporaryDirectory(prefix="readme_board_") as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, "-c", python], cwd=folder, check=True)
        runs = {"board_s": _timed(cli, folder)}
        first = (
            (folder / "runs" / "board" / "leaderboard.md").read_text() if runs["board_s"]["exit_status"] == 0 else None
        )
        runs["rerun_s"] = _timed(cli, folder)
        again = folder / "runs" / "board" / "leaderboard.md"
        record["same_leaderboard_on_rerun"] = first is not None and again.is_file() and again.read_text() == first
    record.update(runs=runs, load_average_end=load_average(), threads=os.environ.get("OMP_NUM_THREADS", "default"))
    record["goals"] = {name: _goal(name, run) for name, run in runs.items()}
    for goal in record["goals"].values():
        verdict = "met" if goal["met"] else "missed"
        print(f"{goal['label']:<40}{goal['measured']:8.1f} s   goal <= {goal['bound']:g} s: {verdict}", flush=True)
    print(f"rerun wrote the same leaderboard.md: {record['same_leaderboard_on_rerun']}")
    if args.out is not None:
        write_results(args.out, {**record, **script_provenance("ppl_models.experiments.benchmarks.readme_board", argv)})
    return 0


if __name__ == "__main__":
    sys.exit(main())

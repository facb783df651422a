"""``ppl-models demo``: the quick demos (:data:`~ppl_models.experiments.registry.DEMOS`), side by side on the
machine's cores.

Each demo is an experiment trained into ``ROOT/<name>``. With ``jobs > 1`` the demos run as
separate processes (:func:`~ppl_models.experiments.processes.run_processes`), ``jobs`` at a time,
the longest first, each with ``cores // jobs`` threads; a demo's output (its progress lines, its table) is printed
whole when it ends, and kept in ``ROOT/logs/<name>.log``. The demos end with a summary
(:mod:`~ppl_models.experiments.demo_summary`): each one's headline figures with their units, the pictures to open
and the wall time, also written to ``ROOT/summary.json``.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ppl_models.inference.atomic_files import write_json

from . import registry, runner, supervised
from .build import resolve_device
from .config import load_config
from .demo_summary import SUMMARY_FILE, demo_summary, format_summary
from .processes import cli_command, default_jobs, run_processes
from .tables import format_table

__all__ = ["run_demos", "default_jobs", "LONGEST_FIRST"]

#: the demos by their time on 2 CPU cores, longest first: the order a parallel run starts them in
LONGEST_FIRST = ("srnn-demo", "pfrnn-demo", "psrnn-demo", "smct-demo", "lgssm-demo")
QUICK = ["train.epochs=3", "evaluate.num_particles=200", "evaluate.iwae_particles=20"]
#: set in the environment of a parallel run's children: each runs one demo, and the parent prints the summary
PART_ENV = "PPL_MODELS_DEMO_PART"


def run_demos(names, root: str | Path, *, jobs: int = 1, device: str | None = None, quick: bool = False) -> int:
    """Train the demos ``names`` into ``root``, then print the summary (unless this process is one demo of a parallel
    run) and write it to ``ROOT/summary.json``; returns 0, or 2 if one failed (its error printed)."""
    root = Path(root)
    if device:
        resolve_device(device)  # an unavailable device is refused before any demo starts
    started = time.monotonic()
    failed = []
    if jobs <= 1 or len(names) == 1:
        for name in names:
            _run_one(name, root, device, quick)
    else:
        with _children_are_parts():
            codes = run_processes(
                [(name, _command(name, root, device, quick)) for name in names],
                root / "logs",
                jobs=jobs,
                cost={name: -LONGEST_FIRST.index(name) for name in LONGEST_FIRST},
            )
        failed = [name for name, code in codes.items() if code != 0]
    if os.environ.get(PART_ENV) != "1":
        summary = demo_summary(root, names, time.monotonic() - started)
        write_json(root / SUMMARY_FILE, summary)
        print(format_summary(summary), flush=True)
    if failed:
        print(f"ppl-models: error: demos {failed} failed (see their logs in {root / 'logs'})", file=sys.stderr)
        return 2
    return 0


@contextmanager
def _children_are_parts():
    """:data:`PART_ENV` set while the block starts the children (which inherit it), as it was after."""
    before = os.environ.get(PART_ENV)
    os.environ[PART_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[PART_ENV]
        else:
            os.environ[PART_ENV] = before


def _run_one(name: str, root: Path, device: str | None, quick: bool) -> None:
    """One demo in this process: train, print its table."""
    path = registry.experiment_config(name)
    print(f"\nDemo {name}: {registry.EXPERIMENTS[name].description}", flush=True)
    if supervised.is_supervised(path):
        config = supervised.load_supervised_config(path, ["train.epochs=1"] if quick else [])
        config["device"] = device or config["device"]
        metrics = supervised.train(config, root / name)
        print(supervised.format_table(metrics) + f"\n\nrun folder: {root / name}", flush=True)
        return
    config = load_config(path, QUICK if quick else [])
    config["device"] = device or config["device"]
    metrics = runner.train(config, root / name)
    print(format_table(metrics) + f"\n\nrun folder: {root / name}", flush=True)


def _command(name: str, root: Path, device: str | None, quick: bool) -> list[str]:
    """The child command of one demo: ``ppl-models demo --only NAME --jobs 1``."""
    return cli_command(
        "demo",
        "--only",
        name,
        "--jobs",
        "1",
        "--run-dir",
        str(root),
        *(["--device", device] if device else []),
        *(["--quick"] if quick else []),
    )

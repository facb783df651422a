"""Peak memory of a user's own file against its size, for skewed lengths (one long series beside many short ones)
and even ones.

Each file is a long-format CSV (``series``, ``t``, ``value``) made from ``--seed`` in a temporary folder:

* ``skewed-K``: one series of ``100 K`` steps and ``K`` series of 10 steps (K = 100, 330, 1000: 0.3, 1 and 3 MB);
* ``even-K``: ``1.1 K`` series of 100 steps (as many rows as ``skewed-K``).

For each file, each command runs in a fresh process under an address-space cap (``--cap-gb``, so that a command
that would need more stops with an allocation error instead of taking the machine's memory) and its peak RSS is
read from the kernel (``wait4``: the process and the processes it waited for):

* ``data``: :func:`~ppl_models.experiments.tasks.own_file.file_data` of the file (read, split by series, the
  transform chosen on the validation split, the splits as tensors) and the elements of each split's tensors;
* ``train``: ``ppl-models train gru --data FILE --series series --time t --set train.epochs=1``.

On the largest skewed file, also a board (``ppl-models leaderboard`` of ``gru`` and ``lgssm`` with the
``last-value`` and ``arima`` rows, one epoch) and, with the long series held out (:data:`HELD_OUT`: scored whole,
each step given its history), ``train gru`` with it in the validation split, in the test split and split by time,
and the board with it in the test split.

``--before FILE`` copies the held-out runs of an earlier results file of this benchmark (run on the code before a
change, e.g. in a checkout of an earlier commit) beside this run's, as ``held_out_before``.

Usage::

    python -m ppl_models.experiments.benchmarks.skewed_memory --out docs/results/skewed_memory_cpu.json
    python -m ppl_models.experiments.benchmarks.skewed_memory --quick      # two small files
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ppl_models.experiments.benchmarks.timing import load_average, machine_info
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json

__all__ = ["FULL", "QUICK", "skewed_file", "even_file", "data_probe", "measured", "main"]

#: the ``K`` of the files of the full run and of ``--quick``
FULL = (100, 330, 1000)
QUICK = (30, 100)
#: the short series' steps, the long one's per short series, and the steps of each series of an even file
SHORT_STEPS, LONG_PER_SHORT, EVEN_STEPS = 10, 100, 100
#: the ``train`` arguments that hold the long series of ``skewed-1000`` out of the training split: the split seeds
#: that put it in the validation and the test split (seed 0: the training split), and a split by time, where every
#: held-out segment keeps its series' history (fractions that leave the 10-step series 2 steps in each part)
HELD_OUT = {
    "validation": ("--set", "data.split_seed=3"),
    "test": ("--set", "data.split_seed=6"),
    "time": ("--split", "time", "--set", "data.fractions=[0.6,0.2,0.2]"),
}
#: what the commands name the columns by
COLUMNS = ["--series", "series", "--time", "t"]


def _write(folder: Path, name: str, lengths: list[int], seed: int) -> Path:
    """A long-format CSV of random walks of ``lengths`` steps (``series``, ``t``, ``value``)."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "series": np.repeat([f"s{i}" for i in range(len(lengths))], lengths),
            "t": np.concatenate([np.arange(n) for n in lengths]),
            "value": np.concatenate([rng.normal(size=n).cumsum() for n in lengths]),
        }
    )
    path = folder / f"{name}.csv"
    table.to_csv(path, index=False)
    return path


def skewed_file(folder: Path, short: int, seed: int) -> Path:
    """``skewed-<short>.csv``: one series of ``100 short`` steps, then ``short`` series of 10 steps."""
    return _write(folder, f"skewed-{short}", [LONG_PER_SHORT * short] + [SHORT_STEPS] * short, seed)


def even_file(folder: Path, short: int, seed: int) -> Path:
    """``even-<short>.csv``: ``1.1 short`` series of 100 steps, as many rows as :func:`skewed_file`'s."""
    rows = (LONG_PER_SHORT + SHORT_STEPS) * short
    return _write(folder, f"even-{short}", [EVEN_STEPS] * (rows // EVEN_STEPS), seed)


def data_probe(path: str) -> dict:
    """:func:`~ppl_models.experiments.tasks.own_file.file_data` of ``path``: each split's tensor shape and elements
    (``x`` and ``mask``), and the steps of the data."""
    from ppl_models.experiments.tasks.own_file import file_data

    data = file_data(path, series="series", time="t")
    splits = {name: getattr(data, name) for name in ("train", "valid", "test")}
    return {
        "shapes": {name: list(x.shape) for name, (x, _) in splits.items()},
        "elements": {name: x.numel() + mask.numel() for name, (x, mask) in splits.items()},
        "valid_steps": {name: int(mask.sum()) for name, (_, mask) in splits.items()},
    }


def measured(command: list[str], cap_bytes: int, timeout: float, threads: int) -> dict:
    """Run ``command`` in a fresh process under an address-space cap of ``cap_bytes``: its peak RSS (MB; itself or
    any process it waited for), wall seconds, exit status, whether it stopped at ``timeout`` or on the cap (an
    allocation refused), the tail of its output and the load average when it ended."""

    def capped():
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    def stop():
        stopped.set()
        process.kill()

    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    stopped, start = threading.Event(), time.perf_counter()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=capped)
        timer = threading.Timer(timeout, stop)
        timer.start()
        _, status, usage = os.wait4(process.pid, 0)
        timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read().decode(errors="replace")
    refused = ("can't allocate memory", "Cannot allocate memory", "MemoryError", "std::bad_alloc", "out of memory")
    return {
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "seconds": time.perf_counter() - start,
        "exit_status": process.returncode,
        "timed_out": stopped.is_set(),
        "stopped_by_cap": any(text in output for text in refused),
        "output_tail": output.strip().splitlines()[-3:],
        "load_average": load_average(),
    }


def _commands(path: Path, folder: Path, held_out: str | None = None) -> dict[str, list[str]]:
    """The ``data`` probe and ``train gru`` commands of the file at ``path`` (``held_out``: a case of
    :data:`HELD_OUT`)."""
    python = [sys.executable, "-m"]
    return {
        "data": [*python, "ppl_models.experiments.benchmarks.skewed_memory", "--probe", str(path)],
        "train": [
            *python,
            "ppl_models.experiments.cli",
            "train",
            "gru",
            "--data",
            str(path),
            *COLUMNS,
            "--run-dir",
            str(folder / f"run-{path.stem}{_suffix(held_out)}"),
            "--set",
            "train.epochs=1",
            *HELD_OUT.get(held_out, ()),
        ],
    }


def _board(path: Path, folder: Path, held_out: str | None = None) -> list[str]:
    """The one-epoch board command of the file at ``path`` (``held_out``: a case of :data:`HELD_OUT`)."""
    return [
        sys.executable,
        "-m",
        "ppl_models.experiments.cli",
        "leaderboard",
        "--data",
        str(path),
        *COLUMNS,
        "--models",
        "gru,lgssm",
        "--classical",
        "last-value,arima",
        "--jobs",
        "1",
        "--set",
        "train.epochs=1",
        "--out",
        str(folder / f"board{_suffix(held_out)}"),
        *HELD_OUT.get(held_out, ()),
    ]


def _suffix(held_out: str | None) -> str:
    """The folder name suffix of a :data:`HELD_OUT` case."""
    return f"-held-out-{held_out}" if held_out else ""


def _held_out(path: Path, folder: Path, args) -> dict:
    """The ``train gru`` runs of the file at ``path`` with its long series held out (:data:`HELD_OUT`), and the
    board with it in the test split."""
    runs = {name: _run(f"train, {name}", _commands(path, folder, name)["train"], args) for name in HELD_OUT}
    return {**runs, "board, test": _run("board, test", _board(path, folder, "test"), args)}


def _file_row(kind: str, path: Path, short: int, results: dict) -> dict:
    """A file's record: its kind, size, steps and longest series, and the ``results`` of its commands."""
    steps = (LONG_PER_SHORT + SHORT_STEPS) * short
    return {
        "kind": kind,
        "file": path.name,
        "file_mb": path.stat().st_size / 1e6,
        "steps": steps,
        "longest": LONG_PER_SHORT * short if kind == "skewed" else EVEN_STEPS,
        **results,
    }


def _run(name: str, command: list[str], args) -> dict:
    """:func:`measured` of ``command``, shown in one line, with the ``data`` probe's figures read from its output."""
    run = measured(command, int(args.cap_gb * 2**30), args.timeout, args.threads)
    probe = run["output_tail"][-1] if name == "data" and run["exit_status"] == 0 else None
    shown = "stopped by the cap" if run["stopped_by_cap"] else f"exit status {run['exit_status']}"
    print(f"  {name:<18}{run['peak_rss_mb']:9.0f} MB  {run['seconds']:7.1f} s  {shown}", flush=True)
    return {**run, "command": " ".join(command[2:]), **({"probe": json.loads(probe)} if probe else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of every command, GiB")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds after which a command is stopped")
    parser.add_argument("--threads", type=int, default=1, help="threads of every command (OMP_NUM_THREADS)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the files' values")
    parser.add_argument("--quick", action="store_true", help="two small files, no board")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="an earlier results file of this benchmark whose held-out runs to record beside these",
    )
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # the data command, in its own process
    args = parser.parse_args(argv)
    if args.probe is not None:
        print(json.dumps(data_probe(args.probe)))
        return 0
    if args.cap_gb <= 0 or args.timeout <= 0 or args.threads < 1:
        parser.error("--cap-gb and --timeout must be > 0 and --threads >= 1")
    before = _before(parser, args.before)
    sizes = QUICK if args.quick else FULL
    results = {
        "seed": args.seed,
        "cap_gb": args.cap_gb,
        "threads": args.threads,
        "quick": args.quick,
        "machine": machine_info("cpu"),
        "load_average_start": load_average(),
        "files": [],
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="skewed_memory_") as tmp:
        folder = Path(tmp)
        for short in sizes:
            for kind, make in (("skewed", skewed_file), ("even", even_file)):
                path = make(folder, short, args.seed)
                print(f"{path.name} ({path.stat().st_size / 1e6:.2f} MB)", flush=True)
                runs = {name: _run(name, command, args) for name, command in _commands(path, folder).items()}
                results["files"].append(_file_row(kind, path, short, runs))
        if not args.quick:
            path = folder / f"skewed-{sizes[-1]}.csv"
            print(f"{path.name}: board, and the long series held out", flush=True)
            results["board"] = _run("board", _board(path, folder), args)
            results["held_out"] = _held_out(path, folder, args)
    if before is not None:
        results["held_out_before"] = before
    results["load_average_end"] = load_average()
    results["wall_s"] = time.perf_counter() - started
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.skewed_memory"
        write_json(args.out, {**results, **script_provenance(module, argv, (args.seed,))})
    return 0


def _before(parser, path: Path | None) -> dict | None:
    """The held-out runs of the results file at ``path`` with the code they ran (``None`` without one); a file
    without them is refused."""
    if path is None:
        return None
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"--before {path}: not a results file of this benchmark ({error})")
    if not isinstance(earlier, dict) or "held_out" not in earlier:
        parser.error(f"--before {path}: no held-out runs (a full run of this benchmark has them)")
    return {"file": path.name, "machine": earlier.get("machine"), "runs": earlier["held_out"]}


if __name__ == "__main__":
    sys.exit(main())

"""Old commit against new, paired: the seconds of a recipe's training steps, or of a whole command, under two source
trees, alternated.

``python -m ppl_models.experiments.benchmarks.paired_commits --old COMMIT --recipe NAME [--steps N --rounds R
--set KEY=VALUE ... --out FILE]``

``python -m ppl_models.experiments.benchmarks.paired_commits --old COMMIT --cli "train vrnn --data FILE ..."
[--threads N --rounds R --out FILE]``

``python -m ppl_models.experiments.benchmarks.paired_commits --old COMMIT --row "pf-lstm layer" [--threads N
--repeats N --rounds R --out FILE]``

The old tree is ``COMMIT``'s files (``git archive``, in a temporary folder), the new one this checkout. Each round
runs one fresh process per tree, old first in odd rounds and new first in even ones, on one CPU thread. A process
builds the recipe's experiment from its configuration (the same data, model and objective for the same seed), takes
the first ``N`` training batches of its first epoch's order and times ``N`` training steps (objective, backward,
Adam) after one warm-up step; the figure of a round is its median step. The results file gives every round's steps,
the median over rounds of each tree and their ratio, with the commands, seeds, both commits and the machine.

With ``--row NAME`` each process times one row of the speed targets (:mod:`.speed_targets`) at their shapes,
``--repeats`` calls after a warm-up, on ``--threads`` threads: ``pf-lstm layer``, ``pf-lstm training step``,
``lstmcell loop B*K`` (:mod:`.pf_rnn`) or ``bootstrap filter`` (ours, float32, :mod:`.bootstrap_filter`); the
figure of a round is its median call.

With ``--cli`` each process runs ``ppl-models`` with the given arguments (a fresh run folder each, ``--threads``
threads) and its figure is the command's wall seconds, imports included; the results file also says whether both
trees wrote the same ``metrics.json`` in every round (the same figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats
from ppl_models.experiments.claims.provenance import git_state, script_provenance
from ppl_models.experiments.claims.results_files import write_results
from ppl_models.experiments.data import DATA_ENV, resolve_data_dir

__all__ = ["STEP_TIMER", "main"]

#: the child process: times training steps of a recipe (arguments: recipe, steps, JSON list of overrides)
STEP_TIMER = """
import json, statistics, sys, time
import torch
torch.set_num_threads(1)
import pyro
from ppl_models.experiments.build import build_experiment
from ppl_models.experiments.config import load_config
from ppl_models.experiments.registry import experiment_config
from ppl_models.inference.training.batches import epoch_batches
name, steps, overrides = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
config = load_config(experiment_config(name), overrides)
pyro.set_rng_seed(config["seed"])
data, model, objective = build_experiment(config)
x, mask = data.train[:2]
size = config["train"]["batch_size"]
batches = epoch_batches(len(x), size, seed=config["seed"], epoch=0)
optimizer = torch.optim.Adam(objective.parameters(), lr=1e-4)
objective.train()
times = []
for index in [batches[0], *(batches * steps)[:steps]]:
    start = time.perf_counter()
    loss = objective(x[index], mask[index]).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    times.append(time.perf_counter() - start)
print(json.dumps(times[1:]))
"""


ROW_TIMER = """
import json, sys, torch
from ppl_models.experiments.benchmarks.timing import time_repeats
name, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
if name == "bootstrap filter":
    from ppl_models.experiments.benchmarks import bootstrap_filter, lgssm_problem
    config = bootstrap_filter.FULL
    data = lgssm_problem.make_data(config["num_sequences"], config["num_steps"], 0)
    run, _ = bootstrap_filter.prepare_ours(config["num_particles"], data, seed=0)
else:
    from ppl_models.experiments.benchmarks import pf_rnn
    run = pf_rnn.row_step(name, 128, 30, 80, 64, "cpu")
    run()
print(json.dumps(time_repeats(run, repeats, "cpu")[0]))
"""

#: the rows ``--row`` times (:data:`ROW_TIMER`)
ROWS = ("pf-lstm layer", "pf-lstm training step", "lstmcell loop B*K", "bootstrap filter")


def _run_row(tree: Path, row: str, threads: int, repeats: int) -> list[float]:
    """The call seconds of speed-target row ``row``, in one fresh process importing the package from ``tree``."""
    out = subprocess.run(
        [sys.executable, "-c", ROW_TIMER, row, str(threads), str(repeats)],
        cwd=tree,
        env=_environment(tree, threads),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run(tree: Path, recipe: str, steps: int, overrides: list[str]) -> list[float]:
    """The step seconds of one fresh process importing the package from ``tree`` (the data folder: this
    checkout's)."""
    out = subprocess.run(
        [sys.executable, "-c", STEP_TIMER, recipe, str(steps), json.dumps(overrides)],
        cwd=tree,
        env=_environment(tree, 1),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _environment(tree: Path, threads: int) -> dict:
    """The child's environment: the package from ``tree``, ``threads`` threads, this checkout's data folder."""
    return {
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PATH": os.environ.get("PATH", ""),
        DATA_ENV: str(resolve_data_dir()),
    }


def _run_cli(tree: Path, arguments: list[str], threads: int, run_dir: Path) -> tuple[float, dict]:
    """The wall seconds of ``ppl-models ARGUMENTS --run-dir RUN_DIR`` importing the package from ``tree``, and the
    ``metrics.json`` it wrote."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ppl_models.experiments.cli", *arguments, "--run-dir", str(run_dir)],
        cwd=tree,
        env=_environment(tree, threads),
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    return seconds, json.loads((run_dir / "metrics.json").read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the old commit")
    parser.add_argument("--recipe", default="srnn-authors-jsb")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override")
    parser.add_argument("--cli", default=None, help="time this whole ppl-models command instead (one string)")
    parser.add_argument("--row", default=None, choices=ROWS, help="time this speed-target row instead")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of the --row per process")
    parser.add_argument("--threads", type=int, default=1, help="threads of each --cli or --row process")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if min(args.steps, args.rounds, args.threads, args.repeats) < 1:
        parser.error(
            "--steps, --rounds, --threads and --repeats must be at least 1, got "
            f"{args.steps}, {args.rounds}, {args.threads} and {args.repeats}"
        )
    if args.cli is not None and args.row is not None:
        parser.error("--cli and --row time different things: give one")
    if args.cli is not None and (args.set or "--run-dir" in shlex.split(args.cli)):
        parser.error("--cli takes the whole command (its --set items included) and makes the run folders itself")
    new = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as folder:
        old = Path(folder) / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(new), "archive", args.old], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        trees = {"old": old, "new": new}
        rounds, same_figures = [], []
        for round_index in range(args.rounds):
            order = ("old", "new") if round_index % 2 == 0 else ("new", "old")
            if args.row is not None:
                rounds.append({side: _run_row(trees[side], args.row, args.threads, args.repeats) for side in order})
            elif args.cli is None:
                rounds.append({side: _run(trees[side], args.recipe, args.steps, args.set) for side in order})
            else:
                runs = {
                    side: _run_cli(
                        trees[side], shlex.split(args.cli), args.threads, Path(folder) / f"{side}-{round_index}"
                    )
                    for side in order
                }
                rounds.append({side: [seconds] for side, (seconds, _) in runs.items()})
                same_figures.append(runs["old"][1] == runs["new"][1])
            print(json.dumps({side: round(statistics.median(s), 3) for side, s in rounds[-1].items()}), flush=True)
    medians = {side: statistics.median(statistics.median(r[side]) for r in rounds) for side in ("old", "new")}
    name = args.row or (args.recipe if args.cli is None else f"ppl-models {args.cli}")
    if args.row is not None:
        what = (
            f"seconds per call of the speed-target row {args.row!r} (median of {args.repeats} calls per process, "
            f"median over {args.rounds} rounds), old commit against new, {args.threads} thread(s)"
        )
    elif args.cli is None:
        what = (
            f"seconds per training step of {args.recipe} (median of {args.steps} steps per process, median "
            f"over {args.rounds} rounds), old commit against new, one CPU thread"
        )
    else:
        what = (
            f"wall seconds of `{name}` (one process per tree and round, {args.threads} thread(s), median over "
            f"{args.rounds} rounds), old commit against new"
        )
    record = {
        "what": what,
        **script_provenance("ppl_models.experiments.benchmarks.paired_commits", argv),
        "old_commit": subprocess.run(
            ["git", "-C", str(new), "rev-parse", args.old], check=True, capture_output=True, text=True
        ).stdout.strip(),
        "new_commit": git_state(),
        "machine": machine_info("cpu"),
        "load_average": load_average(),
        "rounds": rounds,
        "median_step_seconds" if args.cli is None and args.row is None else "median_seconds": medians,
        "speedup": medians["old"] / medians["new"],
        # the form a docs page renders (<!-- speed:NAME -->): each side's round medians, and the speed-up
        "rows": {
            f"{side} ({label})": {**stats([statistics.median(r[side]) for r in rounds]), "median_s": medians[side]}
            for side, label in (("old", args.old), ("new", "this checkout"))
        },
        "comparisons": {name: {"speed_up": medians["old"] / medians["new"]}},
        "threads": 1 if args.cli is None and args.row is None else args.threads,
    }
    if args.cli is not None:
        record["same_metrics_every_round"] = all(same_figures)
    print(
        json.dumps(
            {"medians": medians, "speedup": record["speedup"], **({"same": same_figures} if same_figures else {})}
        )
    )
    if args.out:
        write_results(args.out, record)


if __name__ == "__main__":
    main()

"""Where a bootstrap-filter run's time goes: the model's step, the resampling, the weighting.

The speed targets' filter (:mod:`~ppl_models.experiments.benchmarks.bootstrap_filter`: K = 1000, T = 1000,
B = 16, float32, one thread) runs ``--repeats`` times after a warm-up while the filter's three per-step parts
are timed, each call with ``time.perf_counter`` (the CPU runs every operation before returning). Beside them,
in the same run: the step's standard-normal draws alone (``torch.randn`` of ``K B`` values, ``T`` times), the
floor no rewrite of the model's step goes below. Rows are seconds per run (of ``T`` steps), medians over the
repeats; the rest of a run is the loop and its records.

Usage::

    python -m ppl_models.experiments.benchmarks.filter_step_parts --out docs/results/filter_step_parts_cpu.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks import bootstrap_filter, lgssm_problem
from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.experiments.claims.results_files import write_results
from ppl_models.inference import particle_filter
from ppl_models.inference.state_space import MarkovStateSpace

__all__ = ["PARTS", "main", "time_parts"]

#: the timed parts: (row name, class, method)
PARTS = (
    ("model step (proposal and weight)", MarkovStateSpace, "step"),
    ("resampling and gather", particle_filter._Sweep, "resample"),
    ("weighting, normalisation and ESS", particle_filter._Sweep, "weigh"),
)


def time_parts(repeats: int, config: dict = bootstrap_filter.FULL, seed: int = 0) -> dict:
    """``{row: [seconds of each run]}`` for the whole run, each of :data:`PARTS` and the normal draws alone."""
    torch.set_num_threads(1)
    k, steps, batch = config["num_particles"], config["num_steps"], config["num_sequences"]
    run, _ = bootstrap_filter.prepare_ours(k, lgssm_problem.make_data(batch, steps, seed), seed=seed)
    spent: dict[str, float] = defaultdict(float)
    originals = {name: getattr(owner, method) for name, owner, method in PARTS}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            out = function(*args, **kwargs)
            spent[name] += time.perf_counter() - start
            return out

        return wrapper

    rows = defaultdict(list)
    try:
        for name, owner, method in PARTS:
            setattr(owner, method, timed(name, originals[name]))
        run()  # warm-up
        for _ in range(repeats):
            spent.clear()
            start = time.perf_counter()
            run()
            rows["whole run"].append(time.perf_counter() - start)
            for name, _, _ in PARTS:
                rows[name].append(spent[name])
            start = time.perf_counter()
            for _ in range(steps):
                torch.randn(k, batch, 1)
            rows["normal draws alone"].append(time.perf_counter() - start)
    finally:
        for name, owner, method in PARTS:
            setattr(owner, method, originals[name])
    return dict(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs")
    parser.add_argument("--quick", action="store_true", help="the smoke configuration (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    config = bootstrap_filter.QUICK if args.quick else bootstrap_filter.FULL
    load_start = load_average()
    times = time_parts(args.repeats, config)
    record = {
        "what": (
            f"seconds per bootstrap-filter run of {config['num_steps']} steps (K = {config['num_particles']}, "
            f"B = {config['num_sequences']}, float32, one thread), by part; medians of {args.repeats} runs"
        ),
        **script_provenance("ppl_models.experiments.benchmarks.filter_step_parts", argv),
        "machine": machine_info("cpu"),
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "config": config,
        "threads": 1,
        "rows": {name: stats(values) for name, values in times.items()},
    }
    for name, values in times.items():
        print(f"{name:<36}{statistics.median(values):8.3f} s")
    if args.out is not None:
        write_results(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

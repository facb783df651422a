"""A/B test of ``torch.compile`` on the CPU: the PF-RNN cells' elementwise update fused (``compiled=True``) or not.

Rows, at the speed targets' shapes (``B = 128``, ``K = 30``, ``T = 80``, ``H = 64``, ``--threads`` threads, 2 by
default): the PF-LSTM and PF-GRU localization training steps (RMSprop, clipped, eager) with the option off and on,
and the ``nn.LSTMCell`` / ``nn.GRUCell`` loops at ``B K`` rows, the speed targets' references
(:mod:`ppl_models.experiments.benchmarks.pf_rnn`). Everything else is equal: the same seed, weights and batch. The
rows are timed round-robin after one warm-up call each; a compiled row's warm-up (the compilation) is reported on
its own, with the steps after which compiling has paid for itself. What is not compiled is said by the module
(:mod:`ppl_models.pf_rnn.cells`): the matrix products, batch norm and the particle filter's resampling stay eager.

Usage::

    python -m ppl_models.experiments.benchmarks.compile_ab --out docs/results/compile_ab_cpu.json
    python -m ppl_models.experiments.benchmarks.compile_ab --quick          # tiny shapes, seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks.cuda_graph_speed import training_setup
from ppl_models.experiments.benchmarks.pf_rnn import row_step
from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.training import GraphedCall

__all__ = ["main", "compiled_step"]

#: (row, cell, compiled) of the training steps, and the reference loops (rows of the pf_rnn benchmark)
STEPS = [
    (f"{cell} training step{' compiled' if on else ''}", cell, on) for cell in ("pf-lstm", "pf-gru") for on in (0, 1)
]
REFERENCES = {"pf-lstm": "lstmcell loop B*K", "pf-gru": "grucell loop B*K"}


def compiled_step(cell: str, compiled: bool, shape: tuple):
    """One eager training step of the localization model with the cells' ``compiled`` option: a closure."""
    batch, particles, steps, hidden = shape
    shapes = {"batch": batch, "steps": steps, "particles": particles, "hidden": hidden}
    objective, optimizer, data = training_setup(cell, "cpu", shapes, seed=0, compiled=compiled)
    step = GraphedCall.training_step(
        lambda x, y: objective(x, None, y).loss, optimizer, data, clip_norm=3.0, enabled=False
    )
    return lambda: step(*data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (round-robin)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="tiny shapes that finish in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    shape = (8, 4, 10, 16) if args.quick else (128, 30, 80, 64)
    repeats = 1 if args.quick else args.repeats
    load_start = load_average()
    runs = {name: compiled_step(cell, bool(on), shape) for name, cell, on in STEPS}
    runs.update({name: row_step(name, *shape, "cpu") for name in REFERENCES.values()})
    warm_up = {name: time_repeats(run, 1)[0][0] for name, run in runs.items()}  # a compiled row compiles here
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name] += time_repeats(run, 1)[0]
    rows = {name: {**stats(times[name]), "first_call_s": warm_up[name]} for name in runs}
    comparisons = {}
    for cell, reference in REFERENCES.items():
        eager, fused = rows[f"{cell} training step"], rows[f"{cell} training step compiled"]
        saved = eager["median_s"] - fused["median_s"]
        comparisons[cell] = {
            "speed_up": eager["median_s"] / fused["median_s"],
            "eager_to_reference": eager["median_s"] / rows[reference]["median_s"],
            "compiled_to_reference": fused["median_s"] / rows[reference]["median_s"],
            "compile_s": fused["first_call_s"] - eager["first_call_s"],
            "steps_to_repay_compile": (fused["first_call_s"] - eager["first_call_s"]) / saved if saved > 0 else None,
        }
    results = {
        "command": " ".join(
            ["python -m ppl_models.experiments.benchmarks.compile_ab", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": machine_info("cpu"),
        "threads": args.threads,
        "seed": 0,
        "shape": dict(zip(("batch", "particles", "steps", "hidden"), shape)),
        "rows": rows,
        "comparisons": comparisons,
        "load_average_start": load_start,
        "load_average_end": load_average(),
    }
    for cell, row in comparisons.items():
        print(
            f"{cell}: compiled {row['speed_up']:.2f}x the eager step; to the cell loop {row['eager_to_reference']:.2f}x"
            f" -> {row['compiled_to_reference']:.2f}x; compiling took {row['compile_s']:.0f} s"
        )
    if args.out is not None:
        write_json(
            args.out, {**results, **script_provenance("ppl_models.experiments.benchmarks.compile_ab", argv, (0,))}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

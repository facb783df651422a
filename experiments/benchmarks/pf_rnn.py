"""Benchmark of PF-LSTM / PF-GRU against plain LSTMs and GRUs at the official localization configuration.

Rows, at batch ``B = 128``, ``K = 30`` particles, ``T = 80`` steps, ``H = 64`` hidden units and
64 input features; a layer row is one forward and backward pass (``sum`` of the outputs):

* ``pf-lstm layer``, ``pf-gru layer``: our layers (soft resampling 0.5, stochastic update,
  ReLU + BatchNorm), through the shared particle filter;
* ``lstmcell loop B*K``, ``grucell loop B*K``: ``nn.LSTMCell`` / ``nn.GRUCell`` stepped over a
  batch of ``B K = 3840`` (the cost of running ``K`` RNNs at all), the reference of the PF-LSTM
  (PF-GRU) row; ``nn.LSTM B*K``, ``nn.GRU B*K``: the fused layers at the same shapes;
* ``pf-lstm training step``, ``pf-gru training step``: one RMSprop step (5e-4, gradient norm
  clipped at 3) of the localization network (two input layers, the PF layer, pose head;
  ``L_pred + L_ELBO``) on 128 trajectories of 80 steps, and from its median the wall time of one
  paper-budget epoch (10,000 trajectories = 79 steps; extrapolated, not run) and of 800 epochs.

The rows run round-robin (one call of each row, then the next round), so a change of
background load hits them alike; medians of ``--repeats`` rounds. Then (unless
``--skip-scaling``) the PF-LSTM layer's cost against ``K`` and ``T`` (log-log slopes; 1 is
linear), and (CPU) the peak resident memory of the PF-LSTM training step and of the
``nn.LSTMCell`` row, each in a fresh subprocess. ``--threads`` CPU threads (2 by default, as the
official timings were taken). :data:`OFFICIAL` holds the official PF-RNN code's figures at the same
shapes, measured elsewhere (printed beside ours, never re-measured here).

Usage::

    python -m ppl_models.experiments.benchmarks.pf_rnn                 # a few minutes on 2 cores
    python -m ppl_models.experiments.benchmarks.pf_rnn --quick         # smoke configuration
    python -m ppl_models.experiments.benchmarks.pf_rnn --device cuda --out pf_rnn.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from ppl_models.experiments.benchmarks.cuda_graph_speed import PAPER_EPOCH, training_setup
from ppl_models.experiments.benchmarks.timing import (
    fit_scaling,
    load_average,
    machine_info,
    stats,
    time_repeats,
)
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.training import GraphedCall
from ppl_models.pf_rnn import PFGRU, PFLSTM

__all__ = ["main", "row_step", "time_rows", "OFFICIAL", "REFERENCE", "EPOCHS", "STEPS_PER_EPOCH", "memory_probe"]

#: each row's reference (the ratio's denominator): the plain cell loop at ``B K``
REFERENCE = {
    "pf-lstm layer": "lstmcell loop B*K",
    "pf-gru layer": "grucell loop B*K",
    "nn.LSTM B*K": "lstmcell loop B*K",
    "nn.GRU B*K": "grucell loop B*K",
    "lstmcell loop B*K": "lstmcell loop B*K",
    "grucell loop B*K": "grucell loop B*K",
    "pf-lstm training step": "lstmcell loop B*K",
    "pf-gru training step": "grucell loop B*K",
}

#: the official PF-RNN code (its PFLSTMCell / PFGRUCell loops and full localization model, RMSprop)
#: and plain torch, at these shapes, 2 threads, one process round-robin; measured elsewhere on the
#: same machine kind (torch 2.13 CPU, tuned allocator), seconds
OFFICIAL = {
    "pf-lstm layer": 1.112,
    "pf-gru layer": 0.845,
    "lstmcell loop B*K": 0.489,
    "nn.LSTM B*K": 0.367,
    "grucell loop B*K": 0.385,
    "nn.GRU B*K": 0.424,
    "pf-lstm training step": 2.157,
    "pf-gru training step": 1.847,
}

#: the PF-RNN paper's training budget: 800 epochs of 10,000 trajectories in batches of 128
EPOCHS = 800
STEPS_PER_EPOCH = math.ceil(PAPER_EPOCH["trajectories"] / PAPER_EPOCH["batch"])


def row_step(name: str, batch: int, particles: int, steps: int, hidden: int, device: str):
    """A closure running row ``name`` once (forward + backward, or one optimizer step)."""
    torch.manual_seed(0)
    if name.endswith("training step"):
        shapes = {"batch": batch, "steps": steps, "particles": particles, "hidden": hidden}
        objective, optimizer, data = training_setup(name.split()[0], device, shapes, seed=0)
        step = GraphedCall.training_step(
            lambda x, y: objective(x, None, y).loss, optimizer, data, clip_norm=3.0, enabled=False
        )  # eager: the same step the CUDA-graph benchmark replays
        return lambda: step(*data)
    if name.startswith("pf-"):
        layer_class = PFLSTM if name.startswith("pf-lstm") else PFGRU
        layer = layer_class(hidden, hidden, batch_first=True, num_particles=particles).to(device)
        x = torch.randn(batch, steps, hidden, device=device)
        return lambda: layer(x)[0].sum().backward()
    flat = torch.randn(steps, batch * particles, hidden, device=device)
    if name.startswith("nn."):
        rnn = (nn.LSTM if "LSTM" in name else nn.GRU)(hidden, hidden).to(device)
        return lambda: rnn(flat)[0].sum().backward()
    lstm = name.startswith("lstmcell")
    cell = (nn.LSTMCell if lstm else nn.GRUCell)(hidden, hidden).to(device)

    def run():
        h = c = flat.new_zeros(batch * particles, hidden)
        outputs = []
        for t in range(steps):
            if lstm:
                h, c = cell(flat[t], (h, c))
            else:
                h = cell(flat[t], h)
            outputs.append(h)
        torch.stack(outputs).sum().backward()

    return run


def time_rows(names, shape: tuple, repeats: int, device: str) -> dict:
    """Median, best and all times of each row, timed round-robin after one warm-up call each."""
    runs = {name: row_step(name, *shape, device) for name in names}
    for run in runs.values():
        time_repeats(run, 1, device)
    times = {name: [] for name in names}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name] += time_repeats(run, 1, device)[0]
    return {name: stats(values) for name, values in times.items()}


def memory_probe(name: str, shape: tuple, threads: int) -> dict:
    """Peak RSS growth of one run of ``name`` in a fresh process (after a warm-up run)."""
    code = (
        "import json, torch; from ppl_models.experiments.benchmarks import pf_rnn as b, timing as f; "
        f"torch.set_num_threads({threads}); run = b.row_step({name!r}, *{shape!r}, 'cpu'); run(); "
        "import gc; gc.collect(); m = f.reset_peak_rss(); before, _ = f.current_and_peak_rss(m); run(); "
        "_, peak = f.current_and_peak_rss(m); print(json.dumps({'peak_growth_mb': (peak - before) / 2**20}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": str(threads)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _scaling(shape: tuple, repeats: int, device: str) -> dict:
    batch, particles, steps, hidden = shape
    ks, ts = [max(1, particles // 3), particles, 2 * particles], [max(1, steps // 2), steps, 2 * steps]
    by_k = [
        time_rows(["pf-lstm layer"], (batch, k, steps, hidden), repeats, device)["pf-lstm layer"]["median_s"]
        for k in ks
    ]
    by_t = [
        time_rows(["pf-lstm layer"], (batch, particles, t, hidden), repeats, device)["pf-lstm layer"]["median_s"]
        for t in ts
    ]
    return {
        "particles": ks,
        "seconds_by_particles": by_k,
        "fit_particles": fit_scaling(ks, by_k),
        "steps": ts,
        "seconds_by_steps": by_t,
        "fit_steps": fit_scaling(ts, by_t),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of the rows (round-robin)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="tiny shapes that finish in seconds")
    parser.add_argument("--skip-scaling", action="store_true", help="do not time the PF-LSTM layer against K and T")
    parser.add_argument("--skip-memory", action="store_true", help="do not measure peak memory (CPU)")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    batch, particles, steps, hidden = (8, 4, 10, 16) if args.quick else (128, 30, 80, 64)
    repeats = 1 if args.quick else args.repeats
    shape = (batch, particles, steps, hidden)
    load_start = load_average()
    rows = time_rows(list(REFERENCE), shape, repeats, args.device)
    steps_per_epoch = math.ceil(PAPER_EPOCH["trajectories"] / batch)
    for name, row in rows.items():
        row["reference"] = REFERENCE[name]
        row["ratio_to_reference"] = row["median_s"] / rows[REFERENCE[name]]["median_s"]
        if not args.quick:
            row["official_s"] = OFFICIAL[name]
        if name.endswith("training step"):
            row["epoch_s_extrapolated"] = row["median_s"] * steps_per_epoch
    results = {
        "command": " ".join(
            ["python -m ppl_models.experiments.benchmarks.pf_rnn", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": machine_info(args.device),
        "threads": args.threads,
        "seed": 0,
        "allocator": {key: value for key, value in os.environ.items() if key.startswith("MALLOC_")} or "glibc default",
        "shape": dict(zip(("batch", "particles", "steps", "hidden"), shape)),
        "paper_epoch": {**PAPER_EPOCH, "steps_per_epoch": steps_per_epoch, "epochs": EPOCHS},
        "rows": rows,
        "load_average_start": load_start,
    }
    if not args.skip_scaling:
        results["scaling"] = _scaling(shape, max(1, repeats // 2), args.device)
    if args.device == "cpu" and not args.skip_memory:
        results["memory"] = {
            name: memory_probe(name, shape, args.threads) for name in ("pf-lstm training step", "lstmcell loop B*K")
        }
    results["load_average_end"] = load_average()
    print_report(results)
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.pf_rnn"
        write_json(args.out, {**results, **script_provenance(module, argv, (0,))})
    return 0


def print_report(results: dict) -> None:
    shape = results["shape"]
    print(
        f"B={shape['batch']} K={shape['particles']} T={shape['steps']} H={shape['hidden']}, "
        f"{results['threads']} threads, median s (round-robin); load {results['load_average_start']}:"
    )
    for name, row in results["rows"].items():
        official = f"   official code {row['official_s']:.3f} s (measured elsewhere)" if "official_s" in row else ""
        print(f"  {name:<22}{row['median_s']:>8.3f}   x{row['ratio_to_reference']:.2f} of {row['reference']}{official}")
        if "epoch_s_extrapolated" in row:
            epoch = row["epoch_s_extrapolated"]
            print(
                f"  {'':<22}paper epoch {epoch:.0f} s ({results['paper_epoch']['steps_per_epoch']} steps, "
                f"extrapolated), {EPOCHS} epochs {epoch * EPOCHS / 3600:.1f} h"
            )
    if "scaling" in results:
        fits = results["scaling"]
        print(
            f"  cost vs K {fits['particles']}: slope {fits['fit_particles']['loglog_slope']:.2f}; "
            f"vs T {fits['steps']}: slope {fits['fit_steps']['loglog_slope']:.2f}"
        )
    for name, row in results.get("memory", {}).items():
        print(f"  peak memory growth, {name}: {row['peak_growth_mb']:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())

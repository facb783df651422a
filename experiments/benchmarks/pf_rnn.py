"""Benchmark of PF-LSTM / PF-GRU against plain LSTMs at the official localization configuration.

Rows, each one forward and backward pass (``sum`` of the outputs) at batch ``B = 128``,
``K = 30`` particles, ``T = 80`` steps, ``H = 64`` hidden units and 64 input features:

* ``pf-lstm cell loop``, ``pf-gru cell loop``: our layers (soft resampling 0.5, stochastic
  update, ReLU + BatchNorm), through the shared particle filter;
* ``lstmcell loop B*K``: ``nn.LSTMCell`` stepped over a batch of ``B K = 3840`` (the cost of
  running ``K`` LSTMs at all), and ``nn.LSTM B*K``: the fused layer at the same shapes;
* ``training step``: one Adam step of the localization model (two input layers, PF-LSTM,
  pose head; ``L_pred + L_ELBO``) on 128 trajectories of 80 steps.

Then the PF-LSTM cell loop's cost against ``K`` and ``T`` (log-log slopes; 1 is linear) and
the peak resident memory of the training step and of the ``nn.LSTMCell`` row, each measured
in a fresh subprocess. Median of ``--repeats``; ``--threads`` CPU threads (2 by default, as
the official timings were taken).

Usage::

    python -m experiments.benchmarks.pf_rnn                 # a few minutes on 2 cores
    python -m experiments.benchmarks.pf_rnn --quick         # smoke configuration
    python -m experiments.benchmarks.pf_rnn --device cuda --out pf_rnn.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from experiments.benchmarks.timing import fit_scaling, load_average, machine_info, stats, time_repeats
from inference.discriminative import DiscriminativeLoss
from inference.io import write_json
from ppl_models.pf_rnn import PFGRU, PFLSTM, PFRNNPredictor

__all__ = ["main", "row_step", "OFFICIAL"]

#: the official implementation, timed on this machine kind (2 threads), seconds
OFFICIAL = {"training step": 1.73, "pf-lstm cell loop": 0.88, "lstmcell loop B*K": 0.43, "nn.LSTM B*K": 0.23}


def row_step(name: str, batch: int, particles: int, steps: int, hidden: int, device: str):
    """A closure running row ``name`` once (forward + backward, or one optimizer step)."""
    torch.manual_seed(0)
    if name == "training step":
        model = PFRNNPredictor(8, 4, cell="pf-lstm", hidden_size=hidden, encoder_size=hidden,
                               num_particles=particles, learn_scale=False).to(device)  # fmt: skip
        objective = DiscriminativeLoss(model)
        optimizer = torch.optim.Adam(objective.parameters(), lr=1e-3)
        x, y = torch.randn(batch, steps, 8, device=device), torch.randn(batch, steps, 4, device=device)

        def run():
            optimizer.zero_grad(set_to_none=True)
            objective(x, None, y).loss.backward()
            optimizer.step()

        return run
    if name.startswith("pf-"):
        layer_class = PFLSTM if name.startswith("pf-lstm") else PFGRU
        layer = layer_class(hidden, hidden, batch_first=True, num_particles=particles).to(device)
        x = torch.randn(batch, steps, hidden, device=device)

        def run():
            layer(x)[0].sum().backward()

        return run
    flat = torch.randn(steps, batch * particles, hidden, device=device)
    if name == "nn.LSTM B*K":
        lstm = nn.LSTM(hidden, hidden).to(device)
        return lambda: lstm(flat)[0].sum().backward()
    cell = nn.LSTMCell(hidden, hidden).to(device)

    def run():
        h = c = flat.new_zeros(batch * particles, hidden)
        outputs = []
        for t in range(steps):
            h, c = cell(flat[t], (h, c))
            outputs.append(h)
        torch.stack(outputs).sum().backward()

    return run


def _time(name, shape, repeats, device) -> dict:
    run = row_step(name, *shape, device)
    time_repeats(run, 1, device)  # warm-up
    return stats(time_repeats(run, repeats, device)[0])


def _memory_probe(name: str, shape: tuple, threads: int) -> dict:
    """Peak RSS growth of one run of ``name`` in a fresh process (after a warm-up run)."""
    code = ("import json, torch; from experiments.benchmarks import pf_rnn as b, timing as f; "
            f"torch.set_num_threads({threads}); run = b.row_step({name!r}, *{shape!r}, 'cpu'); run(); "
            "import gc; gc.collect(); m = f.reset_peak_rss(); before, _ = f.current_and_peak_rss(m); run(); "
            "_, peak = f.current_and_peak_rss(m); print(json.dumps({'peak_growth_mb': (peak - before) / 2**20}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": str(threads)})  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per row")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="tiny shapes that finish in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    batch, particles, steps, hidden = (8, 4, 10, 16) if args.quick else (128, 30, 80, 64)
    repeats = 1 if args.quick else args.repeats
    shape = (batch, particles, steps, hidden)
    names = ["pf-lstm cell loop", "pf-gru cell loop", "lstmcell loop B*K", "nn.LSTM B*K", "training step"]
    rows = {name: _time(name, shape, repeats, args.device) for name in names}
    reference = rows["lstmcell loop B*K"]["median_s"]
    for name, row in rows.items():
        row["ratio_to_lstmcell"] = row["median_s"] / reference
        if name in OFFICIAL and not args.quick:
            row["official_s"] = OFFICIAL[name]
    ks = [particles // 3, particles, 2 * particles] if not args.quick else [2, 4, 8]
    ts = [steps // 2, steps, 2 * steps]
    by_k = [_time("pf-lstm cell loop", (batch, k, steps, hidden), max(1, repeats // 2), args.device)["median_s"]
            for k in ks]
    by_t = [_time("pf-lstm cell loop", (batch, particles, t, hidden), max(1, repeats // 2), args.device)["median_s"]
            for t in ts]
    results = {
        "machine": machine_info(args.device), "threads": args.threads,
        "shape": dict(zip(("batch", "particles", "steps", "hidden"), shape)), "rows": rows,
        "scaling": {"particles": ks, "seconds_by_particles": by_k, "fit_particles": fit_scaling(ks, by_k),
                    "steps": ts, "seconds_by_steps": by_t, "fit_steps": fit_scaling(ts, by_t)},
        "load_average": load_average(),
    }  # fmt: skip
    if args.device == "cpu":
        results["memory"] = {name: _memory_probe(name, shape, args.threads)
                             for name in ("training step", "lstmcell loop B*K")}  # fmt: skip
    print(f"B={batch} K={particles} T={steps} H={hidden}, {args.device}, {args.threads} threads (median s):")
    for name, row in rows.items():
        official = f"   official {row['official_s']:.2f} s" if "official_s" in row else ""
        print(f"  {name:<20}{row['median_s']:>9.3f}   x{row['ratio_to_lstmcell']:.2f} of LSTMCell{official}")
    fits = results["scaling"]
    print(f"  cost vs K {ks}: slope {fits['fit_particles']['loglog_slope']:.2f}; "
          f"vs T {ts}: slope {fits['fit_steps']['loglog_slope']:.2f}")
    for name, row in results.get("memory", {}).items():
        print(f"  peak memory growth, {name}: {row['peak_growth_mb']:.0f} MB")
    if args.out is not None:
        write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

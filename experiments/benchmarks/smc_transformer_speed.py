"""Benchmark of the SMC Transformer on the paper's synthetic Model I (sequences of 25 values).

* ``training``: sequences per second of one Fisher-identity training step (forward filter,
  backward, Adam, EM update) at batch 32, ``d = 16``, for ``M = 10`` and ``M = 30`` particles;
* ``predictive``: seconds to draw the one-step-ahead predictive distribution of every step
  (``N = 1000`` samples) for the 100 test sequences with ``M`` particles;
* ``scaling``: the training step's cost against ``M`` and against the sequence length
  (log-log slopes; 1 is linear, as the paper expects).

Median of ``--repeats``; ``--threads`` CPU threads.

Usage::

    python -m ppl_models.experiments.benchmarks.smc_transformer_speed             # about a minute on 2 cores
    python -m ppl_models.experiments.benchmarks.smc_transformer_speed --quick
    python -m ppl_models.experiments.benchmarks.smc_transformer_speed --device cuda --out smct.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks.timing import (
    fit_scaling,
    load_average,
    machine_info,
    stats,
    time_repeats,
)
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference import ParticleFilter
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.objectives import SMCBound
from ppl_models.smc_transformer import SMCTransformer

__all__ = ["main", "training_step", "predictive_run"]


def _ar_batch(batch: int, steps: int, device: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    x = torch.zeros(batch, steps, 1)
    x[:, 0] = torch.randn(batch, 1, generator=generator)
    for t in range(1, steps):
        x[:, t] = 0.8 * x[:, t - 1] + 0.5**0.5 * torch.randn(batch, 1, generator=generator)
    return x.to(device)


def training_step(batch: int, particles: int, steps: int, d_model: int, device: str):
    """A closure running one training step (filter, backward, Adam, EM)."""
    torch.manual_seed(0)
    model = SMCTransformer(1, d_model=d_model, window=steps).to(device)
    pf = ParticleFilter(particles, resampling="multinomial", ess_threshold=1.0, gradient="stop_weights")
    objective = SMCBound(model, pf).train()
    optimizer = torch.optim.Adam(objective.parameters(), lr=1e-3)
    x = _ar_batch(batch, steps, device)

    def run():
        optimizer.zero_grad(set_to_none=True)
        objective(x).loss.backward()
        optimizer.step()

    return run


def predictive_run(batch: int, particles: int, steps: int, d_model: int, samples: int, device: str):
    """A closure filtering ``batch`` sequences and drawing ``samples`` one-step predictive draws per step."""
    torch.manual_seed(0)
    model = SMCTransformer(1, d_model=d_model, window=steps).to(device).eval()
    x = _ar_batch(batch, steps, device)

    @torch.no_grad()
    def run():
        return ParticleFilter(particles).run(model, x, predictive_samples=samples).predictive

    return run


def _median(run, repeats, device) -> float:
    time_repeats(run, 1, device)  # warm-up
    return stats(time_repeats(run, repeats, device)[0])["median_s"]


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
    batch, steps, d_model, test, samples = (4, 6, 8, 5, 20) if args.quick else (32, 25, 16, 100, 1000)
    repeats = 1 if args.quick else args.repeats
    training = {}
    for particles in (10, 30):
        seconds = _median(training_step(batch, particles, steps, d_model, args.device), repeats, args.device)
        training[f"M={particles}"] = {"step_s": seconds, "sequences_per_s": batch / seconds}
    predictive = {
        f"M={m}": {
            "seconds": _median(predictive_run(test, m, steps, d_model, samples, args.device), repeats, args.device)
        }
        for m in (10, 30)
    }
    ms, ts = [5, 10, 20, 40], [steps, 2 * steps, 4 * steps]
    by_m = [
        _median(training_step(batch, m, steps, d_model, args.device), max(1, repeats // 2), args.device) for m in ms
    ]
    by_t = [_median(training_step(batch, 10, t, d_model, args.device), max(1, repeats // 2), args.device) for t in ts]
    results = {
        "machine": machine_info(args.device),
        "threads": args.threads,
        "shape": {"batch": batch, "steps": steps, "d_model": d_model, "test_sequences": test, "samples": samples},
        "training": training,
        "predictive": predictive,
        "scaling": {
            "particles": ms,
            "seconds_by_particles": by_m,
            "fit_particles": fit_scaling(ms, by_m),
            "steps": ts,
            "seconds_by_steps": by_t,
            "fit_steps": fit_scaling(ts, by_t),
        },
        "load_average": load_average(),
    }
    print(f"SMC Transformer, batch {batch}, T={steps}, d={d_model}, {args.device}, {args.threads} threads (median):")
    for name, row in training.items():
        print(f"  training {name:<6}{row['step_s']:>8.3f} s/step  {row['sequences_per_s']:>8.1f} sequences/s")
    for name, row in predictive.items():
        print(f"  predictive N={samples}, {test} sequences, {name}: {row['seconds']:.3f} s")
    fits = results["scaling"]
    print(
        f"  cost vs M {ms}: slope {fits['fit_particles']['loglog_slope']:.2f}; "
        f"vs T {ts}: slope {fits['fit_steps']['loglog_slope']:.2f}"
    )
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.smc_transformer_speed"
        write_json(args.out, {**results, **script_provenance(module, argv, (0,))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of the PSRNN: two-stage regression time, and training throughput of its cell vs a GRU.

* ``two-stage regression``: :meth:`ppl_models.PSRNN.initialize` on the Swimmer training set
  (25 trajectories x 100 steps, 5 features; horizon 10, state 20) with 2000 random Fourier
  features per feature map, as in the paper: features, projections, both regression
  stages and the decoder fit.
* ``training step``: one Adam step of the exact Gaussian likelihood (forward, backward,
  update) on a batch of ``[B, T, 5]`` sequences, for the PSRNN (full and factorized, rank 20)
  and for the GRU baseline with the same state size (20) and encoded size (20).

Best and median of ``--repeats`` are reported, and sequence-steps per second. One CPU thread
by default (``--threads``).

Usage::

    python -m ppl_models.experiments.benchmarks.psrnn_speed                  # Swimmer (a minute)
    python -m ppl_models.experiments.benchmarks.psrnn_speed --quick          # smoke configuration
    python -m ppl_models.experiments.benchmarks.psrnn_speed --device cuda --out psrnn.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from ppl_models import PSRNN, RecurrentPredictor
from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.objectives import ExactLikelihood

__all__ = ["main", "two_stage_timing", "training_step_timing"]


def two_stage_timing(x: torch.Tensor, num_features: int, repeats: int, device: str) -> dict:
    """Seconds of ``PSRNN(...).initialize(x)`` (state 20, horizon 10) with ``num_features`` RFFs."""
    x = x.to(device)
    horizon = min(10, (x.shape[1] - 1) // 2)

    def fit():
        return PSRNN(x.shape[-1], num_features=num_features, horizon=horizon).to(device).initialize(x)

    time_repeats(fit, 1, device)  # warm-up
    times, _ = time_repeats(fit, repeats, device)
    return {**stats(times), "num_features": num_features, "sequences": int(x.shape[0]), "steps": int(x.shape[1])}


def training_step_timing(models: dict, x: torch.Tensor, repeats: int, device: str) -> dict:
    """Round-robin timings of one Adam step of each model's exact likelihood on ``x [B, T, D]``."""
    x = x.to(device)
    steps = {}
    for name, model in models.items():
        objective = ExactLikelihood(model.to(device))
        optimizer = torch.optim.Adam(objective.parameters(), lr=1e-3)

        def step(objective=objective, optimizer=optimizer):
            optimizer.zero_grad(set_to_none=True)
            objective(x).loss.backward()
            optimizer.step()

        steps[name] = step
        time_repeats(step, 2, device)  # warm-up
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name] += time_repeats(step, 1, device)[0]
    sequence_steps = x.shape[0] * x.shape[1]
    return {
        name: {
            **stats(t),
            "sequence_steps_per_s": sequence_steps / statistics.median(t),
            "parameters": sum(p.numel() for p in models[name].parameters()),
        }
        for name, t in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--batch", type=int, default=25, help="sequences per training step")
    parser.add_argument("--quick", action="store_true", help="tiny configuration that finishes in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1 or args.batch < 1:
        parser.error("--repeats, --threads and --batch must be >= 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.quick:
        x, num_features, repeats = torch.randn(4, 30, 5), 200, 1
    else:
        from ppl_models.experiments.tasks.swimmer import swimmer

        x, num_features, repeats = swimmer().train[0], 2000, args.repeats
    batch = x[: min(args.batch, len(x))] if not args.quick else x
    psrnn = PSRNN(5, num_features=num_features, horizon=min(10, (x.shape[1] - 1) // 2)).initialize(x)
    factorized = PSRNN(5, num_features=num_features, horizon=psrnn.horizon, rank=20).initialize(x)
    models = {
        "psrnn": psrnn,
        "psrnn rank 20": factorized,
        "gru": RecurrentPredictor(5, cell="gru", state_dim=20, encoder_dim=20),
    }
    results = {
        "machine": machine_info(args.device),
        "two_stage_regression": two_stage_timing(x, num_features, repeats, args.device),
        "training_step": {
            "batch": int(batch.shape[0]),
            "steps": int(batch.shape[1]),
            "models": training_step_timing(models, batch, repeats, args.device),
        },
        "load_average": load_average(),
    }
    tsr = results["two_stage_regression"]
    print(
        f"two-stage regression, {tsr['num_features']} RFFs, {tsr['sequences']} x {tsr['steps']} steps: "
        f"best {tsr['best_s']:.3f} s, median {tsr['median_s']:.3f} s ({args.device})"
    )
    print(f"\ntraining step, batch {batch.shape[0]} x T={batch.shape[1]} ({args.device}, {args.threads} threads):")
    print(f"  {'model':<16}{'params':>9}{'median s':>11}{'seq-steps / s':>16}")
    for name, row in results["training_step"]["models"].items():
        print(f"  {name:<16}{row['parameters']:>9}{row['median_s']:>11.4f}{row['sequence_steps_per_s']:>16.0f}")
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.psrnn_speed"
        write_json(args.out, {**results, **script_provenance(module, argv, (0,))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

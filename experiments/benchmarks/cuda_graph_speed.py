"""GPU benchmark of CUDA-graph replay (:class:`ppl_models.inference.training.GraphedCall`) against eager
launches.

Sections, each eager beside graphed, on one CUDA device:

* ``filter``: the bootstrap filter of :mod:`ppl_models.experiments.benchmarks.bootstrap_filter` on its 1-d LGSSM
  (:mod:`~ppl_models.experiments.benchmarks.lgssm_problem`; systematic resampling at ESS < K/2, ``B = 16``
  sequences of ``T`` steps) at several ``K``:
  milliseconds per filter step, the speed-up, the capture time, and the log-evidence error
  against the exact Kalman value (mean over sequences), so a graph that computed something
  else would show;
* ``pf-rnn``: one training step of the PF-RNN localization network at the paper's shapes
  (``B = 128``, ``T = 80``, ``K = 30``, ``H = 64``; RMSprop 5e-4, gradient norm clipped at 3),
  PF-LSTM and PF-GRU, and the wall time of one paper-budget epoch (10,000 trajectories, 79
  steps), with the loss after the timed steps.

Usage (needs a CUDA device; nothing is downloaded)::

    python -m ppl_models.experiments.benchmarks.cuda_graph_speed --out docs/results/cuda_graphs_h100.json
    python -m ppl_models.experiments.benchmarks.cuda_graph_speed --quick
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks.lgssm_problem import ESS_THRESHOLD, make_data, make_model
from ppl_models.experiments.benchmarks.timing import machine_info, stats, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference import ParticleFilter
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.inference.training import GraphedCall
from ppl_models.pf_rnn import PFRNNPredictor

__all__ = ["main", "filter_rows", "pf_rnn_rows", "training_setup", "PAPER_EPOCH"]

PAPER_EPOCH = {"trajectories": 10_000, "batch": 128, "steps": 80, "particles": 30, "hidden": 64}


def filter_rows(k_list, *, steps: int, batch: int, repeats: int, device: str, seed: int = 0) -> list[dict]:
    """Eager and graphed bootstrap-filter runs per ``K``: ms per step, speed-up, log-evidence error."""
    x32, _, exact = make_data(batch, steps, seed)
    x = x32.to(device)
    rows = []
    for k in k_list:
        model = make_model(device=device)
        pf = ParticleFilter(
            k,
            resampling="systematic",
            ess_threshold=ESS_THRESHOLD,
            generator=torch.Generator(device=device).manual_seed(seed + 1),
        )

        def eager(model=model, pf=pf):
            with torch.no_grad():
                return pf.run(model, x)

        eager()  # warm-up
        eager_times, eager_result = time_repeats(eager, repeats, device)
        start = time.perf_counter()
        graphed = GraphedCall.filter(pf, model, x)
        capture_s = time.perf_counter() - start
        graph_times, graph_result = time_repeats(lambda graphed=graphed: graphed(x), repeats, device)

        def error(result):
            return float((result.log_evidence.double().cpu() - exact).mean())

        rows.append(
            {
                "num_particles": k,
                "num_steps": steps,
                "num_sequences": batch,
                "eager": stats(eager_times),
                "graph": stats(graph_times),
                "capture_s": capture_s,
                "eager_ms_per_step": 1e3 * min(eager_times) / steps,
                "graph_ms_per_step": 1e3 * min(graph_times) / steps,
                "speedup": min(eager_times) / min(graph_times),
                "eager_mean_error": error(eager_result),
                "graph_mean_error": error(graph_result),
            }
        )
    return rows


def training_setup(cell: str, device: str, shapes: dict, seed: int, **options):
    """The localization network (``options``: more of :class:`PFRNNPredictor`'s), its loss, RMSprop 5e-4 and one
    batch ``(x [B, T, 8], y [B, T, 4])``."""
    torch.manual_seed(seed)
    model = PFRNNPredictor(
        8,
        4,
        cell=cell,
        hidden_size=shapes["hidden"],
        encoder_size=shapes["hidden"],
        num_particles=shapes["particles"],
        **options,
    ).to(device)
    objective = DiscriminativeLoss(model)
    optimizer = torch.optim.RMSprop(objective.parameters(), lr=5e-4, capturable=device.startswith("cuda"))
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shapes["batch"], shapes["steps"], 8, device=device, generator=generator)
    y = torch.randn(shapes["batch"], shapes["steps"], 4, device=device, generator=generator)
    return objective, optimizer, (x, y)


def pf_rnn_rows(cells, *, shapes: dict, repeats: int, device: str, seed: int = 0) -> list[dict]:
    """Eager and graphed PF-RNN training steps, and the paper-budget epoch time each gives."""
    steps_per_epoch = math.ceil(PAPER_EPOCH["trajectories"] / shapes["batch"])
    rows = []
    for cell in cells:
        row = {"cell": cell, **shapes, "steps_per_epoch": steps_per_epoch}
        for mode in ("eager", "graph"):
            objective, optimizer, batch = training_setup(cell, device, shapes, seed)
            start = time.perf_counter()
            step = GraphedCall.training_step(
                lambda x, y, objective=objective: objective(x, None, y).loss,
                optimizer,
                batch,
                clip_norm=3.0,
                enabled=mode == "graph",
            )
            setup_s = time.perf_counter() - start
            step(*batch)  # warm-up
            times, loss = time_repeats(lambda step=step, batch=batch: step(*batch), repeats, device)
            row[mode] = {
                **stats(times),
                "setup_s": setup_s,
                "loss_after": float(loss),
                "epoch_s": min(times) * steps_per_epoch,
            }
        row["speedup"] = row["eager"]["best_s"] / row["graph"]["best_s"]
        rows.append(row)
    return rows


def _guarded(name: str, fn, errors: dict):
    try:
        return fn()
    except Exception:  # a failed section is reported, the others still run
        errors[name] = traceback.format_exc(limit=6)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="a CUDA device (the graphs need one)")
    parser.add_argument("--quick", action="store_true", help="small shapes that finish in seconds")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per row")
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=("filter", "pf_rnn"),
        default=["filter", "pf_rnn"],
        help="which sections to run (a failed capture can leave CUDA unusable for the rest "
        "of the process: run sections in separate processes to isolate one)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if not args.device.startswith("cuda") or not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA device (--device cuda); none is available")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    quick = args.quick
    k_list = [100, 1000] if quick else [1000, 10_000, 100_000]
    shapes = (
        {"batch": 8, "steps": 10, "particles": 4, "hidden": 16}
        if quick
        else {k: PAPER_EPOCH[k] for k in ("batch", "steps", "particles", "hidden")}
    )
    errors: dict[str, str] = {}
    results = {"machine": machine_info(args.device), "torch": torch.__version__}
    if "filter" in args.sections:
        results["filter"] = _guarded(
            "filter",
            lambda: filter_rows(
                k_list, steps=50 if quick else 1000, batch=16, repeats=args.repeats, device=args.device
            ),
            errors,
        )
    if "pf_rnn" in args.sections:
        results["pf_rnn"] = _guarded(
            "pf_rnn",
            lambda: pf_rnn_rows(["pf-lstm", "pf-gru"], shapes=shapes, repeats=args.repeats, device=args.device),
            errors,
        )
    results["errors"] = errors
    for row in results.get("filter") or []:
        print(
            f"filter K={row['num_particles']:>6}: eager {row['eager_ms_per_step']:.3f} ms/step, "
            f"graph {row['graph_ms_per_step']:.4f} ms/step (x{row['speedup']:.1f}; "
            f"capture {row['capture_s']:.1f} s); "
            f"mean log-evidence error {row['eager_mean_error']:+.3f} / {row['graph_mean_error']:+.3f}"
        )
    for row in results.get("pf_rnn") or []:
        print(
            f"{row['cell']} training step: eager {row['eager']['best_s'] * 1e3:.1f} ms, "
            f"graph {row['graph']['best_s'] * 1e3:.1f} ms (x{row['speedup']:.1f}); paper epoch "
            f"{row['eager']['epoch_s']:.1f} s eager, {row['graph']['epoch_s']:.1f} s graphed"
        )
    for name, text in errors.items():
        print(f"{name} failed:\n{text}", file=sys.stderr)
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.cuda_graph_speed"
        write_json(args.out, {**results, **script_provenance(module, argv, (0,))})
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

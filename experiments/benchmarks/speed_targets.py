"""Every speed ratio the benchmarks target, in one run, each beside its target.

* PF-LSTM (PF-GRU) layer, one forward and backward pass at ``B = 128``, ``K = 30``, ``T = 80``,
  ``H = 64``, against the ``nn.LSTMCell`` (``nn.GRUCell``) loop at batch ``B K`` and the fused
  ``nn.LSTM`` (``nn.GRU``); the PF-LSTM and PF-GRU localization training steps (RMSprop) and the
  paper-budget epoch extrapolated from them (:mod:`ppl_models.experiments.benchmarks.pf_rnn`, ``--threads``
  threads, 2 by default, as the official figures were taken);
* the bootstrap filter (K = 1000, T = 1000, B = 16, one thread) against the ``particles`` library
  (:mod:`ppl_models.experiments.benchmarks.bootstrap_filter`; skipped, and said so, when it is not installed) and
  against the same filter written by hand in torch for all sequences at once (the eager-torch floor,
  :func:`~ppl_models.experiments.benchmarks.reference_filters.prepare_torch`);
* SRNN's training step at the paper's sizes against the same ELBO written by hand in torch
  (:mod:`ppl_models.experiments.benchmarks.srnn_step`, one thread);
* peak memory of the PF-LSTM training step and of the ``nn.LSTMCell`` row (fresh processes).

Each section times its methods round-robin, so background load hits them alike, and reports
medians; the load average is recorded before and after. Ratios are ours over the reference
(lower is better), except the filter's speed-up over ``particles`` (higher is better).

Usage::

    python -m ppl_models.experiments.benchmarks.speed_targets --out docs/results/speed_targets_cpu.json
    python -m ppl_models.experiments.benchmarks.speed_targets --quick      # smoke configuration (tiny shapes)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks import bootstrap_filter, lgssm_problem, pf_rnn, reference_filters, srnn_step
from ppl_models.experiments.benchmarks.timing import load_average, machine_info
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json

__all__ = ["TARGETS", "main"]

#: (measured key, bound, "max" if the ratio must stay at or below the bound, "min" if at or above)
TARGETS = {
    "pf-lstm layer / lstmcell loop": (1.5, "max"),
    "pf-lstm training step / lstmcell loop": (1.5, "max"),
    "pf-gru layer / grucell loop": (1.5, "max"),
    "bootstrap filter speed-up over particles": (6.0, "min"),
    "srnn step / hand-written torch": (1.10, "max"),
}


def _pf_rnn_section(quick: bool, repeats: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    shape = (8, 4, 10, 16) if quick else (128, 30, 80, 64)
    rows = pf_rnn.time_rows(list(pf_rnn.REFERENCE), shape, repeats, "cpu")
    memory = (
        {}
        if quick
        else {
            name: pf_rnn.memory_probe(name, shape, threads) for name in ("pf-lstm training step", "lstmcell loop B*K")
        }
    )
    return {"shape": shape, "threads": threads, "rows": rows, "memory": memory}


def _filter_section(quick: bool, repeats: int, seed: int) -> dict:
    torch.set_num_threads(1)
    cfg = bootstrap_filter.QUICK if quick else bootstrap_filter.FULL
    k, t, b = cfg["num_particles"], cfg["num_steps"], cfg["num_sequences"]
    data = lgssm_problem.make_data(b, t, seed)
    prepared = {
        "ours float32": bootstrap_filter.prepare_ours(k, data, seed=seed),
        "hand-written torch float32": reference_filters.prepare_torch(k, data, seed=seed),
    }
    if importlib.util.find_spec("particles") is not None:
        prepared["particles"] = reference_filters.prepare_particles(k, data, seed=seed)
    rows = bootstrap_filter.compare(prepared, dict.fromkeys(prepared, repeats))
    return {"num_particles": k, "num_steps": t, "num_sequences": b, "threads": 1, "rows": rows}


def _srnn_section(quick: bool, repeats: int) -> dict:
    torch.set_num_threads(1)
    size = {"latent_dim": 8, "rnn_dim": 16, "hidden_dim": 16} if quick else srnn_step.SIZES["srnn paper"]
    batch, steps = (4, 10) if quick else (20, 100)
    return {**srnn_step.run(size, batch=batch, steps=steps, repeats=repeats, device="cpu"), "threads": 1}


def ratios(results: dict) -> dict:
    """The speed ratios of :data:`TARGETS` and more, from the sections' medians (``None``: no reference)."""
    rows = results["pf_rnn"]["rows"]
    median = {name: row["median_s"] for name, row in rows.items()}
    filter_rows = results["bootstrap_filter"]["rows"]
    srnn = results["srnn_step"]["methods"]
    return {
        "pf-lstm layer / lstmcell loop": median["pf-lstm layer"] / median["lstmcell loop B*K"],
        "pf-lstm layer / nn.LSTM": median["pf-lstm layer"] / median["nn.LSTM B*K"],
        "pf-gru layer / grucell loop": median["pf-gru layer"] / median["grucell loop B*K"],
        "pf-gru layer / nn.GRU": median["pf-gru layer"] / median["nn.GRU B*K"],
        "pf-lstm training step / lstmcell loop": median["pf-lstm training step"] / median["lstmcell loop B*K"],
        "bootstrap filter speed-up over particles": (
            filter_rows["particles"]["median_s"] / filter_rows["ours float32"]["median_s"]
        )
        if "particles" in filter_rows
        else None,
        "bootstrap filter / hand-written torch": (
            filter_rows["ours float32"]["median_s"] / filter_rows["hand-written torch float32"]["median_s"]
        ),
        "srnn step / hand-written torch": srnn["ours"]["ratio_to_torch"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per section (round-robin)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the PF-RNN section")
    parser.add_argument("--seed", type=int, default=0, help="seed of the filter's data and draws")
    parser.add_argument("--quick", action="store_true", help="tiny shapes that finish in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1")
    repeats = 1 if args.quick else args.repeats
    started = time.perf_counter()
    results = {
        "command": " ".join(
            ["python -m ppl_models.experiments.benchmarks.speed_targets", *(sys.argv[1:] if argv is None else argv)]
        ),
        "seed": args.seed,
        "machine": machine_info("cpu"),
        "load_average_start": load_average(),
        "pf_rnn": _pf_rnn_section(args.quick, repeats, args.threads),
        "bootstrap_filter": _filter_section(args.quick, repeats, args.seed),
        "srnn_step": _srnn_section(args.quick, repeats),
    }
    results["load_average_end"] = load_average()
    results["wall_s"] = time.perf_counter() - started
    results["ratios"] = ratios(results)
    results["targets"] = {
        name: {"bound": bound, "kind": kind, "met": _met(results["ratios"][name], bound, kind)}
        for name, (bound, kind) in TARGETS.items()
    }
    print_report(results)
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.speed_targets"
        write_json(args.out, {**results, **script_provenance(module, argv, (args.seed,))})
    return 0


def _met(value, bound: float, kind: str):
    if value is None:
        return None
    return value <= bound if kind == "max" else value >= bound


def print_report(results: dict) -> None:
    print(
        f"load average {results['load_average_start']} -> {results['load_average_end']}, "
        f"{results['wall_s']:.0f} s; medians, round-robin within each section"
    )
    for name, row in results["pf_rnn"]["rows"].items():
        extra = (
            f", paper epoch {row['median_s'] * pf_rnn.STEPS_PER_EPOCH:.0f} s (extrapolated)"
            if (name.endswith("training step"))
            else ""
        )
        print(
            f"  {name:<24}{row['median_s']:>8.3f} s   official code {pf_rnn.OFFICIAL[name]:.3f} s "
            f"(measured elsewhere){extra}"
        )
    for name, row in results["bootstrap_filter"]["rows"].items():
        print(f"  filter, {name:<16}{row['median_s']:>8.3f} s")
    for name, row in results["srnn_step"]["methods"].items():
        print(f"  srnn step, {name:<13}{row['median_s']:>8.3f} s")
    for name, row in results["pf_rnn"]["memory"].items():
        print(f"  peak memory growth, {name}: {row['peak_growth_mb']:.0f} MB")
    for name, value in results["ratios"].items():
        target = results["targets"].get(name)
        verdict = (
            ""
            if target is None
            else (
                f"   target {'<=' if target['kind'] == 'max' else '>='} {target['bound']}: "
                + {True: "met", False: "missed", None: "not measured"}[target["met"]]
            )
        )
        shown = "not measured (particles not installed)" if value is None else f"{value:.2f}x"
        print(f"  {name:<42}{shown}{verdict}")


if __name__ == "__main__":
    sys.exit(main())

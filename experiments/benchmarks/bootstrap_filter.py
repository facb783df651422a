"""Benchmark of the bootstrap particle filter on a 1-d linear-Gaussian state-space model.

    z_1 ~ N(0, s0^2),  z_t = rho z_{t-1} + sx e_t,  x_t = z_t + sy v_t   (rho=0.9, sx=0.5, sy=1, s0 stationary)

(:mod:`ppl_models.experiments.benchmarks.lgssm_problem`: the model and its data).

Sections (all in one run, one CPU thread):

* ``compare``: wall time of :class:`ppl_models.inference.ParticleFilter` (``B`` sequences at once) beside the
  ``particles`` library of N. Chopin (numpy, ``ssm.Bootstrap`` + ``particles.SMC``, one sequence at
  a time) and beside Pyro's ``pyro.infer.SMCFilter`` (one sequence at a time: it shares one weight
  per particle across a batch and keeps no evidence, so it is timed only). All use systematic
  resampling when the ESS falls below K/2. The log-evidence error against the exact Kalman value
  is reported (mean and sd over sequences) for ours and for ``particles``.
* ``scaling``: time against K (at fixed T) and against T (at fixed K), with log-log slopes and
  linear fits ``time = fixed + marginal * size``.
* ``memory``: peak memory of one evaluation without gradients, without and with
  ``keep_ancestry=True``, at several T. On CPU each configuration runs in a fresh subprocess,
  which resets its peak-RSS mark after a warm-up run (``/proc/self/clear_refs``) and reports how
  far the run raised it (``VmHWM``), once with glibc's default allocator and once with
  ``MALLOC_MMAP_THRESHOLD_`` low enough that the peak follows the live tensors rather than heap
  fragmentation; on CUDA the caching allocator's peak (``torch.cuda.max_memory_allocated``).

Timings are wall-clock seconds after one warm-up run; the methods of a table run round-robin
(A, B, C, A, B, C, ...) so that a change of background load hits them alike, and the best and
the median of ``--repeats`` runs are reported. On CUDA each timed call ends with
``torch.cuda.synchronize()``. Nothing is downloaded. Importing this module sets the thread
variables of OpenMP, MKL, OpenBLAS, numexpr and numba to 1 (through
:mod:`~ppl_models.experiments.benchmarks.lgssm_problem`).

Usage::

    python -m ppl_models.experiments.benchmarks.bootstrap_filter                 # full CPU benchmark (minutes)
    python -m ppl_models.experiments.benchmarks.bootstrap_filter --quick         # smoke configuration (seconds)
    python -m ppl_models.experiments.benchmarks.bootstrap_filter --device cuda --out results.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from ppl_models.experiments.benchmarks.filter_memory import memory
from ppl_models.experiments.benchmarks.lgssm_problem import (
    ESS_THRESHOLD,
    RHO,
    SIGMA_0,
    SIGMA_X,
    SIGMA_Y,
    evidence_errors,
    make_data,
    make_model,
)
from ppl_models.experiments.benchmarks.reference_filters import prepare_particles, prepare_pyro
from ppl_models.experiments.benchmarks.timing import fit_scaling, load_average, machine_info, stats, sync, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference import ParticleFilter
from ppl_models.inference.atomic_files import write_json

FULL = {
    "num_particles": 1000,
    "num_steps": 1000,
    "num_sequences": 16,
    "k_list": [100, 300, 1000, 3000, 10000],
    "k_list_cuda": [1000, 3000, 10000, 30000, 100000],
    "t_list": [250, 500, 1000, 2000],
    "memory_t_list": [500, 1000, 2000, 4000],
    "memory_all_allocators": True,
}
QUICK = {
    "num_particles": 100,
    "num_steps": 50,
    "num_sequences": 4,
    "k_list": [50, 100, 200],
    "k_list_cuda": [100, 1000, 10000],
    "t_list": [25, 50, 100],
    "memory_t_list": [64, 128],
    "memory_all_allocators": False,
}


# --------------------------------------------------------------------------------------------
# the filters: each ``prepare_*`` (ours here, the references in ``reference_filters``) warms up
# and returns ``(run, finish)``; ``run()`` is one timed call over all sequences and
# ``finish(times, last_output)`` turns the timings into a row.
# --------------------------------------------------------------------------------------------
def prepare_ours(num_particles, data, *, device="cpu", dtype=torch.float32, seed=0):
    """:class:`ParticleFilter` on all ``B`` sequences at once, under ``torch.no_grad``."""
    x32, x64, exact = data
    x = (x64 if dtype == torch.float64 else x32).to(device)
    num_sequences, num_steps, _ = x.shape
    model = make_model(dtype, device)
    pf = ParticleFilter(
        num_particles,
        resampling="systematic",
        ess_threshold=ESS_THRESHOLD,
        generator=torch.Generator(device=device).manual_seed(seed + 1),
    )

    def run(inputs=x):
        with torch.no_grad():
            result = pf.run(model, inputs)
        sync(device)
        return result

    run(x[:, : min(num_steps, 20)])  # warm-up: allocator, kernels, lazy imports

    def finish(times, result):
        out = stats(times)
        out.update(evidence_errors(result.log_evidence.double().cpu().numpy(), exact.numpy()))
        out["resampling_rate"] = float(result.resampled.float().mean())
        out.update(
            num_particles=num_particles,
            num_steps=num_steps,
            num_sequences=num_sequences,
            device=device,
            dtype=str(dtype).replace("torch.", ""),
        )
        return out

    return run, finish


def compare(prepared: dict, repeats: dict) -> dict:
    """Time the prepared methods round-robin (A, B, C, A, B, C, ...) so that all see the same background load."""
    times = {name: [] for name in prepared}
    last = {}
    for round_ in range(max(repeats.values())):
        for name, (run, _) in prepared.items():
            if round_ < repeats[name]:
                seconds, last[name] = time_repeats(run, 1)
                times[name] += seconds
    return {name: finish(times[name], last[name]) for name, (_, finish) in prepared.items()}


# --------------------------------------------------------------------------------------------
# scaling
# --------------------------------------------------------------------------------------------
def scaling(cfg, device, repeats, seed) -> dict:
    k_list = cfg["k_list_cuda"] if device.startswith("cuda") else cfg["k_list"]
    steps, batch = cfg["num_steps"], cfg["num_sequences"]
    data = make_data(batch, steps, seed)
    # round-robin over the sizes, so that a change of background load hits all of them alike
    prepared = {k: prepare_ours(k, data, device=device, seed=seed) for k in k_list}
    vs_k = list(compare(prepared, dict.fromkeys(prepared, repeats)).values())
    prepared = {
        t: prepare_ours(cfg["num_particles"], make_data(batch, t, seed), device=device, seed=seed)
        for t in cfg["t_list"]
    }
    vs_t = list(compare(prepared, dict.fromkeys(prepared, repeats)).values())
    del prepared
    fit_k = fit_scaling(k_list, [r["best_s"] for r in vs_k])
    fit_t = fit_scaling(cfg["t_list"], [r["best_s"] for r in vs_t])
    # per-unit costs: the marginal cost of one particle-step of one sequence, and of one filter step (all K, B)
    fit_k["marginal_ns_per_particle_step"] = fit_k["linear_marginal_s"] / (steps * batch) * 1e9
    fit_k["fixed_us_per_step"] = fit_k["linear_fixed_s"] / steps * 1e6
    fit_t["marginal_us_per_step"] = fit_t["linear_marginal_s"] * 1e6
    fit_t["marginal_ns_per_particle_step"] = fit_t["linear_marginal_s"] / (cfg["num_particles"] * batch) * 1e9
    return {"vs_particles": vs_k, "vs_steps": vs_t, "fit_particles": fit_k, "fit_steps": fit_t}


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def _fmt_s(row) -> str:
    return f"{row['best_s']:.3f} ({row['median_s']:.3f})"


def print_report(res: dict) -> None:
    cfg = res["config"]
    print(
        f"\nmachine: {res['machine']['cpu']}, {res['machine']['logical_cpus']} logical CPUs, "
        f"torch {res['machine']['torch']} ({res['machine']['torch_threads']} thread), "
        f"particles {res['machine']['particles']}, pyro {res['machine']['pyro-ppl']}"
        + (f", GPU {res['machine']['gpu']}" if "gpu" in res["machine"] else "")
    )
    comp = res.get("compare")
    if comp:
        print(
            f"\n## Bootstrap filter, K={cfg['num_particles']}, T={cfg['num_steps']}, B={cfg['num_sequences']} "
            f"(best of {cfg['repeats']}, median in brackets)\n"
        )
        print(
            "| method | device | time s best (median) | us / step / sequence | vs particles (best) "
            "| log-evidence error mean | error sd |"
        )
        print("|---|---|---|---|---|---|---|")
        ref = comp.get("particles")
        for name, row in comp.items():
            per = row["best_s"] / (row["num_steps"] * row["num_sequences"]) * 1e6
            ratio = f"{ref['best_s'] / row['best_s']:.2f}x" if ref else "-"
            err = f"{row['error_mean']:+.3f} | {row['error_sd']:.3f}" if "error_mean" in row else "n/a | n/a"
            print(f"| {name} | {row.get('device', 'cpu')} | {_fmt_s(row)} | {per:.1f} | {ratio} | {err} |")
        if ref:
            print(f"\nparticles' own Kalman filter vs ours (exact): |diff| = {ref['kalman_vs_ours_abs_diff']:.2e} nats")
    sc = res.get("scaling")
    if sc:
        fk, ft = sc["fit_particles"], sc["fit_steps"]
        print(f"\n## Scaling with K (T={cfg['num_steps']}, B={cfg['num_sequences']}, device {res['device']})\n")
        print("| K | time s best (median) | ns / particle-step | error mean | error sd |")
        print("|---|---|---|---|---|")
        for r in sc["vs_particles"]:
            per = r["best_s"] / (r["num_particles"] * r["num_steps"] * r["num_sequences"]) * 1e9
            print(f"| {r['num_particles']} | {_fmt_s(r)} | {per:.1f} | {r['error_mean']:+.3f} | {r['error_sd']:.3f} |")
        print(
            f"\nlog-log slope {fk['loglog_slope']:.2f} "
            f"(upper half of the range {fk['loglog_slope_upper_half']:.2f}); "
            f"linear fit: fixed {fk['fixed_us_per_step']:.0f} us per step + "
            f"{fk['marginal_ns_per_particle_step']:.2f} ns per particle-step"
        )
        print(f"\n## Scaling with T (K={cfg['num_particles']}, B={cfg['num_sequences']}, device {res['device']})\n")
        print("| T | time s best (median) | us / step |")
        print("|---|---|---|")
        for r in sc["vs_steps"]:
            print(f"| {r['num_steps']} | {_fmt_s(r)} | {r['best_s'] / r['num_steps'] * 1e6:.0f} |")
        print(
            f"\nlog-log slope {ft['loglog_slope']:.2f}; linear fit: {ft['marginal_us_per_step']:.0f} us per step "
            f"({ft['marginal_ns_per_particle_step']:.2f} ns per particle-step) + fixed {ft['linear_fixed_s']:.4f} s"
        )
    mem = res.get("memory")
    if mem:
        what = "peak allocated (CUDA caching allocator)" if res["device"].startswith("cuda") else "peak RSS growth"
        print(f"\n## Memory of one evaluation, K={cfg['num_particles']}, B={cfg['num_sequences']} ({what})\n")
        print("| keep_ancestry | allocator | T | peak growth MiB | bytes / particle-step | result history MiB |")
        print("|---|---|---|---|---|---|")
        for r in mem:
            print(
                f"| {r['keep_ancestry']} | {r['allocator']} | {r['num_steps']} | {r['delta_bytes'] / 2**20:.3f} | "
                f"{r['bytes_per_particle_step']:.3f} | {r['result_history_bytes'] / 2**20:.1f} |"
            )


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (our engine; particles and Pyro stay on CPU)")
    p.add_argument("--quick", action="store_true", help="small smoke configuration that finishes in seconds")
    p.add_argument("--out", type=Path, default=None, help="write all results to this JSON file (atomically)")
    p.add_argument("--skip-particles", action="store_true", help="do not run the particles library")
    p.add_argument("--skip-pyro", action="store_true", help="do not run pyro.infer.SMCFilter")
    p.add_argument("--skip-scaling", action="store_true", help="do not run the scaling section")
    p.add_argument("--skip-memory", action="store_true", help="do not run the memory section")
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed repeats of our engine and particles (default 5, quick 2); the best and the median are reported",
    )
    p.add_argument("--pyro-repeats", type=int, default=1, help="timed repeats of Pyro's SMCFilter (default 1)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> dict | None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    device = args.device
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise SystemExit(f"--device must be cpu or cuda, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {device} requested but torch {torch.__version__} sees no CUDA device")
    for name in ("repeats", "pyro_repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    cfg = dict(QUICK if args.quick else FULL)
    repeats = args.repeats or (2 if args.quick else 5)
    k, t, b = cfg["num_particles"], cfg["num_steps"], cfg["num_sequences"]
    res = {
        "benchmark": "bootstrap particle filter, 1-d linear-Gaussian SSM",
        "model": {
            "rho": RHO,
            "sigma_x": SIGMA_X,
            "sigma_y": SIGMA_Y,
            "sigma_0": SIGMA_0,
            "resampling": "systematic",
            "ess_threshold": ESS_THRESHOLD,
        },
        "config": {
            **cfg,
            "repeats": repeats,
            "pyro_repeats": args.pyro_repeats,
            "quick": args.quick,
            "seed": args.seed,
        },
        "device": device,
        "machine": machine_info(device),
        "command": " ".join(
            [
                os.path.basename(sys.executable),
                "-m",
                "ppl_models.experiments.benchmarks.bootstrap_filter",
                *(sys.argv[1:] if argv is None else argv),
            ]
        ),
    }
    res["load_average_start"] = load_average()
    started = time.perf_counter()

    data = make_data(b, t, args.seed)
    print(f"compare: K={k} T={t} B={b} ...", flush=True)
    prepared = {
        "ours float32": prepare_ours(k, data, seed=args.seed),
        "ours float64": prepare_ours(k, data, dtype=torch.float64, seed=args.seed),
    }
    if device != "cpu":
        prepared[f"ours float32 {device}"] = prepare_ours(k, data, device=device, seed=args.seed)
    if not args.skip_particles:
        prepared["particles"] = prepare_particles(k, data, seed=args.seed)
    if not args.skip_pyro:
        prepared["pyro SMCFilter"] = prepare_pyro(k, data, seed=args.seed)
    counts = {name: args.pyro_repeats if name.startswith("pyro") else repeats for name in prepared}
    res["compare"] = compare(prepared, counts)
    del prepared
    if "particles" in res["compare"]:
        ref = res["compare"]["particles"]
        res["speedup_vs_particles"] = {
            name: {"best": ref["best_s"] / row["best_s"], "median": ref["median_s"] / row["median_s"]}
            for name, row in res["compare"].items()
            if name != "particles"
        }
    if not args.skip_scaling:
        print("scaling ...", flush=True)
        res["scaling"] = scaling(cfg, device, repeats, args.seed)
    if not args.skip_memory:
        print("memory ...", flush=True)
        res["memory"] = memory(cfg, device, args.seed)
    res["total_wall_s"] = time.perf_counter() - started
    res["load_average_end"] = load_average()
    print_report(res)
    print(
        f"\ntotal {res['total_wall_s']:.1f} s; load average at start {res['load_average_start']}, "
        f"at end {res['load_average_end']}"
    )
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.bootstrap_filter"
        write_json(args.out, {**res, **script_provenance(module, argv, (args.seed,))})
        print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()

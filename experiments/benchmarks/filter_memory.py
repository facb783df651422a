"""Memory of the bootstrap filter benchmark: peak RSS growth of one run per configuration.

On the CPU each configuration runs in a fresh process (``python -m
ppl_models.experiments.benchmarks.filter_memory CONFIG_JSON``), under each allocator setting of
:data:`ALLOCATORS`; on CUDA the caching allocator's peak is read in this process.
:func:`memory` is the entry :mod:`ppl_models.experiments.benchmarks.bootstrap_filter` calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from ppl_models.experiments.benchmarks.lgssm_problem import ESS_THRESHOLD, make_data, make_model
from ppl_models.experiments.benchmarks.timing import current_and_peak_rss, reset_peak_rss
from ppl_models.experiments.claims.provenance import REPO_ROOT
from ppl_models.inference import ParticleFilter

__all__ = ["memory", "memory_probe", "ALLOCATORS"]


def _result_bytes(result) -> int:
    tensors = [result.ancestors, result.history_log_weights, *(result.history or {}).values()]
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def memory_probe(config: dict) -> dict:
    """One evaluation in this (fresh) process: peak RSS grown by the run, on CPU."""
    torch.set_num_threads(1)
    k, b, t, keep = config["num_particles"], config["num_sequences"], config["num_steps"], config["keep_ancestry"]
    x32, _, _ = make_data(b, t, config["seed"])
    model = make_model()
    pf = ParticleFilter(
        k,
        resampling="systematic",
        ess_threshold=ESS_THRESHOLD,
        generator=torch.Generator().manual_seed(config["seed"] + 1),
    )
    with torch.no_grad():
        pf.run(model, x32[:, :16])  # warm-up: per-step temporaries, lazy imports
        method = reset_peak_rss()
        base, _ = current_and_peak_rss(method)
        result = pf.run(model, x32, keep_ancestry=keep)
        after, peak = current_and_peak_rss(method)
    return {
        **config,
        "method": method,
        "baseline_rss_bytes": base,
        "peak_rss_bytes": peak,
        "delta_bytes": peak - base,
        "rss_after_bytes": after,
        "result_history_bytes": _result_bytes(result),
    }


# glibc serves blocks of at least this size with mmap and unmaps them on free, so the peak RSS
# follows the live tensors; with the default allocator it also counts heap fragmentation
MMAP_THRESHOLD = 16384
ALLOCATORS = {
    "glibc default": {},
    f"glibc mmap >= {MMAP_THRESHOLD // 1024} KiB": {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)},
}


def _probe_subprocess(config: dict, extra_env: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(extra_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "ppl_models.experiments.benchmarks.filter_memory", json.dumps(config)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe {config} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _memory_cuda(config: dict) -> dict:
    k, b, t, keep = config["num_particles"], config["num_sequences"], config["num_steps"], config["keep_ancestry"]
    x32, _, _ = make_data(b, t, config["seed"])
    x = x32.to("cuda")
    model = make_model(device="cuda")
    pf = ParticleFilter(
        k,
        resampling="systematic",
        ess_threshold=ESS_THRESHOLD,
        generator=torch.Generator(device="cuda").manual_seed(config["seed"] + 1),
    )
    with torch.no_grad():
        pf.run(model, x[:, :16])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        result = pf.run(model, x, keep_ancestry=keep)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    out = {
        **config,
        "baseline_allocated_bytes": base,
        "peak_allocated_bytes": peak,
        "delta_bytes": peak - base,
        "result_history_bytes": _result_bytes(result),
    }
    del result
    torch.cuda.empty_cache()
    return out


def memory(cfg, device, seed) -> list[dict]:
    cuda = device.startswith("cuda")
    allocators = {"CUDA caching allocator": None} if cuda else ALLOCATORS
    if not cfg["memory_all_allocators"]:
        allocators = dict(list(allocators.items())[:1])
    rows = []
    for keep in (False, True):
        for allocator, extra_env in allocators.items():
            for t in cfg["memory_t_list"]:
                config = {
                    "num_particles": cfg["num_particles"],
                    "num_sequences": cfg["num_sequences"],
                    "num_steps": t,
                    "keep_ancestry": keep,
                    "seed": seed,
                }
                row = _memory_cuda(config) if cuda else _probe_subprocess(config, extra_env)
                row["bytes_per_particle_step"] = row["delta_bytes"] / (t * cfg["num_particles"] * cfg["num_sequences"])
                row.update(device=device, allocator=allocator)
                rows.append(row)
    return rows


if __name__ == "__main__":
    print(json.dumps(memory_probe(json.loads(sys.argv[1]))))

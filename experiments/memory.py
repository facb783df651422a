"""Memory checks before large allocations: a setting that cannot fit is refused by name before it allocates.

On Linux an allocation larger than the free memory often succeeds (the kernel overcommits)
and the process is killed later, while the pages are filled, with no message. So the
evaluation settings whose tensors grow with a sample count are estimated first
(:func:`evaluation_memory`) and compared with :func:`available_memory`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["available_memory", "evaluation_memory", "check_memory"]

FLOAT32 = 4


def available_memory() -> int | None:
    """Bytes this process may still allocate: ``MemAvailable`` of ``/proc/meminfo`` (else free pages by
    ``os.sysconf``), capped by a cgroup v2 limit (``memory.max - memory.current``); ``None`` if unknown."""
    candidates = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                candidates.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, ValueError, OSError):
            pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            candidates.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return min(candidates) if candidates else None


def evaluation_memory(model, data, config) -> dict[str, tuple[int, int, str]]:
    """Lower bounds of the memory the sample counts of ``config`` (an ``EvaluateConfig``) make an evaluation hold.

    Returns ``{"evaluate.<setting>": (value, bytes, how)}`` for each setting that applies to
    ``model`` on ``data``, the bytes counting only float32 tensors that grow with the setting
    (``N`` test sequences of ``T`` steps and ``D`` features; ``b`` sequences a batch):

    * ``predictive_samples`` ``S``: the test split's one-step draws, gathered then put in order, ``2 S N T D``;
    * ``posterior_draws`` ``S``: replicates and pointwise log-likelihoods of the test split, ``2 S N T D``;
    * ``num_particles`` ``K`` (``smc``): one step's particle predictions of a batch, ``K b D``;
    * ``iwae_particles`` ``K`` (``iwae``): one log-density per step of ``min(K, particle_chunk)`` particles, ``K b T``.
    """
    from inference.protocol import ESTIMATORS

    x, _ = data.test
    n, steps, features = (int(size) for size in x.shape)
    batch = min(config.batch_size, n)
    wanted = {name for name in config.estimators if model.supports(ESTIMATORS[name])}
    slice_ = f"{steps} steps x {features} features x 4 bytes"
    needs = {}
    if not data.binary and config.predictive_samples:
        draws = config.predictive_samples
        needs["predictive_samples"] = (draws, 2 * draws * n * steps * features * FLOAT32,
                                       f"{draws} draws x 2 copies x {n} test sequences x {slice_}")  # fmt: skip
    if config.posterior_draws and model.supports("programs") and not getattr(model, "conditional", False):
        draws = config.posterior_draws
        needs["posterior_draws"] = (draws, 2 * draws * n * steps * features * FLOAT32,
                                    f"{draws} draws x 2 (replicates, log-likelihoods) x {n} test sequences x "
                                    f"{slice_}")  # fmt: skip
    if "smc" in wanted:
        particles = config.num_particles
        needs["num_particles"] = (particles, particles * batch * features * FLOAT32,
                                  f"{particles} particles x {batch} sequences x {features} features x 4 bytes")
    if "iwae" in wanted:
        chunk = min(config.iwae_particles, config.particle_chunk or config.iwae_particles)
        needs["iwae_particles"] = (config.iwae_particles, chunk * batch * steps * FLOAT32,
                                   f"{chunk} particles a pass x {batch} sequences x {steps} steps x 4 bytes")
    return {f"evaluate.{name}": need for name, need in needs.items()}


def check_memory(needs: dict[str, tuple[int, int, str]], available: int | None = None) -> None:
    """Raise one ``ValueError`` naming the largest setting if the memory ``needs`` (``{setting: (value, bytes,
    how)}``), held together, exceed ``available`` bytes (default :func:`available_memory`; unknown: no check)."""
    available = available_memory() if available is None else available
    if available is None or not needs:
        return
    total = sum(size for _, size, _ in needs.values())
    if total <= available:
        return
    name, (value, size, how) = max(needs.items(), key=lambda item: item[1][1])
    others = f"; {_gib(total)} with the other settings" if total > 1.01 * size else ""
    raise ValueError(f"{name}={value} needs at least {_gib(size)} of memory ({how}{others}), but {_gib(available)} "
                     f"are available: lower {name}")  # fmt: skip


def _gib(size: int) -> str:
    return f"{size / 2**30:.3g} GiB"

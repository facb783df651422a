"""Shared helpers of the benchmarks: wall-clock timing, machine description, memory marks, scaling fits.

Every benchmark module times its rows with :func:`time_repeats`, summarises them with
:func:`stats`, records :func:`machine_info` and :func:`load_average` beside its figures (other
processes make timings noisy) and, where it measures memory, uses :func:`reset_peak_rss` and
:func:`current_and_peak_rss` in a fresh process. The commit, and the ``commands`` and ``seeds`` of a results file,
come from :mod:`ppl_models.experiments.claims.provenance`.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from ppl_models.experiments.claims.provenance import git_state

__all__ = [
    "time_repeats",
    "sync",
    "stats",
    "fit_scaling",
    "machine_info",
    "load_average",
    "reset_peak_rss",
    "current_and_peak_rss",
    "package_version",
]


def package_version(dist_name: str) -> str | None:
    """Installed version of a distribution, or its module's ``__version__`` (None if neither is known)."""
    try:
        return metadata.version(dist_name)
    except metadata.PackageNotFoundError:
        module = {"pyro-ppl": "pyro"}.get(dist_name, dist_name)
        try:
            return getattr(__import__(module), "__version__", None)
        except ImportError:
            return None


def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA); nothing on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_repeats(fn: Callable[[], object], repeats: int, device: str = "cpu") -> tuple[list[float], object]:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` (synchronized on CUDA) and the last result."""
    times, out = [], None
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return times, out


def stats(times: list[float]) -> dict:
    """All times, the best and the median, in seconds."""
    return {"times_s": times, "best_s": min(times), "median_s": statistics.median(times)}


def fit_scaling(sizes: list[int], seconds: list[float]) -> dict:
    """Log-log slope of ``seconds`` against ``sizes`` and the linear fit ``seconds = fixed + marginal * size``."""
    log_x, log_y = np.log(np.asarray(sizes, float)), np.log(np.asarray(seconds, float))
    slope = float(np.polyfit(log_x, log_y, 1)[0])
    top = slice(len(sizes) // 2, None)  # the upper half of the range, where fixed costs matter least
    slope_upper = float(np.polyfit(log_x[top], log_y[top], 1)[0]) if len(sizes) - len(sizes) // 2 >= 2 else slope
    marginal, fixed = np.polyfit(np.asarray(sizes, float), np.asarray(seconds, float), 1)
    return {
        "loglog_slope": slope,
        "loglog_slope_upper_half": slope_upper,
        "linear_fixed_s": float(fixed),
        "linear_marginal_s": float(marginal),
    }


def _proc_status_bytes(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return None


def reset_peak_rss() -> str:
    """Reset the peak-RSS mark (Linux >= 4.0: ``VmHWM`` := ``VmRSS``); returns the method used.

    ``ru_maxrss`` is the fallback, but it is inherited from the parent at ``fork``, so a probe
    process spawned by a larger parent would read the parent's peak.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
        if _proc_status_bytes("VmHWM") is not None:
            return "VmHWM"
    except OSError:
        pass
    return "ru_maxrss"


def current_and_peak_rss(method: str) -> tuple[int, int]:
    if method == "VmHWM":
        return _proc_status_bytes("VmRSS"), _proc_status_bytes("VmHWM")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss = rss if sys.platform == "darwin" else rss * 1024
    return rss, rss


def machine_info(device: str) -> dict:
    """CPU, thread count, versions, GPU (on CUDA) and the git state of the measured code."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }
    for dist_name in ("pyro-ppl", "particles", "scipy"):
        info[dist_name] = package_version(dist_name)
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    info.update(git_state())
    return info


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: other processes on the machine make the timings noisy."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None

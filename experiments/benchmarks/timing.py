"""Shared helpers of the benchmarks: wall-clock timing, machine description, memory marks, scaling fits.

Every benchmark module times its rows with :func:`time_repeats`, summarises them with
:func:`stats`, records :func:`machine_info` and :func:`load_average` beside its figures (other
processes make timings noisy) and, where it measures memory, uses :func:`reset_peak_rss` and
:func:`current_and_peak_rss` in a fresh process.
"""

from __future__ import annotations

import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

__all__ = ["time_repeats", "sync", "stats", "fit_scaling", "machine_info", "load_average", "reset_peak_rss",
           "current_and_peak_rss", "package_version", "provenance", "git_state", "REPO_ROOT"]  # fmt: skip

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def git_state() -> dict:
    """The commit measured and any uncommitted change to the engine or the models.

    On a copy of the tree sent to another machine (no git history there, or a stale one), the
    environment variable ``PPL_MODELS_MANIFEST`` names a file of ``git ls-files -s inference ppl_models`` output
    taken from the commit in its first line (``commit <sha>``): every engine file is then checked
    against its blob hash there, so a changed, added or missing file is listed. Without either: ``None``.
    """

    def git(*cmd):
        done = subprocess.run(["git", *cmd], capture_output=True, text=True, cwd=str(REPO_ROOT), check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    if os.environ.get("PPL_MODELS_MANIFEST"):
        return _manifest_state(Path(os.environ["PPL_MODELS_MANIFEST"]))
    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--", "inference", "ppl_models") if commit else None
    except OSError:
        commit = dirty = None
    return {
        "git_commit": commit,
        "git_uncommitted_engine_files": None if commit is None else (dirty.splitlines() if dirty else []),
    }


def _manifest_state(manifest: Path) -> dict:
    """:func:`git_state` from a manifest (see there): the commit and the engine files that differ from it."""
    import hashlib

    lines = manifest.read_text().splitlines()
    if not lines or not lines[0].startswith("commit "):
        raise ValueError(f"PPL_MODELS_MANIFEST {manifest}: expected 'commit <sha>' on the first line")
    expected = {}
    for line in lines[1:]:
        meta, _, path = line.partition("\t")
        expected[path] = meta.split()[1]
    present = {str(p.relative_to(REPO_ROOT)) for folder in ("inference", "ppl_models")
               for p in (REPO_ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}  # fmt: skip
    changed = []
    for path in sorted(present | set(expected)):
        if path not in expected:
            changed.append(f"?? {path}")
        elif path not in present:
            changed.append(f" D {path}")
        else:
            data = (REPO_ROOT / path).read_bytes()
            if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != expected[path]:
                changed.append(f" M {path}")
    return {"git_commit": lines[0].split()[1], "git_uncommitted_engine_files": changed,
            "git_checked_by": "blob hashes against the commit's manifest (no git history on this machine)"}


def provenance(module: str, argv: list[str] | None, seeds: tuple[int, ...] = (0,)) -> dict:
    """The ``commands`` and ``seeds`` fields of a benchmark's results file: ``python -m module ARGS`` as run
    (``argv``; ``None``: the process's own arguments) and the seeds its data and draws used."""
    args = sys.argv[1:] if argv is None else list(argv)
    return {"commands": [" ".join(["python -m", module, *map(shlex.quote, args)])], "seeds": list(seeds)}

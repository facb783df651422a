"""The end of ``ppl-models demo``: each demo's headline figures with their units, read from its run folder's files,
the pictures to open, and the wall time of the whole command (:func:`demo_summary`, :func:`format_summary`).

The summary is also written as ``ROOT/summary.json``; ``docs/results/demo_summary_cpu.json`` is that file from a
full run on 2 CPU cores, the source of the README's demo figures (:func:`readme_figures` spells them as printed).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

__all__ = ["HEADLINES", "PICTURES", "demo_summary", "format_summary", "readme_figures", "SUMMARY_FILE"]

#: the file of the demo's root folder that holds :func:`demo_summary`'s record
SUMMARY_FILE = "summary.json"


def _estimate(loglik: dict, family: str) -> tuple[str, float]:
    """``(name, nats per step)`` of the log-likelihood estimate of ``family`` (``smc``: ``smc-K``)."""
    name = next(key for key in loglik if key.split("-")[0] == family)
    return name.upper(), loglik[name]["per_step"]


def _lgssm(folder: Path) -> list[tuple[str, float, str]]:
    loglik = json.loads((folder / "metrics.json").read_text())["loglik"]
    name, smc = _estimate(loglik, "smc")
    return [
        (f"log-likelihood by {name}", smc, "nats/step"),
        ("exact", loglik["exact"]["per_step"], "nats/step"),
    ]


def _srnn(folder: Path) -> list[tuple[str, float, str]]:
    loglik = json.loads((folder / "metrics.json").read_text())["loglik"]
    bounds = [_estimate(loglik, family) for family in ("elbo", "iwae", "smc")]
    return [(f"{name} bound", value, "nats/step") for name, value in bounds]


def _psrnn(folder: Path) -> list[tuple[str, float, str]]:
    metrics = json.loads((folder / "metrics.json").read_text())
    calibration = metrics["calibration"]
    before = json.loads((folder / "predictions.json").read_text())["initial_mse"]["test_mse"]
    return [
        ("one-step MSE before BPTT", before, "squared data units"),
        ("after", metrics["mse"], "squared data units"),
        *((f"coverage at {level}%", calibration[f"coverage_{level / 100:g}"], "") for level in (50, 80, 95)),
        ("PIT KS", calibration["pit_ks"], ""),
    ]


def _pfrnn(folder: Path) -> list[tuple[str, float, str]]:
    metrics = json.loads((folder / "metrics.json").read_text())
    return [
        ("final position error", metrics["position_mse_by_step"][-1], "cells² (squared distance at the last step)"),
        ("per coordinate (the paper's last-step MSE)", metrics["last_step_mse"], "cells²"),
        ("share of robots ending on a mirror image", metrics["last_step_mirror_share"], ""),
    ]


def _smct(folder: Path) -> list[tuple[str, float, str]]:
    truth = json.loads((folder / "metrics.json").read_text())["truth_metrics"]
    return [
        ("predictive MSE", truth["predictive_mse"], f"(the true law's {truth['true_predictive_mse']:.3g})"),
        ("share of samples in the true 80% interval", truth["share_in_80"], ""),
        ("in the 95% one", truth["share_in_95"], ""),
    ]


#: each demo's headline figures: ``folder -> [(what, value, unit)]``, read from its run folder's files
HEADLINES: dict[str, Callable[[Path], list[tuple[str, float, str]]]] = {
    "lgssm-demo": _lgssm,
    "srnn-demo": _srnn,
    "psrnn-demo": _psrnn,
    "pfrnn-demo": _pfrnn,
    "smct-demo": _smct,
}
#: each demo's pictures, inside its run folder (those it wrote are shown)
PICTURES = {
    "lgssm-demo": ("plots/predictive_bands.png", "plots/particles.png"),
    "srnn-demo": ("plots/test_piano_roll.png", "generated/sample.png", "generated/sample.mid"),
    "psrnn-demo": ("plots/predictive_bands.png", "plots/coverage.png"),
    "pfrnn-demo": ("plots/belief_over_time.png", "plots/belief.png"),
    "smct-demo": ("plots/predictive_bands.png", "plots/coverage.png"),
}


def demo_summary(root: str | Path, names, seconds: float) -> dict:
    """``{"root", "wall_seconds", "demos": {name: {"figures": [[what, value, unit], ...], "pictures": [path in root,
    ...]} or {"failed": why}}}`` of the demos ``names`` run into ``root`` in ``seconds``."""
    root = Path(root)
    demos = {}
    for name in names:
        folder = root / name
        try:
            figures = HEADLINES[name](folder)
        except (OSError, KeyError, ValueError, IndexError, StopIteration) as error:
            demos[name] = {"failed": f"no figures in {folder} ({type(error).__name__}: {error})"}
            continue
        pictures = [f"{name}/{path}" for path in PICTURES[name] if (folder / path).is_file()]
        demos[name] = {"figures": [list(figure) for figure in figures], "pictures": pictures}
    return {"root": str(root), "wall_seconds": round(seconds, 1), "demos": demos}


def _value(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.4g}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def format_summary(summary: dict, width: int = 118) -> str:
    """The summary as printed, about two lines per demo (its figures, its pictures), lines of at most ``width``
    characters; the wall time in the head."""
    head = f"Summary: {_duration(summary['wall_seconds'])} of wall time; the pictures are in {summary['root']}"
    lines = ["", *textwrap.wrap(head, width, break_long_words=False, break_on_hyphens=False)]
    for name, demo in summary["demos"].items():
        if "failed" in demo:
            parts = [f"failed: {demo['failed']}"]
        else:
            parts = ["; ".join(f"{what} {_value(value)} {unit}".rstrip() for what, value, unit in demo["figures"])]
            parts += ["open " + ", ".join(demo["pictures"])] if demo["pictures"] else []
        for part in parts:
            lines += textwrap.wrap(
                part, width, initial_indent=f"  {name:<11} ", subsequent_indent=" " * 14, break_on_hyphens=False
            )
            name = ""
    return "\n".join(lines)


def readme_figures(summary: dict) -> dict[str, str]:
    """``{what: value as printed}`` of the figures the README's demo paragraph states, from a summary record (its
    time in minutes where ``wall_seconds`` is measured, not ``None``)."""
    figures = {
        name: {what: _value(value) for what, value, _ in demo["figures"]}
        for name, demo in summary["demos"].items()
        if "figures" in demo
    }
    seconds = summary["wall_seconds"]
    return {
        **({} if seconds is None else {"demo minutes": f"{seconds / 60:.1f} minutes"}),
        **{f"psrnn coverage at {level}%": figures["psrnn-demo"][f"coverage at {level}%"] for level in (50, 80, 95)},
        "psrnn PIT KS": figures["psrnn-demo"]["PIT KS"],
        "pfrnn final position error": figures["pfrnn-demo"]["final position error"],
    }

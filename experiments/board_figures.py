"""The leaderboard's figures: ``calibration.png`` (coverage and PIT ECDF of every model) and ``fan_chart.png``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from .plots import save_png

__all__ = ["calibration_figure", "fan_chart"]


def calibration_figure(folders: dict[str, Path], path: Path) -> None:
    """Coverage against nominal level (left) and the PIT ECDF (right) of every model, on shared axes."""
    figure = Figure(figsize=(10, 4.2))
    coverage_axis, pit_axis = figure.subplots(1, 2)
    coverage_axis.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
    pit_axis.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
    for model, folder in folders.items():
        calibration = json.loads((folder / "metrics.json").read_text()).get("calibration", {})
        levels = sorted((float(k.split("_", 1)[1]), v) for k, v in calibration.items() if k.startswith("coverage_"))
        if levels:
            line = coverage_axis.plot(*zip(*levels), marker="o", lw=1.2, label=model)[0]
            if (folder / "pit.pt").is_file():
                values = np.sort(torch.load(folder / "pit.pt").double().numpy())
                pit_axis.plot(values, np.arange(1, len(values) + 1) / len(values), lw=1.2, color=line.get_color())
    coverage_axis.set(xlabel="nominal level of the central interval", ylabel="share of test values inside",
                      title="coverage (on the diagonal: calibrated)")  # fmt: skip
    pit_axis.set(xlabel="PIT value", ylabel="ECDF", title="PIT ECDF (on the diagonal: calibrated)")
    coverage_axis.legend(fontsize=7)
    figure.tight_layout()
    save_png(figure, path)


@torch.no_grad()
def fan_chart(folders: dict[str, Path], path: Path, device: str, *, num_samples: int = 200, seed: int = 0) -> None:
    """A forecast of the first test series by each model: given its first two thirds, the rest (first feature)."""
    from .forecasting import _in_units, _load

    figure = Figure(figsize=(4.2 * min(len(folders), 4), 3.2 * -(-len(folders) // 4)))
    axes = figure.subplots(-(-len(folders) // 4), min(len(folders), 4), squeeze=False).ravel()
    for axis, (model_name, folder) in zip(axes, folders.items()):
        _, data, model = _load(model_name, folder, device)
        x, mask = data.test
        length = int(mask[0].sum())
        start = max(1, (2 * length) // 3)
        truth = _in_units(data, x[:1, :length], "test")[0, :, 0]
        axis.plot(range(length), truth, color="black", lw=1.0, label="data")
        axis.axvline(start - 0.5, color="grey", ls=":")
        axis.set_title(model_name, fontsize=9)
        if not model.supports("forecast") or start >= length:
            axis.text(0.5, 0.5, model.limitations.get("forecast", "no forecast"), transform=axis.transAxes,
                      ha="center", fontsize=7, wrap=True)  # fmt: skip
            continue
        torch.manual_seed(seed)
        paths = model.forecast(x[:1, :start].to(device), None, length - start, num_samples).cpu()
        paths = _in_units(data, paths, "test")[:, 0, :, 0]
        steps = range(start, length)
        low, q25, median, q75, high = torch.quantile(paths, torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95]), dim=0)
        axis.fill_between(steps, low, high, alpha=0.2, color="C0", label="90%")
        axis.fill_between(steps, q25, q75, alpha=0.4, color="C0", label="50%")
        axis.plot(steps, median, color="C0", lw=1.2, label="median")
    for axis in axes[len(folders):]:
        axis.set_visible(False)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    save_png(figure, path)

"""Run-folder plots that are not calibration plots: learning curves and particle clouds, and the PNG writer.

Figures are drawn on matplotlib's Agg canvas without pyplot, so no global backend is set.
"""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.figure import Figure

from ppl_models.inference.atomic_files import atomic_write, read_jsonl

__all__ = ["save_png", "learning_curve", "particle_cloud"]


def save_png(figure: Figure, path) -> None:
    """Write ``figure`` to ``path`` as a PNG (110 dpi, cropped to its content), atomically."""
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))


def learning_curve(metrics_path: str | Path, path: str | Path) -> None:
    """Training and validation bound per time step against epochs, from ``metrics.jsonl``."""
    if not Path(metrics_path).is_file():
        return
    records = read_jsonl(metrics_path)
    figure = Figure(figsize=(6, 3.5))
    ax = figure.subplots()
    epochs = [r["epoch"] for r in records]
    ax.plot(epochs, [r.get("train_bound_per_step") for r in records], label="train (objective's bound)")
    valid = [(r["epoch"], r["valid_bound_per_step"]) for r in records if r.get("valid_bound_per_step") is not None]
    if valid:
        ax.plot(*zip(*valid), marker="o", label="validation")
    ax.set(xlabel="epoch", ylabel="nats per time step", title="Learning curve")
    ax.legend()
    save_png(figure, path)


def particle_cloud(result, x: torch.Tensor, path: str | Path, *, key: str = "z", sequence: int = 0) -> None:
    """Particles of the first latent coordinate over time, shaded by weight, with the filtering mean.

    ``result`` must come from ``ParticleFilter.run(..., keep_ancestry=True)``.
    """
    values = result.history[key][:, :, sequence, 0].cpu()  # [T, K]
    weights = result.history_log_weights[:, :, sequence].exp().cpu()  # [T, K]
    weights = weights / weights.max(dim=1, keepdim=True).values  # shade relative to each step's heaviest
    steps = torch.arange(values.shape[0]).unsqueeze(1).expand_as(values)
    figure = Figure(figsize=(7, 3.5))
    ax = figure.subplots()
    ax.scatter(steps.flatten(), values.flatten(), s=3, c=weights.flatten(), cmap="viridis", vmin=0, vmax=1, alpha=0.5)
    ax.plot(result.filtered_mean(key)[sequence, :, 0].cpu(), color="crimson", lw=1.5, label="filtering mean")
    ax.set(xlabel="time step", ylabel=f"{key}[0]", title=f"Particle cloud, sequence {sequence}")
    ax.legend()
    save_png(figure, path)

"""Run-folder plots that are not calibration plots: learning curves, particle clouds, piano rolls.

Figures are drawn on matplotlib's Agg canvas without pyplot, so no global backend is set.
"""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.figure import Figure

from ppl_models.inference.io import atomic_write, read_jsonl

from .tasks.music import NUM_KEYS, plot_piano_roll, write_midi

__all__ = ["save_png", "learning_curve", "particle_cloud", "piano_roll_outputs"]


def save_png(figure: Figure, path) -> None:
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


def piano_roll_outputs(model, roll: torch.Tensor, probabilities: torch.Tensor, run_dir: str | Path, *,
                       seed: int = 0, prefix_steps: int = 16, generated_steps: int = 64) -> None:  # fmt: skip
    """Piano-roll pictures (and MIDI, with the ``midi`` extra) of a run on binary music data.

    Writes ``plots/test_piano_roll.png`` (a test piece ``roll [T, K]`` above the model's
    one-step ``probabilities [T, K]``) and, for a model with ``generate``, a continuation
    of the piece's first ``prefix_steps`` steps and an unconditional sample, each as a PNG
    and, when ``pretty_midi`` is installed and the rolls have the piano's 88 keys (whose
    pitches are known), a ``.mid`` file under ``generated/``. Rolls of another width get
    ``generated/no_midi.txt``, a one-line note, instead of MIDI files.
    """
    run_dir = Path(run_dir)
    plot_piano_roll(roll, run_dir / "plots" / "test_piano_roll.png", probabilities=probabilities,
                    title="Test piece and one-step-ahead note probabilities")  # fmt: skip
    if not model.supports("generate"):
        return
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    prefix = roll[:prefix_steps].unsqueeze(0).to(device)
    pieces = {
        "continuation": model.generate(generated_steps, prefix=prefix, generator=generator),
        "sample": model.generate(generated_steps + prefix.shape[1], generator=generator),
    }
    for name, piece in pieces.items():
        x, mean = piece.x[0].cpu(), None if piece.mean is None else piece.mean[0].cpu()
        title = f"Generated {name}" + (f" of the first {prefix.shape[1]} test steps" if name == "continuation" else "")
        plot_piano_roll(x, run_dir / "generated" / f"{name}.png", probabilities=mean, title=title)
        if x.shape[-1] != NUM_KEYS:
            _write_text(run_dir / "generated" / "no_midi.txt", f"no MIDI files: the rolls have {x.shape[-1]} keys, "
                        f"not the piano's {NUM_KEYS} (MIDI pitches unknown)\n")  # fmt: skip
            continue
        try:
            write_midi(x, run_dir / "generated" / f"{name}.mid")
        except ImportError:
            pass  # the MIDI files need the optional extra; the PNGs say the same


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))

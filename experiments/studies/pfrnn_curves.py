"""Validation learning curves of localization-paper runs, in the paper's metric, on one figure.

``python -m ppl_models.experiments.studies.pfrnn_curves OUT.png LABEL=RUN_DIR[@FIRST_EPOCH] ...`` reads each run's
``metrics.jsonl`` (the ``monitor.valid_last_step_mse`` recorded every ``valid_every`` epochs,
from ``FIRST_EPOCH`` on: a resumed copy of another run starts where its own records do),
prints the curves as a table and plots last-step (x, y) MSE in cells² against epochs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from matplotlib.figure import Figure

from ppl_models.inference.atomic_files import read_jsonl

from ..run_plots import save_png


def valid_curve(run_dir: str | Path, first_epoch: int = 1) -> list[tuple[int, float]]:
    """``[(epoch, valid_last_step_mse)]`` of a run from ``first_epoch`` on, in epoch order."""
    records = read_jsonl(Path(run_dir) / "metrics.jsonl")
    return [
        (r["epoch"], r["monitor"]["valid_last_step_mse"])
        for r in records
        if r["epoch"] >= first_epoch and "valid_last_step_mse" in r.get("monitor", {})
    ]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or any("=" not in a for a in args[1:]):
        raise SystemExit(
            "usage: python -m ppl_models.experiments.studies.pfrnn_curves OUT.png LABEL=RUN_DIR[@FIRST_EPOCH] ..."
        )
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for label, source in (a.split("=", 1) for a in args[1:]):
        run_dir, _, first_epoch = source.partition("@")
        curve = valid_curve(run_dir, int(first_epoch or 1))
        print(f"{label:<28}", "  ".join(f"{epoch}: {mse:.2f}" for epoch, mse in curve))
        axes.plot(*zip(*curve), marker="o", label=label)
    axes.set(xlabel="epoch", ylabel="validation last-step MSE (cells²)", yscale="log")
    axes.legend()
    save_png(figure, args[0])


if __name__ == "__main__":
    main()

"""Mean and standard deviation over seeds of finished runs named ``<label>-s<seed>`` in one folder.

Per run: the test one-step MSE of its best checkpoint (``metrics.json``), the MSE of the
initialised model (``predictions.json``), the epoch of the best validation bound and the
lowest and the last test MSE of its learning curve (``metrics.jsonl``), and its 50% coverage and PIT KS;
with ``--epochs N``, the same read from the log at a budget of ``N`` epochs.

Usage::

    python -m ppl_models.experiments.studies.psrnn_seeds runs/psrnn5/ablation \\
        --out docs/results/psrnn_ablation_swimmer.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from ppl_models.experiments.claims.results_files import write_results

__all__ = ["run_summary", "summarize", "main"]

RUN_NAME = re.compile(r"(?P<label>.+)-s(?P<seed>\d+)")


def run_summary(run_dir: Path, epochs: int | None = None) -> dict:
    """The figures of one run folder (see the module docstring); with ``epochs``, at that budget.

    With ``epochs`` the run is read as if it had stopped there: its best validation epoch and
    that epoch's monitored test MSE among the first ``epochs`` epochs (equal to a shorter run's
    best checkpoint under a constant learning rate); the run need not be finished, but must
    have logged that many epochs. Without it, the test MSE and calibration of ``metrics.json``.
    """
    curve = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    if epochs is not None:
        if len(curve) < epochs:
            raise ValueError(f"{run_dir} has logged {len(curve)} epochs, fewer than epochs={epochs}")
        curve = curve[:epochs]
    best = max(curve, key=lambda row: row["valid_bound_per_step"])
    summary = {
        "best_epoch": best["epoch"],
        "lowest_test_mse_seen": min(row["monitor"]["test_mse"] for row in curve),
        "last_test_mse": curve[-1]["monitor"]["test_mse"],
        "initial_test_mse": json.loads((run_dir / "predictions.json").read_text())["initial_mse"]["test_mse"],
    }
    if epochs is not None:
        return {"test_mse": best["monitor"]["test_mse"], **summary}
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {
        "test_mse": metrics["mse"],
        **summary,
        "coverage_0.5": metrics["calibration"]["coverage_0.5"],
        "pit_ks": metrics["calibration"]["pit_ks"],
    }


def summarize(root: str | Path, epochs: int | None = None) -> dict:
    """``{label: {"runs": [...], "mean_test_mse", "sd_test_mse"}}`` over the runs under ``root``.

    Finished runs only; with ``epochs``, every run that has logged that many epochs.
    """
    groups: dict[str, list] = {}
    for run_dir in sorted(Path(root).iterdir()):
        match = RUN_NAME.fullmatch(run_dir.name)
        if not match:
            continue
        if (run_dir / "metrics.json").is_file() if epochs is None else _logged_epochs(run_dir) >= epochs:
            groups.setdefault(match["label"], []).append({"seed": int(match["seed"]), **run_summary(run_dir, epochs)})
    summary = {}
    for label, runs in groups.items():
        mses = [run["test_mse"] for run in runs]
        summary[label] = {
            "runs": runs,
            "mean_test_mse": statistics.mean(mses),
            "sd_test_mse": statistics.stdev(mses) if len(mses) > 1 else None,
        }
    return summary


def _logged_epochs(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.is_file() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="folder of run folders named <label>-s<seed>")
    parser.add_argument("--epochs", type=int, help="read every run at this budget (epochs) from its log")
    parser.add_argument("--out", help="JSON file for the summary")
    args = parser.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    if not Path(args.root).is_dir():
        parser.error(f"root: expected a folder of run folders, got {args.root!r}")
    summary = summarize(args.root, args.epochs)
    for label, row in summary.items():
        sd = "-" if row["sd_test_mse"] is None else f"{row['sd_test_mse']:.4f}"
        epochs = [run["best_epoch"] for run in row["runs"]]
        print(f"{label:>16}  n={len(row['runs'])}  test MSE {row['mean_test_mse']:.4f} +- {sd}  best epochs {epochs}")
    if args.out:
        command = "python -m ppl_models.experiments.studies.psrnn_seeds " + " ".join(sys.argv[1:])
        write_results(args.out, {"command": command, "results": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())

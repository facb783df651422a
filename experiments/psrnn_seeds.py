"""Mean and standard deviation over seeds of finished runs named ``<label>-s<seed>`` in one folder.

Per run: the test one-step MSE of its best checkpoint (``metrics.json``), the MSE of the
initialised model (``predictions.json``), the epoch of the best validation bound and the
lowest test MSE of its learning curve (``metrics.jsonl``), and its 50% coverage and PIT KS.

Usage::

    python -m experiments.psrnn_seeds runs/psrnn5/ablation --out docs/results/psrnn_ablation_swimmer.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from inference.io import write_json

__all__ = ["run_summary", "summarize", "main"]

RUN_NAME = re.compile(r"(?P<label>.+)-s(?P<seed>\d+)")


def run_summary(run_dir: Path) -> dict:
    """The figures of one finished run folder (see the module docstring)."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    curve = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    best = max(curve, key=lambda row: row["valid_bound_per_step"])
    return {"test_mse": metrics["mse"], "best_epoch": best["epoch"],
            "lowest_test_mse_seen": min(row["monitor"]["test_mse"] for row in curve),
            "initial_test_mse": json.loads((run_dir / "predictions.json").read_text())["initial_mse"]["test_mse"],
            "coverage_0.5": metrics["calibration"]["coverage_0.5"],
            "pit_ks": metrics["calibration"]["pit_ks"]}  # fmt: skip


def summarize(root: str | Path) -> dict:
    """``{label: {"runs": [...], "mean_test_mse", "sd_test_mse"}}`` over the finished runs under ``root``."""
    groups: dict[str, list] = {}
    for run_dir in sorted(Path(root).iterdir()):
        match = RUN_NAME.fullmatch(run_dir.name)
        if match and (run_dir / "metrics.json").is_file():
            groups.setdefault(match["label"], []).append({"seed": int(match["seed"]), **run_summary(run_dir)})
    summary = {}
    for label, runs in groups.items():
        mses = [run["test_mse"] for run in runs]
        summary[label] = {"runs": runs, "mean_test_mse": statistics.mean(mses),
                          "sd_test_mse": statistics.stdev(mses) if len(mses) > 1 else None}  # fmt: skip
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="folder of run folders named <label>-s<seed>")
    parser.add_argument("--out", help="JSON file for the summary")
    args = parser.parse_args(argv)
    if not Path(args.root).is_dir():
        parser.error(f"root: expected a folder of run folders, got {args.root!r}")
    summary = summarize(args.root)
    for label, row in summary.items():
        sd = "-" if row["sd_test_mse"] is None else f"{row['sd_test_mse']:.4f}"
        epochs = [run["best_epoch"] for run in row["runs"]]
        print(f"{label:>16}  n={len(row['runs'])}  test MSE {row['mean_test_mse']:.4f} +- {sd}  best epochs {epochs}")
    if args.out:
        write_json(args.out, {"command": "python -m experiments.psrnn_seeds " + " ".join(sys.argv[1:]),
                              "results": summary})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

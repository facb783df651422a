"""The SMC Transformer paper's COVID-19 protocol over training seeds: train, forecast 20 days, collect coverage.

``python -m ppl_models.experiments.studies.covid_forecasts --seeds N --run-dir DIR --out FILE``

For each seed ``S``: ``ppl-models train smct-covid`` and ``ppl-models train mcdropout-covid`` (their defaults: the
paper's 80/20 split of the counties with >= 100 deaths), then one ``ppl-models forecast`` of both runs over the 20
held-out days of the test counties. A finished training run or forecast is kept when the study runs again. The
results file records, per seed and model, the forecasts' interval coverage (``coverage_0.5`` ... ``coverage_0.95``)
and the run's budget (epochs, best epoch, seconds), with the commands, seeds, commit and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import time
from pathlib import Path

import torch

from ppl_models.experiments.claims.results_files import write_results

from ..claims.provenance import commit_label
from ..cli import main as cli_main
from ..compare import run_budget
from ..run_folder import is_finished

__all__ = ["MODELS", "seed_commands", "collect", "main"]

#: label -> experiment of the compared models
MODELS = {"SMC-T": "smct-covid", "LSTM MC-dropout": "mcdropout-covid"}
_COVERAGES = ("coverage_0.5", "coverage_0.8", "coverage_0.9", "coverage_0.95")


def _folder(label: str) -> str:
    return label.lower().replace(" ", "-")


def seed_commands(seed: int, run_dir: Path, particles: int = 10) -> tuple[list[list[str]], Path]:
    """The ``ppl-models`` argument lists of seed ``seed`` (two trainings, one forecast) and its forecast folder."""
    root = run_dir / f"seed-{seed}"
    trains = [
        [
            "train",
            experiment,
            "--run-dir",
            str(root / _folder(label)),
            "--set",
            f"seed={seed}",
            "--set",
            f"train.seed={seed}",
        ]
        for label, experiment in MODELS.items()
    ]
    out = root / "forecast"
    forecast = [
        "forecast",
        *(f"{label}={root / _folder(label)}" for label in MODELS),
        "--out",
        str(out),
        "--particles",
        str(particles),
    ]
    return [*trains, forecast], out


def collect(forecast: dict, runs: dict[str, Path]) -> dict:
    """One seed's record from its ``forecast.json`` data and run folders ``{label: folder}``:
    ``{label: {coverage_*, epochs, best_epoch, seconds}}``."""
    return {
        label: {**{key: forecast["metrics"][label][key] for key in _COVERAGES}, **run_budget(folder)}
        for label, folder in runs.items()
    }


def _run(argv: list[str]) -> None:
    status = cli_main(argv)
    if status:
        raise SystemExit(f"ppl-models {shlex.join(argv)} failed with status {status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.covid_forecasts", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=3, help="training seeds 0 .. N-1")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/covid-paper"))
    parser.add_argument("--out", type=Path, required=True, help="the results file to write")
    parser.add_argument("--particles", type=int, default=10, help="SMC-T particles of the forecasts")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    start, commands, per_seed, data = time.perf_counter(), [], {}, None
    for seed in range(args.seeds):
        steps, out = seed_commands(seed, args.run_dir, args.particles)
        commands += ["ppl-models " + shlex.join(step) for step in steps]
        runs = {label: args.run_dir / f"seed-{seed}" / _folder(label) for label in MODELS}
        for step, folder in zip(steps[:-1], runs.values()):
            if not is_finished(folder):
                _run(step)
        if not (out / "forecast.json").is_file():
            _run(steps[-1])
        forecast = json.loads((out / "forecast.json").read_text())
        data = forecast["data"]
        per_seed[str(seed)] = collect(forecast, runs)
    write_results(
        args.out,
        {
            "what": f"20-day COVID-19 forecasts of the test counties ({data}); {args.particles} SMC-T particles; "
            "interval coverage in units d/M",
            "commands": commands,
            "seeds": list(range(args.seeds)),
            "commit": commit_label(),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__},
            "wall_seconds": time.perf_counter() - start,
            "per_seed": per_seed,
        },
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

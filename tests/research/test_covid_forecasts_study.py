"""The COVID-19 forecasts study: its commands per seed and the record it collects from a forecast and run folders."""

import json
from pathlib import Path

from ppl_models.experiments.studies.covid_forecasts import MODELS, collect, seed_commands


def test_each_seed_trains_both_models_then_forecasts_them_together():
    steps, out = seed_commands(1, Path("runs/x"), particles=7)
    assert [step[:2] for step in steps[:2]] == [["train", "smct-covid"], ["train", "mcdropout-covid"]]
    assert all(["--set", "seed=1"] == step[4:6] and ["--set", "train.seed=1"] == step[6:8] for step in steps[:2])
    assert steps[2] == [
        "forecast",
        "SMC-T=runs/x/seed-1/smc-t",
        "LSTM MC-dropout=runs/x/seed-1/lstm-mc-dropout",
        "--out",
        "runs/x/seed-1/forecast",
        "--particles",
        "7",
    ]
    assert out == Path("runs/x/seed-1/forecast") and set(MODELS) == {"SMC-T", "LSTM MC-dropout"}


def test_collect_takes_each_models_coverages_and_its_runs_budget(tmp_path):
    runs = {}
    for label, best in (("SMC-T", 2), ("LSTM MC-dropout", 1)):
        folder = tmp_path / label
        folder.mkdir()
        rows = [
            {"epoch": 1, "seconds": 1.5, "valid_bound_per_step": -2.0},
            {"epoch": 2, "seconds": 2.5, "valid_bound_per_step": -1.0 if best == 2 else -3.0},
        ]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs[label] = folder
    coverages = {"coverage_0.5": 0.5, "coverage_0.8": 0.75, "coverage_0.9": 0.875, "coverage_0.95": 1.0}
    forecast = {"metrics": {label: {**coverages, "coverage_by_step": {}} for label in runs}}
    record = collect(forecast, runs)
    assert record["SMC-T"] == {**coverages, "epochs": 2, "seconds": 4.0, "best_epoch": 2}
    assert record["LSTM MC-dropout"]["best_epoch"] == 1

"""What ``ppl-models backtest`` says it used: the origins a held-out segment allows, a horizon no forecast can reach,
binary data judged as probabilities, and a board's classical row backtested beside the models."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.classical import classical_model
from ppl_models.classical.sequence_model import ClassicalSequenceModel
from ppl_models.experiments.cli import main
from ppl_models.experiments.registry import DATASETS, build
from ppl_models.inference.backtest import backtest, longest_reach

#: 4 series of 40 steps split by time (fractions 0.7, 0.15, 0.15): 28 training steps, round(6.0) = 6 validation
#: steps and 40 - 28 - 6 = 6 held-out test steps per series, each with history before it
SERIES, STEPS, HELD_OUT = 4, 40, 6
FAST = [
    "train.epochs=1",
    "model.latent_dim=2",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
]
DATA_FLAGS = ["--series", "station", "--time", "hour", "--split", "time"]


def _csv(path, values):
    """A long-format CSV of ``values [SERIES, STEPS, 2]`` (columns station, hour, a, b)."""
    rows = [
        {"station": f"s{i}", "hour": t, "a": values[i, t, 0], "b": values[i, t, 1]}
        for i in range(SERIES)
        for t in range(STEPS)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _sets(items):
    return [arg for item in items for arg in ("--set", item)]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A board of random walks: an LGSSM run (``runs/lgssm``) and the last-value classical row."""
    root = tmp_path_factory.mktemp("board")
    walks = np.cumsum(np.random.default_rng(0).normal(size=(SERIES, STEPS, 2)), axis=1)
    data = _csv(root / "walks.csv", walks)
    args = [
        "leaderboard",
        "--data",
        str(data),
        *DATA_FLAGS,
        "--out",
        str(root / "b"),
        "--models",
        "lgssm",
        "--classical",
        "last-value",
        *_sets(FAST),
    ]
    assert main(args) == 0
    return root / "b"


def _backtest(folder, out, *flags):
    """``backtest`` of ``folder`` into ``out``: ``(exit status, report or None, backtest.md or None)``."""
    status = main(["backtest", str(folder), "--samples", "10", "--particles", "5", "--out", str(out), *flags])
    written = (out / "backtest.json").is_file()
    return (
        status,
        json.loads((out / "backtest.json").read_text()) if written else None,
        (out / "backtest.md").read_text() if written else None,
    )


def test_fewer_origins_than_asked_are_said_and_counted(board, tmp_path):
    status, report, table = _backtest(board / "runs" / "lgssm", tmp_path, "--horizon", "3", "--origins", "20")
    assert status == 0
    # one origin per held-out step: 6 per series, not 20
    assert report["origins_possible"] == [HELD_OUT] * SERIES and report["origins_used"] == [HELD_OUT] * SERIES
    assert report["forecasts"] == SERIES * HELD_OUT
    # h steps ahead reach from the segment's first HELD_OUT - h + 1 origins
    assert report["per_horizon"]["targets"] == [SERIES * (HELD_OUT - h + 1) for h in (1, 2, 3)]
    assert f"{SERIES * HELD_OUT} forecasts of 3 steps ahead from {HELD_OUT} origins per test series" in table
    assert (
        f"Fewer origins than the 20 asked: each of the {SERIES} test series has only {HELD_OUT} held-out steps "
        f"with history before them (one origin each), so {HELD_OUT} origins were used per "
        "series."
    ) in table
    left = report["mase_left_out"]
    pairs = SERIES * HELD_OUT * 2
    assert (f"all {pairs} forecast-feature pairs had one" if not left else f"{left} of the {pairs}") in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[1] for row in rows] == [str(n) for n in report["per_horizon"]["targets"]]


@pytest.mark.parametrize("horizon", [HELD_OUT + 1, 100])
def test_a_horizon_past_every_held_out_segment_is_refused(board, tmp_path, capsys, horizon):
    status, report, _ = _backtest(board / "runs" / "lgssm", tmp_path, "--horizon", str(horizon), "--origins", "2")
    assert status == 2 and report is None
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert f"horizon {horizon} (--horizon)" in error and f"choose --horizon {HELD_OUT} or less" in error


def test_the_longest_reach_and_the_possible_origins():
    """Scored steps 1-2 and 4-7 of row 0 (runs of 2 and 4), 3-4 of row 1; step 0 is history only."""
    steps = torch.arange(9)
    scored = torch.stack([((steps >= 1) & (steps <= 2)) | ((steps >= 4) & (steps <= 7)), (steps >= 3) & (steps <= 4)])
    mask = torch.ones(2, 9, dtype=torch.bool)
    assert longest_reach(mask, scored) == 4
    assert longest_reach(mask) == 8  # every step but the first
    x = torch.arange(18.0).reshape(2, 9, 1)
    result = backtest(_Last(), x, mask, scored, horizon=4, origins=10, num_samples=2)
    assert result.origins_possible == [6, 2] and result.origins_used == [6, 2] and result.origins == 10
    # h = 4 only from origin 4 of row 0 (4..7); h = 3 from 4, 5; h = 2 from 1, 4, 5, 6 and 3 (row 1)
    assert result.per_horizon["targets"] == [8, 5, 2, 1]


class _Last:
    """Draws the last value (real data), or 0/1 draws whose share of 1s is 0.75 after a 1 and 0.25 after a 0."""

    def forecast(self, x, mask, horizon, num_samples, generator=None):
        last = x[torch.arange(x.shape[0]), mask.sum(1) - 1]  # [B, D]
        if not ((x == 0) | (x == 1)).all():
            return last[None, :, None].expand(num_samples, -1, horizon, -1)
        ones = torch.tensor([1.0, 0.0, 0.0, 0.0])[:, None, None, None]  # p = 0.25
        draws = torch.where(last[None, :, None] == 1, 1 - ones, ones)  # p = 0.75 after a 1
        return draws.expand(num_samples, -1, horizon, -1)


def test_binary_draws_are_judged_as_probabilities():
    """One 0/1 series; the probability of a 1 is 0.25 after a 0 and 0.75 after a 1. By hand, h = 1 (origins 1..5,
    targets 1 1 0 1 1 after 0 1 1 0 1): Brier (3 x 0.75^2 + 2 x 0.25^2) / 5; ECE: p = 0.25 twice, both 1s (gap 0.75),
    p = 0.75 three times, two 1s (gap 1 / 12). h = 2 (origins 1..4, targets 1 0 1 1): p 0.25, 0.75, 0.75, 0.25."""
    x = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 1.0])[None, :, None]
    result = backtest(_Last(), x, None, horizon=2, origins=10, num_samples=4)
    assert result.binary and result.mase_left_out is None
    figures = result.per_horizon
    assert set(figures) == {"h", "targets", "brier", "ece", "mean_probability", "frequency_of_ones"}
    assert figures["targets"] == [5, 4]
    assert figures["brier"] == pytest.approx([(3 * 0.75**2 + 2 * 0.25**2) / 5, (3 * 0.75**2 + 0.25**2) / 4])
    assert figures["ece"] == pytest.approx([(2 * 0.75 + 3 / 12) / 5, (2 * 0.75 + 2 * 0.25) / 4])
    assert figures["mean_probability"] == pytest.approx([(2 * 0.25 + 3 * 0.75) / 5, 0.5])
    assert figures["frequency_of_ones"] == pytest.approx([4 / 5, 3 / 4])
    with pytest.raises(ValueError, match="draw 0 or 1 on binary data"):
        backtest(_Last(), x * 2, None, horizon=1, origins=2, num_samples=4, binary=True)


def test_the_command_on_binary_data_reports_probabilities(tmp_path):
    flips = (np.random.default_rng(1).random((SERIES, STEPS, 2)) < 0.3).astype(int)
    data = _csv(tmp_path / "flips.csv", flips)
    run = tmp_path / "run"
    args = ["train", "gru", "--data", str(data), *DATA_FLAGS, "--run-dir", str(run)]
    assert main([*args, *_sets(["train.epochs=1", "model.rnn_dim=4", "model.hidden_dim=4"])]) == 0
    status, report, table = _backtest(run, tmp_path / "bt", "--horizon", "2", "--origins", "3")
    assert status == 0 and report["binary"] and report["mase_left_out"] is None
    assert set(report["per_horizon"]) == {"h", "targets", "brier", "ece", "mean_probability", "frequency_of_ones"}
    assert "| h | targets | Brier | ECE | mean probability | frequency of 1s |" in table
    assert "Binary (0/1) data" in table and "MASE" not in table.split("| h |")[1]
    for h, brier in zip((1, 2), report["per_horizon"]["brier"]):
        assert f"| {h} | {report['per_horizon']['targets'][h - 1]} | {brier:.4g} |" in table


def test_a_classical_row_is_backtested_as_the_board_fitted_it(board, tmp_path):
    folder = board / "classical" / "last-value"
    status, report, table = _backtest(folder, tmp_path, "--horizon", "2", "--origins", "3")
    assert status == 0 and report["kind"] == "classical" and table.startswith("# Backtest: last-value on")
    assert report["origins_used"] == [3] * SERIES and report["origins_possible"] == [HELD_OUT] * SERIES
    # the same forecaster fitted by hand on the board's training split, backtested from Python with seed 0
    config = json.loads((board / "runs" / "lgssm" / "config.json").read_text())
    levels = build(config["data"], DATASETS, "data").levels
    train = levels.standardizer.inverse(levels.train[0], dtype=torch.float64)  # the row models the data's own units
    model = ClassicalSequenceModel(classical_model("last-value").fit(train, levels.train[1]))
    x, mask = levels.test
    expected = backtest(
        model,
        levels.standardizer.inverse(x, dtype=torch.float64),
        mask,
        levels.scored["test"],
        horizon=2,
        origins=3,
        num_samples=10,
        generator=torch.Generator().manual_seed(0),
    )
    assert report["per_horizon"].keys() == expected.per_horizon.keys()
    for name, values in expected.per_horizon.items():
        assert report["per_horizon"][name] == pytest.approx(values, rel=1e-12), name


@pytest.mark.parametrize("command", [["evaluate", "{folder}"], ["forecast", "a={folder}", "--out", "{out}"]])
def test_evaluate_and_forecast_refuse_a_classical_row_by_name(board, tmp_path, capsys, command):
    folder = board / "classical" / "last-value"
    assert main([part.format(folder=folder, out=tmp_path / "out") for part in command]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "is a leaderboard's classical row" in error
    assert "ppl_models.experiments.classical_rows." in error and "ppl-models backtest takes" in error


def test_any_row_of_a_board_is_backtested_by_its_name(board, tmp_path, capsys):
    status, report, _ = _backtest(
        board, tmp_path / "classical", "--row", "last-value", "--horizon", "2", "--origins", "3"
    )
    by_folder = _backtest(board / "classical" / "last-value", tmp_path / "folder", "--horizon", "2", "--origins", "3")
    assert status == 0 and report["kind"] == "classical" and report["per_horizon"] == by_folder[1]["per_horizon"]
    status, report, _ = _backtest(board, tmp_path / "model", "--row", "lgssm", "--horizon", "2", "--origins", "3")
    assert status == 0 and report["kind"] == "collection"
    capsys.readouterr()
    assert _backtest(board, tmp_path / "none", "--row", "arima", "--horizon", "2", "--origins", "3")[0] == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "'arima' is not a row of it" in error
    assert "last-value" in error and "lgssm" in error
    assert _backtest(board, tmp_path / "none", "--horizon", "2", "--origins", "3")[0] == 2
    assert "name one of its rows with --row" in capsys.readouterr().err

"""The leaderboard's figures, checked through the data they draw: the PIT ECDF, the reliability curves of binary
data, and the fan chart's series and feature (the ones that vary most, named)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments import board_plots
from ppl_models.experiments.cli import main
from ppl_models.experiments.leaderboard import _run_form
from ppl_models.experiments.tasks import music
from ppl_models.inference.calibration import reliability_curve

TINY = [
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "model.rnn_dim=8",
    "model.hidden_dim=8",
]


def sets(*items):
    return [a for item in items for a in ("--set", item)]


def run_folder(path, calibration, **tensors):
    path.mkdir()
    (path / "metrics.json").write_text(json.dumps({"calibration": calibration}))
    for name, tensor in tensors.items():
        torch.save(tensor, path / f"{name}.pt")
    return path


def line_of(axis, label):
    return next(line for line in axis.lines if line.get_label().startswith(label))


def test_the_pit_ecdf_is_every_value_sorted_into_steps_from_0_to_1():
    x, y = board_plots.pit_ecdf(np.array([[0.9, 0.1], [0.5, np.nan]]))
    assert x.tolist() == [0.0, 0.1, 0.5, 0.9, 1.0]
    assert y.tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0, 1.0])


def test_the_calibration_figure_draws_each_runs_coverage_and_sorted_pit_ecdf(tmp_path):
    """``pit.pt`` holds ``[entries, features]``, as a run writes it: every value counts once, in order."""
    calibration = {"coverage_0.5": 0.4, "coverage_0.9": 0.85, "crps": 0.3}
    folders = {"m": run_folder(tmp_path / "m", calibration, pit=torch.tensor([[0.7, 0.2], [0.4, 0.9]]))}
    figure = board_plots.calibration_figure(folders, tmp_path / "calibration.png")
    coverage_axis, pit_axis = figure.axes
    assert line_of(coverage_axis, "m").get_xydata().tolist() == [[0.5, 0.4], [0.9, 0.85]]
    line = line_of(pit_axis, "m")
    assert line.get_drawstyle() == "steps-post"
    assert line.get_xdata().tolist() == pytest.approx([0.0, 0.2, 0.4, 0.7, 0.9, 1.0])
    assert line.get_ydata().tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, 1.0])
    assert (tmp_path / "calibration.png").stat().st_size > 0


def test_binary_runs_get_reliability_curves_from_their_folders(tmp_path):
    """Probabilities 0.05, 0.15, 0.95, 0.97 of entries 0, 1, 1, 1: bins 0, 1 and 9 hold 1, 1 and 2 entries with
    frequencies of 1s 0, 1 and 1. A run without the curve shows its overall point (from ``metrics.json``)."""
    binary = {"brier": 0.2, "ece": 0.05, "mean_probability": 0.3, "frequency_of_ones": 0.25}
    curved = run_folder(tmp_path / "curved", binary)
    probabilities = torch.tensor([0.05, 0.15, 0.95, 0.97]).reshape(1, 4, 1)
    board_plots.write_reliability(
        reliability_curve(probabilities, torch.tensor([0.0, 1, 1, 1]).reshape(1, 4, 1)), curved
    )
    record = json.loads((curved / board_plots.RELIABILITY_FILE).read_text())
    assert record["counts"] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert record["observed_frequency"] == [0.0, 1.0, *[None] * 7, 1.0]
    folders = {"curved": curved, "plain": run_folder(tmp_path / "plain", binary)}
    reliability_axis, counts_axis = board_plots.calibration_figure(folders, tmp_path / "calibration.png").axes
    curve = line_of(reliability_axis, "curved (Brier 0.200, ECE 0.050)")
    assert curve.get_xydata().ravel().tolist() == pytest.approx([0.05, 0.0, 0.15, 1.0, 0.95, 1.0])
    assert line_of(counts_axis, "curved").get_ydata().tolist() == pytest.approx([0.25, 0.25, 0.5])
    assert line_of(reliability_axis, "plain").get_xydata().tolist() == [[0.3, 0.25]]


def test_the_fan_shows_the_feature_then_the_series_that_vary_most_over_valid_steps():
    """Feature 1 pools 0, 0, 0, 0, 5, -5, 1, 1, 1 (variance 52/9 - 1/9) against feature 0's 0/1 values; in it,
    series 1 varies (5, -5), the others are flat. The padding (50, 1000) would say otherwise."""
    x = torch.zeros(3, 4, 2)
    x[0, :, 0] = torch.tensor([0.0, 1, 0, 1])
    x[1, :, 0], x[1, :2, 1], x[1, 2:, 0] = torch.tensor([0.0, 1, 0, 0]), torch.tensor([5.0, -5]), 50.0
    x[2, :3, 0], x[2, :3, 1], x[2, 3, 1] = torch.tensor([0.0, 0, 1]), 1.0, 1000.0
    mask = torch.arange(4) < torch.tensor([4, 2, 3]).unsqueeze(1)
    assert board_plots.fan_choice(x, mask) == (1, 1)


def test_the_fan_names_its_series_and_feature_from_the_split_record():
    record = {"test": {"ids": ["a", "b"], "steps": [3, 4]}, "standardizer": {"features": ["key21", "key22"]}}
    assert board_plots.fan_names(record, 1, 0) == ("b", "key21")
    assert board_plots.fan_names(None, 1, 0) == ("test series 1", "feature 0")


def test_the_fan_chart_forecasts_the_most_variable_named_series_in_the_data_units(tmp_path, capsys):
    """Test series ``wild`` swings its ``level`` ten times wider than training did; ``calm`` and ``noise`` do not."""
    rng = np.random.default_rng(0)
    parts = {**{f"a{i}": "train" for i in range(8)}, "v0": "valid", "v1": "valid", "calm": "test", "wild": "test"}
    frame = pd.DataFrame(
        [
            {
                "id": name,
                "t": t,
                "part": part,
                "noise": rng.normal(),
                "level": 100 + (10 if name == "wild" else 1) * rng.normal(),
            }
            for name, part in parts.items()
            for t in range(12)
        ]
    )
    frame.to_csv(tmp_path / "d.csv", index=False)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(tmp_path / "d.csv"),
                "--run-dir",
                str(run),
                *sets('data.series="id"', 'data.time="t"', 'data.split="part"', *TINY),
            ]
        )
        == 0
    )
    axis = board_plots.fan_chart({"gru": run}, tmp_path / "fan.png", "cpu", num_samples=20).axes[0]
    assert axis.get_title() == "gru: series wild:test, level"
    truth = line_of(axis, "data")
    assert truth.get_ydata() == pytest.approx(frame[frame.id == "wild"].level.to_numpy(), rel=1e-5)
    assert len(line_of(axis, "median").get_xdata()) == 12 - 8  # the last third, after 2 * 12 // 3 steps


def test_a_binary_fan_chart_gives_the_most_variable_keys_probability(tmp_path, capsys, monkeypatch):
    """Key 3 is on half the time, the others rarely: the fan shows key 3 of the test piece that varies most in it
    (read off the file and the run's split record) and a probability of a 1 after its first two thirds."""
    rng = np.random.default_rng(0)
    x = (rng.random((12, 15, 5)) < [0.05, 0.05, 0.05, 0.5, 0.05]).astype(float)
    np.savez(tmp_path / "rolls.npz", x=x)
    monkeypatch.setattr(music, "piano_roll_outputs", lambda *args, **kwargs: None)  # not drawn here: time
    run = tmp_path / "run"
    assert main(["train", "gru", "--data", str(tmp_path / "rolls.npz"), "--run-dir", str(run), *sets(*TINY)]) == 0
    ids = json.loads((run / "data_split.json").read_text())["test"]["ids"]
    wildest = max(ids, key=lambda name: x[int(name), :, 3].var())
    axis = board_plots.fan_chart({"gru": run}, tmp_path / "fan.png", "cpu", num_samples=20).axes[0]
    assert axis.get_title() == f"gru: series {wildest}, x3"
    assert line_of(axis, "data").get_ydata().tolist() == x[int(wildest), :, 3].tolist()
    probability = line_of(axis, "P(1)").get_ydata()
    assert len(probability) == 15 - 10 and ((0 <= probability) & (probability <= 1)).all()


def test_a_rows_season_is_the_lag_of_its_seasonal_difference_or_the_period_of_its_profile(tmp_path):
    config = {"model": {"name": "gru"}}
    for transform, season in (
        ({"name": "seasonal-profile-12+difference", "lag": 1, "profile": 12}, 12),
        ({"name": "seasonal-difference-7", "lag": 7, "profile": 0}, 7),
        ({"name": "difference", "lag": 1}, None),  # a run recorded before profiles existed
    ):
        (tmp_path / "data_split.json").write_text(json.dumps({"transform": transform}))
        form = _run_form(tmp_path, config)
        assert form["season"] == season and form["transform"] == transform["name"]

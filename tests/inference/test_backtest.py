"""The rolling-origin backtest: origins placed on the scored steps, histories that end before their targets, the
figures per step ahead of a forecaster whose draws are known, a model of the collection end to end, the command."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models import LinearGaussianSSM
from ppl_models.experiments.cli import main
from ppl_models.inference.backtest import backtest, origin_steps
from ppl_models.inference.data import Standardizer

#: offsets of the stub's draws from the last value: median and mean 0; central intervals (linear interpolation
#: between order statistics) +-1.5 (50 %), +-2.4 (80 %), +-2.85 (95 %); E|X - X'| / 2 = 40 / 16 / 2 = 1.25
OFFSETS = [-3.0, -1.0, 1.0, 3.0]
#: one series, and its negative as a second feature; steps 1..4 are scored, each an origin
SERIES = [0.0, 1.0, 3.0, 2.0, 2.0]


class LastValue:
    """Draws ``last value + OFFSETS`` at every step ahead; records the histories it is given."""

    def __init__(self):
        self.calls = []

    def forecast(self, x, mask, horizon, num_samples, generator=None):
        self.calls.append((x.clone(), mask.clone()))
        last = x[torch.arange(x.shape[0]), mask.sum(1) - 1]  # [B, D]
        offsets = torch.tensor(OFFSETS, dtype=x.dtype)[:num_samples, None, None, None]
        return (last[None, :, None, :] + offsets).expand(num_samples, x.shape[0], horizon, x.shape[-1])


def _series():
    values = torch.tensor(SERIES, dtype=torch.float64)
    return torch.stack([values, -values], -1)[None], torch.ones(1, len(SERIES), dtype=torch.bool)


# By hand: at origin o the draws are x[o-1] + OFFSETS and d = x[o+h-1] - x[o-1] is the target's distance from
# their median. h = 1: d = 1, 2, -1, 0 (origins 1..4); h = 2: d = 3, 1, -1 (origins 1..3).
# CRPS = mean|OFFSETS - d| - 1.25: 0.75 for |d| <= 1, 1.25 for |d| = 2, 1.75 for |d| = 3.
# MASE scales (lag 1) before origins 2, 3, 4: 1, (1 + 2) / 2, (1 + 2 + 1) / 3; origin 1 has no difference.
EXPECTED = {
    "h": [1, 2],
    "targets": [4, 3],
    "crps": [(0.75 + 1.25 + 0.75 + 0.75) / 4, (1.75 + 0.75 + 0.75) / 3],
    "coverage_50": [3 / 4, 2 / 3],
    "coverage_80": [4 / 4, 2 / 3],
    "coverage_95": [4 / 4, 2 / 3],
    "mse": [(1 + 4 + 1 + 0) / 4, (9 + 1 + 1) / 3],
    "mase": [(2 / 1 + 1 / 1.5 + 0 / (4 / 3)) / 3, (1 / 1 + 1 / 1.5) / 2],
    "mase_targets": [3 * 2, 2 * 2],  # values: steps x features
}


def _close(found: dict, expected: dict):
    assert found.keys() == expected.keys()
    for name, values in expected.items():
        assert found[name] == pytest.approx(values, rel=1e-12), name


def test_figures_per_step_ahead_of_known_draws():
    x, mask = _series()
    result = backtest(LastValue(), x, mask, horizon=2, origins=10, num_samples=4)
    _close(result.per_horizon, EXPECTED)
    assert result.origins_used == [4] and result.forecasts == 4
    assert result.mase_left_out == 2  # origin 1, both features
    assert json.loads(json.dumps(result.to_dict())) == result.to_dict()


def test_figures_in_the_data_units():
    """Draws and series standardised by scales 2 and 3: CRPS scales by their mean, MSE by the mean of their squares;
    coverage and MASE do not change."""
    x, mask = _series()
    units = Standardizer(mean=[100.0, -7.0], scale=[2.0, 3.0], features=["a", "b"])
    result = backtest(LastValue(), x.float(), mask, horizon=2, origins=4, num_samples=4, standardizer=units)
    expected = {**EXPECTED, "crps": [v * 2.5 for v in EXPECTED["crps"]], "mse": [v * 6.5 for v in EXPECTED["mse"]]}
    _close(result.per_horizon, expected)


def test_season_of_the_mase_scale():
    """Lag 2: the scales before origins 3 and 4 are |3 - 0| = 3 and (3 + |2 - 1|) / 2 = 2; origins 1, 2 have none."""
    x, mask = _series()
    result = backtest(LastValue(), x, mask, horizon=2, origins=4, num_samples=4, season=2)
    assert result.per_horizon["mase"] == pytest.approx([(1 / 3 + 0 / 2) / 2, 1 / 3])
    assert result.per_horizon["mase_targets"] == [2 * 2, 1 * 2] and result.mase_left_out == 2 * 2


def test_a_constant_history_is_left_out_of_mase():
    x = torch.tensor([[[5.0], [5.0], [5.0], [6.0]]])
    result = backtest(LastValue(), x, None, horizon=1, origins=3, num_samples=4)
    # origins 1, 2, 3: no difference, a scale of 0, then 0 again (5, 5, 5)
    assert result.mase_left_out == 3 and result.per_horizon["mase"] == [None]
    assert result.per_horizon["mase_targets"] == [0] and result.per_horizon["targets"] == [3]


def test_origins_evenly_spaced_over_the_scored_steps():
    steps = torch.arange(12)
    scored = torch.stack([(steps >= 4), (steps >= 3) & (steps < 6), steps < 2, torch.zeros(12, dtype=torch.bool)])
    assert origin_steps(scored, 3) == [[4, 8, 11], [3, 4, 5], [1], []]  # 0 .. 7 at 0, 3.5, 7 (halves up)
    assert origin_steps(scored, 4) == [[4, 6, 9, 11], [3, 4, 5], [1], []]  # 0, 7/3, 14/3, 7
    assert origin_steps(scored, 1) == [[4], [3], [1], []]


def test_histories_end_before_their_targets():
    """Each call gets one origin of every row that has it; its history is the prefix before the origin, the later
    values zero."""
    lengths = [12, 6, 2, 9]
    mask = torch.arange(12) < torch.tensor(lengths)[:, None]
    x = (100.0 + torch.arange(12.0)).expand(4, 12).unsqueeze(-1) * mask[..., None]
    scored = mask & (torch.arange(12) >= torch.tensor([4, 3, 0, 9])[:, None])  # row 3: nothing scored
    stub = LastValue()
    result = backtest(stub, x, mask, scored, horizon=3, origins=3, num_samples=2)
    assert result.origins_used == [3, 3, 1, 0] and result.forecasts == 7
    starts = [[4, 3, 1], [8, 4], [11, 5]]  # the rows' first, second, third origins
    assert len(stub.calls) == 3
    for (history, history_mask), start in zip(stub.calls, starts):
        assert history_mask.sum(1).tolist() == start and history.shape[1] == max(start)
        for row, s in enumerate(start):
            assert torch.equal(history[row, :s, 0], 100.0 + torch.arange(float(s)))
            assert not history[row, s:].any() and not history_mask[row, s:].any()
    # targets inside the rows' scored steps: h = 1 at all 7 origins; h = 2 at 5, 9 (row 0) and 4, 5 (row 1);
    # h = 3 at 6, 10 (row 0) and 5 (row 1); row 2 ends after its origin
    assert result.per_horizon["targets"] == [7, 4, 3]


def test_origins_given_are_used_and_each_origins_forecasts_are_shown():
    """``starts`` replaces the spaced origins; ``on_forecast`` sees each origin's rows, steps, draws and targets."""
    mask = torch.ones(2, 8, dtype=torch.bool)
    x = torch.arange(16.0).reshape(2, 8, 1)
    stub, seen = LastValue(), []
    result = backtest(
        stub,
        x,
        mask,
        horizon=2,
        origins=5,
        num_samples=4,
        starts=[[2, 7], [5]],
        on_forecast=lambda *args: seen.append(args),
    )
    assert result.origins_used == [2, 1] and [call[1].sum(1).tolist() for call in stub.calls] == [[2, 5], [7]]
    assert [(rows, start.tolist()) for rows, start, *_ in seen] == [([0, 1], [2, 5]), ([0], [7])]
    _, _, draws, target, valid = seen[0]
    # the draws are the last values (1 and 12) plus OFFSETS; the targets steps 2, 3 and 5, 6 of the rows
    assert torch.equal(draws[:, :, 0, 0], torch.tensor([[1.0, 12.0]]) + torch.tensor(OFFSETS)[:, None])
    assert target[..., 0].tolist() == [[2.0, 3.0], [13.0, 14.0]] and valid.all()
    assert seen[1][4].tolist() == [[True, False]]  # row 0 ends after step 7


def test_lgssm_end_to_end():
    model = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0))
    x = model.sample(3, 15, generator=torch.Generator().manual_seed(1))[0]
    mask = torch.arange(15) < torch.tensor([15, 15, 10])[:, None]
    result = backtest(
        model,
        x,
        mask,
        horizon=3,
        origins=4,
        num_samples=30,
        generator=torch.Generator().manual_seed(2),
        forecast_kwargs={"num_particles": 20},
    )
    figures = result.per_horizon
    # steps 1..14 (rows 0, 1: origins 1, 5, 10, 14) and 1..9 (row 2: 1, 4, 6, 9); the last origins reach no further
    assert result.origins_used == [4, 4, 4] and figures["targets"] == [12, 9, 9]
    for name in ("crps", "mse", "mase"):
        assert all(math.isfinite(v) and v >= 0 for v in figures[name])
    assert all(0 <= v <= 1 for level in (50, 80, 95) for v in figures[f"coverage_{level}"])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"horizon": 0}, "horizon"),
        ({"origins": 2.5}, "origins"),
        ({"num_samples": 1}, "num_samples"),
        ({"season": 0}, "season"),
        ({"scored": torch.ones(1, 4, dtype=torch.bool)}, "scored"),
        ({"scored": torch.ones(1, 5)}, "scored"),
        ({"mask": torch.arange(5) < 3, "scored": torch.ones(1, 5, dtype=torch.bool)}, "scored"),
        ({"scored": torch.arange(5)[None] == 0}, "scored"),
        ({"forecaster": object()}, "forecaster"),
        ({"forecast_kwargs": {"generator": None}}, "forecast_kwargs"),
        ({"forecast_kwargs": [1]}, "forecast_kwargs"),
        ({"generator": 3}, "generator"),
        ({"standardizer": Standardizer([0.0], [1.0], ["a"])}, "standardizer"),
        ({"x": torch.ones(5, 2)}, "x"),
        ({"starts": [[0, 2]]}, "starts"),
        ({"starts": [[2], [3]]}, "starts"),
        ({"starts": [[3, 2]]}, "starts"),
        ({"starts": [[2.0]]}, "starts"),
        ({"starts": 2}, "starts"),
        ({"on_forecast": 3}, "on_forecast"),
    ],
)
def test_bad_arguments_are_refused(change, match):
    x, mask = _series()
    arguments = {
        "forecaster": LastValue(),
        "x": x,
        "mask": mask,
        "scored": None,
        "horizon": 2,
        "origins": 2,
        "num_samples": 4,
        **change,
    }
    if arguments["mask"].dim() == 1:
        arguments["mask"] = arguments["mask"][None]
    with pytest.raises((ValueError, TypeError), match=match):
        backtest(**arguments)


class Broken(LastValue):
    def __init__(self, fault):
        super().__init__()
        self.fault = fault

    def forecast(self, x, mask, horizon, num_samples, generator=None):
        draws = super().forecast(x, mask, horizon, num_samples)
        return draws[:, :, :1] if self.fault == "shape" else draws * float("nan")


@pytest.mark.parametrize("fault", ["shape", "nan"])
def test_bad_draws_are_refused(fault):
    x, mask = _series()
    with pytest.raises(ValueError, match="forecaster.forecast"):
        backtest(Broken(fault), x, mask, horizon=2, origins=2, num_samples=4)


@pytest.fixture
def time_split_run(tmp_path):
    """A one-epoch LGSSM run on 6 series of 30 steps split by time: the test series keep their earlier steps."""
    rng = np.random.default_rng(0)
    rows = [
        {"id": f"s{i}", "t": t, "v": float(np.sin(t / 3) + i + 0.1 * rng.normal())} for i in range(6) for t in range(30)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "tiny.csv", index=False)
    run = tmp_path / "run"
    sets = [
        'data.series="id"',
        'data.time="t"',
        'data.split_by="time"',
        "train.epochs=1",
        "model.latent_dim=2",
        "evaluate.predictive_samples=10",
        "evaluate.num_particles=10",
        "evaluate.iwae_particles=4",
    ]
    args = ["train", "lgssm", "--data", str(tmp_path / "tiny.csv"), "--run-dir", str(run)]
    assert main([*args, *(a for item in sets for a in ("--set", item))]) == 0
    return run


def test_the_command_writes_its_report(time_split_run, tmp_path):
    out = tmp_path / "bt"
    args = ["backtest", str(time_split_run), "--horizon", "2", "--origins", "3", "--samples", "10", "--particles", "5"]
    assert main([*args, "--out", str(out)]) == 0
    report = json.loads((out / "backtest.json").read_text())
    test = json.loads((time_split_run / "data_split.json").read_text())["test"]
    held_out = [steps - context for steps, context in zip(test["steps"], test["context"])]
    assert min(held_out) >= 3 and all(context >= 1 for context in test["context"])
    # three origins in each held-out segment: its first, middle and last step; the last has no second step
    assert report["origins_used"] == [3] * len(held_out)
    assert report["per_horizon"]["targets"] == [3 * len(held_out), 2 * len(held_out)]
    assert (out / "backtest.md").read_text().startswith("# Backtest: lgssm")
    assert main(["backtest", str(time_split_run), "--horizon", "1", "--origins", "1"]) == 0
    assert (time_split_run / "backtest" / "backtest.json").is_file()


def test_the_command_refuses_bad_arguments(tmp_path, capsys):
    assert main(["backtest", str(tmp_path / "missing"), "--horizon", "2", "--origins", "2"]) == 2
    assert "run_dir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["backtest", str(tmp_path), "--horizon", "2", "--origins", "2", "--samples", "1"])
    assert exit_info.value.code == 2


def test_targets_stop_at_the_first_step_not_scored():
    """Scored steps 1, 2, 4 of a row of 5: from origin 1, steps 1 and 2 are targets, not 4 after the gap."""
    x, mask = _series()
    scored = torch.tensor([[False, True, True, False, True]])
    result = backtest(LastValue(), x, mask, scored, horizon=4, origins=1, num_samples=4)
    assert result.per_horizon["targets"] == [1, 1, 0, 0]
    assert result.per_horizon["crps"][2:] == [None, None]


class OnAnotherDevice(LastValue):
    """Returns numpy draws (a classical forecaster's), float32."""

    def forecast(self, x, mask, horizon, num_samples, generator=None):
        return super().forecast(x, mask, horizon, num_samples).float().numpy()


def test_numpy_draws_are_taken():
    x, mask = _series()
    result = backtest(OnAnotherDevice(), x, mask, horizon=2, origins=10, num_samples=4)
    _close(result.per_horizon, EXPECTED)

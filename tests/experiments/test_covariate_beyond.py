"""Forecasts past the end of a file read with covariates (``forecast RUN --beyond H``): a GRU that reads a known
covariate forecasts the targets given the file's rows after each series' last target; a horizon past those rows, a
future value missing, or past-only covariates beyond one step are refused in one line; the future covariates go
into the run's units through its transform as :class:`DataUnits` bring the forecasts back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments.cli import main
from ppl_models.experiments.covariate_futures import model_units
from ppl_models.inference.data import DataUnits
from ppl_models.inference.data.covariates import CovariateLayout

COLUMNS = ["--series", "site", "--time", "t", "--split", "time"]
#: a small GRU that learns y = 3 c in a few epochs
FAST = ["train.epochs=4", "train.batch_size=1", "train.lr=0.03", "evaluate.predictive_samples=10"]
FAST += ['data.transform="none"', "model.rnn_dim=8", "model.hidden_dim=8"]
AHEAD = 5


def _sets(items):
    return [a for item in items for a in ("--set", item)]


def _frame(seed: int, *, past: bool = False) -> pd.DataFrame:
    """Four series of 40 steps, ``y_t = 3 c_t + noise`` with ``c`` white noise, then ``AHEAD`` rows with ``c`` and no
    ``y`` (and a past-only column ``p``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(4):
        for t in range(40 + AHEAD):
            c = rng.normal()
            y = 3 * c + 0.1 * rng.normal() if t < 40 else np.nan
            rows.append({"site": f"s{s}", "t": t, "c": c, "y": y, "p": rng.normal()})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("beyond")
    _frame(0).to_csv(folder / "priced.csv", index=False)
    argv = ["train", "gru", "--data", str(folder / "priced.csv"), *COLUMNS, "--covariates", "c"]
    assert main([*argv, "--features", "y,c", "--run-dir", str(folder / "run"), *_sets(FAST)]) == 0
    return folder


@pytest.fixture(scope="module")
def past(run):
    """A GRU run of ``y`` that reads ``p`` as a past-only covariate."""
    _frame(2).to_csv(run / "past.csv", index=False)
    argv = ["train", "gru", "--data", str(run / "past.csv"), *COLUMNS, "--past-covariates", "p", "--features", "y,p"]
    fast = [item for item in FAST if not item.startswith("train.epochs")] + ["train.epochs=1"]
    assert main([*argv, "--run-dir", str(run / "past"), *_sets(fast)]) == 0
    return run / "past"


def _error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("ppl-models: error:") and "Traceback" not in out + err, err
    return err


def test_the_forecasts_follow_three_times_the_covariate_of_the_rows_ahead(run):
    assert main(["forecast", f"r={run / 'run'}", "--beyond", str(AHEAD), "--out", str(run / "ahead")]) == 0
    table = pd.read_csv(run / "ahead" / "beyond.csv")
    assert set(table.feature) == {"y"} and len(table) == 4 * AHEAD  # the targets alone
    frame = pd.read_csv(run / "priced.csv")
    future = frame[frame.y.isna()].assign(step_ahead=lambda f: f.t - 39)
    merged = table.merge(future, left_on=["series", "step_ahead"], right_on=["site", "step_ahead"])
    assert len(merged) == 4 * AHEAD
    assert np.corrcoef(merged["mean"], 3 * merged["c"])[0, 1] > 0.9


def test_a_horizon_past_the_files_rows_ahead_is_refused_in_one_line(run, capsys):
    assert main(["forecast", f"r={run / 'run'}", "--beyond", str(AHEAD + 1), "--out", str(run / "far")]) == 2
    err = _error_line(capsys)
    assert f"--beyond={AHEAD + 1} goes past the file's rows of the known covariates ['c']" in err
    assert f"at most {AHEAD} steps ahead fit" in err


def test_a_missing_covariate_ahead_is_refused_in_one_line(run, capsys):
    frame = _frame(1)
    frame.loc[frame.index[frame.y.isna()][2], "c"] = np.nan
    frame.to_csv(run / "gap.csv", index=False)
    argv = ["forecast", f"r={run / 'run'}", "--beyond", "2", "--data", str(run / "gap.csv"), "--out", str(run / "gap")]
    assert main(argv) == 2
    err = _error_line(capsys)
    assert "column 'c' (given as covariates)" in err and "no value after the series' last target" in err


def test_past_only_covariates_forecast_one_step_and_refuse_more(run, past, capsys):
    assert main(["forecast", f"p={past}", "--beyond", "1", "--out", str(run / "one")]) == 0
    assert len(pd.read_csv(run / "one" / "beyond.csv")) == 4
    assert main(["forecast", f"p={past}", "--beyond", "2", "--out", str(run / "two")]) == 2
    assert "--beyond=2 with past_covariates ['p']" in _error_line(capsys)


@pytest.mark.parametrize(
    "log, lag, period, logged",
    [(False, 0, 0, None), (True, 0, 0, None), (False, 1, 0, None), (True, 2, 0, None), (False, 0, 3, None)]
    + [(True, 1, 2, None), (True, 1, 0, 1), (True, 1, 2, 1)],  # logged=1: the target's log only
)
def test_covariates_put_in_model_units_come_back_through_the_runs_data_units(log, lag, period, logged):
    rng = np.random.default_rng(lag)
    data_rows = torch.as_tensor(rng.uniform(1.0, 2.0, size=(2, 9, 2)))
    lengths = torch.tensor([9, 7])
    ahead = torch.as_tensor(rng.uniform(1.0, 2.0, size=(2, 4, 1)))
    if logged:  # the covariate is not logged: values <= 0 come back as well
        ahead = ahead - 1.5
    for r, length in enumerate(lengths.tolist()):  # a row's last step holds the first covariate ahead (the layout)
        data_rows[r, length - 1, 1] = ahead[r, 0, 0]
    offset, scale = torch.as_tensor(rng.normal(size=(2, 2))), torch.as_tensor(rng.uniform(0.5, 2.0, size=(2, 2)))
    profile = torch.as_tensor(rng.normal(size=(2, period, 2))) if period else None
    units = DataUnits(offset, scale, data_rows, lengths, log=log, lag=lag, profile=profile, logged=logged)
    data = type("Data", (), {"covariates": CovariateLayout(("y",), ("c",)), "units": lambda self, split: units})()
    z = model_units(data, "test", ahead)
    # DataUnits brings forecasts back from the positions after a start; the covariate read in the row before step
    # end + h sits at position end - 1 + h: the values back from a start one position before the end
    paths = torch.cat([torch.zeros_like(z), z], -1).unsqueeze(0)
    back = units.forecast(paths, None, lengths - lag - 1)[0, :, :, 1:]
    torch.testing.assert_close(back, ahead, rtol=1e-12, atol=1e-12)


def test_a_backtest_of_the_run_reads_the_covariates_ahead_and_scores_the_targets(run, capsys):
    out = run / "backtest"
    assert main(["backtest", str(run / "run"), "--horizon", "2", "--origins", "2", "--out", str(out)]) == 0
    report = pd.read_json(out / "backtest.json", typ="series")
    # 4 series x 2 origins (the second the last step: no target 2 ahead), one value each (y; c is an input)
    assert report["per_horizon"]["targets"] == [8, 4]
    assert report["per_horizon"]["mse"][1] < 0.2 * 9  # far below y's spread (9 Var c): c ahead is read


def test_a_backtest_with_past_only_covariates_beyond_one_step_is_refused(run, past, capsys):
    assert main(["backtest", str(past), "--horizon", "2", "--origins", "1", "--out", str(run / "pb")]) == 2
    assert "horizon 2 (--horizon) with past_covariates ['p']" in _error_line(capsys)


def test_a_forecast_of_the_test_split_is_refused_in_one_line(run, capsys):
    argv = ["forecast", f"r={run / 'run'}", "--observed", "5", "--horizon", "2", "--out", str(run / "split")]
    assert main(argv) == 2
    assert "CovariateInputs cannot forecast the test split" in _error_line(capsys)

"""The board's ``arimax`` row: one-step means of each test step equal to statsforecast's AutoARIMA with the covariate
as regressor, fitted on the series' history before the scored steps; ranked far above ARIMA without the covariate;
left out, with the reason, where past-only covariates are given."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from statsforecast.models import AutoARIMA

from ppl_models.experiments import own_data
from ppl_models.experiments.classical_rows import applicable_classical, data_units, fitted_classical
from ppl_models.experiments.cli import main
from ppl_models.experiments.registry import DATASETS, build

COLUMNS = ["--series", "site", "--time", "t", "--split-column", "part"]
TABLE = ['data.series="site"', 'data.time="t"', 'data.split="part"', 'data.transform="none"']
#: the scored (test) steps of every series, after its history (training and validation steps)
TEST_FROM, STEPS = 34, 40


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    """Two series of 40 steps, ``y_t = 3 c_t + noise`` with ``c`` white noise; rows 34 to 39 of each are the test
    split (a ``part`` column)."""
    folder = tmp_path_factory.mktemp("arimax")
    rng = np.random.default_rng(3)
    rows = []
    for s in range(2):
        for t in range(STEPS):
            c = rng.normal()
            part = "train" if t < 28 else "valid" if t < TEST_FROM else "test"
            rows.append({"site": f"s{s}", "t": t, "c": c, "y": 3 * c + 0.3 * rng.normal(), "part": part})
    pd.DataFrame(rows).to_csv(folder / "priced.csv", index=False)
    return folder


def _data(folder, *covariates: str):
    config = own_data.model_config("gru", folder / "priced.csv", [*TABLE, *covariates])
    return build(config["data"], DATASETS, "data")


def test_its_one_step_means_are_statsforecasts_arimax_fitted_on_each_series_history(priced):
    data = _data(priced, 'data.covariates=["c"]')
    model = fitted_classical("arimax", data)
    x, mask = data_units(data.levels, "test")
    scored = data.levels.scored["test"]
    assert scored.sum(1).tolist() == [STEPS - TEST_FROM] * 2 and scored[:, TEST_FROM:].all()
    predictive = model.predictive(x, mask, 0, scored=scored)
    frame = pd.read_csv(priced / "priced.csv")
    for i, (_, series) in enumerate(frame.groupby("site")):
        y, c = series.y.to_numpy(), series.c.to_numpy()[:, None]
        # the history before the scored steps; step 0 has no regressor in the layout (its c is not read)
        direct = AutoARIMA(season_length=1).fit(y[1:TEST_FROM], X=c[1:TEST_FROM])
        fitted = direct.forward(y=y[1:], h=1, X=c[1:], X_future=c[-1:], fitted=True)["fitted"][TEST_FROM - 1 :]
        means = predictive.mean[i, TEST_FROM:].numpy()
        np.testing.assert_allclose(means[:, 0], fitted, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(means[:-1, 1], c[TEST_FROM + 1 :, 0], atol=1e-6)  # the covariate held as read
        expected = norm.logpdf(y[TEST_FROM:], fitted, np.sqrt(direct.model_["sigma2"]))  # the target alone
        np.testing.assert_allclose(predictive.log_density[i, TEST_FROM:].numpy(), expected, rtol=1e-4, atol=1e-4)
    assert model.modelled_features == 1 and "forecast" not in model.capabilities


def test_past_only_covariates_leave_the_row_out_with_the_reason(priced):
    names, refused = applicable_classical(_data(priced, 'data.past_covariates=["c"]'))
    assert "arimax" not in names and refused["arimax"].startswith("past_covariates: arimax takes future-known")
    names, refused = applicable_classical(_data(priced))
    assert "arimax" not in names and "arimax" not in refused  # no covariates: no such row to speak of
    with pytest.raises(ValueError, match="arimax needs future-known covariates"):
        fitted_classical("arimax", _data(priced))


def test_the_board_ranks_arimax_far_above_arima_without_the_covariate(priced, monkeypatch):
    monkeypatch.chdir(priced)
    fast = ["train.epochs=1", "evaluate.predictive_samples=10", 'data.transform="none"']
    fast += ["gru:model.rnn_dim=4", "gru:model.hidden_dim=4"]
    board = ["leaderboard", "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--out", "board"]
    assert (
        main([*board, "--models", "gru", "--classical", "arima,arimax", "--budget", "1", "--jobs", "1", *_sets(fast)])
        == 0
    )
    record = json.loads((priced / "board" / "leaderboard.json").read_text())
    rows = {row["model"]: row for row in record["rows"]}
    assert rows["arimax"]["form"].endswith("; covariates c as regressors") and "+ c" in rows["arimax"]["form"]
    assert rows["arima"]["form"].endswith("; no covariates")
    frame = pd.read_csv(priced / "priced.csv")
    spread = float(frame.y[frame.part == "test"].var(ddof=0))  # c is white noise: y's spread bounds ARIMA's error
    assert rows["arima"]["mse"] > 0.5 * spread and rows["arimax"]["mse"] < 0.1 * spread
    # nats of y alone: y's own Gaussian at its spread is about what any forecast without c can reach
    assert rows["arimax"]["nats_per_step"] > -0.5 * np.log(2 * np.pi * np.e * spread) + 1.0
    assert rows["arimax"]["nats_per_step"] > rows["arima"]["nats_per_step"] + 1.0
    assert "| arimax | classical |" in (priced / "board" / "leaderboard.md").read_text()


def _sets(items):
    return [a for item in items for a in ("--set", item)]

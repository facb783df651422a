"""Transforms that fit real series (log, differencing, per-series scaling), chosen on validation and undone for every
figure: the transformed rows, densities, draws and forecasts against hand computations in numpy, the scored data
steps recorded, the choice on hand-built series, a run on a file with its forecast of a new file, and a seasonal
difference that names a whole lag."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments import forecasting
from ppl_models.experiments.cli import main
from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference import evaluate, one_step_mse
from ppl_models.inference.backtest import backtest
from ppl_models.inference.data import (
    DataUnits,
    SequenceDataset,
    SeriesTransform,
    Standardizer,
    choose_transform,
    detect_season,
    resolve_transform,
)
from ppl_models.inference.data.transforms import seasonal_index
from ppl_models.predictors import OneStepPredictor

FRACTIONS = (0.6, 0.2, 0.2)


def _positive_series(count=2, steps=20, features=2, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        np.exp(rng.normal(size=(1, features)) + np.cumsum(0.2 * rng.normal(size=(steps, features)), 0))
        for _ in range(count)
    ]


def _hand_log_difference_scaled(series: list[np.ndarray], train: int):
    """Per series: its log first differences ``w [T - 1, D]``, the training part's mean and sd (of the first
    ``train - 1`` differences), and the pooled global mean and sd of the scaled training differences."""
    diffs = [np.diff(np.log(s), axis=0) for s in series]
    stats = [(w[: train - 1].mean(0), w[: train - 1].std(0)) for w in diffs]
    pooled = np.concatenate([(w[: train - 1] - m) / s for w, (m, s) in zip(diffs, stats)])
    return diffs, stats, pooled.mean(0), pooled.std(0)


class _Lagged(OneStepPredictor):
    """``z_t ~ N(a z_{t-1} + b, sigma^2)`` per feature (``z_{-1} = 0``): a one-step model whose density is known."""

    def __init__(self, features: int, a: float, b: float, sigma: float):
        super().__init__(obs_dim=features, state_dim=features)
        self.double()  # the parameters exactly a, b and log sigma
        with torch.no_grad():
            self.decoder.weight.copy_(a * torch.eye(features, dtype=torch.float64))
            self.decoder.bias.fill_(b)
            self.log_noise_scale.fill_(math.log(sigma))

    def states(self, x):
        return torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)


def test_the_transformed_rows_are_the_hand_computed_log_differences_scaled_per_series():
    series = _positive_series()
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=FRACTIONS)
    applied = SeriesTransform(log=True, lag=1, series_scale=True).apply(splits)
    diffs, stats, mean, sd = _hand_log_difference_scaled(series, train=12)
    for i, (w, (m, s)) in enumerate(zip(diffs, stats)):
        np.testing.assert_allclose(applied.train.sequences[i], (w[:11] - m) / s, rtol=1e-12)
        np.testing.assert_allclose(applied.test.sequences[i], (w - m) / s, rtol=1e-12)  # the whole history
    assert applied.standardizer.mean == pytest.approx(mean.tolist(), abs=1e-12)
    assert applied.standardizer.scale == pytest.approx(sd.tolist(), rel=1e-12)
    assert applied.valid.context == [11, 11] and applied.test.context == [15, 15]  # context - lag
    assert applied.test.lengths == [19, 19]


def test_seasonal_differencing_drops_the_first_lag_steps_and_scores_from_the_lag():
    rows = [np.arange(1.0, 9.0)[:, None] ** 2, np.arange(2.0, 12.0)[:, None] ** 2]
    splits = SequenceDataset.from_sequences(rows * 3).split(by="series", seed=0)
    applied = SeriesTransform(lag=3).apply(splits)
    for raw, transformed in zip(splits.test.sequences, applied.test.sequences):
        np.testing.assert_array_equal(transformed[:, 0], raw[3:, 0] - raw[:-3, 0])
    assert applied.test.context is None  # a series split: no history, its first 3 data steps are not scored
    record = applied.to_dict()
    assert (
        record["test"]["first_scored"] == [3] * len(splits.test)
        and record["test"]["transform"] == "seasonal-difference-3"
    )
    lengths = splits.test.lengths
    expected = [[3 <= t < length for t in range(max(lengths))] for length in lengths]
    assert applied.level_scored()["test"].tolist() == expected


def test_the_scored_data_steps_of_a_split_by_time_are_recorded():
    series = _positive_series(count=3, steps=30)
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=(0.7, 0.1, 0.2))
    applied = SeriesTransform(log=True, lag=1).apply(splits)
    record = applied.to_dict()
    assert record["test"]["steps"] == [30] * 3 and record["test"]["context"] == [24] * 3  # the data as read
    assert record["test"]["first_scored"] == [24] * 3 and record["valid"]["first_scored"] == [21] * 3
    level = applied.level_scored()["test"]
    assert level.shape == (3, 30) and level[:, 24:].all() and not level[:, :24].any()
    # the transformed rows score the very same data steps: positions 23.. are data steps 24..
    assert applied.test.scored_mask()[:, 23:].all() and not applied.test.scored_mask()[:, :23].any()
    x, mask = applied.level_tensors()[2]
    standardizer = applied.levels.standardizer
    np.testing.assert_allclose(standardizer.inverse(x.double())[0].numpy(), series[0], rtol=1e-5)


def test_evaluate_on_log_differenced_series_scaled_data_gives_the_hand_computed_density_in_data_units():
    series = _positive_series()
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=FRACTIONS)
    applied = SeriesTransform(log=True, lag=1, series_scale=True).apply(splits)
    x, mask = applied.test.padded(applied.standardizer, dtype=torch.float64)
    scored = applied.test.scored_mask()
    a, b, sigma = 0.4, 0.1, 0.7
    result = evaluate(
        _Lagged(2, a, b, sigma),
        x,
        mask,
        scored=scored,
        standardizer=applied.units("test"),
        estimators=["exact"],
        predictive_samples=0,
    )
    diffs, stats, mean, sd = _hand_log_difference_scaled(series, train=12)
    total, count = 0.0, 0
    for w, (m, s), raw in zip(diffs, stats, series):
        z = ((w - m) / s - mean) / sd
        previous = np.vstack([np.zeros((1, 2)), z[:-1]])
        for t in range(15, 19):  # the scored positions: data steps 16..19
            density = -0.5 * ((z[t] - (a * previous[t] + b)) / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))
            total += float(density.sum() - np.log(s * sd).sum() - np.log(raw[t + 1]).sum())
            count += 1
    assert result.metrics["test_steps"] == count == 8
    assert result.metrics["loglik"]["exact"]["per_step"] == pytest.approx(total / count, rel=1e-9)
    np.testing.assert_allclose(result.x[0, 15:].numpy(), series[0][16:], rtol=1e-12)  # the data at the steps


def test_draws_and_means_come_back_from_the_level_before_them():
    series = _positive_series()
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=FRACTIONS)
    applied = SeriesTransform(log=True, lag=1, series_scale=True).apply(splits)
    x, mask = applied.test.padded(applied.standardizer, dtype=torch.float64)
    scored = applied.test.scored_mask()
    a, b = 0.4, 0.1
    model = _Lagged(2, a, b, 1e-7)
    result = evaluate(
        model,
        x,
        mask,
        scored=scored,
        standardizer=applied.units("test"),
        estimators=["exact"],
        predictive_samples=5,
        seed=0,
    )
    diffs, stats, mean, sd = _hand_log_difference_scaled(series, train=12)
    squared, count = 0.0, 0
    for i, (w, (m, s), raw) in enumerate(zip(diffs, stats, series)):
        z = ((w - m) / s - mean) / sd
        previous = np.vstack([np.zeros((1, 2)), z[:-1]])
        expected = raw[:-1] * np.exp(m + s * (mean + sd * (a * previous + b)))  # x_{t-1} exp(predicted difference)
        for draw in result.predictive[:, i, 15:19].numpy():
            np.testing.assert_allclose(draw, expected[15:19], rtol=1e-5)
        squared += float(((expected[15:19] - raw[16:20]) ** 2).sum())
        count += 8
    mse = one_step_mse(model, x, mask, standardizer=applied.units("test"), scored=scored)
    assert mse == pytest.approx(squared / count, rel=1e-9) and result.metrics["mse"] == pytest.approx(mse, rel=1e-9)


def test_forecasts_integrate_the_differences_from_the_observed_levels():
    data = torch.tensor([[[1.0], [2.0], [4.0], [8.0], [1.0]]], dtype=torch.float64)  # one row of 5 steps
    units = DataUnits(torch.tensor([[0.5]]), torch.tensor([[2.0]]), data, torch.tensor([5]), log=True, lag=2)
    z = torch.tensor([[[[0.0], [1.0], [-1.0], [0.5]]]])  # [S=1, b=1, H=4, D=1], after the row's end
    u = 0.5 + 2.0 * z[0, 0, :, 0].numpy()  # the log differences
    level = list(np.log([1.0, 2.0, 4.0, 8.0, 1.0]))
    for h in range(4):
        level.append(level[-2] + u[h])  # from the level two steps before: observed, then forecast
    np.testing.assert_allclose(units.forecast(z)[0, 0, :, 0].numpy(), np.exp(level[5:]), rtol=1e-12)
    # from inside the row: after its first 1 transformed position (data steps 0..2 observed)
    np.testing.assert_allclose(
        units.forecast(z[:, :, :2], start=1)[0, 0, :, 0].numpy(),
        np.exp([np.log(2.0) + u[0], np.log(4.0) + u[1]]),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="start"):
        units.forecast(z, start=4)


def test_choose_transform_differences_a_random_walk_with_drift_and_leaves_white_noise():
    rng = np.random.default_rng(0)
    walk = SequenceDataset.from_sequences([np.cumsum(0.5 + rng.normal(size=(200, 1)), 0) for _ in range(3)])
    transform, record = choose_transform(walk.split(by="time"))
    assert transform.lag == 1 and not transform.log
    assert record["candidates"]["difference"] > record["candidates"]["none"]
    assert "feature 'x0' has a non-positive value" in record["left_out"]["log"]
    noise = SequenceDataset.from_sequences([rng.normal(size=(300, 2)) for _ in range(4)])
    assert choose_transform(noise.split(by="time"))[0].name == "none"


def test_choose_transform_logs_a_geometric_random_walk():
    rng = np.random.default_rng(1)
    walks = [np.exp(rng.uniform(0, 7) + np.cumsum(0.01 + 0.1 * rng.normal(size=(300, 1)), 0)) for _ in range(4)]
    transform, record = choose_transform(SequenceDataset.from_sequences(walks).split(by="time"))
    assert transform.log
    assert record["candidates"]["log"] > record["candidates"]["none"] + 1


def test_a_fixed_season_is_detected_and_removed_as_a_profile():
    rng = np.random.default_rng(2)
    steps = np.arange(240)
    seasonal = [
        (0.05 * steps + 3 * np.sin(2 * np.pi * steps / 12) + 0.3 * rng.normal(size=240))[:, None] for _ in range(3)
    ]
    assert detect_season(seasonal) == 12
    assert detect_season([rng.normal(size=(240, 1))]) is None
    transform, record = choose_transform(SequenceDataset.from_sequences(seasonal).split(by="time"))
    assert transform.profile == 12 and transform.lag == 1 and record["season"] == 12  # the trend differenced
    assert record["candidates"]["seasonal-profile-12+difference"] > record["candidates"]["seasonal-difference-12"]


def test_a_season_that_wanders_is_differenced_at_its_lag():
    rng = np.random.default_rng(3)
    walks = []  # x_t = x_{t-12} + e_t: each month its own random walk, no fixed profile
    for _ in range(3):
        values = np.zeros(240)
        values[:12] = 3 * rng.normal(size=12)
        for t in range(12, 240):
            values[t] = values[t - 12] + rng.normal()
        walks.append(values[:, None])
    transform, record = choose_transform(SequenceDataset.from_sequences(walks).split(by="time"))
    assert transform.lag == 12 and not transform.profile
    assert record["candidates"]["seasonal-difference-12"] > record["candidates"]["seasonal-profile-12"] + 0.1


def _statsmodels_index(values: np.ndarray, period: int) -> np.ndarray:
    """``[period, D]``: statsmodels' additive classical decomposition's seasonal component at places 0 .. period - 1."""
    from statsmodels.tsa.seasonal import seasonal_decompose

    return np.stack([seasonal_decompose(column, period=period).seasonal[:period] for column in values.T], -1)


@pytest.mark.parametrize("period, steps", [(4, 41), (5, 23), (12, 100)])
def test_the_seasonal_index_is_statsmodels_classical_decomposition_and_ignores_a_trend(period, steps):
    rng = np.random.default_rng(period)
    season = rng.normal(size=(period, 2))
    season -= season.mean(0)
    t = np.arange(steps)
    values = 0.3 * t[:, None] + season[t % period] + 0.01 * rng.normal(size=(steps, 2))
    index = seasonal_index(values, period)
    np.testing.assert_allclose(index, _statsmodels_index(values, period), atol=1e-12)
    np.testing.assert_allclose(index, season, atol=0.02)  # the trend leaves no place above another


def test_a_seasonal_profile_is_each_series_training_mean_at_each_place_in_the_season():
    series = _positive_series(count=2, steps=40)
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=(0.6, 0.2, 0.2))
    applied = SeriesTransform(log=True, lag=1, profile=4).apply(splits)
    assert applied.transform.name == "log+seasonal-profile-4+difference"
    assert SeriesTransform.parse("log+seasonal-profile+difference", season=4) == applied.transform
    for i, raw in enumerate(series):
        anomaly = np.log(raw) - _statsmodels_index(np.log(raw[:24]), 4)[np.arange(40) % 4]
        np.testing.assert_allclose(applied.train.sequences[i], np.diff(anomaly[:24], axis=0), atol=1e-12)
        np.testing.assert_allclose(applied.test.sequences[i], np.diff(anomaly, axis=0), atol=1e-12)
    units = applied.units("test")
    x, _ = applied.test.padded(applied.standardizer, dtype=torch.float64)
    back = units.values(x[:, 1:], start=1)  # each position from the observed level before it
    np.testing.assert_allclose(back[0].numpy(), series[0][2:], rtol=1e-10)


def test_forecasts_under_a_profile_add_each_steps_place_in_the_season():
    data = torch.tensor([[[1.0], [5.0], [2.0], [6.0], [3.0]]], dtype=torch.float64)  # one row of 5 steps
    profile = torch.tensor([[[1.0], [4.0]]], dtype=torch.float64)  # [N=1, m=2, D=1]
    units = DataUnits(torch.tensor([[0.0]]), torch.tensor([[2.0]]), data, torch.tensor([5]), lag=1, profile=profile)
    z = torch.tensor([[[[0.5], [1.0], [-1.0]]]])  # [S=1, b=1, H=3, D=1] after the row's end (data steps 5, 6, 7)
    anomaly = 3.0 - 1.0  # data step 4 (place 0) less its profile
    expected = []
    for h, step in enumerate((5, 6, 7)):
        anomaly += 2.0 * float(z[0, 0, h, 0])
        expected.append(anomaly + float(profile[0, step % 2, 0]))
    np.testing.assert_allclose(units.forecast(z)[0, 0, :, 0].numpy(), expected, rtol=1e-12)
    # one step at a time inside the row: position t' is data step t' + 1, from the observed level before it
    one_step = units.values(z[:, :, :2], start=2)[0, 0, :, 0].numpy()  # data steps 3, 4
    np.testing.assert_allclose(one_step, [(2.0 - 1.0) + 1.0 + 4.0, (6.0 - 4.0) + 2.0 + 1.0], rtol=1e-12)


def test_a_profile_is_the_targets_own_and_leaves_a_seasonal_covariate_as_read(tmp_path):
    """A month's number known ahead, beside a series with a fixed season: the profile (and log) are the target's
    only, so the covariate still varies (it was left out when every column lost its profile) and reads as in the
    file."""
    rng = np.random.default_rng(4)
    rows = []
    for s in range(3):
        level = 10.0 + 3 * np.sin(2 * np.pi * np.arange(120) / 12) + 0.3 * rng.normal(size=120).cumsum()
        rows += [{"id": f"s{s}", "t": t, "y": level[t], "month": t % 12} for t in range(120)]
    pd.DataFrame(rows).to_csv(tmp_path / "monthly.csv", index=False)
    options = {"series": "id", "time": "t", "split_by": "time", "features": ("y", "month"), "covariates": ("month",)}
    data = file_data(str(tmp_path / "monthly.csv"), **options)
    record = data.split_record["transform"]
    assert "seasonal-profile-12" in record["candidates"] and record["profile"] == 12
    # the month seasonally differenced is constant, but only an input: the candidate stays; every figure is the
    # target's alone (a nearly constant covariate's tiny AR noise once gave a profile candidate +34 nats)
    assert "seasonal-difference-12" in record["candidates"] and max(record["candidates"].values()) < 0.5
    assert "log+seasonal-profile-12" in record["candidates"]  # log is the target's: the month's 0 does not refuse it
    applied = file_data(str(tmp_path / "monthly.csv"), transform=record["name"], **options)
    units = applied.units("test")
    x, mask = applied.test
    back = units.values(x, start=0)  # every position back in the data's units
    frame = pd.read_csv(tmp_path / "monthly.csv")
    for r in range(3):
        read = frame[frame.id == f"s{r}"]
        first = record["lag"]  # a transformed row's position 0 is data step lag
        # the covariate column holds the next step's month (known one step ahead): as read, no profile taken off
        np.testing.assert_allclose(back[r, : 119 - first, 1].numpy(), read.month.to_numpy()[first + 1 :], atol=1e-5)
        np.testing.assert_allclose(back[r, : 120 - first, 0].numpy(), read.y.to_numpy()[first:], rtol=1e-6)
        assert not units.profile[r, :, 1].any() and units.profile[r, :, 0].abs().max() > 1.0


def test_a_seasonal_profile_that_cannot_apply_is_refused_by_name():
    series = _positive_series(count=6, steps=40)
    by_series = SequenceDataset.from_sequences(series).split(by="series")
    with pytest.raises(ValueError, match="no training part: per-series scaling and seasonal profiles"):
        resolve_transform("seasonal-profile-4", by_series)
    by_time = SequenceDataset.from_sequences(series).split(by="time", fractions=(0.6, 0.2, 0.2))
    with pytest.raises(ValueError, match="has 24 steps: a seasonal profile of 13 needs two cycles"):
        resolve_transform("seasonal-profile-13", by_time)
    with pytest.raises(ValueError, match="a seasonal difference already removes a seasonal profile"):
        resolve_transform("seasonal-profile-4+seasonal-difference-4", by_time)
    with pytest.raises(ValueError, match="more than one training row"):
        resolve_transform("seasonal-profile-4", by_time.windows(10, 10))


def test_a_transform_that_cannot_apply_is_refused_by_name():
    series = _positive_series(count=4)
    series[1][5, 1] = -2.0
    splits = SequenceDataset.from_sequences(series).split(by="time")
    refused = r"data.transform: 'log\+difference': feature 'x1' has a non-positive value \(-2\)"
    with pytest.raises(ValueError, match=refused):
        resolve_transform("log+difference", splits, prefix="data.")
    by_series = SequenceDataset.from_sequences(_positive_series(count=6)).split(by="series")
    with pytest.raises(ValueError, match="no training part: per-series scaling"):
        resolve_transform("series-scale", by_series)
    with pytest.raises(ValueError, match="unknown part 'logs'"):
        resolve_transform("logs", by_series)
    with pytest.raises(ValueError, match="needs a season"):
        resolve_transform("seasonal-difference", by_series)
    with pytest.raises(ValueError, match="has 20 steps: differencing at lag 19"):
        resolve_transform("seasonal-difference-19", by_series)
    binary = SequenceDataset.from_sequences([np.eye(2)[np.arange(8) % 2] for _ in range(6)]).split()
    assert choose_transform(binary)[0].name == "none"
    with pytest.raises(ValueError, match="binary"):
        resolve_transform("difference", binary)


def _walk_file(path, *, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    rows = [
        {"id": f"s{s}", "t": t, "v": float(value), "w": float(other)}
        for s in range(3)
        for t, (value, other) in enumerate(
            zip(shift + np.cumsum(1.0 + rng.normal(size=40)), shift + np.cumsum(-0.5 + rng.normal(size=40)))
        )
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_file_data_applies_the_choice_and_none_is_the_data_as_before(tmp_path):
    path = _walk_file(tmp_path / "walk.csv")
    options = {"series": "id", "time": "t", "split_by": "time"}
    data = file_data(str(path), **options)
    record = data.split_record["transform"]
    assert record["lag"] == 1 and not record["log"] and set(record["candidates"]) >= {"none", "difference"}
    assert data.split_record["test"]["first_scored"] == [34] * 3
    assert isinstance(data.units("valid"), DataUnits) and data.units("test") is data.standardizer
    assert data.test[0].shape == (3, 39, 2) and data.levels.test[0].shape == (3, 40, 2)
    assert data.levels.scored["test"][:, 34:].all() and not data.levels.scored["test"][:, :34].any()
    frame = pd.read_csv(path)
    np.testing.assert_allclose(data.units("test").observed[0].numpy(), frame[frame.id == "s0"][["v", "w"]][1:])
    plain = file_data(str(path), transform="none", **options)
    splits = SequenceDataset.from_file(path, series="id", time="t").split(by="time")
    assert isinstance(plain.standardizer, Standardizer) and plain.standardizer == splits.standardizer
    for got, expected in zip((plain.train, plain.valid, plain.test), splits.tensors()):
        assert all(torch.equal(g, e) for g, e in zip(got, expected))


def test_a_forecast_of_a_new_file_reads_it_under_the_recorded_transform_and_standardisation(tmp_path):
    path, other = _walk_file(tmp_path / "walk.csv"), _walk_file(tmp_path / "other.csv", seed=1, shift=500.0)
    options = {"name": "file", "path": str(path), "series": "id", "time": "t", "split_by": "time"}
    trained = file_data(str(path), **{k: v for k, v in options.items() if k not in ("name", "path")})
    run = tmp_path / "run"
    run.mkdir()
    (run / "data_split.json").write_text(json.dumps({**trained.split_record, "transform": {"name": "log"}}))
    section = forecasting._file_data(run, {"data": options}, other)
    assert section["transform"] == "log" and section["standardizer"] == trained.split_record["standardizer"]
    new = file_data(**{k: v for k, v in section.items() if k != "name"})
    assert new.split_record["transform"]["name"] == "log" and new.units("test").log
    assert new.units("test").offset[0].tolist() == trained.split_record["standardizer"]["mean"]
    (run / "data_split.json").write_text(json.dumps({"standardizer": trained.split_record["standardizer"]}))
    assert forecasting._file_data(run, {"data": options}, other)["transform"] == "none"  # a run before transforms


@pytest.mark.slow
def test_a_run_records_its_transform_and_a_forecast_of_a_new_file_reuses_it(tmp_path, capsys):
    path, other = _walk_file(tmp_path / "walk.csv"), _walk_file(tmp_path / "other.csv", seed=1, shift=500.0)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(path),
                "--run-dir",
                str(run),
                "--set",
                'data.series="id"',
                "--set",
                'data.time="t"',
                "--set",
                'data.split_by="time"',
                "--set",
                "train.epochs=1",
                "--set",
                "evaluate.predictive_samples=10",
                "--set",
                'evaluate.noise_refit="none"',
                "--set",
                "model.rnn_dim=8",
                "--set",
                "model.hidden_dim=8",
            ]
        )
        == 0
    ), capsys.readouterr().err
    split = json.loads((run / "data_split.json").read_text())
    assert split["transform"]["lag"] == 1 and split["test"]["first_scored"] == [34] * 3
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test_steps"] == 3 * 6 and "transform" in metrics["units"]
    out = tmp_path / "forecast"
    assert (
        main(["forecast", f"gru={run}", "--data", str(other), "--observed", "36", "--samples", "20", "--out", str(out)])
        == 0
    ), capsys.readouterr().err
    report = json.loads((out / "forecast.json").read_text())
    assert report["observed"] == 36 and report["horizon"] == 4 and math.isfinite(report["metrics"]["gru"]["crps"])
    _, loaded, _ = forecasting.load_run("gru", run, "cpu", other)
    assert loaded.split_record["transform"]["name"] == split["transform"]["name"]
    assert loaded.split_record["standardizer"] == split["standardizer"]  # the run's, not the new file's
    frame = pd.read_csv(other)
    np.testing.assert_allclose(forecasting._truth(loaded, "test")[2].numpy(), frame[frame.id == "s2"][["v", "w"]])


class _NoChange:
    """Forecasts a difference of 0 at every step ahead."""

    def forecast(self, x, mask, horizon, num_samples, generator=None):
        return torch.zeros(num_samples, x.shape[0], horizon, x.shape[-1])


def test_a_backtest_of_differenced_data_judges_the_levels():
    data = torch.tensor([[[1.0], [2.0], [4.0], [7.0], [11.0]]], dtype=torch.float64)
    units = DataUnits(
        torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64), data, torch.tensor([5]), lag=1
    )
    x = torch.tensor([[[1.0], [2.0], [3.0], [4.0]]])  # the differences
    result = backtest(_NoChange(), x, None, horizon=1, origins=3, num_samples=2, standardizer=units)
    # origins at positions 1, 2, 3: the forecast is the level before (2, 4, 7) of the data steps 2, 3, 4 (4, 7, 11)
    assert result.per_horizon["mse"] == [pytest.approx((2**2 + 3**2 + 4**2) / 3)]
    # MASE's scale: the mean |first difference| of the data before each origin's step: 1, 1.5, 2
    assert result.per_horizon["mase"] == [pytest.approx(2.0)]


def test_a_transform_that_makes_a_feature_constant_is_no_candidate():
    trends = [np.arange(20.0)[:, None] * 0.5 + i for i in range(6)]  # differencing leaves a constant
    transform, record = choose_transform(SequenceDataset.from_sequences(trends).split(by="time"))
    assert transform.lag == 0
    assert "makes feature 'x0' constant on the training split" in record["left_out"]["difference"]


def test_the_season_is_the_period_not_one_of_its_multiples():
    """A yearly season of weekly data correlates about as much at 52, 104 and 156 weeks: its period is 52."""
    from ppl_models.classical.base import detect_season as classical_season
    from ppl_models.inference.data.transforms import detect_season as transform_season
    from ppl_models.inference.data.transforms import fundamental_lag

    correlation = np.full(200, 0.05)
    correlation[[52 - 2, 104 - 2, 156 - 2]] = [0.40, 0.41, 0.42]  # entry i is lag i + 2
    assert fundamental_lag(correlation) + 2 == 52
    weeks = np.arange(1600.0)
    series = 0.02 * weeks + 3 * np.sin(2 * np.pi * weeks / 52) + np.random.default_rng(0).normal(0, 0.1, 1600)
    # differenced noise correlates -1/2 with its neighbour, so lags 51 and 53 read about as high as 52: a step either
    # way; never 104 or 156
    assert abs(transform_season([series[:, None]]) - 52) <= 1 and abs(classical_season([series[:, None]])[0] - 52) <= 1


def test_a_seasonal_difference_names_a_whole_lag():
    assert SeriesTransform.parse("seasonal-difference-12").lag == 12
    assert SeriesTransform.parse("seasonal-difference", season=4).lag == 4
    for spec in ("seasonal-difference--3", "seasonal-difference3", "seasonal-difference-1", "seasonal-difference-x"):
        with pytest.raises(ValueError, match="seasonal-difference-<m>"):
            SeriesTransform.parse(spec, season=4)


def test_forecasts_past_the_end_under_a_profile_follow_each_series_season(tmp_path, capsys):
    rng = np.random.default_rng(4)
    season = np.array([0.0, 10.0, -5.0, 3.0])
    rows = [
        {"id": f"s{s}", "t": t, "v": float(20 * s + season[(t + s) % 4] + 0.05 * rng.normal())}
        for s in range(3)
        for t in range(41 + s)  # each series its own length and its own place in the season at its first step
    ]
    path = tmp_path / "seasons.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    run = tmp_path / "run"
    items = [
        'data.series="id"',
        'data.time="t"',
        'data.split_by="time"',
        'data.transform="seasonal-profile-4+series-scale"',
    ]
    items += ["train.epochs=1", "model.rnn_dim=4", "model.hidden_dim=4", "evaluate.predictive_samples=10"]
    items += ['evaluate.noise_refit="none"']
    argv = ["train", "gru", "--data", str(path), "--run-dir", str(run)] + [a for i in items for a in ("--set", i)]
    assert main(argv) == 0, capsys.readouterr().err
    assert main(["forecast", f"gru={run}", "--beyond", "5", "--samples", "50", "--out", str(tmp_path / "b")]) == 0
    beyond = pd.read_csv(tmp_path / "b" / "beyond.csv")
    for s in range(3):
        means = beyond[beyond.series == f"s{s}"].sort_values("step_ahead")["mean"].to_numpy()
        expected = [20 * s + season[(41 + s + h + s) % 4] for h in range(5)]  # data steps 41 + s ..
        np.testing.assert_allclose(means, expected, atol=1.0)  # the season's swing is 15


def test_a_trending_multiplicative_season_is_removed_as_a_profile_of_logs_then_differenced():
    rng = np.random.default_rng(0)
    steps = np.arange(144)  # twelve years of months, the training split ending partway through a year
    noise = np.zeros(144)
    for t in range(1, 144):
        noise[t] = 0.6 * noise[t - 1] + 0.03 * rng.normal()
    season = 0.15 * np.sin(2 * np.pi * steps / 12) + 0.05 * np.cos(4 * np.pi * steps / 12)
    series = np.exp(4.8 + 0.01 * steps + season + noise)[:, None]
    transform, record = choose_transform(SequenceDataset.from_sequences([series]).split(by="time"), season=12)
    assert transform.name == "log+seasonal-profile-12+difference"
    figures = record["candidates"]
    assert figures["log+seasonal-profile-12+difference"] > figures["log+seasonal-difference-12"] + 0.1

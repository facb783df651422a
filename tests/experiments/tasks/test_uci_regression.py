"""The AIR and PM regression tasks of the PF-RNN paper: loaders on the real files, evaluation, runner.

Every expected value is recomputed here with pandas / numpy / scipy from the raw CSV files or
by hand, independently of :mod:`ppl_models.experiments.tasks.uci_regression` and the modules it builds on
(:mod:`~ppl_models.experiments.tasks.hourly_windows`, :mod:`~ppl_models.experiments.tasks.regression_evaluation`).
"""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

from ppl_models.experiments import cli
from ppl_models.experiments.data import resolve_data_dir
from ppl_models.experiments.registry import experiment_config
from ppl_models.experiments.supervised import load_supervised_config
from ppl_models.experiments.tasks.hourly_window_spec import HourlyWindowSpec
from ppl_models.experiments.tasks.hourly_windows import build_windows
from ppl_models.experiments.tasks.regression_evaluation import evaluate_regression, predictive_samples
from ppl_models.experiments.tasks.uci_regression import AIR_INPUTS, PM25_INPUTS, air_quality_regression, pm25_regression
from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.pf_rnn import ParticleBelief, PFRNNPredictor

try:
    DATA = resolve_data_dir()
except ValueError:  # no shared data folder on this machine
    DATA = None
needs_data = pytest.mark.skipif(DATA is None, reason="the shared data folder (../shared/data) is not available")


# --------------------------------------------------------------------------- independent truth from pandas


@pytest.fixture(scope="module")
def air_raw():
    frame = pd.read_csv(DATA / "air_quality/AirQualityUCI.csv", sep=";", decimal=",")
    frame = frame.dropna(subset=["Date"]).replace(-200, np.nan).reset_index(drop=True)
    frame["time"] = pd.to_datetime(frame["Date"] + " " + frame["Time"], format="%d/%m/%Y %H.%M.%S")
    return frame


@pytest.fixture(scope="module")
def pm_raw():
    frame = pd.read_csv(DATA / "pm25/PRSA_data_2010.1.1-2014.12.31.csv")
    frame["time"] = pd.to_datetime(frame[["year", "month", "day", "hour"]])
    return frame


@pytest.fixture(scope="module")
def air():
    return air_quality_regression()[0]


@pytest.fixture(scope="module")
def pm():
    return pm25_regression()[0]


def _expected_features(raw: pd.DataFrame, inputs, target: str, cut: int, categorical: pd.DataFrame | None = None):
    """The documented preprocessing, written with pandas: ``[H, D]`` features and the ``[H]`` normalised target."""
    train = raw.iloc[:cut]
    columns = {}
    for name in inputs:
        columns[name] = (raw[name].ffill() - train[name].mean()) / train[name].std(ddof=0)
    mean, std = train[target].mean(), train[target].std(ddof=0)
    columns["lag"] = ((raw[target].shift(1).ffill() - mean) / std).fillna(0.0)  # none before the first hour: mean
    columns["lag missing"] = raw[target].shift(1).isna().astype(float)
    columns["inputs missing"] = raw[list(inputs)].isna().any(axis=1).astype(float)
    if categorical is not None:
        for name in categorical:
            columns[name] = categorical[name].astype(float)
    hour, weekday = raw["time"].dt.hour, raw["time"].dt.day_of_week
    columns.update(
        {
            "hour sin": np.sin(2 * np.pi * hour / 24),
            "hour cos": np.cos(2 * np.pi * hour / 24),
            "weekday sin": np.sin(2 * np.pi * weekday / 7),
            "weekday cos": np.cos(2 * np.pi * weekday / 7),
        }
    )
    return pd.DataFrame(columns).to_numpy(), ((raw[target] - mean) / std).to_numpy()


def _check_windows(data, raw, features, target, window=24):
    """Each window of each split is the expected table's rows ``start .. start + window``."""
    for split, (x, mask, y) in data.splits.items():
        assert mask is None and x.dtype == torch.float32 and not torch.isnan(x).any()
        for i in (0, len(x) // 2, len(x) - 1):
            rows = np.arange(data.starts[split][i], data.starts[split][i] + window)
            np.testing.assert_allclose(x[i].numpy(), features[rows], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(y[i, :, 0].numpy(), target[rows], rtol=1e-5, atol=1e-5)  # NaN where missing
        # a window is dropped only when no hour of it has a target
        assert (~torch.isnan(y)).any(1).all()
    scored = sum(int((~torch.isnan(y)).sum()) for _, _, y in data.splits.values())
    assert 0 < scored <= raw[data.target].notna().sum()


# --------------------------------------------------------------------------- loaders on the real files


@needs_data
def test_air_windows_match_an_independent_pandas_preprocessing(air, air_raw):
    hours = len(air_raw)
    assert hours == 9357 and air.bounds == (round(0.7 * hours), round(0.8 * hours), hours)
    cut = air.bounds[0]
    assert air.target == "NO2(GT)" and len(air.feature_names) == 15
    for name in AIR_INPUTS:  # statistics of the observed training hours only
        assert air.input_stats[name] == pytest.approx((air_raw[name][:cut].mean(), air_raw[name][:cut].std(ddof=0)))
    assert (air.target_mean, air.target_std) == pytest.approx(
        (air_raw["NO2(GT)"][:cut].mean(), air_raw["NO2(GT)"][:cut].std(ddof=0))
    )
    features, target = _expected_features(air_raw, AIR_INPUTS, "NO2(GT)", cut)
    _check_windows(air, air_raw, features, target)
    x, _, y = air.splits["test"]
    assert x.shape == (len(air.starts["test"]), 24, 15) and y.shape == (len(x), 24, 1)
    # the persistence reference is the last observed NO2 before each hour
    last = air_raw["NO2(GT)"].shift(1).ffill().to_numpy()
    np.testing.assert_allclose(air.last_observed["test"], last[air.starts["test"][:, None] + np.arange(24)])


@needs_data
def test_pm25_windows_match_an_independent_pandas_preprocessing(pm, pm_raw):
    hours = len(pm_raw)
    assert hours == 43824 and pm.bounds == (round(0.7 * hours), round(0.8 * hours), hours)
    cut = pm.bounds[0]
    assert not any("ago" in name for name in pm.feature_names)  # the appended lag columns are not read
    assert len(pm.feature_names) == 17 and pm.target == "pm2.5"
    assert (pm.target_mean, pm.target_std) == pytest.approx(
        (pm_raw["pm2.5"][:cut].mean(), pm_raw["pm2.5"][:cut].std(ddof=0))
    )
    wind = pd.get_dummies(pm_raw["cbwd"])[["NE", "NW", "SE", "cv"]]
    features, target = _expected_features(pm_raw, PM25_INPUTS, "pm2.5", cut, wind)
    _check_windows(pm, pm_raw, features, target)
    # our lag is the file's own (dropped) pm2.5_1ago column, forward-filled
    lag = pm.feature_names.index("pm2.5 lag 1h")
    x, _, _ = pm.splits["valid"]
    rows = pm.starts["valid"][:, None] + np.arange(24)
    expected = (pm_raw["pm2.5_1ago"].ffill().to_numpy()[rows] - pm.target_mean) / pm.target_std
    np.testing.assert_allclose(x[..., lag].numpy(), expected, rtol=1e-5, atol=1e-5)


@needs_data
def test_splits_are_chronological_and_disjoint(air, pm, air_raw):
    for data in (air, pm):
        train_end, valid_end, hours = data.bounds
        spans = {s: (data.starts[s].min(), data.starts[s].max() + 24) for s in data.starts}
        assert 0 <= spans["train"][0] and spans["train"][1] <= train_end <= spans["valid"][0]
        assert spans["valid"][1] <= valid_end <= spans["test"][0] and spans["test"][1] <= hours
        # validation and test windows do not overlap each other; training windows start every 6 hours
        for split in ("valid", "test"):
            assert (np.diff(data.starts[split]) >= 24).all()
    assert air.times[air.starts["test"].min()] > air_raw["time"][air.starts["train"].max() + 23]
    _, splits = air_quality_regression(stride=6, max_windows=5)
    assert [len(splits[s][0]) for s in ("train", "valid", "test")] == [5, 5, 5]


def test_statistics_come_from_the_training_hours_only():
    rng = np.random.default_rng(0)
    hours = 200
    times = list(pd.date_range("2020-01-01", periods=hours, freq="h").to_pydatetime())
    measured, target = rng.normal(size=(hours, 2)), rng.normal(size=hours)
    measured[5, 1] = np.nan  # forward-filled, flagged
    base = build_windows(measured, ("a", "b"), target, times, target_name="y", units="u", window=10)
    measured_later, target_later = measured.copy(), target.copy()  # change only the valid / test hours
    measured_later[140:] *= 1000.0
    target_later[140:] += 500.0
    changed = build_windows(measured_later, ("a", "b"), target_later, times, target_name="y", units="u", window=10)
    assert base.input_stats == changed.input_stats and base.target_mean == changed.target_mean
    assert torch.equal(base.splits["train"][0], changed.splits["train"][0])
    assert base.input_stats["a"] == pytest.approx((measured[:140, 0].mean(), measured[:140, 0].std()))
    x = base.splits["train"][0]
    b, missing = base.feature_names.index("b"), base.feature_names.index("inputs_missing")
    mean, std = base.input_stats["b"]
    assert x[0, 5, b].item() == pytest.approx((measured[4, 1] - mean) / std, rel=1e-5)
    assert x[0, 5, missing].item() == 1.0 and x[0, 4, missing].item() == 0.0
    no_lag = build_windows(
        measured, ("a", "b"), target, times, target_name="y", units="u", window=10, lagged_target=False
    )
    assert len(no_lag.feature_names) == len(base.feature_names) - 2


@pytest.mark.parametrize(
    "settings, error, message",
    [
        ({"window": 0}, ValueError, "window must be >= 1"),
        ({"window": 2.5}, TypeError, "window must be an int"),
        ({"stride": 0}, ValueError, "stride must be >= 1"),
        ({"stride": True}, TypeError, "stride must be an int"),
        ({"fractions": (0.9, 0.2)}, ValueError, "fractions must be two positive shares summing below 1"),
        ({"fractions": (0.0, 0.2)}, ValueError, "fractions must be two positive shares"),
        ({"fractions": (0.7,)}, ValueError, "fractions must be two shares"),
        ({"fractions": 0.7}, ValueError, "fractions must be two shares"),
        ({"fractions": (0.7, "0.1")}, TypeError, "fractions must hold numbers"),
        ({"fractions": (True, 0.1)}, TypeError, "fractions must hold numbers"),
        ({"lagged_target": "yes"}, TypeError, "lagged_target must be true or false"),
        ({"max_windows": 0}, ValueError, "max_windows must be >= 1"),
        ({"max_windows": 1.0}, TypeError, "max_windows must be an int"),
    ],
)
def test_window_spec_refuses_a_bad_setting_by_name(settings, error, message):
    with pytest.raises(error, match=message):
        HourlyWindowSpec(**settings)


def test_window_spec_normalises_its_settings_and_is_what_build_windows_reads():
    spec = HourlyWindowSpec(window=np.int64(10), fractions=[0.6, 0.2], max_windows=np.int64(3))
    assert (spec.window, spec.stride, spec.train_stride, spec.fractions, spec.max_windows) == (
        10,
        None,
        10,
        (0.6, 0.2),
        3,
    )
    assert type(spec.window) is int and type(spec.max_windows) is int
    assert HourlyWindowSpec.of(spec, stride=4).train_stride == 4 and HourlyWindowSpec.of(spec) is spec
    assert HourlyWindowSpec.of(window=6) == HourlyWindowSpec(window=6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.window = 5
    with pytest.raises(TypeError, match="spec must be a HourlyWindowSpec"):
        HourlyWindowSpec.of({"window": 6})
    with pytest.raises(ValueError, match="window must be >= 1"):
        HourlyWindowSpec.of(spec, window=0)
    rng = np.random.default_rng(1)
    hours = 120
    times = list(pd.date_range("2021-03-01", periods=hours, freq="h").to_pydatetime())
    measured, target = rng.normal(size=(hours, 2)), rng.normal(size=hours)
    table = (measured, ("a", "b"), target, times)
    by_spec = build_windows(*table, spec, target_name="y", units="u")
    by_keywords = build_windows(*table, target_name="y", units="u", window=10, fractions=(0.6, 0.2), max_windows=3)
    assert (
        by_spec.description
        == by_keywords.description
        == ": y (u) from 9 inputs, 10-hour windows, 3/2/2 train/valid/test windows"
    )
    for split in by_spec.splits:
        assert torch.equal(by_spec.splits[split][0], by_keywords.splits[split][0])
    with pytest.raises(TypeError, match="windw"):
        build_windows(*table, target_name="y", units="u", windw=10)


# --------------------------------------------------------------------------- predictive distribution


def test_particle_mixture_samples_and_density_match_the_mixture():
    predictor = PFRNNPredictor(3, 1, cell="pf-lstm", hidden_size=2, encoder_size=4, num_particles=3)
    with torch.no_grad():
        predictor.head.weight.copy_(torch.tensor([[1.0, 0.0]]))
        predictor.head.bias.zero_()
        predictor.log_scale.fill_(math.log(0.5))
    steps, batch = 2, 1
    particles = torch.tensor([-2.0, 0.0, 3.0]).view(1, 3, 1, 1).expand(steps, 3, batch, 1)
    particles = torch.cat([particles, torch.zeros_like(particles)], -1)  # [T, K, B, H]
    weights = torch.tensor([0.2, 0.3, 0.5])
    log_w = weights.log().view(1, 3, 1).expand(steps, 3, batch)
    belief = ParticleBelief(mean=None, particles=particles, log_weights=log_w, state=None)
    with torch.no_grad():
        samples, log_density = predictive_samples(predictor, belief, 40_000, torch.Generator().manual_seed(0))
    assert samples.shape == (40_000, batch, steps, 1)
    centres = np.array([-2.0, 0.0, 3.0])
    mean = (weights.numpy() * centres).sum()
    variance = (weights.numpy() * (0.25 + centres**2)).sum() - mean**2
    assert samples.mean().item() == pytest.approx(mean, abs=0.03)
    assert samples.var().item() == pytest.approx(variance, rel=0.02)
    y = torch.tensor([[[0.7], [-1.5]]])
    expected = [np.log((weights.numpy() * scipy.stats.norm(centres, 0.5).pdf(v)).sum()) for v in (0.7, -1.5)]
    np.testing.assert_allclose(log_density(y)[0].detach().numpy(), expected, rtol=1e-5)


@needs_data
def test_evaluation_scores_observed_hours_in_original_units(air):
    predictor = PFRNNPredictor(15, 1, cell="gru", hidden_size=4, encoder_size=4)
    metrics = evaluate_regression(predictor, air, "valid", num_samples=50)
    x, _, y = air.splits["valid"]
    with torch.no_grad():
        predicted = predictor(x)[..., 0].numpy() * air.target_std + air.target_mean
    observed = y[..., 0].numpy() * air.target_std + air.target_mean
    scored = ~np.isnan(observed)
    assert metrics["valid_hours"] == scored.sum() < observed.size  # the calibration hour is missing
    assert metrics["rmse"] == pytest.approx(np.sqrt(((predicted - observed)[scored] ** 2).mean()), rel=1e-4)
    assert metrics["rmse_normalized"] == pytest.approx(metrics["rmse"] / air.target_std)
    assert metrics["mean_rmse"] == pytest.approx(np.sqrt(((observed[scored] - air.target_mean) ** 2).mean()), rel=1e-5)
    # one Gaussian of scale sigma: its NLPD is the Gaussian's, in original units
    nlpd = -scipy.stats.norm(predicted[scored], air.target_std).logpdf(observed[scored]).mean()
    assert metrics["sigma"] == pytest.approx(air.target_std) and metrics["nlpd"] == pytest.approx(nlpd, rel=1e-4)
    for key in ("coverage_0.9", "width_0.9", "crps", "pit_ks", "mean_ess"):
        assert math.isfinite(metrics[key])
    assert metrics["mean_ess"] == pytest.approx(1.0) and metrics["particle_sd"] == 0.0  # one "particle"


# --------------------------------------------------------------------------- missing targets in the loss


def test_missing_targets_are_not_scored_but_still_filtered_through():
    torch.manual_seed(0)
    predictor = PFRNNPredictor(3, 1, cell="lstm", hidden_size=5, encoder_size=4)
    x, y = torch.randn(2, 6, 3), torch.randn(2, 6, 1)
    y[0, 2] = y[1, 0] = y[1, 5] = float("nan")
    out = DiscriminativeLoss(predictor, elbo_weight=0.0, missing_targets=True)(x, None, y)
    with torch.no_grad():
        prediction = predictor(x)
    scored = ~torch.isnan(y)
    expected = ((prediction - y)[scored] ** 2).sum() / scored.sum()
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert out.num_steps.tolist() == [5, 4]
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in predictor.parameters() if p.grad is not None)
    with pytest.raises(ValueError, match="finite"):
        DiscriminativeLoss(predictor)(x, None, y)  # off by default
    with pytest.raises(TypeError, match="missing_targets"):
        DiscriminativeLoss(predictor, missing_targets="yes")
    classifier = PFRNNPredictor(3, 4, cell="lstm", hidden_size=5, task="classification")
    with pytest.raises(ValueError, match="missing_targets"):
        DiscriminativeLoss(classifier, target="last", missing_targets=True)


# --------------------------------------------------------------------------- runner and bad input


def _sets(*items):
    return [arg for item in items for arg in ("--set", item)]


@needs_data
def test_runner_end_to_end_writes_rmse_and_calibration(tmp_path):
    tiny = (
        "data.max_windows=4",
        "data.window=8",
        "data.stride=8",
        "model.hidden_size=6",
        "model.encoder_size=6",
        "train.epochs=1",
        "train.batch_size=4",
    )
    run = tmp_path / "air"
    assert cli.main(["train", "pfrnn-air", "--run-dir", str(run), *_sets(*tiny, "model.num_particles=3")]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    for key in (
        "rmse",
        "rmse_normalized",
        "crps",
        "crps_normalized",
        "nlpd",
        "coverage_0.9",
        "width_0.9",
        "pit_ks",
        "persistence_rmse",
    ):
        assert math.isfinite(metrics[key]), key
    assert metrics["num_particles"] == 3 and metrics["units"] == "ug/m3" and 0 < metrics["test_hours"] <= 32
    for plot in ("pit_ecdf.png", "predictive_bands.png", "learning_curve.png"):
        assert (run / "plots" / plot).stat().st_size > 0
    # one config serves the baselines: the particle-only options are dropped for lstm / gru
    config = load_supervised_config(experiment_config("pfrnn-pm25"), ['model.cell="lstm"'])
    assert config["model"] == {"cell": "lstm", "hidden_size": 50, "encoder_size": 64, "learn_scale": True}


@needs_data
@pytest.mark.parametrize(
    "options, error, name",
    [
        ({"window": 0}, ValueError, "window"),
        ({"window": 2.5}, TypeError, "window"),
        ({"window": 9000}, ValueError, "window"),
        ({"stride": 0}, ValueError, "stride"),
        ({"fractions": (0.9, 0.2)}, ValueError, "fractions"),
        ({"fractions": (0.7,)}, ValueError, "fractions"),
        ({"lagged_target": "yes"}, TypeError, "lagged_target"),
        ({"max_windows": 0}, ValueError, "max_windows"),
        ({"target": "O3"}, ValueError, "target"),
    ],
)
def test_bad_options_name_the_argument(options, error, name):
    with pytest.raises(error, match=name):
        air_quality_regression(**options)


def test_bad_data_folder_and_config_keys(tmp_path, capsys):
    with pytest.raises(ValueError, match="data_dir"):
        pm25_regression(data_dir=tmp_path)
    with pytest.raises(ValueError, match="stride"):
        pm25_regression(stride=-1, data_dir=tmp_path)  # options are checked before any file is read
    assert cli.main(["train", "pfrnn-air", "--run-dir", str(tmp_path / "x"), "--set", "data.windw=8"]) != 0
    assert "unknown keys in [data]" in capsys.readouterr().err


# --------------------------------------------------------------------------- the optional classification task


def test_japanese_vowels_task_against_sktimes_own_data(tmp_path):
    datasets = pytest.importorskip("sktime.datasets")
    from ppl_models.experiments.tasks.uea_classification import japanese_vowels

    raw_train, labels_train = datasets.load_japanese_vowels(split="train", return_X_y=True)
    raw_test, labels_test = datasets.load_japanese_vowels(split="test", return_X_y=True)

    def arrays(frame):
        return [np.column_stack([frame.iloc[i, c].to_numpy() for c in range(12)]) for i in range(len(frame))]

    train_arrays, test_arrays = arrays(raw_train), arrays(raw_test)
    data, splits = japanese_vowels()
    assert data.num_classes == 9 and [len(splits[s][2]) for s in ("train", "valid", "test")] == [216, 54, 370]
    assert np.bincount(splits["valid"][2].numpy()).tolist() == [6] * 9  # stratified hold-out
    x, mask, y = splits["test"]
    assert x.shape == (370, 29, 12) and mask.sum(1).tolist() == [len(a) for a in test_arrays]
    assert [data.classes[i] for i in y] == list(np.asarray(labels_test).astype(str))
    # statistics from the frames of the training utterances that are not held out
    restored = [(x_i[m_i] * data.std + data.mean).numpy() for x_i, m_i in zip(*splits["train"][:2])]
    fingerprints = {round(float(a.sum()), 3): a for a in train_arrays}
    matched = [fingerprints[round(float(r.sum()), 3)] for r in restored]
    for r, a in zip(restored, matched):
        np.testing.assert_allclose(r, a, rtol=1e-4, atol=1e-4)
    frames = np.concatenate(matched)
    np.testing.assert_allclose(data.mean.numpy(), frames.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data.std.numpy(), frames.std(0), rtol=1e-5)
    np.testing.assert_allclose(
        (x[0, : len(test_arrays[0])] * data.std + data.mean).numpy(), test_arrays[0], rtol=1e-4, atol=1e-4
    )
    with pytest.raises(ValueError, match="valid_fraction"):
        japanese_vowels(valid_fraction=1.0)
    with pytest.raises(ValueError, match="max_sequences"):
        japanese_vowels(max_sequences=0)
    run = tmp_path / "vowels"
    tiny = (
        "data.max_sequences=12",
        "model.hidden_size=6",
        "model.encoder_size=6",
        "model.num_particles=3",
        "train.epochs=1",
        "train.batch_size=6",
    )
    assert cli.main(["train", "pfrnn-vowels", "--run-dir", str(run), *_sets(*tiny)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0 <= metrics["accuracy"] <= 1 and math.isfinite(metrics["nll"]) and metrics["test_sequences"] == 12
    assert (run / "plots" / "reliability.png").stat().st_size > 0

"""Many-steps-ahead forecasts: one-step predictors fed their own draws, particle models, the report; a run trained on a
file forecasts that file and a new one in its own units, and a checkpoint of another run is refused."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from factories import SITE_COLUMNS, set_args, sites_file

from ppl_models import LinearGaussianSSM
from ppl_models.experiments import cli, forecasting, runner
from ppl_models.experiments.config import load_config
from ppl_models.experiments.registry import experiment_config
from ppl_models.experiments.tasks.covid import covid_deaths
from ppl_models.inference.recalibration import coverage_by_step
from ppl_models.predictors import OneStepPredictor


class _Persistence(OneStepPredictor):
    """Predicts x_t = x_{t-1} + 1 with a tiny noise: forecasts must climb by one per step."""

    def __init__(self):
        super().__init__(obs_dim=1, state_dim=1)
        with torch.no_grad():
            self.decoder.weight.fill_(1.0)
            self.decoder.bias.fill_(1.0)
            self.log_noise_scale.fill_(-12.0)

    def states(self, x):
        return torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)


def test_one_step_predictors_feed_their_own_draws_back():
    prefix = torch.tensor([[[2.0], [5.0]], [[0.0], [-1.0]]])
    paths = _Persistence().forecast(prefix, None, horizon=3, num_samples=4)
    assert paths.shape == (4, 2, 3, 1)
    expected = torch.tensor([[6.0, 7.0, 8.0], [0.0, 1.0, 2.0]]).unsqueeze(-1)
    torch.testing.assert_close(paths, expected.expand(4, 2, 3, 1), atol=1e-3, rtol=0)


def test_particle_model_forecasts_follow_the_kalman_predictive():
    model = LinearGaussianSSM.random(1, 1, generator=torch.Generator().manual_seed(2))
    x, _ = model.sample(1, 30, generator=torch.Generator().manual_seed(3))
    paths = model.forecast(
        x, None, horizon=2, num_samples=4000, num_particles=2000, generator=torch.Generator().manual_seed(0)
    )
    # the exact two-step predictive mean: C A^h E[z_T | x_{1:T}] from the Kalman filter
    filtered = model.kalman_filter(x).filtered_means[:, -1]  # [1, 1]
    for h in (1, 2):
        mean = filtered @ torch.linalg.matrix_power(model.A, h).T @ model.C.T
        assert paths[:, 0, h - 1].mean().item() == pytest.approx(mean.item(), abs=0.1)


def test_forecast_command_writes_the_report(tmp_path, capsys):
    config = load_config(
        experiment_config("smct-demo"), ["data.num_samples=50", "train.epochs=1", "evaluate.predictive_samples=10"]
    )
    config["device"] = "cpu"
    runner.train(config, tmp_path / "smct")
    out = tmp_path / "report"
    assert (
        cli.main(
            [
                "forecast",
                f"SMC-T={tmp_path / 'smct'}",
                "--out",
                str(out),
                "--observed",
                "20",
                "--horizon",
                "5",
                "--samples",
                "30",
                "--particles",
                "10",
            ]
        )
        == 0
    )
    report = json.loads((out / "forecast.json").read_text())
    row = report["metrics"]["SMC-T"]
    assert report["observed"] == 20 and report["horizon"] == 5 and row["model"] == "smc-transformer"
    assert 0 <= row["coverage_0.8"] <= 1 and row["crps"] > 0 and (out / "forecast.png").is_file()
    assert "| SMC-T | 0 |" in capsys.readouterr().out
    # each test sequence's own observation variance, fitted by EM on its 20 observed steps
    assert (
        cli.main(
            [
                "forecast",
                f"SMC-T={tmp_path / 'smct'}",
                "--out",
                str(out),
                "--observed",
                "20",
                "--horizon",
                "5",
                "--samples",
                "30",
                "--particles",
                "10",
                "--em-iterations",
                "3",
                "--em-sites",
                "x",
            ]
        )
        == 0
    )
    assert json.loads((out / "forecast.json").read_text())["metrics"]["SMC-T"]["em_iterations"] == 3
    assert "| SMC-T | 3 |" in capsys.readouterr().out
    assert cli.main(["forecast", f"SMC-T={tmp_path / 'smct'}", "--out", str(out), "--observed", "25"]) == 2
    # recalibrated on the validation split: a second row, and coverage per step ahead in every row
    assert (
        cli.main(
            [
                "forecast",
                f"SMC-T={tmp_path / 'smct'}",
                "--out",
                str(out),
                "--observed",
                "20",
                "--horizon",
                "5",
                "--samples",
                "30",
                "--particles",
                "10",
                "--recalibrate",
                "scale",
            ]
        )
        == 0
    )
    metrics = json.loads((out / "forecast.json").read_text())["metrics"]
    assert metrics["SMC-T"]["recalibration"] == "none"
    assert metrics["SMC-T + scale"]["recalibration"] == "scale (pooled, validation split)"
    assert metrics["SMC-T"]["crps"] == row["crps"]  # the raw forecasts do not change
    for rates in metrics["SMC-T + scale"]["coverage_by_step"].values():
        assert len(rates) == 5 and all(0 <= r <= 1 for r in rates)
    assert "| SMC-T + scale | 0 | scale (pooled, validation split) |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        cli.main(["forecast", f"SMC-T={tmp_path / 'smct'}", "--out", str(out), "--recalibrate", "isotonic"])
    assert exited.value.code == 2
    with pytest.raises(ValueError, match="recalibrate"):
        forecasting.ForecastSpec(recalibrate="isotonic")


def test_coverage_by_step_counts_each_step_alone():
    samples = torch.arange(1.0, 101.0).reshape(100, 1, 1, 1).expand(100, 4, 2, 1)  # values 1..100
    # step 1: outcomes 50, 50, 50, 99 (three inside the central 80%, 10.9..90.1); step 2: all 5, outside
    observed = torch.tensor([[50.0, 5.0], [50.0, 5.0], [50.0, 5.0], [99.0, 5.0]]).unsqueeze(-1)
    assert coverage_by_step(samples, observed, levels=(0.8,)) == {0.8: [0.75, 0.0]}


@pytest.mark.parametrize("transform", ["sqrt", "log1p"])
def test_covid_transforms_map_back_to_the_scaled_counts(transform):
    plain, changed = covid_deaths(), covid_deaths(transform=transform)
    x, scaled = changed.test[0], plain.test[0]
    assert float(x[:, :40].max()) == pytest.approx(1.0)  # observed days in [0, 1]
    torch.testing.assert_close(changed.untransform(x), scaled, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(changed.to_deaths(x), plain.to_deaths(scaled), atol=1e-3, rtol=1e-5)
    # by hand for one value: sqrt: d / M = x^2; log1p: d / M = expm1(x log1p(M)) / M; negatives are 0 deaths
    m = changed.scales["test"][0]
    value = torch.full((1, len(changed.scales["test"]), 1, 1), 0.5)
    expected = 0.25 if transform == "sqrt" else float(torch.expm1(0.5 * m.log1p()) / m)
    assert changed.untransform(value)[0, 0, 0, 0].item() == pytest.approx(expected, rel=1e-5)
    assert float(changed.untransform(-value).abs().max()) == 0.0
    with pytest.raises(ValueError, match="transform"):
        covid_deaths(transform="log")


# --- forecasts of a run trained on a file -------------------------------------------------------------------------
TINY_GRU = [
    "train.epochs=1",
    "train.batch_size=4",
    "model.rnn_dim=8",
    "model.hidden_dim=8",
    "evaluate.predictive_samples=10",
]


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    """A one-epoch GRU trained by name on a file: ``(file, run folder)``."""
    folder = tmp_path_factory.mktemp("gru")
    data = sites_file(folder / "sites.csv")
    run = folder / "run"
    assert (
        cli.main(["train", "gru", "--data", str(data), "--run-dir", str(run), *SITE_COLUMNS, *set_args(TINY_GRU)]) == 0
    )
    return data, run


def test_a_run_on_a_file_forecasts_that_file_and_a_new_one_in_its_own_units(gru_run, tmp_path, capsys):
    data, run = gru_run
    other = sites_file(tmp_path / "other.csv", shift=50.0, seed=1)  # the same columns, other values
    for path in (data, other):
        out = tmp_path / f"forecast-{path.stem}"
        assert (
            cli.main(
                ["forecast", f"gru={run}", "--data", str(path), "--observed", "8", "--samples", "20", "--out", str(out)]
            )
            == 0
        ), capsys.readouterr().err
        assert np.isfinite(json.loads((out / "forecast.json").read_text())["metrics"]["gru"]["crps"])
    _, loaded, _ = forecasting.load_run("gru", run, "cpu", other)
    # the trained model's units: the training file's training series, not the new file's
    frame = pd.read_csv(data)
    train_ids = json.loads((run / "data_split.json").read_text())["train"]["ids"]
    expected = frame[frame["site"].isin(train_ids)][["a", "b", "y"]]
    assert loaded.standardizer.mean == pytest.approx(expected.mean().tolist())
    assert loaded.standardizer.scale == pytest.approx(expected.std(ddof=0).tolist())
    # the new file's test series come back as they are in the file
    new = pd.read_csv(other).sort_values(["site", "step"])
    test_ids = loaded.split_record["test"]["ids"]
    truth = np.stack([new[new["site"] == site][["a", "b", "y"]].to_numpy() for site in test_ids])
    restored = loaded.standardizer.inverse(loaded.test[0].double())
    np.testing.assert_allclose(restored.numpy(), truth, rtol=1e-5, atol=1e-4)


def test_a_checkpoint_of_another_run_is_still_refused_with_data(gru_run, tmp_path, capsys):
    data, run = gru_run
    copied = tmp_path / "run"
    shutil.copytree(run, copied)
    best = copied / "checkpoints" / "best.pt"
    checkpoint = torch.load(best, weights_only=True)
    checkpoint["experiment"]["data"]["path"] = "another.csv"  # a best.pt of a run on another file
    torch.save(checkpoint, best)
    assert (
        cli.main(
            [
                "forecast",
                f"gru={copied}",
                "--data",
                str(data),
                "--observed",
                "8",
                "--samples",
                "20",
                "--out",
                str(tmp_path / "f"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another.csv" in err and "different runs" in err

"""Many-steps-ahead forecasts: one-step predictors fed their own draws, particle models, the report."""

import json

import pytest
import torch

from experiments import cli, runner
from experiments.config import load_config
from experiments.registry import experiment_config
from ppl_models import LinearGaussianSSM
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
    paths = model.forecast(x, None, horizon=2, num_samples=4000, num_particles=2000,
                           generator=torch.Generator().manual_seed(0))  # fmt: skip
    # the exact two-step predictive mean: C A^h E[z_T | x_{1:T}] from the Kalman filter
    filtered = model.kalman_filter(x).filtered_means[:, -1]  # [1, 1]
    for h in (1, 2):
        mean = filtered @ torch.linalg.matrix_power(model.A, h).T @ model.C.T
        assert paths[:, 0, h - 1].mean().item() == pytest.approx(mean.item(), abs=0.1)


def test_forecast_command_writes_the_report(tmp_path, capsys):
    config = load_config(experiment_config("smct-demo"), ["data.num_samples=50", "train.epochs=1",
                                                          "evaluate.predictive_samples=10"])  # fmt: skip
    config["device"] = "cpu"
    runner.train(config, tmp_path / "smct")
    out = tmp_path / "report"
    assert cli.main(["forecast", f"SMC-T={tmp_path / 'smct'}", "--out", str(out), "--observed", "20",
                     "--horizon", "5", "--samples", "30", "--particles", "10"]) == 0  # fmt: skip
    report = json.loads((out / "forecast.json").read_text())
    row = report["metrics"]["SMC-T"]
    assert report["observed"] == 20 and report["horizon"] == 5 and row["model"] == "smc-transformer"
    assert 0 <= row["coverage_0.8"] <= 1 and row["crps"] > 0 and (out / "forecast.png").is_file()
    assert "| SMC-T | 0 |" in capsys.readouterr().out
    # each test sequence's own observation variance, fitted by EM on its 20 observed steps
    assert cli.main(["forecast", f"SMC-T={tmp_path / 'smct'}", "--out", str(out), "--observed", "20",
                     "--horizon", "5", "--samples", "30", "--particles", "10", "--em-iterations", "3",
                     "--em-sites", "x"]) == 0  # fmt: skip
    assert json.loads((out / "forecast.json").read_text())["metrics"]["SMC-T"]["em_iterations"] == 3
    assert "| SMC-T | 3 |" in capsys.readouterr().out
    assert cli.main(["forecast", f"SMC-T={tmp_path / 'smct'}", "--out", str(out), "--observed", "25"]) == 2

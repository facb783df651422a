"""The example model of docs/write_your_own_model.md, run as it is on the page: protocol, exact truth, CLI."""

import importlib
import json
import math
import re
from pathlib import Path

import pytest
import torch

from ppl_models.experiments import cli
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE

PAGE = Path(__file__).resolve().parents[2] / "docs" / "write_your_own_model.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.fixture
def sv_module(tmp_path, monkeypatch):
    """The page's python block as the module ``my_models`` (the name its TOML block uses)."""
    (code,) = [block for block in _blocks("python") if "class StochasticVolatility" in block]
    (tmp_path / "my_models.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("my_models")
    yield module
    monkeypatch.delitem(__import__("sys").modules, "my_models")


def test_the_example_is_about_forty_lines(sv_module):
    (code,) = [block for block in _blocks("python") if "class StochasticVolatility" in block]
    assert len([line for line in code.splitlines() if line.strip()]) <= 45


def test_the_example_answers_the_protocol(sv_module):
    model = sv_module.StochasticVolatility(2)
    torch.manual_seed(0)
    x = model.generate(12, num_sequences=3).x
    assert x.shape == (3, 12, 2)
    assert model.supports("generate") and not model.supports("exact")
    step = model.predictive(x, None, 5)
    assert step.samples.shape == (5, 3, 12, 2) and step.log_density.shape == (3, 12)
    assert model.forecast(x, None, 4, 6).shape == (6, 3, 4, 2)
    assert model.generate(3, prefix=x[:, :5]).x.shape == (3, 8, 2)


def _exact_iid_log_likelihood(x, mu, sigma):
    """``sum_t log ∫ N(x_t; 0, e^z) N(z; mu, sigma^2) dz`` by the trapezoid rule on a fine grid (phi = 0)."""
    z = torch.linspace(mu - 10 * sigma, mu + 10 * sigma, 20001, dtype=torch.float64)
    log_prior = torch.distributions.Normal(mu, sigma).log_prob(z)
    x = x.double().unsqueeze(-1)  # [B, T, D, 1]
    log_joint = torch.distributions.Normal(0.0, (0.5 * z).exp()).log_prob(x) + log_prior
    weights = torch.full_like(z, float(z[1] - z[0]))
    weights[[0, -1]] /= 2
    return torch.logsumexp(log_joint + weights.log(), -1).sum((1, 2))  # [B]


def test_the_example_meets_its_exact_likelihood(sv_module):
    model = sv_module.StochasticVolatility(1, phi=0.0, sigma=0.7)
    with torch.no_grad():
        model.mu.fill_(-0.5)
        model.guide_shift[0].fill_(0.1)  # a guide that leans a little towards log x_t^2
    torch.manual_seed(1)
    x = model.generate(40, num_sequences=4).x
    exact = _exact_iid_log_likelihood(x, -0.5, 0.7).float()
    with torch.no_grad():
        smc = ParticleFilter(4000, generator=torch.Generator().manual_seed(2)).run(model, x).log_evidence
        elbo = torch.stack([ELBO(model)(x).bound for _ in range(40)])
        iwae = torch.stack([IWAE(model, 50)(x).bound for _ in range(40)])
    assert torch.allclose(smc, exact, atol=0.1)
    # both are bounds in expectation: their means stay below the truth beyond Monte Carlo error, IWAE above ELBO
    for draws in (elbo, iwae):
        assert bool((draws.mean(0) < exact + 3 * draws.std(0) / 40**0.5).all())
    assert bool((iwae.mean(0) > elbo.mean(0)).all())


def test_the_example_gets_the_command_line(sv_module, tmp_path, capsys):
    (toml,) = _blocks("toml")
    config = tmp_path / "my_sv.toml"
    config.write_text(toml.replace("epochs = 5", "epochs = 1"))
    run_dir = tmp_path / "run"
    assert (
        cli.main(
            [
                "train",
                str(config),
                "--run-dir",
                str(run_dir),
                "--set",
                "evaluate.num_particles=200",
                "--set",
                "evaluate.iwae_particles=20",
                "--set",
                "evaluate.predictive_samples=50",
            ]
        )
        == 0
    )
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["loglik"]) >= {"elbo", "iwae-20", "smc-200", "exact (true parameters)"}
    assert all(math.isfinite(v["per_step"]) for v in metrics["loglik"].values())
    assert 0 <= metrics["calibration"]["coverage_0.8"] <= 1 and (run_dir / "predictive.nc").is_file()
    assert "smc-200" in capsys.readouterr().out

"""Long runs, skipped by default (``pytest -m slow``): the full demo experiment."""

import pytest

from ppl_models.experiments import registry, runner
from ppl_models.experiments.config import load_config

pytestmark = pytest.mark.slow


def test_full_lgssm_demo_learns_the_true_likelihood_and_orders_the_bounds(tmp_path):
    config = load_config(registry.EXPERIMENTS["lgssm-demo"].build, ["device='cpu'", "train.progress=false"])
    loglik = runner.train(config, tmp_path / "run")["loglik"]
    per_step = {k: v["per_step"] for k, v in loglik.items()}
    assert per_step["exact (true parameters)"] - per_step["exact"] < 0.05  # learnt from a wrong start
    assert per_step["elbo"] < per_step["iwae-100"] < per_step["exact"]
    assert abs(per_step["smc-1000"] - per_step["exact"]) < 0.01

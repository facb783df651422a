"""Evaluation of data with covariate columns scores the targets only: MSE, nats, calibration draws."""

import math

import torch

from ppl_models import GRUBaseline
from ppl_models.covariate_model import CovariateInputs
from ppl_models.inference.data import Standardizer
from ppl_models.inference.data.covariates import CovariateLayout
from ppl_models.inference.evaluation import evaluate, one_step_mse

LAYOUT = CovariateLayout(("y",), ("c",), ("p",))
STANDARDIZER = Standardizer([1.0, -2.0, 0.5], [2.0, 5.0, 0.1], ["y", "c", "p"])


def _data():
    torch.manual_seed(0)
    x = torch.randn(3, 7, 3)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[2, 5:] = False
    return x, mask


def test_a_wrapped_models_figures_are_those_of_the_target_column_by_hand():
    x, mask = _data()
    inner = GRUBaseline(3, emission="gaussian", rnn_dim=4, hidden_dim=4).eval()
    model = CovariateInputs(inner, LAYOUT)
    result = evaluate(model, x, mask, estimators=["exact"], predictive_samples=20, standardizer=STANDARDIZER, seed=0)
    with torch.no_grad():
        exact = inner.predictive_distribution(x, mask)
    loc, scale = exact.base_dist.loc[..., 0], exact.base_dist.scale[..., 0]
    mse = ((loc - x[..., 0]) * 2.0)[mask].pow(2).mean()  # in the data's units: scale 2 of y
    nats = torch.distributions.Normal(loc, scale).log_prob(x[..., 0])[mask] - math.log(2.0)
    assert math.isclose(result["mse"], float(mse), rel_tol=1e-5)
    assert math.isclose(result["loglik"]["exact"]["per_step"], float(nats.mean()), rel_tol=1e-5)
    assert result.x.shape[-1] == 1 and result.predictive.shape[-1] == 1  # the calibration reads y only
    torch.testing.assert_close(result.x[..., 0][mask], (x[..., 0] * 2.0 + 1.0)[mask].double())
    assert math.isclose(one_step_mse(model, x, mask, standardizer=STANDARDIZER), float(mse), rel_tol=1e-5)


def test_data_that_carry_a_layout_are_scored_on_their_targets_even_for_a_model_of_every_column():
    x, mask = _data()
    model = GRUBaseline(3, emission="gaussian", rnn_dim=4, hidden_dim=4).eval()
    result = evaluate(model, x, mask, estimators=["exact"], predictive_samples=0, covariates=LAYOUT)
    mean = model.predictive(x, mask, 0).mean
    assert math.isclose(result["mse"], float((mean[..., 0] - x[..., 0])[mask].pow(2).mean()), rel_tol=1e-5)
    assert "GRUBaseline's of every column" in result["scored_columns"]

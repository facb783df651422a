"""Recurrent latent models (SRNN, VRNN) that read covariates as inputs: their emission scores the targets only, and
their forecasts draw the targets given the known covariates ahead."""

import numpy as np
import pytest
import torch
from scipy import stats

from ppl_models import SRNN, VRNN
from ppl_models.inference import Unsupported
from ppl_models.inference.data.covariates import CovariateLayout
from ppl_models.nets import emission_distribution

LAYOUT = CovariateLayout(("y",), ("c",))


def test_an_emission_of_the_targets_only_scores_them_and_never_reads_the_covariates():
    log_rate = torch.tensor([[0.5, 1.0], [2.0, -1.0]], dtype=torch.float64)
    value = torch.tensor([[3.0, -0.37], [6.0, 12.5]], dtype=torch.float64)  # a real, negative covariate
    got = emission_distribution("poisson", log_rate, scored_columns=1).log_prob(value)
    want = stats.poisson.logpmf(value[:, 0].numpy(), np.exp(log_rate[:, 0].numpy()))
    assert np.allclose(got.numpy(), want, rtol=1e-12)
    params = torch.tensor([[0.2, -0.3, 0.0, 0.4]], dtype=torch.float64)  # gaussian: means, then log-variances
    got = emission_distribution("gaussian", params, scored_columns=1).log_prob(torch.tensor([[1.0, 99.0]]).double())
    assert np.allclose(got.numpy(), stats.norm.logpdf(1.0, 0.2, 1.0), rtol=1e-12)


def _models():
    torch.manual_seed(0)
    return [
        SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=6, hidden_dim=6),
        VRNN(2, emission="gaussian", latent_dim=2, rnn_dim=6, hidden_dim=6),
    ]


@pytest.mark.parametrize("index", [0, 1], ids=["srnn", "vrnn"])
def test_the_forecast_draws_the_targets_given_the_covariates_ahead(index):
    model = _models()[index].eval()
    model.read_covariates(LAYOUT)
    assert model.modelled_features == 1 and not model.supports("forecast") and not model.supports("generate")
    with pytest.raises(Unsupported, match="forecast_given"):
        model.forecast(torch.randn(2, 6, 2), None, 3)
    x = torch.randn(2, 6, 2, generator=torch.Generator().manual_seed(1))

    def draws(future):  # the filter's proposals draw from torch's global generator, the rest from the one given
        torch.manual_seed(3)
        return model.forecast_given(x, None, future, 3, 50, num_particles=8, generator=torch.Generator().manual_seed(2))

    low, high = torch.full((2, 3, 1), -5.0), torch.full((2, 3, 1), 5.0)
    paths = draws(low)
    assert paths.shape == (50, 2, 3, 1) and torch.equal(paths, draws(low))  # the seeds decide the draws
    shifted = high.clone()
    shifted[:, 0] = -5.0  # only the rows the draws of steps 2 and 3 read change
    assert torch.equal(draws(shifted)[:, :, 0], paths[:, :, 0])  # step 1 reads the last row: future[:, 0] alike
    assert not torch.allclose(draws(shifted)[:, :, 1:], paths[:, :, 1:])  # the later steps read the covariates ahead
    assert not torch.allclose(draws(high)[:, :, 0], paths[:, :, 0])  # and step 1 reads future[:, 0], not x's value


def test_a_count_emission_beside_a_real_covariate_scores_and_checks_the_counts_only():
    torch.manual_seed(0)
    model = SRNN(2, emission="poisson", latent_dim=2, rnn_dim=4, hidden_dim=4, count_scale=[3.0, 1.0])
    model.read_covariates(LAYOUT)
    x = torch.stack([torch.poisson(torch.full((3, 5), 2.0)), torch.randn(3, 5)], -1)  # counts, then a real value
    model.check_values(x, torch.ones(3, 5, dtype=torch.bool))  # no error: the covariate is not a count
    with pytest.raises(ValueError, match="non-negative integers"):
        model.check_values(x + torch.tensor([0.5, 0.0]), torch.ones(3, 5, dtype=torch.bool))
    from ppl_models.inference import ParticleFilter

    result = ParticleFilter(16, generator=torch.Generator().manual_seed(0)).run(model, x)
    assert bool(torch.isfinite(result.log_evidence).all())


def test_a_layout_that_does_not_fit_the_columns_is_refused():
    with pytest.raises(ValueError, match="layout: expected 2 columns"):
        _models()[0].read_covariates(CovariateLayout(("y",), ("c", "d")))

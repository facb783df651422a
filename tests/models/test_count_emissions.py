"""Count emissions (Poisson, negative binomial) of the shared emission code, against scipy and closed forms; the
models that take them draw integers, the others refuse them with their reason."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from ppl_models import PSRNN, SRNN, VRNN, GRUBaseline, RecurrentPredictor, SMCTransformer
from ppl_models.inference import Unsupported
from ppl_models.nets import draw_emission, emission_distribution, emission_params

COUNTS = torch.tensor([[0.0, 1.0, 3.0], [7.0, 0.0, 25.0]])


def test_poisson_log_probability_is_scipys():
    log_rate = torch.tensor([[0.2, -1.0, 1.5], [2.0, 0.0, 3.1]], dtype=torch.float64)
    got = emission_distribution("poisson", log_rate).log_prob(COUNTS.double())
    want = stats.poisson.logpmf(COUNTS.numpy(), np.exp(log_rate.numpy())).sum(-1)
    assert np.allclose(got.numpy(), want, rtol=1e-10)


def test_negative_binomial_log_probability_is_scipys():
    log_mean = np.array([[0.2, -1.0, 1.5], [2.0, 0.0, 3.1]])
    log_dispersion = np.array([[0.0, 2.0, -0.7], [1.1, -2.0, 0.4]])
    params = torch.tensor(np.concatenate([log_mean, log_dispersion], -1))
    got = emission_distribution("negbin", params).log_prob(COUNTS.double())
    mean, r = np.exp(log_mean), np.exp(log_dispersion)
    want = stats.nbinom.logpmf(COUNTS.numpy(), r, r / (r + mean)).sum(-1)  # scipy: successes r, success prob p
    assert np.allclose(got.numpy(), want, rtol=1e-10)
    assert np.allclose(emission_distribution("negbin", params).mean.numpy(), mean)


def test_sizes_of_the_net_outputs():
    assert [emission_params(kind, 5) for kind in ("bernoulli", "gaussian", "poisson", "negbin")] == [5, 10, 5, 10]


def test_count_draws_with_a_generator_are_integers_with_the_closed_form_moments():
    mean, r = math.exp(1.0), math.exp(-0.5)  # variance mu + mu^2 / r, overdispersed
    params = torch.tensor([1.0, -0.5], dtype=torch.float64).expand(200_000, 2)
    draws, means = draw_emission("negbin", params, torch.Generator().manual_seed(0))
    assert torch.equal(draws, draws.round()) and bool((draws >= 0).all())
    assert torch.allclose(means, torch.full_like(means, mean))
    assert abs(float(draws.mean()) - mean) < 0.03 * mean
    assert abs(float(draws.var()) - (mean + mean**2 / r)) < 0.05 * (mean + mean**2 / r)
    again, _ = draw_emission("negbin", params, torch.Generator().manual_seed(0))
    assert torch.equal(again, draws)  # the generator decides the draws
    poisson, rate = draw_emission("poisson", torch.full((200_000, 1), 0.5, dtype=torch.float64), None)
    assert torch.equal(poisson, poisson.round()) and abs(float(poisson.var()) - math.exp(0.5)) < 0.05


def test_gaussian_and_bernoulli_draws_are_the_formulas_they_were():
    params = torch.tensor([[0.3, -1.2, 0.5, -0.4]])
    draw, mean = draw_emission("gaussian", params, torch.Generator().manual_seed(3))
    noise = torch.randn((1, 2), generator=torch.Generator().manual_seed(3))
    assert torch.equal(draw, params[:, :2] + (0.5 * params[:, 2:]).exp() * noise) and torch.equal(mean, params[:, :2])
    draw, probs = draw_emission("bernoulli", params, torch.Generator().manual_seed(3))
    want = torch.bernoulli(torch.sigmoid(params), generator=torch.Generator().manual_seed(3))
    assert torch.equal(draw, want) and torch.equal(probs, torch.sigmoid(params))


def _counts(batch=3, steps=6, dim=2):
    return torch.poisson(torch.full((batch, steps, dim), 2.0), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("emission", ["poisson", "negbin"])
@pytest.mark.parametrize(
    "make",
    [
        lambda e: GRUBaseline(2, emission=e, rnn_dim=4, hidden_dim=4),
        lambda e: VRNN(2, emission=e, latent_dim=2, rnn_dim=4, hidden_dim=4),
        lambda e: SRNN(2, emission=e, latent_dim=2, rnn_dim=4, hidden_dim=4),
    ],
    ids=["gru", "vrnn", "srnn"],
)
def test_models_with_a_count_emission_forecast_integers(make, emission):
    torch.manual_seed(0)
    model = make(emission).eval()
    x = _counts()
    paths = model.forecast(x, None, 4, 5, num_particles=3, generator=torch.Generator().manual_seed(0))
    assert paths.shape == (5, 3, 4, 2)
    assert torch.equal(paths, paths.round()) and bool((paths >= 0).all())
    predictive = model.predictive(x, None, 4, num_particles=3)
    assert torch.equal(predictive.samples, predictive.samples.round()) and bool((predictive.mean > 0).all())
    with pytest.raises(ValueError, match="non-negative integers"):
        model.predictive(x + 0.5, None, 2, num_particles=3)


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: SMCTransformer(1, emission="poisson"), "Gaussian by construction"),
        (lambda: RecurrentPredictor(2, emission="negbin"), "Gaussian noise around a decoded mean"),
        (lambda: PSRNN(2, emission="poisson"), "Gaussian noise around a decoded mean"),
    ],
    ids=["smc-transformer", "recurrent", "psrnn"],
)
def test_models_without_a_count_emission_refuse_it_with_their_reason(make, reason):
    with pytest.raises(Unsupported, match=f"has no (poisson|negbin) emission \\(counts\\): .*{reason}"):
        make()

"""Count emissions (Poisson, negative binomial) of the shared emission code, against scipy and closed forms; the
models that take them draw integers, the others refuse them with their reason."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from ppl_models import PSRNN, SRNN, VRNN, GRUBaseline, RecurrentPredictor, SMCTransformer
from ppl_models.inference import Unsupported
from ppl_models.nets import draw_emission, emission_distribution, emission_params, shifted_inputs

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


def test_a_count_scale_reads_counts_over_it_and_multiplies_the_rates_by_it():
    """DeepAR's scale by hand: the scaled GRU's Poisson at ``x`` is the unscaled one's rates at ``x / s``, times s."""
    torch.manual_seed(0)
    scale = torch.tensor([300.0, 2.0])
    plain = GRUBaseline(2, emission="poisson", rnn_dim=4, hidden_dim=4)
    scaled = GRUBaseline(2, emission="poisson", rnn_dim=4, hidden_dim=4, count_scale=scale.tolist())
    scaled.load_state_dict({**plain.state_dict(), "count_scale.scale": scale})
    x = torch.poisson(scale.expand(3, 6, 2), generator=torch.Generator().manual_seed(1))
    want_rate = plain.step_distribution(plain.rnn(shifted_inputs(x / scale))[0]).mean * scale
    got = scaled.predictive_distribution(x)
    assert torch.allclose(got.mean, want_rate, rtol=1e-5)
    want = stats.poisson.logpmf(x.numpy(), want_rate.detach().numpy()).sum(-1)
    assert np.allclose(got.log_prob(x).detach().numpy(), want, rtol=1e-5)


def test_a_count_scale_moves_a_negative_binomials_mean_not_its_dispersion():
    torch.manual_seed(0)
    plain = GRUBaseline(1, emission="negbin", rnn_dim=4, hidden_dim=4)
    scaled = GRUBaseline(1, emission="negbin", rnn_dim=4, hidden_dim=4, count_scale=[50.0])
    scaled.load_state_dict({**plain.state_dict(), "count_scale.scale": torch.tensor([50.0])})
    x = torch.poisson(torch.full((2, 5, 1), 50.0), generator=torch.Generator().manual_seed(2))
    before = plain.step_distribution(plain.rnn(shifted_inputs(x / 50.0))[0]).base_dist
    after = scaled.predictive_distribution(x).base_dist
    assert torch.allclose(after.mean, 50.0 * before.mean, rtol=1e-5)
    assert torch.allclose(after.total_count, before.total_count)  # r, the dispersion


@pytest.mark.parametrize(
    "make",
    [
        lambda **k: GRUBaseline(1, emission="negbin", rnn_dim=4, hidden_dim=4, **k),
        lambda **k: VRNN(1, emission="negbin", latent_dim=2, rnn_dim=4, hidden_dim=4, **k),
        lambda **k: SRNN(1, emission="negbin", latent_dim=2, rnn_dim=4, hidden_dim=4, **k),
    ],
    ids=["gru", "vrnn", "srnn"],
)
def test_an_untrained_model_with_a_count_scale_forecasts_near_it(make):
    """Untrained nets put out numbers near 0, so the rate starts near the scale: near 1 without one."""
    x = torch.poisson(torch.full((4, 8, 1), 400.0), generator=torch.Generator().manual_seed(0))
    medians = {}
    for scale in (None, [401.0]):
        torch.manual_seed(0)
        model = make(count_scale=scale).eval()
        paths = model.forecast(x, None, 3, 20, num_particles=3, generator=torch.Generator().manual_seed(0))
        assert torch.equal(paths, paths.round()) and bool((paths >= 0).all())
        medians[scale is None] = float(paths.median())
    assert 401.0 / 10 < medians[False] < 401.0 * 10
    assert medians[True] < 20


def test_a_count_scale_is_refused_unless_it_fits_a_count_emission():
    with pytest.raises(ValueError, match="count_scale: only a count emission"):
        GRUBaseline(2, emission="gaussian", count_scale=[1.0, 2.0])
    with pytest.raises(ValueError, match="count_scale: expected 2 positive finite numbers"):
        SRNN(2, emission="poisson", count_scale=[1.0])
    with pytest.raises(ValueError, match="count_scale: expected 1 positive finite numbers"):
        VRNN(1, emission="poisson", count_scale=[0.0])
    with pytest.raises(TypeError, match="count_scale must be a list of 2 numbers"):
        GRUBaseline(2, emission="poisson", count_scale="ab")


def test_a_model_without_a_count_scale_keeps_its_state_dict_keys():
    """No scale, no buffer: checkpoints written before the scale existed still load."""
    keys = set(GRUBaseline(2, emission="poisson", rnn_dim=4, hidden_dim=4).state_dict())
    assert not any("count_scale" in key for key in keys)
    scaled = GRUBaseline(2, emission="poisson", rnn_dim=4, hidden_dim=4, count_scale=[3.0, 4.0])
    assert set(scaled.state_dict()) == keys | {"count_scale.scale"}

"""Posterior draws and pointwise log-likelihoods (ppl_models.inference.pointwise) against independent truth; their
counts and flags refused by name, their draws beyond memory before they are allocated."""

import math
import warnings

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch

from ppl_models import PFLSTM, SRNN, GRUBaseline, LinearGaussianSSM, PFRNNPredictor, PFRNNProgram
from ppl_models.inference import Unsupported, posterior_predictive, validation
from ppl_models.inference.arviz_compat import ARVIZ_1, az, loo_summary
from ppl_models.inference.calibration import posterior_inference_data
from ppl_models.inference.objectives import IWAE
from ppl_models.inference.pointwise import entry_log_prob, posterior_draws


def _gaussian_conditionals(mean, cov, x):
    """log N(x_d | x_{<d}) of each d, by the Schur complement (numpy, float64)."""
    out = []
    for d in range(len(x)):
        if d == 0:
            mu, var = mean[0], cov[0, 0]
        else:
            gain = np.linalg.solve(cov[:d, :d], cov[:d, d])
            mu, var = mean[d] + gain @ (x[:d] - mean[:d]), cov[d, d] - gain @ cov[:d, d]
        out.append(-0.5 * (math.log(2 * math.pi * var) + (x[d] - mu) ** 2 / var))
    return np.array(out)


def test_multivariate_normal_factors_are_the_gaussian_conditionals():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, generator=generator, dtype=torch.float64)
    cov, mean = a @ a.T + 0.5 * torch.eye(3, dtype=torch.float64), torch.randn(3, generator=generator).double()
    x = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    fn = dist.MultivariateNormal(mean, covariance_matrix=cov).expand([4])
    factors = entry_log_prob(fn, x)
    assert factors.shape == (4, 3)
    for row in range(4):
        truth = _gaussian_conditionals(mean.numpy(), cov.numpy(), x[row].numpy())
        np.testing.assert_allclose(factors[row].numpy(), truth, rtol=1e-10)
    torch.testing.assert_close(factors.sum(-1), fn.log_prob(x))


def test_mixture_factors_are_the_component_weighted_conditionals():
    weights = torch.tensor([0.3, 0.7], dtype=torch.float64)
    loc = torch.tensor([[0.0, 1.0], [2.0, -1.0]], dtype=torch.float64)  # [K, D]
    scale = torch.tensor([[1.0, 0.5], [0.7, 2.0]], dtype=torch.float64)
    fn = dist.MixtureSameFamily(dist.Categorical(probs=weights), dist.Normal(loc, scale).to_event(1))
    x = torch.tensor([0.4, 0.2], dtype=torch.float64)
    first = dist.Normal(loc[:, 0], scale[:, 0]).log_prob(x[0]).exp()  # p_k(x_1)
    second = dist.Normal(loc[:, 1], scale[:, 1]).log_prob(x[1]).exp()
    p1 = float((weights * first).sum())
    p2_given_1 = float((weights * first * second).sum()) / p1  # component weights updated by x_1
    np.testing.assert_allclose(entry_log_prob(fn, x).numpy(), [math.log(p1), math.log(p2_given_1)], rtol=1e-12)


def test_independent_and_masked_factors():
    base = dist.Bernoulli(probs=torch.tensor([[0.2, 0.9], [0.5, 0.5]]))
    x = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    factors = entry_log_prob(base.to_event(1), x)
    torch.testing.assert_close(factors, torch.log(torch.tensor([[0.2, 0.9], [0.5, 0.5]])))
    masked = base.mask(torch.tensor([[True], [False]])).to_event(1)  # the second row masked out
    torch.testing.assert_close(entry_log_prob(masked, x), torch.tensor([[math.log(0.2), math.log(0.9)], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="per-feature factors"):
        entry_log_prob(dist.Dirichlet(torch.ones(3)), torch.full((3,), 1 / 3))


def test_exact_model_draws_agree_and_loo_is_its_exact_log_likelihood():
    model = GRUBaseline(3, emission="gaussian", rnn_dim=4, hidden_dim=4)
    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    draws = posterior_draws(model, x, mask, 6)
    assert draws.latents == {}
    assert torch.equal(draws.log_likelihood, draws.log_likelihood[:1].expand_as(draws.log_likelihood))
    exact = model.log_likelihood(x, mask).detach()
    torch.testing.assert_close(draws.log_likelihood[0].sum((1, 2)), exact)
    idata = posterior_inference_data(model, x, mask, 6)
    loo = loo_summary(idata)
    assert loo["elpd"] == pytest.approx(float(exact.sum()), rel=1e-5) and loo["p"] == 0.0
    if not ARVIZ_1:  # ArviZ 0.x's own loo agrees (its k is inf: constant ratios); 1.x's refuses constant draws
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            assert float(az.loo(idata).elpd_loo) == pytest.approx(float(exact.sum()), rel=1e-5)


def test_importance_weights_are_the_iwae_weights_of_the_same_draws():
    model = LinearGaussianSSM.random(2, 2, proposal="bootstrap", generator=torch.Generator().manual_seed(0))
    x, _ = model.sample(num_sequences=3, num_steps=8)
    mask = torch.ones(3, 8, dtype=torch.bool)
    pyro.set_rng_seed(5)
    draws = posterior_draws(model, x, mask, 16, max_plate_nesting=1)
    pyro.set_rng_seed(5)
    iwae_weights = IWAE(model, 16).log_weights(x, mask).detach()
    torch.testing.assert_close(draws.log_weights, iwae_weights)
    # the guide is the prior, so the weight is log p(x | z): the sum of the per-entry factors
    torch.testing.assert_close(draws.log_likelihood.sum((2, 3)), draws.log_weights, rtol=1e-4, atol=1e-4)
    assert draws.latents["z"].shape == (16, 3, 8, 2)


def test_resampling_picks_whole_draws_of_the_same_sequence():
    model = SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=4, hidden_dim=4)
    x = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(2))
    pyro.set_rng_seed(7)
    plain = posterior_draws(model, x, None, 10)
    pyro.set_rng_seed(7)
    picked = posterior_draws(model, x, None, 10, resample=True, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(picked.log_weights, plain.log_weights)
    for b in range(3):
        for s in range(10):  # each resampled draw is one of the guide's draws of that sequence, whole
            rows = (plain.latents["z"][:, b] == picked.latents["z"][s, b]).flatten(1).all(1)
            assert rows.any()
            source = int(rows.nonzero()[0])
            assert torch.equal(picked.log_likelihood[s, b], plain.log_likelihood[source, b])


def test_conditional_model_needs_targets_and_layers_refuse():
    program = PFRNNProgram(PFRNNPredictor(2, 1, hidden_size=4, encoder_size=4, num_particles=3))
    x, y = torch.randn(2, 4, 2), torch.randn(2, 4, 1)
    with pytest.raises(ValueError, match="targets must be given"):
        posterior_draws(program, x)
    draws = posterior_draws(program, x, None, 3, targets=y, parallel=False)
    assert draws.log_likelihood.shape == (3, 2, 4, 1) and bool(torch.isfinite(draws.log_likelihood).all())
    with pytest.raises(ValueError, match="targets must be None"):
        posterior_draws(GRUBaseline(2, emission="gaussian"), x, targets=y)
    with pytest.raises(Unsupported, match="programs"):
        posterior_draws(PFLSTM(2, 4, num_particles=2), x)
    with pytest.raises(ValueError, match="num_draws"):
        posterior_draws(GRUBaseline(2, emission="gaussian"), x, num_draws=0)


# --- the counts and flags of the posterior draws name themselves --------------------------------------------------
@pytest.mark.parametrize("value", [1.5, "10", True, -1, 0])
@pytest.mark.parametrize(("call", "name"), [(posterior_predictive, "num_samples"), (posterior_draws, "num_draws")])
def test_the_counts_of_the_posterior_draws_name_themselves(small_lgssm, call, name, value):
    model, x = small_lgssm
    kind = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(kind, match=rf"^{name} must be"):
        call(model, x, None, value)


@pytest.mark.parametrize("call", [posterior_predictive, posterior_draws])
def test_max_plate_nesting_names_itself(small_lgssm, call):
    model, x = small_lgssm
    with pytest.raises(TypeError, match=r"^max_plate_nesting must be an int >= 1, got float 1.5"):
        call(model, x, None, 2, max_plate_nesting=1.5)


@pytest.mark.parametrize("flag", ["resample", "parallel"])
@pytest.mark.parametrize("call", [posterior_predictive, posterior_draws])
def test_the_flags_of_the_posterior_draws_must_be_bools(small_lgssm, call, flag):
    model, x = small_lgssm
    with pytest.raises(TypeError, match=rf"^{flag} must be True or False, got str 'no'"):
        call(model, x, None, 2, **{flag: "no"})


# --- memory is estimated before the draws are allocated -----------------------------------------------------------
GIB = 2**30


@pytest.mark.parametrize(
    ("call", "name", "copies"), [(posterior_predictive, "num_samples", 2), (posterior_draws, "num_draws", 2)]
)
def test_posterior_draws_beyond_memory_are_refused_by_name_before_allocating(
    small_lgssm, monkeypatch, call, name, copies
):
    model, x = small_lgssm
    monkeypatch.setattr(validation, "available_memory", lambda: GIB)
    draws = 10**7
    need = copies * draws * 4 * 6 * 3 * 4  # copies x S x B x T x D x 4 bytes (float32)
    with pytest.raises(
        ValueError,
        match=rf"^{name}={draws} needs at least {need / GIB:.3g} GiB of memory .*but 1 GiB "
        rf"are available: lower {name}$",
    ):
        call(model, x, None, draws)
    assert call(model, x, None, 3) is not None  # a count that fits is drawn


def test_posterior_predictive_of_a_billion_draws_is_refused_with_its_name(small_lgssm):
    model, x = small_lgssm
    with pytest.raises(ValueError, match=r"^num_samples=1000000000 needs at least 536 GiB of memory"):
        posterior_predictive(model, x, None, 10**9)  # 2 x 1e9 x 4 x 6 x 3 x 4 bytes

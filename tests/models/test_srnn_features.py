"""SRNN's shared feature net on x (the paper's appendix A) and input dropout: shapes, sharing, bounds."""

import pyro
import pytest
import torch
from pyro.infer import TraceMeanField_ELBO
from torch.nn import functional as F

from ppl_models import SRNN, LinearGaussianSSM
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE, SMCBound
from ppl_models.inference.training import TrainConfig, Trainer

KEYS, FEATURES = 6, 5


def _rolls(batch=3, steps=7, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch, steps, KEYS, generator=generator) < 0.3).float()
    mask = torch.arange(steps) < torch.tensor([[7], [4], [1]])[:batch]
    return x, mask


def _srnn(**kwargs):
    torch.manual_seed(0)
    return SRNN(KEYS, latent_dim=3, rnn_dim=8, hidden_dim=16, **kwargs)


def _phi_by_hand(model, x):
    """``phi(x) = clip(leaky(W_o clip(leaky(W_b x + c)) + b_o))``, slope 1/3, clipped to [-3, 3]."""
    net = model.feature_net

    def act(v):
        return torch.clamp(torch.where(v > 0, v, v / 3), -3, 3)

    hidden = act(x @ net.input_b.weight.T + net.input_b.bias)
    return act(hidden @ net.output.weight.T + net.output.bias)


@pytest.mark.parametrize("inference", ["smooth", "filter"])
def test_feature_net_feeds_both_grus_with_the_papers_shapes(inference):
    model = _srnn(feature_dim=FEATURES, inference=inference)
    x, mask = _rolls()
    assert model.rnn.input_size == FEATURES
    if inference == "smooth":
        assert model.inference_rnn.input_size == 8 + FEATURES
    context = model.context(x, mask)
    assert context.d.shape == (7, 3, 8) and context.posterior_input.shape == (7, 3, 16)
    # u_t = phi(x_{t-1}) with x_0 = 0: d is the GRU run on phi of the shifted rolls, by hand
    u = _phi_by_hand(model, F.pad(x, (0, 0, 1, 0))[:, :-1])
    d, _ = model.rnn(u)
    torch.testing.assert_close(context.d, d.transpose(0, 1))
    # the guide reads phi(x_t), not x_t
    a = model.inference_features(context.d.transpose(0, 1), x, mask)
    if inference == "smooth":
        torch.testing.assert_close(
            a[2, :1], model.inference_rnn(torch.cat([d[2:, :1], _phi_by_hand(model, x[2:, :1])], -1))[0][0]
        )
    else:
        phi = _phi_by_hand(model, x)
        torch.testing.assert_close(a, model.inference_net(phi, model.inference_net.project(d)))


def test_one_feature_net_is_trained_by_the_model_and_by_the_guide():
    model = _srnn(feature_dim=FEATURES)
    assert sum(name.startswith("feature_net.") for name, _ in model.named_parameters()) == 4  # one copy
    x, mask = _rolls()

    def feature_grads(value):
        model.zero_grad()
        value.backward()
        return [p.grad for name, p in model.named_parameters() if name.startswith("feature_net.")]

    # the generative model alone (latents from its prior) through u_t = phi(x_{t-1}) ...
    generative = feature_grads(pyro.poutine.trace(model.model).get_trace(x, mask).log_prob_sum())
    # ... and the inference network alone (d held fixed) through phi(x_t)
    d = model.context(x, mask).d.transpose(0, 1).detach()
    inference = feature_grads(model.inference_features(d, x, mask).sum())
    for grads in (generative, inference):
        assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_features_leave_the_model_causal():
    """d_t depends on x_{<t} only, with the feature net as without it."""
    model = _srnn(feature_dim=FEATURES)
    x, mask = _rolls()
    changed = x.clone()
    changed[0, 3] = 1 - changed[0, 3]
    d, d_changed = model.context(x, mask).d, model.context(changed, mask).d
    torch.testing.assert_close(d_changed[:4], d[:4])
    assert not torch.allclose(d_changed[4:, 0], d[4:, 0])


def test_elbo_with_features_matches_pyros_mean_field_elbo_on_the_same_draws():
    model = _srnn(feature_dim=FEATURES)
    x, mask = _rolls()
    pyro.set_rng_seed(5)
    ours = ELBO(model, mean_field=True)(x, mask).bound.sum()
    pyro.set_rng_seed(5)
    pyros = -TraceMeanField_ELBO(max_plate_nesting=1).differentiable_loss(model.model, model.guide, x, mask)
    torch.testing.assert_close(ours, pyros)


def test_input_dropout_drops_units_of_u_in_training_mode_only():
    model = _srnn(feature_dim=FEATURES, input_dropout=0.5)
    x, _ = _rolls()
    phi = model.features(F.pad(x, (0, 0, 1, 0))[:, :-1])
    torch.manual_seed(1)
    u = model.generative_inputs(x)
    kept = u != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(u[kept], 2 * phi[kept])  # inverted dropout: kept units scaled by 1 / (1 - p)
    model.eval()
    torch.testing.assert_close(model.generative_inputs(x), phi)


def test_generation_with_features_returns_binary_rolls():
    model = _srnn(feature_dim=FEATURES)
    out = model.generate(6, num_sequences=2, generator=torch.Generator().manual_seed(0))
    assert out.x.shape == (2, 6, KEYS) and set(out.x.unique().tolist()) <= {0.0, 1.0}
    x, _ = _rolls()
    cont = model.generate(3, prefix=x[:2, :4], generator=torch.Generator().manual_seed(0))
    assert cont.x.shape == (2, 7, KEYS) and torch.equal(cont.x[:, :4], x[:2, :4])


def test_bad_feature_options_are_refused_by_name():
    with pytest.raises(ValueError, match="feature_dim"):
        SRNN(KEYS, feature_dim=0)
    with pytest.raises(TypeError, match="feature_dim"):
        SRNN(KEYS, feature_dim=2.5)
    with pytest.raises(ValueError, match=r"input_dropout must be in \[0, 1\)"):
        SRNN(KEYS, input_dropout=1.0)


@pytest.mark.slow  # about 20 s alone, 100 s on a loaded machine
def test_trained_srnn_with_features_stays_below_and_approaches_the_exact_lgssm_likelihood():
    """Data from a known LGSSM (exact Kalman log-likelihood): every bound stays below it and comes close."""
    torch.manual_seed(0)
    pyro.set_rng_seed(0)
    truth = LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    (train, _), (test, _) = truth.sample(128, 30, generator=generator), truth.sample(64, 30, generator=generator)
    model = SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=8, hidden_dim=16, feature_dim=4)
    steps = test.shape[0] * test.shape[1]
    with torch.no_grad():
        exact = truth.log_likelihood(test).sum() / steps
    Trainer(
        ELBO(model, mean_field=True),
        (train, None),
        config=TrainConfig(epochs=30, batch_size=32, lr=0.01, progress=False),
    ).fit()
    with torch.no_grad():
        elbo = ELBO(model, mean_field=True, num_samples=10)(test).bound.sum() / steps
        iwae = IWAE(model, 200)(test).bound.sum() / steps
        smc = SMCBound(model, ParticleFilter(500))(test).bound.sum() / steps
    assert elbo < iwae < exact and smc < exact
    assert exact - elbo < 0.1  # nats per step

"""SRNN and its GRU baseline: Pyro programs, the paper's equations, bounds against exact answers, generation."""

import math

import pyro
import pytest
import torch
from pyro.infer import SVI, JitTrace_ELBO, Trace_ELBO, TraceMeanField_ELBO
from torch.distributions import Normal, kl_divergence

from ppl_models import SRNN, GRUBaseline, LinearGaussianSSM
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE, ExactLikelihood, SMCBound
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.nets import reverse_padded, shifted_inputs

LENGTHS = [9, 4, 6, 1]


def _rolls(batch=4, steps=9, keys=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch, steps, keys, generator=generator) < 0.3).float()
    mask = torch.arange(steps) < torch.tensor(LENGTHS[:batch]).unsqueeze(1)
    return x, mask


def _srnn(keys=6, **kwargs):
    torch.manual_seed(0)
    return SRNN(keys, latent_dim=3, rnn_dim=8, hidden_dim=16, **kwargs)


@pytest.mark.parametrize("inference", ["smooth", "filter"])
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("elbo", [Trace_ELBO, TraceMeanField_ELBO])
def test_svi_with_pyros_elbos_trains_every_variant(inference, residual, elbo):
    model = _srnn(inference=inference, residual=residual)
    x, mask = _rolls()
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.01}), elbo(max_plate_nesting=1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    losses = [svi.step(x, mask) for _ in range(30)]
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) < sum(losses[:5])
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    guide_part = "inference_rnn" if inference == "smooth" else "inference_net"
    assert any(k.startswith(guide_part) for k in changed) and any(k.startswith("prior_net") for k in changed)


@pytest.mark.parametrize("objective", ["elbo", "elbo-mf", "iwae", "smc"])
def test_bounds_ignore_the_padding(objective):
    """Whatever sits after a sequence's end, every bound of that sequence is the same (same random draws)."""
    model = _srnn()
    x, mask = _rolls()
    other = torch.where(mask.unsqueeze(-1), x, 1.0 - x)
    build = {
        "elbo": lambda: ELBO(model),
        "elbo-mf": lambda: ELBO(model, mean_field=True),
        "iwae": lambda: IWAE(model, 7),
        "smc": lambda: SMCBound(model, ParticleFilter(7)),
    }[objective]
    results = []
    for data in (x, other):
        pyro.set_rng_seed(3)
        results.append(build()(data, mask))
    torch.testing.assert_close(results[0].bound, results[1].bound)
    assert results[0].num_steps.tolist() == LENGTHS
    assert torch.isfinite(results[0].loss) and results[0].bound.shape == (4,)


def test_objective_matches_pyro_trace_elbo_on_the_same_draws():
    model = _srnn()
    x, mask = _rolls()
    pyro.set_rng_seed(5)
    ours = ELBO(model, mean_field=True)(x, mask).bound.sum()
    pyro.set_rng_seed(5)
    pyros = -TraceMeanField_ELBO(max_plate_nesting=1).differentiable_loss(model.model, model.guide, x, mask)
    torch.testing.assert_close(ours, pyros)


def test_analytic_kl_elbo_equals_monte_carlo_elbo_in_expectation():
    model = _srnn()
    x, mask = _rolls(batch=1, steps=9)
    reps = x.expand(4000, -1, -1)
    with torch.no_grad():
        analytic = ELBO(model, mean_field=True)(reps).bound
        monte_carlo = ELBO(model)(reps).bound
    se = (analytic.var() / analytic.numel() + monte_carlo.var() / monte_carlo.numel()).sqrt()
    assert abs(analytic.mean() - monte_carlo.mean()) < 4 * se
    assert analytic.var() < monte_carlo.var()  # the reason to use the analytic KL


def test_residual_guide_mean_is_prior_mean_plus_residual_eq_12():
    model = _srnn(residual=True)
    x, mask = _rolls()
    context = model.context(x, mask)
    z_prev = torch.randn(5, 4, 3)
    t = 2
    prior = model.prior(z_prev, t, context)
    q = model.proposal(z_prev, t, x[:, t], context)
    mean_p, log_var_p = model.prior_net(z_prev, model.prior_net.project(context.d[t])).chunk(2, -1)
    a = model.inference_features(context.d.transpose(0, 1), x, mask)[:, t]
    residual, log_var_q = model.posterior_net(z_prev, model.posterior_net.project(a)).chunk(2, -1)
    torch.testing.assert_close(prior.mean, mean_p)
    torch.testing.assert_close(prior.variance, log_var_p.exp())
    torch.testing.assert_close(q.mean, mean_p + residual)
    torch.testing.assert_close(q.variance, log_var_q.exp())
    # hence KL(q || p) does not depend on the prior mean: it is that of N(residual, v_q) against N(0, v_p)
    expected = kl_divergence(Normal(residual, (0.5 * log_var_q).exp()), Normal(0.0, (0.5 * log_var_p).exp())).sum(-1)
    torch.testing.assert_close(kl_divergence(q, prior), expected)


def test_smoothing_features_run_backwards_within_each_sequence():
    model = _srnn(inference="smooth")
    x, mask = _rolls()
    d = torch.randn(4, 9, 8)
    a = model.inference_features(d, x, mask)
    # a_t depends on x_{t:T} only: changing an earlier step leaves it alone, a later one does not
    changed = x.clone()
    changed[0, 2] = 1 - changed[0, 2]
    a_changed = model.inference_features(d, changed, mask)
    torch.testing.assert_close(a_changed[0, 3:], a[0, 3:])
    assert not torch.allclose(a_changed[0, :3], a[0, :3])
    # a padded sequence gets what it gets alone, started at a_{T_b + 1} = 0
    alone, _ = model.inference_rnn(torch.cat([d[1:2, :4], x[1:2, :4]], -1).flip(1))
    torch.testing.assert_close(a[1, :4], alone[0].flip(0))


def test_reverse_padded_is_an_involution_that_keeps_padding_after_the_end():
    x = torch.arange(12.0).reshape(2, 6, 1)
    mask = torch.arange(6) < torch.tensor([[6], [3]])
    r = reverse_padded(x, mask)
    assert r[0, :, 0].tolist() == [5, 4, 3, 2, 1, 0]
    assert r[1, :3, 0].tolist() == [8, 7, 6]
    torch.testing.assert_close(reverse_padded(r, mask), x)
    assert shifted_inputs(x)[0, :, 0].tolist() == [0, 0, 1, 2, 3, 4]


def _predictive(model, x, mask):
    pyro.set_rng_seed(0)
    return model.predictive(x, mask, 0, num_particles=50, generator=torch.Generator().manual_seed(0)).mean


def test_filter_predictive_probabilities_are_probabilities_and_ignore_future_steps():
    model = _srnn(inference="filter")
    x, mask = _rolls()
    probs = _predictive(model, x, mask)
    assert probs.shape == x.shape and bool(((probs >= 0) & (probs <= 1)).all())
    assert bool((probs[~mask] == 0).all())
    # E[x_t | x_<t] may not look at x_t, although the filter's proposal for z_t does
    changed = x.clone()
    changed[:, 5:] = 1 - changed[:, 5:]
    again = _predictive(model, changed, mask)
    torch.testing.assert_close(again[:, :6], probs[:, :6])
    assert not torch.allclose(again[:, 6:], probs[:, 6:])


@pytest.mark.parametrize("inference", ["smooth", "filter"])
def test_generation_returns_binary_rolls_of_the_requested_length(inference):
    model = _srnn(inference=inference)
    out = model.generate(12, num_sequences=3, generator=torch.Generator().manual_seed(0))
    assert out.x.shape == (3, 12, 6) and set(out.x.unique().tolist()) <= {0.0, 1.0}
    assert bool(((out.mean > 0) & (out.mean < 1)).all())
    x, _ = _rolls()
    cont = model.generate(5, prefix=x[:2, :4], generator=torch.Generator().manual_seed(0))
    assert cont.x.shape == (2, 9, 6) and torch.equal(cont.x[:, :4], x[:2, :4])
    assert set(cont.x.unique().tolist()) <= {0.0, 1.0}
    same = model.generate(12, num_sequences=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(same.x, out.x)  # a seeded generator makes generation repeatable


def test_gaussian_emission_generates_real_values():
    model = SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=4, hidden_dim=8)
    out = model.generate(7, num_sequences=2)
    assert out.x.shape == (2, 7, 2) and not set(out.x.unique().tolist()) <= {0.0, 1.0}


def test_bad_input_raises_clear_errors():
    model = _srnn()
    x, mask = _rolls()
    with pytest.raises(ValueError, match="x must have 6 features"):
        model.model(torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="x must be binary"):
        ELBO(model)(x * 0.5 + 0.25)
    nan = x.clone()
    nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ELBO(model)(nan, mask)
    with pytest.raises(ValueError, match="prefix must have 6 features"):
        model.generate(3, prefix=torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="inference must be one of"):
        SRNN(6, inference="backward")
    with pytest.raises(ValueError, match="emission must be one of"):
        SRNN(6, emission="laplace")
    with pytest.raises(TypeError, match="num_steps"):
        model.generate(2.5)
    with pytest.raises(ValueError, match="mask must have shape"):
        ELBO(model)(x, mask[:, :3])
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        SRNN(6, dropout=1.0)
    with pytest.raises(TypeError, match="dropout"):
        SRNN(6, dropout="0.1")


def test_dropout_drops_units_of_d_in_training_mode_only():
    x, mask = _rolls()
    plain = _srnn()
    dropping = _srnn(dropout=0.5)
    dropping.load_state_dict(plain.state_dict())
    d = plain.context(x, mask).d
    torch.manual_seed(1)
    dropped = dropping.context(x, mask).d
    kept = dropped != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(dropped[kept], 2 * d[kept])  # inverted dropout: kept units scaled by 1 / (1 - p)
    dropping.eval()
    torch.testing.assert_close(dropping.context(x, mask).d, d)
    torch.manual_seed(2)
    expected = ELBO(plain)(x, mask).bound
    torch.manual_seed(2)
    torch.testing.assert_close(ELBO(dropping)(x, mask).bound, expected)


def test_objectives_compute_the_context_once_per_evaluation(monkeypatch):
    model = _srnn()
    x, mask = _rolls()
    calls = []
    original = SRNN.context
    monkeypatch.setattr(SRNN, "context", lambda self, *a: calls.append(1) or original(self, *a))
    ELBO(model)(x, mask)
    IWAE(model, 4)(x, mask)
    assert len(calls) == 2  # guide and replayed model share one
    model.guide(x, mask)
    model.model(x, mask)
    assert len(calls) == 4  # outside an objective nothing is shared


def test_trained_srnn_bounds_stay_below_and_approach_the_exact_lgssm_likelihood():
    """Data from a known LGSSM: after training, ELBO <= IWAE, SMC below the exact Kalman value, and all close."""
    torch.manual_seed(0)
    pyro.set_rng_seed(0)
    truth = LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    (train, _), (test, _) = truth.sample(128, 30, generator=generator), truth.sample(64, 30, generator=generator)
    model = SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=8, hidden_dim=16)
    steps = test.shape[0] * test.shape[1]

    def bounds():
        with torch.no_grad():
            return {
                "elbo": ELBO(model, mean_field=True, num_samples=10)(test).bound.sum() / steps,
                "iwae": IWAE(model, 200)(test).bound.sum() / steps,
                "smc": SMCBound(model, ParticleFilter(500))(test).bound.sum() / steps,
            }

    with torch.no_grad():
        exact = truth.log_likelihood(test).sum() / steps
    before = bounds()
    Trainer(
        ELBO(model, mean_field=True),
        (train, None),
        config=TrainConfig(epochs=30, batch_size=32, lr=0.01, progress=False),
    ).fit()
    after = bounds()
    assert after["elbo"] < after["iwae"] < exact
    assert after["smc"] < exact
    for name, value in after.items():
        assert exact - value < 0.08, name  # nats per step
        assert exact - value < 0.2 * (exact - before[name]), name


def test_gru_baseline_likelihood_is_the_sum_of_its_bernoulli_terms():
    torch.manual_seed(0)
    model = GRUBaseline(6, rnn_dim=8, hidden_dim=16)
    x, mask = _rolls()
    d, _ = model.rnn(torch.cat([torch.zeros(4, 1, 6), x[:, :-1]], 1))
    logits = model.emission_net(None, model.emission_net.project(d))
    p = torch.sigmoid(logits)
    by_hand = ((x * p.log() + (1 - x) * (1 - p).log()).sum(-1) * mask).sum(1)
    torch.testing.assert_close(model.log_likelihood(x, mask), by_hand)
    torch.testing.assert_close(model.predictive(x, mask, 0).mean[mask], p[mask])  # padding: read as 0, not x's
    pyros = -Trace_ELBO(max_plate_nesting=1).differentiable_loss(model.model, model.guide, x, mask)
    torch.testing.assert_close(pyros, by_hand.sum())
    out = ExactLikelihood(model)(x, mask)
    torch.testing.assert_close(out.bound, by_hand)
    with pytest.raises(ValueError, match="binary"):
        model.log_likelihood(x + 0.5, mask)


@pytest.mark.parametrize("residual", [True, False])
def test_jit_trace_elbo_trains_with_and_without_res_q(residual):
    """TorchScript's autodiff takes the model and guide, Res_q included, and SVI with it learns."""
    torch.manual_seed(0)
    model = SRNN(3, latent_dim=2, rnn_dim=4, hidden_dim=4, residual=residual)
    x = (torch.rand(4, 7, 3) < 0.3).float()
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.05}), JitTrace_ELBO(ignore_jit_warnings=True))
    losses = [svi.step(x) for _ in range(40)]
    assert all(math.isfinite(loss) for loss in losses)
    assert sum(losses[-5:]) < 0.9 * sum(losses[:5])

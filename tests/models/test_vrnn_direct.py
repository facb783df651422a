"""The VRNN's ELBO terms and particle step computed without Pyro's traces are its traced Pyro programs: the same
draws, states and log-densities to the last bit, so every bound, filter run and gradient is unchanged."""

import pyro
import pytest
import torch

from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO
from ppl_models.vrnn import VRNN

EMISSIONS = ["gaussian", "bernoulli", "poisson"]


def _model(emission):
    torch.manual_seed(0)
    return VRNN(3, emission=emission, latent_dim=4, rnn_dim=5, hidden_dim=6)


def _data(emission, batch=4, steps=7):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, steps, 3, generator=generator)
    if emission == "bernoulli":
        x = (x > 0).float()
    elif emission == "poisson":
        x = torch.poisson(torch.full((batch, steps, 3), 2.0), generator=generator)
    mask = torch.ones(batch, steps, dtype=torch.bool)
    mask[1, 5:] = False
    mask[3, 2:] = False
    return x, mask


def _bound_and_gradients(model, x, mask, mean_field):
    model.zero_grad()
    pyro.set_rng_seed(3)
    output = ELBO(model, mean_field=mean_field)(x, mask)
    output.loss.backward()
    return output.bound.detach(), [p.grad.clone() for p in model.parameters()]


def _assert_equal(got, expected):
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("emission", EMISSIONS)
@pytest.mark.parametrize("mean_field", [False, True])
def test_the_direct_elbo_is_the_traced_one_with_its_gradients(emission, mean_field, monkeypatch):
    model, (x, mask) = _model(emission), _data(emission)
    bound, gradients = _bound_and_gradients(model, x, mask, mean_field)
    monkeypatch.delattr(VRNN, "elbo_terms")  # the objective now reads the traces of guide() and model()
    traced_bound, traced_gradients = _bound_and_gradients(model, x, mask, mean_field)
    torch.testing.assert_close(bound, traced_bound, rtol=0, atol=0)
    _assert_equal(gradients, traced_gradients)


@pytest.mark.parametrize("emission", EMISSIONS)
def test_a_direct_particle_step_is_the_traced_program_step(emission):
    model, (x, _) = _model(emission), _data(emission)
    traced = model.program_model
    state, context = model.start(x, None, 5)
    for t in range(3):
        pyro.set_rng_seed(t)
        direct = model.step(state, t, x[:, t], context)
        pyro.set_rng_seed(t)
        reference = traced.step(state, t, x[:, t], context)
        assert direct.state.keys() == reference.state.keys() == {"h", "z"}
        for key in reference.state:
            torch.testing.assert_close(direct.state[key], reference.state[key], rtol=0, atol=0, msg=key)
        torch.testing.assert_close(direct.log_weight, reference.log_weight, rtol=0, atol=0)
        torch.testing.assert_close(direct.log_joint, reference.log_joint, rtol=0, atol=0)
        for name in ("simulate", "predict_mean"):
            pyro.set_rng_seed(10 + t)
            got = getattr(model, name)(reference.state, t, context)
            pyro.set_rng_seed(10 + t)
            expected = getattr(traced, name)(reference.state, t, context)
            if name == "simulate":
                (got_state, got), (expected_state, expected) = got, expected
                for key in expected_state:
                    torch.testing.assert_close(got_state[key], expected_state[key], rtol=0, atol=0, msg=key)
            torch.testing.assert_close(got, expected, rtol=0, atol=0, msg=name)
        state = reference.state


@pytest.mark.parametrize("emission", ["gaussian", "bernoulli"])
def test_a_filter_run_and_its_gradients_are_the_traced_programs(emission):
    model, (x, mask) = _model(emission), _data(emission)
    runs = []
    for particle_model in (model, model.program_model):
        model.zero_grad()
        pyro.set_rng_seed(4)
        pf = ParticleFilter(6, generator=torch.Generator().manual_seed(2))
        result = pf.run(particle_model, x, mask, predictive_samples=3, predictive_mean=True)
        result.log_evidence.sum().backward()
        figures = [result.log_evidence.detach(), result.predictive, result.predictive_mean, result.log_weights.detach()]
        runs.append((figures, [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    _assert_equal(runs[0][0], runs[1][0])
    _assert_equal(runs[0][1], runs[1][1])

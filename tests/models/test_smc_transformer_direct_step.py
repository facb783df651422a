"""The SMC Transformer's particle step computed without Pyro's traces is its traced Pyro program: the same draws,
state and log-densities, so every filter run and its Fisher-identity gradients are unchanged."""

import pyro
import pytest
import torch

from ppl_models.inference import ParticleFilter
from ppl_models.smc_transformer import SMCTransformer


def _model(emission="gaussian"):
    torch.manual_seed(0)
    options = {"emission": "categorical", "num_classes": 3} if emission == "categorical" else {}
    model = SMCTransformer(1, d_model=4, num_heads=2, window=3, ff_dim=8, init_variance=0.3, **options)
    return model


def _data(emission, batch=3, steps=6):
    generator = torch.Generator().manual_seed(1)
    if emission == "categorical":
        return torch.randint(0, 3, (batch, steps, 1), generator=generator).float()
    return torch.randn(batch, steps, 1, generator=generator)


@pytest.mark.parametrize("emission", ["gaussian", "categorical"])
@pytest.mark.parametrize("reparameterize", [True, False])
def test_a_direct_step_is_the_traced_program_step(emission, reparameterize):
    model, x = _model(emission), _data(emission)
    traced = model.program_model
    state, context = traced.start(x, torch.ones(x.shape[:2], dtype=torch.bool), 5)
    for t in range(3):
        pyro.set_rng_seed(t)
        direct = model.step(state, t, x[:, t], context, reparameterize=reparameterize)
        pyro.set_rng_seed(t)
        reference = traced.step(state, t, x[:, t], context, reparameterize=reparameterize)
        assert direct.state.keys() == reference.state.keys()
        for key in reference.state:
            torch.testing.assert_close(direct.state[key], reference.state[key], rtol=0, atol=0, msg=key)
        torch.testing.assert_close(direct.log_weight, reference.log_weight, rtol=0, atol=0)
        torch.testing.assert_close(direct.log_joint, reference.log_joint, rtol=0, atol=0)
        assert direct.state["q"].requires_grad == reparameterize
        state = reference.state


def test_a_fisher_identity_run_and_its_gradients_are_the_traced_programs():
    model, x = _model(), _data("gaussian", steps=8)
    results = []
    for particle_model in (model, model.program_model):
        model.zero_grad()
        pyro.set_rng_seed(4)
        pf = ParticleFilter(
            6, resampling="multinomial", gradient="stop_weights", generator=torch.Generator().manual_seed(2)
        )
        result = pf.run(particle_model, x)
        result.fisher_objective.sum().backward()
        results.append(
            (result.log_evidence.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
        )
    torch.testing.assert_close(results[0][0], results[1][0], rtol=0, atol=0)
    assert len(results[0][1]) == len(results[1][1]) > 0
    for direct, traced in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(direct, traced, rtol=0, atol=0)


@pytest.mark.parametrize("emission", ["gaussian", "categorical"])
def test_direct_draws_of_the_observation_are_the_unconditioned_traced_programs(emission):
    model, x = _model(emission), _data(emission)
    traced = model.program_model
    state, context = traced.start(x, torch.ones(x.shape[:2], dtype=torch.bool), 5)
    for t in range(3):
        pyro.set_rng_seed(t)
        new_state, drawn = model.simulate(state, t, context)
        pyro.set_rng_seed(t)
        reference_state, reference_drawn = traced.simulate(state, t, context)
        for key in reference_state:
            torch.testing.assert_close(new_state[key], reference_state[key], rtol=0, atol=0, msg=key)
        torch.testing.assert_close(drawn, reference_state["input"], rtol=0, atol=0)
        pyro.set_rng_seed(t)
        mean = model.predict_mean(state, t, context)
        pyro.set_rng_seed(t)
        site = traced.unconditioned_step(state, context)[1]["fn"]
        if emission == "gaussian":
            expected = site.mean
        else:  # the mean class index
            expected = (site.probs * torch.arange(3.0)).sum(-1, keepdim=True)
        torch.testing.assert_close(mean, expected, rtol=0, atol=0)
        state = reference_state

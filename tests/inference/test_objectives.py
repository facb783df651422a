"""ELBO, IWAE and SMC bounds against Pyro's own ELBOs and the exact Kalman likelihood."""

import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO, TraceMeanField_ELBO

from ppl_models import LinearGaussianSSM
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE, ExactLikelihood, SMCBound
from ppl_models.inference.traces import annealed

pytestmark = pytest.mark.usefixtures("float64")


def _model(latent=2, obs=2, seed=0):
    return LinearGaussianSSM.random(latent, obs, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("mean_field", [False, True])
@pytest.mark.parametrize("kl_factor", [1.0, 0.3])
def test_elbo_per_sequence_sums_to_pyros_annealed_elbo(mean_field, kl_factor):
    model = _model()
    x, _ = model.sample(5, 12, generator=torch.Generator().manual_seed(1))
    mask = torch.arange(12).unsqueeze(0) < torch.tensor([12, 5, 9, 12, 1]).unsqueeze(1)
    objective = ELBO(model, mean_field=mean_field)
    objective.kl_factor = kl_factor
    pyro.set_rng_seed(2)
    bound, surrogate = objective.estimate(x, mask)
    pyro.set_rng_seed(2)
    pyro_elbo = TraceMeanField_ELBO if mean_field else Trace_ELBO
    loss = pyro_elbo(max_plate_nesting=1).differentiable_loss(
        annealed(model.model, kl_factor), annealed(model.guide, kl_factor), x, mask
    )
    torch.testing.assert_close(surrogate.sum(), -loss)
    if kl_factor == 1.0:
        torch.testing.assert_close(bound, surrogate)
    out = objective(x, mask)
    assert out.bound.shape == (5,) and out.num_steps.tolist() == [12, 5, 9, 12, 1]


def test_bounds_are_ordered_elbo_iwae_exact_and_iwae_rises_with_k():
    model = _model(1, 1, seed=3)
    with torch.no_grad():  # a guide twice too wide, so that the bounds are visibly apart
        model.S_raw[:, 0, 0] += torch.log(torch.tensor(2.0))
    x, _ = model.sample(1, 10, generator=torch.Generator().manual_seed(4))
    reps = x.expand(3000, 10, 1)  # many independent estimates of one sequence, in one batch
    exact = model.log_likelihood(x).item()
    with torch.no_grad():
        elbo = ELBO(model)(reps).bound
        iwae = {k: IWAE(model, k)(reps[:600]).bound for k in (1, 5, 50)}
        smc = SMCBound(model, ParticleFilter(50))(reps).bound
    se = lambda v: (v.std() / v.numel() ** 0.5).item()  # noqa: E731
    assert abs(iwae[1].mean() - elbo.mean()) < 4 * (se(elbo) + se(iwae[1]))  # IWAE-1 is the ELBO
    assert elbo.mean() < iwae[5].mean() < iwae[50].mean() < exact
    assert iwae[50].mean() - iwae[5].mean() > 4 * (se(iwae[5]) + se(iwae[50]))
    assert smc.mean() < exact and exact - smc.mean() < exact - elbo.mean()


def test_iwae_in_particle_chunks_estimates_the_same_bound():
    model = _model(1, 1, seed=3)
    with torch.no_grad():  # a wide guide, so that the IWAE-20 bound is far from the ELBO and log p(x)
        model.S_raw[:, 0, 0] += torch.log(torch.tensor(2.0))
    x, _ = model.sample(1, 10, generator=torch.Generator().manual_seed(4))
    reps = x.expand(2000, 10, 1)
    mask = torch.ones(2000, 10, dtype=torch.bool)
    with torch.no_grad():
        whole = IWAE(model, 20)(reps).bound
        chunked_objective = IWAE(model, 20, particle_chunk=7)  # passes of 7, 7 and 6 particles
        assert chunked_objective.log_weights(reps[:3], mask[:3]).shape == (20, 3)
        chunked = chunked_objective(reps).bound
    se = lambda v: (v.std() / v.numel() ** 0.5).item()  # noqa: E731
    assert abs(chunked.mean() - whole.mean()) < 4 * (se(whole) + se(chunked))
    assert IWAE(model, 5, particle_chunk=50).particle_chunk == 5
    with pytest.raises(ValueError, match="particle_chunk"):
        IWAE(model, 5, particle_chunk=0)


def _train(objective, x, steps, lr=0.05):
    optimizer = torch.optim.Adam(objective.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        objective(x).loss.backward()
        optimizer.step()


def _wrong_start(true):
    one = torch.ones(1, 1)
    return LinearGaussianSSM(0.1 * one, 2.0 * one, 1.0 * one, 1.0 * one, true.init_cov.clone())


@pytest.mark.parametrize(
    "make_objective",
    [
        lambda m: ExactLikelihood(m),
        lambda m: ELBO(m, mean_field=True),
        lambda m: IWAE(m, 8),
        lambda m: SMCBound(m, ParticleFilter(64)),
        lambda m: SMCBound(m, ParticleFilter(64, gradient="soft")),
        lambda m: SMCBound(m, ParticleFilter(64, gradient="stop_weights")),
    ],
    ids=["exact", "elbo", "iwae", "smc-reparam", "smc-soft", "smc-fisher"],
)
def test_training_from_a_wrong_start_approaches_the_true_likelihood(make_objective):
    true = LinearGaussianSSM(
        torch.tensor([[0.9]]), torch.tensor([[1.0]]), torch.tensor([[0.2]]), torch.tensor([[0.3]]), torch.eye(1)
    )
    g = torch.Generator().manual_seed(5)
    train, _ = true.sample(32, 40, generator=g)
    test, _ = true.sample(64, 40, generator=g)
    with torch.no_grad():
        target = true.log_likelihood(test).mean().item() / 40
    model = _wrong_start(true)
    with torch.no_grad():
        start = model.log_likelihood(test).mean().item() / 40
    _train(make_objective(model), train, steps=150)
    with torch.no_grad():
        end = model.log_likelihood(test).mean().item() / 40
    assert target - start > 0.3  # the start is far (nats per step)
    assert target - end < 0.1 * (target - start) + 0.02, (start, end, target)


def test_objectives_reject_bad_arguments():
    model = _model()
    with pytest.raises(ValueError, match="num_particles"):
        IWAE(model, 0)
    with pytest.raises(TypeError, match="particle_filter"):
        SMCBound(model, "systematic")
    with pytest.raises(ValueError, match="x must have 2 features"):
        ELBO(model)(torch.zeros(1, 3, 4))


class _DiscreteGuideModel(torch.nn.Module):
    def model(self, x, mask=None):
        with pyro.plate("sequences", x.shape[0], dim=-1):
            k = pyro.sample("k", pyro.distributions.Bernoulli(0.5))
            pyro.sample("x", pyro.distributions.Normal(k, 1.0).to_event(2), obs=x)

    def guide(self, x, mask=None):
        with pyro.plate("sequences", x.shape[0], dim=-1):
            pyro.sample("k", pyro.distributions.Bernoulli(0.3))


def test_elbo_and_iwae_refuse_non_reparameterisable_guides():
    x = torch.zeros(2, 3, 1)
    for objective in (ELBO(_DiscreteGuideModel()), IWAE(_DiscreteGuideModel(), 4)):
        with pytest.raises(ValueError, match="guide site 'k' .* has no rsample"):
            objective(x)

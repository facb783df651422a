"""The sequence-model protocol: every exported class declares what it can do, and does it on a tiny input."""

import math

import pyro
import pytest
import torch
from factories import FACTORIES, MASK, VARIANTS, B, T
from pyro.infer import SVI, Trace_ELBO

import ppl_models
from ppl_models import PFRNNPredictor, PFRNNProgram
from ppl_models.inference import CAPABILITIES, ESTIMATORS, ParticleFilter, Unsupported
from ppl_models.inference.objectives import ELBO, IWAE
from ppl_models.predictors import ExactPredictiveModel

#: a call that exercises each capability with a method of its own
CALLS = {
    "programs": lambda m, x: m.model(x),
    "exact": lambda m, x: m.log_likelihood(x),
    "predictive": lambda m, x: m.predictive(x, None, 2),
    "generate": lambda m, x: m.generate(3, num_sequences=2),
    "forecast": lambda m, x: m.forecast(x, None, 2, 3),
}


def test_the_collection_is_exported_and_described():
    assert set(FACTORIES) == set(ppl_models.COLLECTION)
    for cls in ppl_models.COLLECTION:
        assert getattr(ppl_models, cls.__name__) is cls and cls.__name__ in ppl_models.__all__
        assert ppl_models.catalog()[cls.__name__] == cls.description and len(cls.description) > 20


@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_every_capability_is_declared_or_plainly_refused(cls):
    model, x = FACTORIES[cls]()
    assert set(cls.capabilities) <= set(CAPABILITIES)
    for capability in CAPABILITIES:
        if model.supports(capability):
            assert capability not in cls.limitations
            continue
        reason = cls.limitations.get(capability, "")
        assert len(reason) > 20, f"{cls.__name__} lacks {capability} without saying why"
        if capability in CALLS:  # a method of its own refuses with the reason
            with pytest.raises(Unsupported, match=reason[:30].replace("(", r"\(")):
                CALLS[capability](model, x)
    if not any(model.supports(capability) for capability in ESTIMATORS.values()):
        with pytest.raises(Unsupported, match="declares no way to score x"):
            model.score(x)
    with pytest.raises(ValueError, match="capability must be one of"):
        model.supports("teleport")


def _density_models():
    cases = {cls.__name__: FACTORIES[cls] for cls in FACTORIES if not cls.conditional and cls.capabilities}
    return {**cases, **VARIANTS}


@pytest.mark.parametrize("name", list(_density_models()))
def test_declared_capabilities_work_on_a_tiny_batch(name):
    pyro.set_rng_seed(0)
    model, x = _density_models()[name]()
    model.eval()
    B, T, D = x.shape
    if model.supports("programs"):
        loss = Trace_ELBO().differentiable_loss(model.model, model.guide, x, MASK)
        assert math.isfinite(float(loss.detach()))
    if model.supports("exact"):
        exact = model.log_likelihood(x, MASK)
        assert exact.shape == (B,) and bool(torch.isfinite(exact).all())
        assert model.score(x, MASK).estimator == "exact" and torch.equal(model.score(x, MASK).log_likelihood, exact)
    for estimator, capability in ESTIMATORS.items():
        if model.supports(capability):
            score = model.score(x, MASK, estimator, num_particles=4)
            assert score.estimator.startswith(estimator) and score.log_likelihood.shape == (B,)
        else:
            with pytest.raises(Unsupported):
                model.score(x, MASK, estimator)
    if model.supports("latent"):
        for objective in (ELBO(model, mean_field=True), IWAE(model, 4)):
            bound = objective(x, MASK).bound
            assert bound.shape == (B,) and bool(torch.isfinite(bound).all())
    if model.supports("particles"):
        evidence = ParticleFilter(5).run(model, x, MASK).log_evidence
        assert evidence.shape == (B,) and bool(torch.isfinite(evidence).all())
    if model.supports("predictive"):
        step = model.predictive(x, MASK, 4)
        assert step.samples.shape == (4, B, T, D) and step.mean.shape == (B, T, D) and step.source
        assert step.log_density.shape == (B, T) and bool((step.log_density[~MASK] == 0).all())
        assert model.predictive(x, MASK, 0).samples is None
    if model.supports("generate"):
        fresh = model.generate(4, num_sequences=2)
        assert fresh.x.shape == (2, 4, D)
        continued = model.generate(3, prefix=x[:2, :2])
        assert continued.x.shape == (2, 5, D) and torch.equal(continued.x[:, :2], x[:2, :2])
        if continued.mean is not None:
            assert continued.mean.shape == (2, 5, D)
    if model.supports("forecast"):
        paths = model.forecast(x, MASK, 3, 5)
        assert paths.shape == (5, B, 3, D) and bool(torch.isfinite(paths).all())


def test_the_conditional_predictor_draws_targets_from_its_particle_mixture():
    predictor, x = FACTORIES[PFRNNPredictor]()
    predictor.eval()
    step = predictor.predictive(x, None, 7, generator=torch.Generator().manual_seed(0))
    assert step.samples.shape == (7, B, T, 1) and step.log_density is None
    # the mixture's mean is the head of the mean particle (the head is linear)
    torch.testing.assert_close(
        step.mean, predictor.head(predictor.belief(x, generator=torch.Generator().manual_seed(0)).mean)
    )
    program = PFRNNProgram(predictor)
    y = torch.randn(B, T, 1)
    assert math.isfinite(float(Trace_ELBO().differentiable_loss(program.model, program.guide, x, y).detach()))


def test_forecasts_of_variable_length_sequences_continue_from_each_last_step():
    """A predictor's forecast of a short row equals the forecast of that row alone, cut to its length."""

    class Climb(ExactPredictiveModel):  # x_t = x_{t-1} + 1 with a tiny noise, read off the last valid step
        obs_dim = 1

        def predictive_distribution(self, x, mask=None):
            shifted = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)
            return torch.distributions.Independent(torch.distributions.Normal(shifted + 1, 1e-6), 1)

    model = Climb()
    x = torch.tensor([[[1.0], [2.0], [3.0]], [[5.0], [0.0], [0.0]]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    paths = model.forecast(x, mask, 2, 3)
    torch.testing.assert_close(paths[:, 0, :, 0], torch.tensor([4.0, 5.0]).expand(3, 2), atol=1e-3, rtol=0)
    torch.testing.assert_close(paths[:, 1, :, 0], torch.tensor([6.0, 7.0]).expand(3, 2), atol=1e-3, rtol=0)


def test_the_readme_quickstart_imports_every_model_from_ppl_models():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart") :]
    imported = re.search(r"from ppl_models import \(([^)]*)\)", quickstart).group(1)
    names = {name.strip() for name in imported.split(",")}
    assert {cls.__name__ for cls in ppl_models.COLLECTION} <= names
    for cls in ppl_models.COLLECTION:  # and uses each of them
        assert quickstart.count(cls.__name__) >= 2, cls.__name__


@pytest.mark.parametrize("cls", [cls for cls in FACTORIES if cls.capabilities & {"programs"}], ids=lambda c: c.__name__)
def test_two_instances_train_side_by_side_in_one_parameter_store(cls):
    """Each instance registers its own parameters, so SVI on the second trains the second (no clear_param_store)."""
    first, x = FACTORIES[cls]()
    second, _ = FACTORIES[cls]()
    assert first.pyro_name != second.pyro_name
    args = (x, torch.randn(B, T, 1)) if cls.conditional else (x,)
    for model in (first, second):
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.05}), Trace_ELBO())
        for _ in range(2):
            svi.step(*args)
        changed = [name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])]
        assert len(changed) >= len(before) // 2, f"{model.pyro_name} trained {len(changed)} of {len(before)}"
    store = set(pyro.get_param_store().keys())
    assert any(k.startswith(first.pyro_name + "$$$") for k in store)
    assert any(k.startswith(second.pyro_name + "$$$") for k in store)

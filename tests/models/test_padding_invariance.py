"""Whatever the padding holds (NaN, infinities, huge values), no result changes: every model of the collection, the
filter and the bounds give the numbers (and gradients) they give with zeros there, and the caller's tensor is
untouched."""

import math

import pyro
import pytest
import torch
from factories import FACTORIES, MASK, PADDING_FILLS, padded_sequences, random_lgssm
from pyro.infer import Trace_ELBO

from ppl_models import PFGRU, PFLSTM, PFRNNProgram
from ppl_models.inference import ESTIMATORS, ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE
from ppl_models.psrnn import PSRNN


# --- every model of the collection ----------------------------------------------------------------------------------
def _seeded(compute):
    """``compute(generator)`` from fixed random numbers (Pyro's and torch's global ones, and a generator)."""
    pyro.set_rng_seed(0)
    return compute(torch.Generator().manual_seed(0))


def _results(model, x, y):
    """Every result of ``model`` over ``x`` (targets ``y``) taking ``MASK``, on the valid steps: ``{name: tensor}``."""
    out = {}
    if isinstance(model, (PFLSTM, PFGRU)):  # a layer: its filter's belief ([T, B, D] input)
        belief = _seeded(lambda g: model.filter(x.transpose(0, 1), mask=MASK, generator=g))
        out["filter mean"] = belief.mean[MASK]
    if isinstance(model, PFRNNProgram):
        out["Trace_ELBO"] = _seeded(lambda g: Trace_ELBO().differentiable_loss(model.model, model.guide, x, y, MASK))
    if model.supports("exact"):
        out["log_likelihood"] = _seeded(lambda g: model.log_likelihood(x, MASK))
    for estimator, capability in ESTIMATORS.items():
        if model.supports(capability):
            out[f"score {estimator}"] = _seeded(
                lambda g, e=estimator: model.score(x, MASK, e, num_particles=4).log_likelihood
            )
    if model.supports("predictive"):
        step = _seeded(lambda g: model.predictive(x, MASK, 3, num_particles=4, generator=g))
        out["predictive draws"], out["predictive mean"] = step.samples[:, MASK], step.mean[MASK]
        if step.log_density is not None:
            out["predictive log density"] = step.log_density  # 0 at padding
    if model.supports("forecast"):
        out["forecast"] = _seeded(lambda g: model.forecast(x, MASK, 2, 3, num_particles=4, generator=g))
    return out


def _padded(tensor, fill):
    return tensor.masked_fill(~MASK.unsqueeze(-1), fill)


@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_whatever_the_padding_holds_no_result_changes(cls):
    model, x = FACTORIES[cls]()
    model.eval()
    y = torch.randn(*x.shape[:2], 1, generator=torch.Generator().manual_seed(3))  # PFRNNProgram's targets
    with torch.no_grad():
        reference = _results(model, _padded(x, 0.0), _padded(y, 0.0))
        assert reference, f"{cls.__name__} has no result that takes a mask"
        for fill in PADDING_FILLS:
            x_fill, y_fill = _padded(x, fill), _padded(y, fill)
            kept = x_fill.clone()
            results = _results(model, x_fill, y_fill)
            torch.testing.assert_close(x_fill, kept, rtol=0, atol=0, equal_nan=True)  # the caller's x is untouched
            assert results.keys() == reference.keys()
            for name, value in results.items():
                assert torch.equal(value, reference[name]), f"{name} with padding {fill}"


@pytest.mark.parametrize("cls", [cls for cls in FACTORIES if cls.supports(cls, "exact")], ids=lambda c: c.__name__)
def test_nan_padding_leaves_the_gradient_of_the_likelihood_unchanged(cls):
    model, x = FACTORIES[cls]()
    model.eval()
    grads = []
    for fill in (0.0, math.nan):
        model.zero_grad()
        model.log_likelihood(_padded(x, fill), MASK).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert grads[0] and all(torch.equal(a, b) for a, b in zip(*grads))


# --- NaN in the padding of the filter, the bounds and the PSRNN ----------------------------------------------------
def _psrnn():
    model = PSRNN(1, state_dim=3, obs_features=3, num_features=20, init="random")
    model.initialize(*padded_sequences(0.0), generator=torch.Generator().manual_seed(0))
    return model


NAN_PADDING = [
    ("kalman", lambda x, m: random_lgssm(2, 1).log_likelihood(x, m)),
    (
        "filter",
        lambda x, m: (
            torch.manual_seed(0),
            ParticleFilter(8, generator=torch.Generator().manual_seed(0)).run(random_lgssm(2, 1), x, m).log_evidence,
        )[1],
    ),
    ("iwae", lambda x, m: (torch.manual_seed(0), IWAE(random_lgssm(2, 1), 4)(x, m).bound)[1]),
    ("elbo", lambda x, m: (torch.manual_seed(0), ELBO(random_lgssm(2, 1))(x, m).bound)[1]),
    ("psrnn", lambda x, m: _psrnn().log_likelihood(x, m)),
]


@pytest.mark.parametrize("compute", [c[1] for c in NAN_PADDING], ids=[c[0] for c in NAN_PADDING])
def test_nan_in_the_padding_is_accepted_and_changes_nothing(compute):
    with torch.no_grad():
        with_nan, zeros = compute(*padded_sequences(math.nan)), compute(*padded_sequences(0.0))
    assert torch.isfinite(with_nan).all()
    assert torch.equal(with_nan, zeros)

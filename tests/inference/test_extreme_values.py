"""Extreme values: the particle filter's weights stay normalised and finite up to the dtype's limit; every model
gives the same numbers whatever its padding holds, and a finite result with one warning for an extreme valid value."""

import math
import re
import warnings

import pyro
import pytest
import torch
from factories import FACTORIES, MASK, VARIANTS
from pyro.infer import Trace_ELBO

from ppl_models import (
    PFGRU,
    PFLSTM,
    SRNN,
    GRUBaseline,
    LinearGaussianSSM,
    PFRNNPredictor,
    PFRNNProgram,
    SMCTransformer,
    TransformerForecaster,
)
from ppl_models.inference import ESTIMATORS, ParticleFilter, Unsupported
from ppl_models.inference.particle_filter import Step
from ppl_models.inference.resampling import _draw_ancestors, effective_sample_size, normalize_with_total, resample
from ppl_models.inference.saturation import saturate, saturated_sum
from ppl_models.inference.validation import check_sequences

K, OUTLIER_STEP = 64, 5


def _bootstrap_lgssm(dtype):
    model = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0), proposal="bootstrap")
    return model.to(dtype)


def _with_outlier(value, dtype):
    x = torch.randn(3, 12, 1, generator=torch.Generator().manual_seed(1)).to(dtype)
    x[0, OUTLIER_STEP, 0] = value
    x[2, OUTLIER_STEP, 0] = -value
    return x


def _run(model, x, scheme="systematic", **kwargs):
    pf = ParticleFilter(K, resampling=scheme, generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pf.run(model, x, **kwargs)
    return result, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


F32_MAX, F64_MAX = torch.finfo(torch.float32).max, torch.finfo(torch.float64).max


@pytest.mark.parametrize("scheme", ["systematic", "stratified", "multinomial", "soft"])
@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (1e6, torch.float32),
        (1e18, torch.float32),
        (1e19, torch.float32),
        (1e30, torch.float32),
        (F32_MAX, torch.float32),
        (1e150, torch.float64),
        (F64_MAX, torch.float64),
    ],
)
def test_outlier_keeps_filter_finite_and_normalised(value, dtype, scheme):
    model = _bootstrap_lgssm(dtype)
    result, _ = _run(model, _with_outlier(value, dtype), scheme, keep_ancestry=True)
    assert torch.isfinite(result.log_evidence).all(), result.log_evidence
    assert ((result.ess >= 1) & (result.ess <= K)).all(), result.ess
    sums = result.history_log_weights.exp().sum(1)  # [T, B]
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5), sums
    # the outlier sequences are far less likely than the clean one
    assert (result.log_evidence[[0, 2]] < result.log_evidence[1] - 1e6).all()


def test_overflowing_outlier_warns_naming_step_and_sequence():
    _, messages = _run(_bootstrap_lgssm(torch.float32), _with_outlier(1e30, torch.float32))
    assert len(messages) == 1 and f"step {OUTLIER_STEP} of sequence 0" in messages[0], messages


def test_representable_outlier_neither_warns_nor_changes_the_weights_argmax():
    """At a 1e6 outlier (log-weights ~ -1e12 in float32) the filter's weights match a float64 hand computation."""
    model = _bootstrap_lgssm(torch.float32)
    x = _with_outlier(1e6, torch.float32)
    result, messages = _run(model, x, keep_ancestry=True)
    assert messages == []
    z = result.history["z"][OUTLIER_STEP].double()  # [K, B, 2]: particles that weighed the outlier
    mean = z @ model.C.double().T  # [K, B, 1]
    var = model.R.double()[0, 0]
    prior_log_w = result.history_log_weights[OUTLIER_STEP - 1].double()
    resampled = result.resampled[:, OUTLIER_STEP]
    prior_log_w = torch.where(resampled, torch.full_like(prior_log_w, -math.log(K)), prior_log_w)
    log_lik = -0.5 * (x[:, OUTLIER_STEP, 0].double() - mean[..., 0]) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)
    hand = torch.softmax(prior_log_w + log_lik, dim=0)
    filt = result.history_log_weights[OUTLIER_STEP].exp().double()
    assert torch.equal(hand.argmax(0)[[0, 2]], filt.argmax(0)[[0, 2]])
    assert torch.allclose(filt[:, [0, 2]], hand[:, [0, 2]], atol=1e-3)


def test_normalisation_with_tied_huge_weights_sums_to_one():
    # four tied particles at -1e12 in float32: one log-sum subtraction gave each weight 1
    log_w = torch.tensor([[-1e12], [-1e12], [-1e12], [-1e12], [-2e12]], dtype=torch.float32)
    normalised, total = normalize_with_total(log_w)
    assert torch.allclose(normalised.exp().sum(0), torch.ones(1))
    assert torch.allclose(normalised.exp()[:4, 0], torch.full((4,), 0.25))
    assert total.item() == pytest.approx(-1e12 + math.log(4), rel=1e-7)
    assert 1 <= effective_sample_size(log_w).item() <= 5


class _NaNAt:
    """A particle model whose incremental weight is NaN at one (step, sequence)."""

    def __init__(self, step, sequence):
        self.step_index, self.sequence = step, sequence

    def start(self, x, mask, num_particles):
        return {"z": x.new_zeros(num_particles, x.shape[0])}, None

    def step(self, state, t, x_t, context, *, reparameterize=True):
        log_w = torch.zeros_like(state["z"])
        if t == self.step_index:
            log_w[:, self.sequence] = math.nan
        return Step(state, log_w, log_w)


@pytest.mark.parametrize("scheme", ["systematic", "multinomial"])
def test_nan_weight_is_one_error_naming_step_and_sequence(scheme):
    x = torch.zeros(3, 6, 1)
    with pytest.raises(ValueError, match=r"NaN or \+inf at step 3 of sequence 1 \(x\[1, 3\]\)"):
        ParticleFilter(8, resampling=scheme, ess_threshold=1.0).run(_NaNAt(3, 1), x)


def test_nan_at_padding_is_ignored():
    x = torch.zeros(3, 6, 1)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 3:] = False
    result = ParticleFilter(8).run(_NaNAt(3, 1), x, mask)
    assert torch.isfinite(result.log_evidence).all()


def test_resample_refuses_nan_or_all_minus_inf_weights():
    for bad in ([[0.0], [math.nan]], [[-math.inf], [-math.inf]], [[math.inf], [0.0]]):
        with pytest.raises(ValueError, match="log_weights must be finite or -inf"):
            resample(torch.tensor(bad), "systematic")


@pytest.mark.parametrize("scheme", ["systematic", "stratified"])
def test_nan_weights_never_give_a_negative_index(scheme):
    weights = torch.tensor([[math.nan, 0.5], [math.nan, 0.5]])  # [K, B]
    ancestors = _draw_ancestors(weights, scheme, torch.Generator().manual_seed(0))
    assert ((ancestors >= 0) & (ancestors < 2)).all(), ancestors


# --- the shared mechanism (ppl_models.inference.saturation), against hand-computed values ----------------------------

LOWEST32 = torch.finfo(torch.float32).min
#: fills of the padding; 0 is the reference
PADDING = (1e30, -1e30, math.nan, math.inf, -math.inf)


def _recorded(compute):
    """``(result, [RuntimeWarning messages])`` of ``compute()``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compute()
    return result, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_saturate_holds_valid_minus_inf_and_ignores_the_padding():
    values = torch.tensor([[-1.0, -math.inf, -math.inf], [-2.0, math.nan, -math.inf]], requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    held, messages = _recorded(lambda: saturate(values, mask))
    assert torch.equal(held.detach(), torch.tensor([[-1.0, LOWEST32, LOWEST32], [-2.0, 0.0, 0.0]]))
    assert len(messages) == 1
    assert "at 2 valid steps of x, the first at step 1 of sequence 0 (x[0, 1])" in messages[0], messages
    held.sum().backward()  # the held and the padded entries pass no gradient, the others pass 1
    assert torch.equal(values.grad, torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))


def test_saturate_raises_for_nan_at_a_valid_step_unless_told_not_to():
    values = torch.tensor([[0.0, -1.0], [math.nan, 0.0]])
    with pytest.raises(ValueError, match=r"NaN or \+inf at step 0 of sequence 1 \(x\[1, 0\]\)"):
        saturate(values)
    assert saturate(values, failures=False).isnan().sum() == 1


def test_saturated_sum_holds_a_sum_that_overflows_from_finite_steps():
    steps = torch.tensor([[-2e38, -2e38], [-1.0, -2.0]])  # each finite, their sum below float32's range
    total, messages = _recorded(lambda: saturated_sum(steps))
    assert torch.equal(total, torch.tensor([LOWEST32, -3.0]))
    assert len(messages) == 1 and "the sum over the steps of the log-density" in messages[0], messages
    assert "1 valid sequence of x, the first at sequence 0 (x[0])" in messages[0], messages


def test_check_sequences_copies_x_only_where_its_padding_holds_something():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    x = torch.ones(2, 3, 1).masked_fill(~mask.unsqueeze(-1), 0.0)
    assert check_sequences(x, mask)[0] is x  # programs given the returned tensor recognise it
    for fill in PADDING:
        padded = x.masked_fill(~mask.unsqueeze(-1), fill)
        checked, _ = check_sequences(padded, mask)
        assert torch.equal(checked, x)
        untouched = padded[~mask].isnan() if math.isnan(fill) else padded[~mask] == fill
        assert untouched.all() and torch.equal(padded[mask], x[mask])  # the caller's tensor is untouched


# --- every model of the collection -----------------------------------------------------------------------------------


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
        for fill in PADDING:
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


#: the models that score x, with a Gaussian emission for the two whose Bernoulli one refuses a non-binary value
SCORING = {
    cls.__name__: FACTORIES[cls]
    for cls in FACTORIES
    if any(cls.supports(cls, capability) for capability in ESTIMATORS.values()) and not cls.conditional
}
SCORING["SRNN gaussian"] = VARIANTS["SRNN gaussian filter guide without Res_q, dropout"]
SCORING["GRUBaseline gaussian"] = VARIANTS["GRUBaseline gaussian"]
#: attention over the extreme input overflows the transformers' states (NaN): they cannot score the steps after it
OVERFLOWING = (SMCTransformer, TransformerForecaster)
EXTREMES = [(1e30, torch.float32), (1e200, torch.float64)]


def _with_extreme(x, value, dtype):
    x = x.to(dtype).clone()
    x[0, 1, 0] = value
    return x


def _refusal(model):
    """``(error, message)`` for a model that cannot score an extreme value at ``x[0, 1]``, else ``None``."""
    if isinstance(model, (SRNN, GRUBaseline)) and model.emission_kind == "bernoulli":
        return ValueError, "must be binary"  # outside the support: refused at the boundary
    if isinstance(model, OVERFLOWING):
        return ValueError, r"NaN or \+inf at step 2 of sequence 0 \(x\[0, 2\]\).*overflowed"
    return None


def _one_saturation_warning(messages, dtype):
    assert len(messages) == 1, messages
    pattern = (
        rf"fell below the {re.escape(str(dtype))} range \(-inf\) at \d+ valid (steps?|sequences?) of x, "
        r"the first at (step \d+ of )?sequence 0 \(x\[0"
    )
    assert re.search(pattern, messages[0]), messages[0]


@pytest.mark.parametrize(("value", "dtype"), EXTREMES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(SCORING))
def test_an_extreme_valid_value_gives_a_finite_result_and_one_warning(name, value, dtype):
    model, x = SCORING[name]()
    model = model.to(dtype).eval()
    x = _with_extreme(x, value, dtype)
    lowest, refusal = torch.finfo(dtype).min, _refusal(model)
    calls = {
        estimator: lambda e=estimator: model.score(x, MASK, e, num_particles=4).log_likelihood
        for estimator, capability in ESTIMATORS.items()
        if model.supports(capability)
    }
    if model.supports("predictive"):
        calls["predictive"] = lambda: model.predictive(x, MASK, 0, num_particles=4).log_density
    for name, compute in calls.items():
        with torch.no_grad():
            if refusal:
                with pytest.raises(refusal[0], match=refusal[1]):
                    compute()
                continue
            result, messages = _recorded(compute)
        _one_saturation_warning(messages, dtype)
        assert torch.isfinite(result).all(), (name, result)
        # the true value (about -value^2 / 2, or below) is below the range: held at its lowest value
        assert (result[0, 1] if name == "predictive" else result[0]) == lowest, (name, result)
    if model.supports("exact") and not refusal:  # the other sequences keep their numbers
        clean = x.clone()
        clean[0, 1, 0] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert torch.equal(model.log_likelihood(x, MASK)[1:], model.log_likelihood(clean, MASK)[1:])


@pytest.mark.parametrize("cls", [PFLSTM, PFGRU, PFRNNPredictor, PFRNNProgram], ids=lambda c: c.__name__)
def test_the_models_without_a_density_of_x_say_so(cls):
    model, x = FACTORIES[cls]()
    with pytest.raises(Unsupported, match="declares no way to score x"):
        model.score(_with_extreme(x, 1e30, torch.float32), MASK)

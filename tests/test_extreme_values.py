"""Extreme observations: the particle filter's weights stay normalised and finite up to the dtype's limit."""

import math
import warnings

import pytest
import torch

from inference import ParticleFilter
from inference.particle_filter import Step
from inference.resampling import _draw_ancestors, effective_sample_size, normalize_with_total, resample
from ppl_models import LinearGaussianSSM

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
@pytest.mark.parametrize(("value", "dtype"), [(1e6, torch.float32), (1e18, torch.float32), (1e19, torch.float32),
                                              (1e30, torch.float32), (F32_MAX, torch.float32),
                                              (1e150, torch.float64), (F64_MAX, torch.float64)])
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

"""Resampling schemes against their definitions: offspring means, soft weights, adaptivity; tied huge weights
normalised, NaN or all -inf weights refused."""

import math

import numpy as np
import pytest
import torch

from ppl_models.inference.resampling import (
    SCHEMES,
    _draw_ancestors,
    _particle_max,
    _resample_normalized,
    effective_sample_size,
    gather_particles,
    normalize_with_total,
    resample,
    resample_adaptive,
)

K, B = 6, 3


def _weights(seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(K, B, generator=g, dtype=torch.float64) ** 3 + 1e-3
    return (w / w.sum(0)).log()


def _offspring(ancestors):
    return torch.zeros(ancestors.shape, dtype=torch.float64).scatter_add_(
        0, ancestors, torch.ones(ancestors.shape, dtype=torch.float64)
    )


@pytest.mark.parametrize("scheme", ["multinomial", "stratified", "systematic", "soft"])
def test_offspring_counts_have_mean_k_times_sampling_weights(scheme):
    log_w = _weights()
    alpha = 0.6
    w = log_w.exp()
    target = w if scheme != "soft" else alpha * w + (1 - alpha) / K  # soft samples from the mixture q
    g = torch.Generator().manual_seed(1)
    draws = torch.stack([_offspring(resample(log_w, scheme, alpha=alpha, generator=g)[0]) for _ in range(4000)])
    mean, sd = draws.mean(0), draws.std(0)
    # CLT: the empirical mean is within 5 standard errors of K * target for every particle and sequence
    se = sd / math.sqrt(draws.shape[0]) + 1e-3
    assert torch.all((mean - K * target).abs() < 5 * se), (mean, K * target)
    assert torch.all(draws.sum(1) == K)


@pytest.mark.parametrize("scheme", ["stratified", "systematic"])
def test_ordered_schemes_agree_with_inverse_cdf_by_search(scheme):
    """The O(K) offspring construction equals the textbook search of the cdf, uniform by uniform."""
    log_w = _weights(3)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    ancestors, _ = resample(log_w, scheme, generator=g1)
    shape = (B, 1) if scheme == "systematic" else (B, K)  # the draws are laid out particles last
    u = torch.rand(shape, generator=g2, dtype=torch.float64).T
    points = (torch.arange(K, dtype=torch.float64).unsqueeze(-1) + u) / K
    cdf = np.cumsum(log_w.exp().numpy(), axis=0)
    for b in range(B):
        expected = np.minimum(np.searchsorted(cdf[:, b], points[:, b].numpy(), side="right"), K - 1)
        assert ancestors[:, b].tolist() == expected.tolist()


@pytest.mark.parametrize("scheme", ["stratified", "systematic"])
def test_accelerator_search_path_matches_the_scan_path(scheme):
    """The searchsorted construction used on accelerators gives the same ancestors from the same uniforms."""
    from ppl_models.inference.resampling import _draw_ancestors, _search_ancestors

    for k, b in [(5, 3), (100, 16), (1000, 4)]:
        weights = torch.softmax(3 * torch.randn(k, b, generator=torch.Generator().manual_seed(k)), 0)
        scan = _draw_ancestors(weights, scheme, torch.Generator().manual_seed(9))
        search = _search_ancestors(weights.T, scheme, torch.Generator().manual_seed(9)).T
        assert torch.equal(scan, search)


def test_systematic_offspring_are_floor_or_ceil_of_k_w():
    log_w = _weights(2)
    kw = K * log_w.exp()
    for seed in range(200):
        counts = _offspring(resample(log_w, "systematic", generator=torch.Generator().manual_seed(seed))[0])
        assert torch.all(counts >= torch.floor(kw) - 1e-9) and torch.all(counts <= torch.ceil(kw) + 1e-9)


def test_soft_weights_equal_importance_correction_formula():
    log_w = _weights(4)
    alpha = 0.3
    ancestors, new_log_w = resample(log_w, "soft", alpha=alpha, generator=torch.Generator().manual_seed(0))
    w = log_w.exp().numpy()
    for b in range(B):
        picked = w[ancestors[:, b].numpy(), b]
        corrected = picked / (alpha * picked + (1 - alpha) / K)
        np.testing.assert_allclose(new_log_w[:, b].exp().numpy(), corrected / corrected.sum(), rtol=1e-10)


def test_gradients_flow_through_soft_weights_not_hard_ones():
    log_w = _weights(5).requires_grad_()
    _, soft = resample(log_w, "soft", alpha=0.5, generator=torch.Generator().manual_seed(0))
    (soft * torch.arange(K, dtype=torch.float64).unsqueeze(-1)).sum().backward()
    assert log_w.grad is not None and log_w.grad.abs().sum() > 0
    _, hard = resample(log_w.detach().requires_grad_(), "systematic")
    assert not hard.requires_grad
    assert torch.allclose(hard, torch.full_like(hard, -math.log(K)))


def test_none_keeps_particles_and_normalises():
    log_w = _weights(6) + 3.0
    ancestors, new_log_w = resample(log_w, "none")
    assert torch.equal(ancestors, torch.arange(K).unsqueeze(-1).expand(K, B))
    assert torch.allclose(new_log_w.exp().sum(0), torch.ones(B, dtype=torch.float64))


def test_ess_matches_definition():
    log_w = _weights(7)
    w = log_w.exp()
    assert torch.allclose(effective_sample_size(log_w + 5.0), 1 / (w**2).sum(0))
    assert torch.allclose(effective_sample_size(torch.zeros(K, B)), torch.full((B,), float(K)))


def test_adaptive_resamples_only_low_ess_sequences():
    log_w = torch.zeros(K, B, dtype=torch.float64)
    log_w[:, 1] = torch.tensor([0.0, -20, -20, -20, -20, -20], dtype=torch.float64)  # ESS ~ 1
    ancestors, new_log_w, resampled = resample_adaptive(log_w, "systematic", ess_threshold=0.5)
    assert resampled.tolist() == [False, True, False]
    assert torch.equal(ancestors[:, 0], torch.arange(K)) and torch.equal(ancestors[:, 2], torch.arange(K))
    assert torch.all(ancestors[:, 1] == 0)
    assert torch.allclose(new_log_w[:, 1], torch.full((K,), -math.log(K), dtype=torch.float64))
    assert torch.allclose(new_log_w[:, 0], log_w[:, 0] - math.log(K))
    always = resample_adaptive(log_w, "systematic", ess_threshold=1.0)[2]
    never = resample_adaptive(log_w, "systematic", ess_threshold=0.0)[2]
    assert always.all() and not never.any()


@pytest.mark.parametrize("scheme", ["systematic", "stratified"])
def test_adaptive_scans_of_the_resampled_sequences_draw_as_resampling_all(scheme):
    # the CPU path scans only the sequences below the threshold; the full draw, then selected, gives the same bits
    g = torch.Generator().manual_seed(4)
    log_w = normalize_with_total(torch.randn(40, 9, generator=g) * torch.linspace(0.1, 3.0, 9))[0]
    ess = effective_sample_size(log_w)
    resampled = ess < 0.5 * 40
    assert 0 < resampled.sum() < 9
    ancestors, new_log_w, flags = resample_adaptive(
        log_w, scheme, ess_threshold=0.5, generator=torch.Generator().manual_seed(1), ess=ess, weights=log_w.exp()
    )
    every, uniform = _resample_normalized(log_w, scheme, 0.5, torch.Generator().manual_seed(1))
    assert torch.equal(flags, resampled)
    assert torch.equal(ancestors, torch.where(resampled, every, torch.arange(40).unsqueeze(-1)))
    assert torch.equal(new_log_w, torch.where(resampled, uniform, log_w))
    assert ancestors.is_contiguous()


@pytest.mark.parametrize("shape", [(1000, 16), (64, 8), (30, 128), (24, 3), (7, 9)])
def test_particle_max_is_the_column_max(shape):
    values = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    values[:, 0] = -math.inf
    assert torch.equal(_particle_max(values), values.max(dim=0).values)
    assert torch.equal(_particle_max(values.T.contiguous().T), values.max(dim=0).values)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_same_generator_seed_same_draws(scheme):
    log_w = _weights(8)
    a1, _ = resample(log_w, scheme, generator=torch.Generator().manual_seed(3))
    a2, _ = resample(log_w, scheme, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a1, a2)


def test_gather_particles_selects_per_sequence():
    values = torch.arange(K * B * 2).reshape(K, B, 2)
    ancestors = torch.randint(0, K, (4, B))
    out = gather_particles(values, ancestors)
    for s in range(4):
        for b in range(B):
            assert torch.equal(out[s, b], values[ancestors[s, b], b])


@pytest.mark.parametrize("features", [(), (1,), (3,), (8,), (4, 5)])
def test_gather_particles_row_copy_matches_gather_with_gradients(features):
    """Feature rows are copied by index_select; values and gradients equal torch.gather's."""
    values = torch.randn((K, B) + features, dtype=torch.float64, requires_grad=True)
    ancestors = torch.randint(0, K, (K + 2, B))
    index = ancestors.reshape(ancestors.shape + (1,) * len(features)).expand(ancestors.shape + features)
    weights = torch.randn((K + 2, B) + features, dtype=torch.float64)
    out = gather_particles(values, ancestors)
    (grad,) = torch.autograd.grad((out * weights).sum(), values)
    expected = torch.gather(values, 0, index)
    (expected_grad,) = torch.autograd.grad((expected * weights).sum(), values)
    assert torch.equal(out, expected) and torch.equal(grad, expected_grad)
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        gather_particles(values, torch.full((2, B), K))


def test_bad_input_raises_value_error_naming_argument():
    with pytest.raises(ValueError, match="scheme"):
        resample(_weights(), "residual")
    with pytest.raises(ValueError, match="log_weights"):
        resample(torch.zeros(K), "systematic")
    with pytest.raises(ValueError, match="alpha"):
        resample(_weights(), "soft", alpha=0.0)


# --- NaN, infinite and tied huge weights --------------------------------------------------------------------------
def test_normalisation_with_tied_huge_weights_sums_to_one():
    # four tied particles at -1e12 in float32: one log-sum subtraction gave each weight 1
    log_w = torch.tensor([[-1e12], [-1e12], [-1e12], [-1e12], [-2e12]], dtype=torch.float32)
    normalised, total = normalize_with_total(log_w)
    assert torch.allclose(normalised.exp().sum(0), torch.ones(1))
    assert torch.allclose(normalised.exp()[:4, 0], torch.full((4,), 0.25))
    assert total.item() == pytest.approx(-1e12 + math.log(4), rel=1e-7)
    assert 1 <= effective_sample_size(log_w).item() <= 5


def test_resample_refuses_nan_or_all_minus_inf_weights():
    for bad in ([[0.0], [math.nan]], [[-math.inf], [-math.inf]], [[math.inf], [0.0]]):
        with pytest.raises(ValueError, match="log_weights must be finite or -inf"):
            resample(torch.tensor(bad), "systematic")


@pytest.mark.parametrize("scheme", ["systematic", "stratified"])
def test_nan_weights_never_give_a_negative_index(scheme):
    weights = torch.tensor([[math.nan, 0.5], [math.nan, 0.5]])  # [K, B]
    ancestors = _draw_ancestors(weights, scheme, torch.Generator().manual_seed(0))
    assert ((ancestors >= 0) & (ancestors < 2)).all(), ancestors

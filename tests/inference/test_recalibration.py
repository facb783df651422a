"""Recalibration of forecast samples: hand-computed fits, known true scales, conformal coverage."""

import math

import pytest
import torch

from ppl_models.inference import calibration
from ppl_models.inference.recalibration import fit_recalibration


def _gaussian_forecasts(num_sequences, generator, *, horizon=3, num_samples=400):
    """Forecasts N(0, 1) at every step, outcomes N(0.5, (1.5 h)^2) at step h: wrong place, scale and growth."""
    samples = torch.randn(num_samples, num_sequences, horizon, 1, generator=generator)
    growth = torch.arange(1, horizon + 1, dtype=torch.float32).reshape(1, horizon, 1)
    observed = 0.5 + 1.5 * growth * torch.randn(num_sequences, horizon, 1, generator=generator)
    return samples, observed


def test_scale_by_hand():
    samples = torch.tensor([-1.0, 0.0, 1.0]).reshape(3, 1, 1, 1)  # median 0, variance 1
    fitted = fit_recalibration(samples, torch.tensor([[[3.0]]]), "scale")  # squared error 9: factor 3
    assert fitted.factors.tolist() == [3.0] and fitted.pits is None
    assert fitted.apply(samples).flatten().tolist() == [-3.0, 0.0, 3.0]


def test_scale_recovers_a_known_true_scale_per_step():
    generator = torch.Generator().manual_seed(0)
    samples = torch.randn(500, 4000, 2, 1, generator=generator)  # forecasts N(0, 1)
    truth_scale = torch.tensor([[2.0], [0.5]])  # outcomes N(0, 2^2) one step ahead, N(0, 0.5^2) two
    observed = torch.randn(4000, 2, 1, generator=generator) * truth_scale
    fitted = fit_recalibration(samples, observed, "scale", per_step=True)
    torch.testing.assert_close(fitted.factors, torch.tensor([2.0, 0.5]), atol=0.05, rtol=0)
    pooled = fit_recalibration(samples, observed, "scale")  # the default: sqrt((4 + 0.25) / 2)
    assert pooled.factors.item() == pytest.approx(math.sqrt(2.125), abs=0.05)


def test_conformal_levels_by_hand():
    validation = torch.arange(4.0).reshape(4, 1, 1, 1).expand(4, 1, 3, 1)  # samples 0..3: median 1.5, variance 5/3
    # squared errors about the median 1, 1/4, 15/4: mean 5/3, so the spread factor is 1 and the
    # PITs are those of the samples 0..3: 1/4, (2 + 1/2) / 4 and 1
    observed = torch.tensor([0.5, 2.0, 1.5 + 3.75**0.5]).reshape(1, 3, 1)
    fitted = fit_recalibration(validation, observed, "conformal", per_step=False)
    assert fitted.factors.item() == pytest.approx(1.0)
    torch.testing.assert_close(fitted.pits, torch.tensor([[0.25, 0.625, 1.0]]))
    # n = 3: q(p) = u_(floor(4p)) below 1/2 and u_(ceil(4p)) above, with u_(0) = 0 and u_(4) = 1;
    # on samples 0..100 the level-q quantile is 100 q
    new = fitted.apply(torch.arange(101.0).reshape(101, 1, 1, 1).expand(101, 1, 3, 1))
    for i, expected in ((20, 0.0), (30, 25.0), (50, 62.5), (60, 100.0)):  # p = (i + 1/2) / 101
        torch.testing.assert_close(new[i, 0].flatten(), torch.full((3,), expected))


@pytest.mark.parametrize("per_step", [True, False])
def test_conformal_intervals_cover_at_their_level_on_exchangeable_data(per_step):
    generator = torch.Generator().manual_seed(1)
    fitted = fit_recalibration(*_gaussian_forecasts(600, generator), "conformal", per_step=per_step)
    samples, observed = _gaussian_forecasts(3000, generator)
    levels = (0.5, 0.8, 0.95)
    before = calibration.coverage(samples, observed, levels)
    after = calibration.coverage(fitted.apply(samples), observed, levels)
    assert all(before[level] < level - 0.2 for level in levels)  # far too narrow before
    for level in levels:
        # binomial error of 9000 outcomes (< 0.006) plus the conformal fit's from 600 (per step) sequences
        assert after[level] == pytest.approx(level, abs=0.035)
    if per_step:  # each step ahead on its own, 3000 outcomes each
        new = fitted.apply(samples)
        rates = [calibration.coverage(new[:, :, h : h + 1], observed[:, h : h + 1], [0.8])[0.8] for h in range(3)]
        assert all(abs(rate - 0.8) < 0.04 for rate in rates)


def test_scale_keeps_the_median_and_conformal_keeps_the_sample_count():
    generator = torch.Generator().manual_seed(2)
    samples, observed = _gaussian_forecasts(50, generator)
    for method in ("scale", "conformal"):
        new = fit_recalibration(samples, observed, method).apply(samples)
        assert new.shape == samples.shape
    scaled = fit_recalibration(samples, observed, "scale").apply(samples)
    torch.testing.assert_close(scaled.quantile(0.5, dim=0), samples.quantile(0.5, dim=0))


def test_bad_input_is_named():
    samples, observed = _gaussian_forecasts(5, torch.Generator().manual_seed(3))
    with pytest.raises(ValueError, match="method"):
        fit_recalibration(samples, observed, "isotonic")
    with pytest.raises(ValueError, match="observed"):
        fit_recalibration(samples, observed[:, :2])
    with pytest.raises(ValueError, match="samples"):
        fit_recalibration(samples[0], observed)
    with pytest.raises(ValueError, match="observed"):
        fit_recalibration(samples, observed.clone().fill_(float("nan")))
    with pytest.raises(TypeError, match="per_step"):
        fit_recalibration(samples, observed, per_step="yes")
    with pytest.raises(ValueError, match="samples must spread"):
        fit_recalibration(torch.zeros_like(samples), observed, "scale")
    with pytest.raises(ValueError, match="horizon H = 3"):
        fit_recalibration(samples, observed).apply(samples[:, :, :2])

"""Noise refits of one-step predictors (ppl_models.predictive_noise), the runner's default refit and the MSE objective.

Truths: closed-form MLEs on hand-given residuals, the parameters that generated large samples,
scipy's Student-t, and nominal coverage on fresh draws from a known predictive.
"""

import math

import pytest
import scipy.stats
import torch

from ppl_models import RecurrentPredictor, TwoStageKalmanFilter
from ppl_models.experiments.config import evaluation_options
from ppl_models.experiments.data import ExperimentData
from ppl_models.experiments.studies.psrnn_calibration import calibration_from_pit, pit
from ppl_models.inference.evaluation import evaluate
from ppl_models.inference.squared_error import SquaredError
from ppl_models.predictive_noise import SHAPE_POINTS, check_refit, choose_shape, fit_noise, noise_distribution


def test_gaussian_refit_is_the_closed_form_mle_by_hand():
    residuals = torch.tensor([[1.0, 0.0], [-3.0, 2.0], [0.0, -2.0], [2.0, 0.0]])
    fit = fit_noise(residuals, shape="normal")
    # sigma_d = sqrt(mean r^2): (1 + 9 + 0 + 4) / 4 = 3.5 and (0 + 4 + 4 + 0) / 4 = 2
    torch.testing.assert_close(fit.log_scale.exp(), torch.tensor([3.5**0.5, 2.0**0.5]))
    assert torch.isinf(fit.df).all() and fit.weight.shape == (0, 2)


def test_student_t_refit_recovers_the_generating_scale_and_degrees_of_freedom():
    df, scale = torch.tensor([3.0, 5.0]), torch.tensor([0.5, 2.0])
    z = torch.from_numpy(scipy.stats.t.rvs(df.numpy(), size=(20_000, 2), random_state=0)).float()
    fit = fit_noise(z * scale, shape="student-t")
    torch.testing.assert_close(fit.log_scale.exp(), scale, rtol=0.03, atol=0)
    torch.testing.assert_close(fit.df, df, rtol=0.12, atol=0)  # about 3 sd of the MLE at 20,000 draws


def test_student_t_refit_of_gaussian_residuals_has_large_degrees_of_freedom():
    residuals = 0.3 * torch.randn(50_000, 1, generator=torch.Generator().manual_seed(1))
    fit = fit_noise(residuals, shape="student-t")
    assert fit.df.item() > 50 and fit.log_scale.exp().item() == pytest.approx(0.3, rel=0.02)


def test_state_dependent_scale_recovers_the_generating_log_linear_scale():
    generator = torch.Generator().manual_seed(2)
    features = 3.0 + 2.0 * torch.randn(60_000, 3, generator=generator)  # not standardised: the fit must undo it
    weight = torch.tensor([[0.3, 0.0], [0.0, -0.2], [0.1, 0.1]])
    bias = torch.tensor([-1.0, 0.5])
    residuals = torch.randn(60_000, 2, generator=generator) * (bias + features @ weight).exp()
    fit = fit_noise(residuals, features, shape="normal")
    torch.testing.assert_close(fit.weight, weight, atol=0.01, rtol=0)
    torch.testing.assert_close(fit.log_scale, bias, atol=0.04, rtol=0)


def test_pit_of_a_cauchy_predictive_is_the_arctan_by_hand():
    # Student-t with 1 degree of freedom: F(x) = 1/2 + arctan((x - loc) / scale) / pi
    x = torch.tensor([0.0, 3.0, -10.0, 1.0])
    predictive = torch.distributions.StudentT(torch.tensor(1.0), torch.tensor(0.0), torch.tensor(2.0))
    expected = 0.5 + torch.atan(x.double() / 2) / math.pi
    torch.testing.assert_close(pit(predictive, x), expected)
    # |F - 1/2| = 0, 0.3128, 0.4372, 0.1476: inside the 50% interval twice, the 80% three times, the 95% always
    out = calibration_from_pit(pit(predictive, x), x)
    assert (out["coverage_0.5"], out["coverage_0.8"], out["coverage_0.95"]) == (0.5, 0.75, 1.0)


def test_fitted_student_t_intervals_have_nominal_coverage_on_fresh_draws():
    df, scale = 4.0, 0.7
    fit = fit_noise(torch.from_numpy(scale * scipy.stats.t.rvs(df, size=(40_000, 1), random_state=3)).float())
    fresh = torch.from_numpy(scale * scipy.stats.t.rvs(df, size=20_000, random_state=4))
    fitted = torch.distributions.StudentT(fit.df.double(), 0.0, fit.log_scale.exp().double())
    out = calibration_from_pit(pit(fitted, fresh), fresh)
    for level in (0.5, 0.8, 0.95):  # binomial sd of a coverage over 20,000 draws is at most 0.0035
        assert out[f"coverage_{level:g}"] == pytest.approx(level, abs=0.012)
    # the fitted 95% interval against scipy's quantile of the true law
    half_width = scipy.stats.t.ppf(0.975, fit.df.item()) * fit.log_scale.exp().item()
    assert half_width == pytest.approx(scipy.stats.t.ppf(0.975, df) * scale, rel=0.03)


def _fixed_decoder_model():
    """A GRU predictor whose decoder ignores the state: predictions 1 and -1."""
    model = RecurrentPredictor(2, cell="gru", state_dim=3, encoder_dim=2)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(torch.tensor([1.0, -1.0]))
    return model


def test_calibrate_sets_a_student_t_predictive_that_scipy_scores_alike():
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(6, 30, 2, generator=generator)
    model = _fixed_decoder_model().calibrate(x, refit="student-t+state")
    predictive = model.predictive_distribution(x)
    base = predictive.base_dist
    assert isinstance(base, torch.distributions.StudentT) and torch.isfinite(model.noise_df).all()
    states = model.states(x)
    scale = (model.log_noise_scale + states @ model.noise_weight).exp()
    expected = scipy.stats.t.logpdf(
        x.detach().numpy(), model.noise_df.numpy(), [1.0, -1.0], scale.detach().numpy()
    ).sum(-1)
    torch.testing.assert_close(
        predictive.log_prob(x).detach().double(), torch.from_numpy(expected), rtol=1e-4, atol=1e-4
    )
    model.fit_noise_scale(x)  # back to the constant Gaussian
    assert isinstance(model.predictive_distribution(x).base_dist, torch.distributions.Normal)
    assert torch.isinf(model.noise_df).all() and not model.noise_weight.any()


def test_calibrate_ignores_padding_and_names_a_bad_refit():
    x = torch.tensor([[[1.0, 0.0], [3.0, -1.0], [1.0, 1.0]], [[0.0, -1.0], [5.0, 9.0], [2.0, 2.0]]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    model = _fixed_decoder_model().calibrate(x, mask, refit="normal")
    # valid residuals, feature 0: 0, 2, 0, -1, 4; feature 1: 1, 0, 2, 0, 10
    torch.testing.assert_close(model.log_noise_scale.exp(), torch.tensor([(21 / 5) ** 0.5, (105 / 5) ** 0.5]))
    with pytest.raises(ValueError, match="noise refit must be one of"):
        model.calibrate(x, mask, refit="laplace")


def test_fit_noise_names_bad_shapes():
    with pytest.raises(ValueError, match="residuals must be"):
        fit_noise(torch.zeros(5))
    with pytest.raises(ValueError, match="features must be"):
        fit_noise(torch.zeros(5, 2), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="evaluate.noise_refit must be one of"):
        evaluation_options({"noise_refit": "t"})
    with pytest.raises(ValueError, match="noise refit must be one of"):
        _fixed_decoder_model().refit_noise(torch.zeros(1, 2, 2), None, "t")


def test_runner_refits_one_step_predictors_on_the_validation_split_only():
    generator = torch.Generator().manual_seed(6)
    split = lambda scale: (scale * torch.randn(4, 20, 2, generator=generator), torch.ones(4, 20, dtype=torch.bool))  # noqa: E731
    data = ExperimentData(split(1.0), split(3.0), split(100.0), "test data")
    model = _fixed_decoder_model()
    settings = {"estimators": ["exact"], "predictive_samples": 0}
    fitted = evaluate(model, *data.test, valid=data.valid, noise_refit="normal", **settings)["noise_refit"]
    expected = (data.valid[0] - torch.tensor([1.0, -1.0])).pow(2).mean((0, 1)).sqrt()
    torch.testing.assert_close(model.log_noise_scale.exp(), expected)
    assert fitted["refit"] == "normal" and fitted["split"] == "valid"
    # the trained scale (1) is a third of the validation errors': the check keeps the refit
    assert fitted["kept"] and fitted["nlpd_refit"] < fitted["nlpd_unrefit"]
    assert "noise_refit" not in evaluate(model, *data.test, valid=data.valid, **settings).metrics  # "none"
    kalman = TwoStageKalmanFilter(2, state_dim=2, horizon=2)  # no noise of its own to refit
    assert "noise_refit" not in evaluate(kalman, *data.test, valid=data.valid, noise_refit="normal", **settings).metrics
    with pytest.raises(ValueError, match="^noise_refit='normal' needs the validation split: pass valid="):
        evaluate(model, *data.test, noise_refit="normal", **settings)


def test_a_refit_on_fewer_than_four_validation_steps_keeps_the_trained_noise():
    model = _fixed_decoder_model()
    x, mask = torch.randn(2, 3, 2), torch.tensor([[True, True, False], [True, False, False]])
    record = model.refit_noise(x, mask, "student-t")
    assert record["refit"] == "student-t" and not record["kept"] and record["reason"].startswith("3 validation steps")
    assert model.log_noise_scale.tolist() == [0.0, 0.0]  # the trained (initial) noise, untouched


def test_squared_error_objective_is_the_mse_by_hand():
    x = torch.tensor([[[1.0, 0.0], [3.0, -1.0], [1.0, 1.0]], [[0.0, -1.0], [5.0, 9.0], [2.0, 2.0]]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    out = SquaredError(_fixed_decoder_model())(x, mask)
    # squared errors per step (mean over the 2 features): (0+1)/2, (4+0)/2, (0+4)/2 | (1+0)/2, (16+100)/2
    torch.testing.assert_close(out.bound, torch.tensor([-4.5, -58.5]))
    torch.testing.assert_close(out.loss, torch.tensor(63.0 / 5))
    with pytest.raises(TypeError, match="objective mse needs a model with predict"):
        SquaredError(TwoStageKalmanFilter(2, state_dim=2, horizon=2))


def _calibration_of(shape, draws):
    """Calibration on 20,000 fresh draws of the noise of ``shape`` fit to 20,000 others."""
    fresh = draws(20_000, 8)
    fit = fit_noise(draws(20_000, 7), shape=shape)
    predictive = noise_distribution(
        torch.zeros_like(fresh), fit.log_scale.exp().expand_as(fresh), fit.df, fit.shape_points, fit.bandwidth
    )
    return calibration_from_pit(pit(predictive, fresh).flatten(), fresh.flatten())


def test_empirical_shape_calibrates_bimodal_errors_that_no_scale_can():
    def bimodal(n, seed):  # +-1 plus N(0, 0.2^2)
        generator = torch.Generator().manual_seed(seed)
        sign = torch.randint(0, 2, (n, 1), generator=generator) * 2.0 - 1
        return sign + 0.2 * torch.randn(n, 1, generator=generator)

    normal, empirical = _calibration_of("normal", bimodal), _calibration_of("empirical", bimodal)
    # the Gaussian's 50% interval, +-0.69 sd = +-0.70, holds only errors within 0.3 of 0: P(|N(0,1)| > 1.5) = 6%
    assert normal["coverage_0.5"] < 0.1 and normal["pit_ks"] > 0.2
    assert empirical["coverage_0.5"] == pytest.approx(0.5, abs=0.015) and empirical["pit_ks"] < 0.04
    # Silverman's bandwidth oversmooths two sharp peaks: the outer intervals are a little too wide
    assert 0.8 < empirical["coverage_0.8"] < 0.86 and 0.95 < empirical["coverage_0.95"] < 0.99


def test_empirical_shape_is_nominal_for_skewed_errors():
    def skewed(n, seed):  # N(-0.7, 0.5^2) w.p. 0.3, N(0.3, 0.5^2) w.p. 0.7 (mean 0)
        generator = torch.Generator().manual_seed(seed)
        stay = torch.rand(n, 1, generator=generator) < 0.3
        return torch.where(stay, -0.7, 0.3) + 0.5 * torch.randn(n, 1, generator=generator)

    empirical = _calibration_of("empirical", skewed)
    for level in (0.5, 0.8, 0.95):  # binomial sd of a coverage over 20,000 draws is at most 0.0035
        assert empirical[f"coverage_{level:g}"] == pytest.approx(level, abs=0.015)
    assert empirical["pit_ks"] < 0.015 < _calibration_of("normal", skewed)["pit_ks"]


def test_auto_shape_picks_student_t_for_heavy_tails_and_empirical_for_two_modes():
    heavy = torch.from_numpy(scipy.stats.t.rvs(2.0, size=(4_000, 1), random_state=9)).float()
    sign = torch.randint(0, 2, (4_000, 1), generator=torch.Generator().manual_seed(10)) * 2.0 - 1
    two_modes = sign + 0.2 * torch.randn(4_000, 1, generator=torch.Generator().manual_seed(11))
    assert choose_shape(heavy) == "student-t"
    assert choose_shape(two_modes) == "empirical"
    fit = fit_noise(two_modes, shape="auto")
    assert fit.shape_points.shape == (1, SHAPE_POINTS) and torch.isinf(fit.df).all()


def test_state_dependent_scale_is_not_extrapolated_beyond_the_states_it_was_fit_to():
    # residuals N(0, 0.5^2) whatever the state; 20 state features, 15 of them nearly constant (sd 0.01)
    generator = torch.Generator().manual_seed(12)
    spread = torch.cat([torch.ones(5), torch.full((15,), 0.01)])
    features = spread * torch.randn(400, 20, generator=generator)
    fit = fit_noise(0.5 * torch.randn(400, 2, generator=generator), features, shape="normal")
    # a state 100 sd out in every nearly constant direction: the raw log-linear scale runs away ...
    far = torch.cat([torch.zeros(5), torch.ones(15)]).expand(3, 20)
    raw = (fit.log_scale + far @ fit.weight).exp()
    assert (raw.max() / raw.min()).item() > 1e3
    # ... the bounded one stays within the range it spans on the fitted rows, near the true 0.5
    scale = fit.log_scales(far).exp()
    inside = fit.log_scales(features).exp()
    assert (scale >= inside.min(0).values - 1e-6).all() and (scale <= inside.max(0).values + 1e-6).all()
    assert ((scale > 0.25) & (scale < 1.0)).all(), scale  # the 95% interval +-1.96 sigma within 2x of +-0.98
    torch.testing.assert_close(fit.log_scales(None), fit.log_scale)


def test_refit_check_is_the_two_fold_held_out_nlpd_by_hand():
    residuals = torch.tensor([[1.0, 0.0], [-3.0, 2.0], [0.0, -2.0], [2.0, 0.0], [1.0, 1.0]])
    unrefit = torch.tensor([-2.0, -3.0, -4.0, -5.0, -6.0])
    verdict = check_refit(residuals, None, unrefit, shape="normal")
    # halves: rows 0-1 (rms 10/2, 4/2 -> sd sqrt 5, sqrt 2) score rows 2-4; rows 2-4 (rms 5/3, 5/3) score rows 0-1
    first, second = residuals[:2].numpy(), residuals[2:].numpy()
    score = lambda rows, sd: scipy.stats.norm.logpdf(rows, 0, sd).sum()  # noqa: E731
    held_out = score(second, [5**0.5, 2**0.5]) + score(first, [(5 / 3) ** 0.5] * 2)
    assert verdict.nlpd_refit == pytest.approx(-held_out / 5) and verdict.nlpd_unrefit == pytest.approx(4.0)
    assert verdict.kept == (verdict.nlpd_refit < 4.0)
    with pytest.raises(ValueError, match="unrefit_log_density must have shape"):
        check_refit(residuals, None, unrefit[:3], shape="normal")
    with pytest.raises(ValueError, match="at least 4 residual rows"):
        check_refit(residuals[:3], None, unrefit[:3], shape="normal")


def _gaussian_sequences(scale, seed, num_sequences=4, num_steps=20):
    """``[B, T, 2]`` around the fixed decoder's means (1, -1), N(0, scale^2) errors."""
    generator = torch.Generator().manual_seed(seed)
    return torch.tensor([1.0, -1.0]) + scale * torch.randn(num_sequences, num_steps, 2, generator=generator)


def test_checked_refit_recovers_the_noise_scale_when_it_beats_the_trained_one():
    x = _gaussian_sequences(0.3, 13, num_sequences=20, num_steps=50)
    model = _fixed_decoder_model().calibrate(x, refit="normal", check=True)  # trained scale: 1
    verdict = model.refit_check
    # the trained N(0, 1) noise by hand: 2 features, log N(r; 0, 1) per entry
    expected = -scipy.stats.norm.logpdf((x - torch.tensor([1.0, -1.0])).numpy()).sum(-1).mean()
    assert verdict["nlpd_unrefit"] == pytest.approx(expected, rel=1e-5)
    assert verdict["kept"] and verdict["nlpd_refit"] < verdict["nlpd_unrefit"]
    torch.testing.assert_close(model.log_noise_scale.exp(), torch.full((2,), 0.3), rtol=0.05, atol=0)


def test_checked_refit_keeps_the_trained_noise_when_the_refit_does_worse_held_out():
    # the trained noise is the true N(0, 0.3^2); a state-dependent Student-t refit on 20 steps overfits
    x = _gaussian_sequences(0.3, 14, num_sequences=2, num_steps=10)
    model = _fixed_decoder_model()
    with torch.no_grad():
        model.log_noise_scale.fill_(math.log(0.3))
    model.calibrate(x, refit="student-t+state", check=True)
    verdict = model.refit_check
    assert not verdict["kept"] and verdict["nlpd_refit"] > verdict["nlpd_unrefit"]
    torch.testing.assert_close(model.log_noise_scale.exp(), torch.full((2,), 0.3))
    assert not model.noise_weight.any() and torch.isinf(model.noise_df).all()

"""Calibration metrics, ArviZ export and plots, checked against closed forms and hand-worked examples."""

import math

import numpy as np
import pytest
import scipy.stats
import torch
from matplotlib.figure import Figure
from pyro.infer import Predictive

from ppl_models import SRNN, GRUBaseline, SMCTransformer
from ppl_models.inference.arviz_compat import az, group_names
from ppl_models.inference.calibration import (
    ReliabilityCurve,
    brier_score,
    calibration_summary,
    coverage,
    crps,
    interval_width,
    nlpd,
    pit,
    plot_coverage,
    plot_pit_ecdf,
    plot_predictive_bands,
    plot_reliability,
    reliability_curve,
    save_inference_data,
    stack_sequence_sites,
    to_inference_data,
)

LEVELS = (0.5, 0.8, 0.9, 0.95)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def gaussian_problem(scale=1.0, samples=1000, batch=8, steps=100, features=2, seed=0):
    """Observations from N(mu, sigma) per entry and predictive samples from N(mu, scale * sigma)."""
    generator = torch.Generator().manual_seed(seed)
    mu = 3 * torch.randn(batch, steps, features, generator=generator, dtype=torch.float64)
    sigma = 0.5 + torch.rand(batch, steps, features, generator=generator, dtype=torch.float64)
    observed = mu + sigma * torch.randn(batch, steps, features, generator=generator, dtype=torch.float64)
    noise = torch.randn(samples, batch, steps, features, generator=generator, dtype=torch.float64)
    return mu + scale * sigma * noise, observed, mu, sigma


def binomial_tolerance(level, count, sigmas=4.0):
    return sigmas * math.sqrt(level * (1 - level) / count)


# --------------------------------------------------------------------------- PIT


def test_pit_of_calibrated_gaussian_is_uniform():
    predictive, observed, _, _ = gaussian_problem(samples=200)
    values = pit(predictive, observed, generator=torch.Generator().manual_seed(1))
    assert values.shape == observed.shape
    assert scipy.stats.kstest(values.flatten().numpy(), "uniform").pvalue > 0.01


def test_pit_of_calibrated_discrete_data_is_uniform():
    generator = torch.Generator().manual_seed(0)
    rate = torch.full((4, 250, 1), 2.0)
    observed = torch.poisson(rate, generator=generator)
    predictive = torch.poisson(rate.expand(50, -1, -1, -1).contiguous(), generator=generator)
    values = pit(predictive, observed.long(), generator=generator).flatten().numpy()
    assert scipy.stats.kstest(values, "uniform").pvalue > 0.01


def test_pit_of_a_biased_predictive_is_not_uniform():
    predictive, observed, _, sigma = gaussian_problem(samples=200)
    values = pit(predictive + sigma, observed).flatten().numpy()
    assert scipy.stats.kstest(values, "uniform").pvalue < 1e-6
    assert np.mean(values) < 0.4  # observations fall low in a predictive shifted upwards


def test_pit_hand_examples():
    samples = torch.tensor([1.0, 2.0, 3.0]).reshape(3, 1, 1, 1).expand(3, 1, 4, 1)
    observed = torch.tensor([0.0, 2.5, 4.0, 2.0]).reshape(1, 4, 1)
    # below = #samples < y, ties = #samples == y; pit lies in [below, below + ties + 1] / (S + 1)
    below = torch.tensor([0.0, 2.0, 3.0, 1.0])
    ties = torch.tensor([0.0, 0.0, 0.0, 1.0])
    uniform = torch.rand(1, 4, 1, generator=torch.Generator().manual_seed(7))
    expected = (below + uniform.flatten() * (ties + 1)) / 4
    values = pit(samples, observed, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(values.flatten(), expected)
    assert bool(((values.flatten() >= below / 4) & (values.flatten() <= (below + ties + 1) / 4)).all())


def test_pit_breaks_ties_uniformly():
    observed = torch.full((1, 4000, 1), 5.0)
    predictive = torch.full((3, 1, 4000, 1), 5.0)  # every sample ties: the rank is uniform on 0..3
    values = pit(predictive, observed).flatten().numpy()
    assert scipy.stats.kstest(values, "uniform").pvalue > 0.01


# --------------------------------------------------------------------------- coverage and widths


def test_coverage_of_calibrated_predictive_is_nominal():
    predictive, observed, _, _ = gaussian_problem()
    rates = coverage(predictive, observed, LEVELS)
    assert set(rates) == set(LEVELS)
    for level, rate in rates.items():
        assert abs(rate - level) < binomial_tolerance(level, observed.numel()), (level, rate)


@pytest.mark.parametrize("scale, wider", [(2.0, True), (0.5, False)])
def test_coverage_of_miscalibrated_predictive(scale, wider):
    predictive, observed, _, _ = gaussian_problem(scale=scale)
    for level, rate in coverage(predictive, observed, LEVELS).items():
        true_rate = 2 * scipy.stats.norm.cdf(scipy.stats.norm.ppf((1 + level) / 2) * scale) - 1
        assert (rate > level) if wider else (rate < level)
        assert abs(rate - true_rate) < binomial_tolerance(true_rate, observed.numel()), (level, rate, true_rate)


def test_interval_width_matches_gaussian_quantiles():
    predictive, observed, _, sigma = gaussian_problem()
    widths = interval_width(predictive, observed, LEVELS)
    for level, width in widths.items():
        expected = 2 * scipy.stats.norm.ppf((1 + level) / 2) * sigma.mean().item()
        assert width == pytest.approx(expected, rel=0.02)


def test_interval_ends_are_numpy_quantiles():
    generator = torch.Generator().manual_seed(3)
    predictive = torch.randn(37, 2, 3, 2, generator=generator, dtype=torch.float64)
    observed = torch.zeros(2, 3, 2, dtype=torch.float64)
    samples = predictive.numpy()
    widths = interval_width(predictive, observed, (0.5, 0.9))
    for level in (0.5, 0.9):
        lower, upper = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
        assert widths[level] == pytest.approx(np.mean(upper - lower), rel=1e-12)


def test_coverage_hand_example():
    predictive = torch.arange(101.0).reshape(101, 1, 1, 1).expand(101, 1, 4, 1)  # quantile q is 100 q
    observed = torch.tensor([10.0, 25.0, 50.0, 96.0]).reshape(1, 4, 1)
    # 50%: [25, 75] holds 25 (ends included) and 50; 90%: [5, 95] holds 10, 25, 50
    assert coverage(predictive, observed, (0.5, 0.9)) == {0.5: 0.5, 0.9: 0.75}
    assert interval_width(predictive, observed, (0.5, 0.9)) == {0.5: 50.0, 0.9: 90.0}


# --------------------------------------------------------------------------- scores


def gaussian_crps(y, mu, sigma):
    z = (y - mu) / sigma
    return sigma * (z * (2 * scipy.stats.norm.cdf(z) - 1) + 2 * scipy.stats.norm.pdf(z) - 1 / math.sqrt(math.pi))


def test_crps_matches_gaussian_closed_form():
    predictive, observed, mu, sigma = gaussian_problem(samples=2000, batch=4, steps=50)
    expected = gaussian_crps(observed.numpy(), mu.numpy(), sigma.numpy()).mean(-1)
    scores = crps(predictive, observed)
    assert scores.shape == (4, 50)
    np.testing.assert_allclose(scores.numpy(), expected, atol=0.08)  # per step: Monte Carlo error ~ 0.02
    assert scores.mean().item() == pytest.approx(expected.mean(), abs=0.005)


def test_crps_of_one_sample_is_absolute_error():
    predictive = torch.tensor([[[[1.0, -2.0]]]])
    observed = torch.tensor([[[3.0, 0.0]]])
    assert crps(predictive, observed).item() == pytest.approx((2.0 + 2.0) / 2)


def test_nlpd_hand_example():
    log_density = torch.tensor([[-1.0, -2.0], [-3.0, float("nan")]])
    mask = torch.tensor([[True, True], [True, False]])
    assert nlpd(log_density, mask) == pytest.approx(2.0)
    assert nlpd(np.array([[-0.5, -1.5]])) == pytest.approx(1.0)


def test_brier_score_hand_example():
    prob = torch.tensor([[[0.9, 0.2]], [[0.5, 0.0]]])
    observed = torch.tensor([[[1.0, 0.0]], [[0.0, 0.0]]])
    assert brier_score(prob, observed) == pytest.approx((0.01 + 0.04 + 0.25 + 0.0) / 4)


def test_reliability_curve_hand_example():
    prob = torch.tensor([0.05, 0.05, 0.15, 0.95, 0.95, 0.95, 1.0]).reshape(1, 7, 1)
    observed = torch.tensor([0, 1, 0, 1, 1, 0, 1]).reshape(1, 7, 1)
    curve = reliability_curve(prob, observed, bins=10)
    np.testing.assert_allclose(curve.bin_centers, np.arange(0.05, 1.0, 0.1))
    np.testing.assert_array_equal(curve.counts, [2, 1, 0, 0, 0, 0, 0, 0, 0, 4])
    np.testing.assert_allclose(curve.observed_frequency[[0, 1, 9]], [0.5, 0.0, 0.75])
    assert np.isnan(curve.observed_frequency[2:9]).all()


def test_reliability_curve_of_calibrated_forecast_follows_diagonal():
    generator = torch.Generator().manual_seed(0)
    prob = torch.rand(10, 500, 2, generator=generator, dtype=torch.float64)
    observed = torch.bernoulli(prob, generator=generator)
    curve = reliability_curve(prob, observed, bins=5)
    assert curve.counts.sum() == prob.numel()
    for center, frequency, count in zip(*curve):
        assert abs(frequency - center) < 0.02 + binomial_tolerance(center, count)


# --------------------------------------------------------------------------- summary


def test_calibration_summary_of_calibrated_predictive():
    predictive, observed, mu, sigma = gaussian_problem(samples=400)
    log_density = torch.distributions.Normal(mu, sigma).log_prob(observed).sum(-1)
    summary = calibration_summary(predictive, observed, log_pred_density=log_density)
    expected_keys = {f"coverage_{level:g}" for level in LEVELS} | {f"width_{level:g}" for level in LEVELS}
    assert set(summary) == expected_keys | {"crps", "nlpd", "pit_ks"}
    assert all(isinstance(value, float) for value in summary.values())
    assert abs(summary["coverage_0.9"] - 0.9) < binomial_tolerance(0.9, observed.numel())
    assert summary["crps"] == pytest.approx(gaussian_crps(observed.numpy(), mu.numpy(), sigma.numpy()).mean(), abs=0.01)
    assert summary["nlpd"] == pytest.approx(-log_density.mean().item())
    assert summary["pit_ks"] < 1.63 / math.sqrt(observed.numel())  # KS critical value at 1%
    assert "nlpd" not in calibration_summary(predictive, observed)


# --------------------------------------------------------------------------- masks


def padded_and_concatenated(seed=0):
    """Two sequences of lengths 6 and 4 padded to T=6 with garbage, and the same valid steps as one sequence."""
    generator = torch.Generator().manual_seed(seed)
    predictive = torch.randn(50, 2, 6, 3, generator=generator, dtype=torch.float64)
    observed = torch.randn(2, 6, 3, generator=generator, dtype=torch.float64)
    log_density = torch.randn(2, 6, generator=generator, dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    padded = (predictive.clone(), observed.clone(), log_density.clone())
    padded[0][:, 1, 4:] = 1e6
    padded[1][1, 4:] = float("nan")
    padded[2][1, 4:] = float("nan")
    concatenated = (
        torch.cat([predictive[:, 0], predictive[:, 1, :4]], dim=1)[:, None],
        torch.cat([observed[0], observed[1, :4]])[None],
        torch.cat([log_density[0], log_density[1, :4]])[None],
    )
    return padded, mask, concatenated


def test_padded_steps_change_no_pooled_metric():
    (predictive, observed, log_density), mask, (whole_predictive, whole_observed, whole_log_density) = (
        padded_and_concatenated()
    )
    assert coverage(predictive, observed, LEVELS, mask) == pytest.approx(coverage(whole_predictive, whole_observed))
    assert interval_width(predictive, observed, LEVELS, mask) == pytest.approx(
        interval_width(whole_predictive, whole_observed)
    )
    assert nlpd(log_density, mask) == pytest.approx(nlpd(whole_log_density))
    summary = calibration_summary(predictive, observed, mask, log_density)
    whole_summary = calibration_summary(whole_predictive, whole_observed, log_pred_density=whole_log_density)
    del summary["pit_ks"], whole_summary["pit_ks"]  # the random tie-breaking draws differ between layouts
    assert summary == pytest.approx(whole_summary)


def test_padded_steps_give_nan_and_leave_valid_steps_alone():
    (predictive, observed, _), mask, _ = padded_and_concatenated()
    scores = crps(predictive, observed, mask)
    assert torch.isnan(scores[1, 4:]).all() and not torch.isnan(scores[mask]).any()
    torch.testing.assert_close(scores[1, :4], crps(predictive[:, 1:, :4], observed[1:, :4])[0])
    values = pit(predictive, observed, mask)
    assert torch.isnan(values[1, 4:]).all()
    ranks = (values[mask] * (predictive.shape[0] + 1)).floor()  # continuous data: no ties, so the rank is exact
    torch.testing.assert_close(ranks, (predictive[:, mask] < observed[mask]).sum(0).double())


def test_padded_binary_steps_change_nothing():
    generator = torch.Generator().manual_seed(0)
    prob = torch.rand(2, 5, 3, generator=generator)
    observed = torch.bernoulli(prob, generator=generator)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    garbage_prob, garbage_observed = prob.clone(), observed.clone()
    garbage_prob[1, 2:] = 7.0
    garbage_observed[1, 2:] = float("nan")
    valid_prob, valid_observed = prob[mask][None], observed[mask][None]
    assert brier_score(garbage_prob, garbage_observed, mask) == pytest.approx(brier_score(valid_prob, valid_observed))
    curve = reliability_curve(garbage_prob, garbage_observed, mask, bins=4)
    np.testing.assert_array_equal(curve.counts, reliability_curve(valid_prob, valid_observed, bins=4).counts)


# --------------------------------------------------------------------------- InferenceData


def test_inference_data_groups_dims_and_padding():
    (predictive, observed, _), mask, (whole_predictive, whole_observed, _) = padded_and_concatenated()
    log_lik = predictive.clone().neg()  # any per-draw, per-entry values
    latent = torch.randn(50, 2, 6, 4, dtype=torch.float64)
    idata = to_inference_data(
        predictive,
        observed,
        mask=mask,
        log_likelihood=log_lik,
        posterior={"z": latent},
        var_name="y",
        coords={"feature": ["a", "b", "c"]},
    )
    assert group_names(idata) == {"posterior", "posterior_predictive", "observed_data", "log_likelihood"}
    # padding: only the 10 valid steps are stored, along one dim "step" with their (sequence, time)
    samples = idata.posterior_predictive["y"]
    assert samples.dims == ("chain", "draw", "step", "feature") and samples.shape == (1, 50, 10, 3)
    assert list(samples["feature"].values) == ["a", "b", "c"]
    assert list(samples["sequence"].values) == [0] * 6 + [1] * 4
    assert list(samples["time"].values) == list(range(6)) + list(range(4))
    np.testing.assert_array_equal(samples.values[0], whole_predictive[:, 0].numpy())
    np.testing.assert_array_equal(idata.observed_data["y"].values, whole_observed[0].numpy())
    assert idata.log_likelihood["y"].dims == ("chain", "draw", "step", "feature")
    np.testing.assert_array_equal(idata.log_likelihood["y"].values[0], -whole_predictive[:, 0].numpy())
    assert idata.posterior["z"].dims == ("chain", "draw", "step", "z_dim_0")
    # no padding: the grid (sequence, time, feature)
    full = to_inference_data(predictive, observed.nan_to_num(), log_likelihood=log_lik, posterior={"z": latent})
    assert full.posterior_predictive["x"].dims == ("chain", "draw", "sequence", "time", "feature")
    assert full.log_likelihood["x"].dims == ("chain", "draw", "sequence", "time", "feature")
    assert full.posterior["z"].dims == ("chain", "draw", "sequence", "time", "z_dim_0")


def test_inference_data_round_trips_through_h5netcdf(tmp_path):
    (predictive, observed, _), mask, _ = padded_and_concatenated()
    idata = to_inference_data(
        predictive.numpy(), observed.numpy(), mask=mask.numpy(), log_likelihood=predictive.numpy() * 0 - 1.0
    )
    path = save_inference_data(idata, tmp_path / "run" / "predictive.nc")
    assert sorted(p.name for p in path.parent.iterdir()) == ["predictive.nc"]  # no temporary file left behind
    loaded = az.from_netcdf(path, engine="h5netcdf")
    assert group_names(loaded) == group_names(idata)
    for group in group_names(idata):
        np.testing.assert_array_equal(loaded[group]["x"].values, idata[group]["x"].values)
        assert loaded[group]["x"].dims == idata[group]["x"].dims
        np.testing.assert_array_equal(loaded[group]["sequence"].values, idata[group]["sequence"].values)


# --------------------------------------------------------------------------- plots


def test_plots_write_png_files(tmp_path):
    predictive, observed, _, _ = gaussian_problem(samples=100, batch=2, steps=30)
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[1, 20:] = False
    prob = torch.rand(2, 30, 2, generator=torch.Generator().manual_seed(0))
    figures = {
        "pit.png": lambda path: plot_pit_ecdf(pit(predictive, observed, mask), path),
        "coverage.png": lambda path: plot_coverage(coverage(predictive, observed, mask=mask), path),
        "bands.png": lambda path: plot_predictive_bands(
            predictive, observed, sequence=1, feature=1, mask=mask, path=path
        ),
        "reliability.png": lambda path: plot_reliability(reliability_curve(prob, prob.round(), mask), path),
    }
    for name, draw in figures.items():
        assert isinstance(draw(tmp_path / name), Figure)
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE), name
    assert isinstance(plot_coverage({0.5: 0.4, 0.9: 0.8}), Figure)  # without a path nothing is written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(figures)


# --------------------------------------------------------------------------- bad inputs


def bad_calls():
    predictive, observed = torch.randn(5, 2, 3, 1), torch.randn(2, 3, 1)
    with_nan = observed.clone()
    with_nan[0, 1, 0] = float("nan")
    predictive_nan = predictive.clone()
    predictive_nan[2, 1, 0, 0] = float("nan")
    prob = torch.full((2, 3, 1), 0.5)
    return {
        "predictive 3-D": (lambda: pit(predictive[0], observed), "predictive must have shape \\[S, B, T, D\\]"),
        "no samples": (lambda: crps(predictive[:0], observed), "predictive needs S >= 1 samples"),
        "one sample, no interval": (lambda: coverage(predictive[:1], observed), "predictive needs S >= 2 samples"),
        "one sample, no width": (lambda: interval_width(predictive[:1], observed), "predictive needs S >= 2"),
        "shape mismatch": (lambda: crps(predictive, observed[:, :2]), "observed must have shape .*\\(2, 3, 1\\)"),
        "observed 2-D": (lambda: crps(predictive, observed[..., 0]), "observed must have shape \\[B, T, D\\]"),
        "level 1": (lambda: coverage(predictive, observed, (0.5, 1.0)), "levels must .*\\(0, 1\\).*1.0"),
        "level 0": (lambda: interval_width(predictive, observed, (0.0,)), "levels must"),
        "no levels": (lambda: coverage(predictive, observed, ()), "levels must be a non-empty"),
        "level scalar": (lambda: coverage(predictive, observed, 0.9), "levels must be a sequence"),
        "mask shape": (lambda: pit(predictive, observed, torch.ones(2, 4, dtype=torch.bool)), "mask must have shape"),
        "mask all padded": (lambda: pit(predictive, observed, torch.zeros(2, 3, dtype=torch.bool)), "at least one"),
        "observed NaN": (lambda: pit(predictive, with_nan), "observed contains NaN"),
        "predictive NaN": (lambda: calibration_summary(predictive_nan, observed), "predictive contains NaN"),
        "lpd shape": (
            lambda: calibration_summary(predictive, observed, log_pred_density=torch.zeros(2, 4)),
            "log_pred_density and mask",
        ),
        "lpd NaN": (lambda: nlpd(torch.tensor([[0.0, float("nan")]])), "log_pred_density contains NaN"),
        "lpd 3-D": (lambda: nlpd(torch.zeros(1, 2, 1)), "log_pred_density must have shape \\[B, T\\]"),
        "prob > 1": (lambda: brier_score(prob + 0.6, prob.round()), "prob must lie in \\[0, 1\\]"),
        "not binary": (lambda: brier_score(prob, prob), "observed must be binary"),
        "prob shape": (lambda: reliability_curve(prob, prob[:1]), "observed must have shape"),
        "sequence index": (lambda: plot_predictive_bands(predictive, observed, sequence=2), "sequence must be"),
        "feature index": (lambda: plot_predictive_bands(predictive, observed, feature=-1), "feature must be"),
        "pit range": (lambda: plot_pit_ecdf(np.array([0.2, 1.5])), "pit_values must lie in \\[0, 1\\]"),
        "coverage keys": (lambda: plot_coverage({1.5: 0.9}), "coverage_by_level"),
        "coverage values": (lambda: plot_coverage({0.5: 2.0}), "coverage_by_level values"),
        "curve": (lambda: plot_reliability(ReliabilityCurve(np.ones(2), np.ones(3), np.ones(2))), "curve must be"),
        "var_name": (lambda: to_inference_data(predictive, observed, var_name=""), "var_name"),
    }


@pytest.mark.parametrize("case", list(bad_calls()))
def test_bad_inputs_raise_value_error_naming_the_argument(case):
    call, message = bad_calls()[case]
    with pytest.raises(ValueError, match=message):
        call()


def test_non_array_inputs_raise_type_error():
    with pytest.raises(TypeError, match="predictive must be a torch.Tensor or numpy.ndarray"):
        pit([[[[0.0]]]], torch.zeros(1, 1, 1))
    with pytest.raises(TypeError, match="idata must be an arviz.InferenceData"):
        save_inference_data({}, "unused.nc")


@pytest.mark.parametrize("kind", ["srnn", "smc-transformer", "gru"])
def test_predictive_output_stacks_into_sequences_for_arviz(kind):
    """Per-step sites (x_t, t{t}/x) or one site x: one [S, B, T, D] tensor in time order, then InferenceData."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 2)
    model = {
        "srnn": lambda: SRNN(2, emission="gaussian", latent_dim=2, rnn_dim=4, hidden_dim=4),
        "smc-transformer": lambda: SMCTransformer(2, d_model=4, window=3),
        "gru": lambda: GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4),
    }[kind]()
    samples = Predictive(model.model, guide=model.guide, num_samples=7)(x)
    stacked = stack_sequence_sites(samples)
    assert stacked.shape == (7, 3, 5, 2)
    last = samples["x"][..., -1, :] if "x" in samples else samples.get("x_4", samples.get("t4/x"))
    assert torch.equal(stacked[:, :, -1], last)
    idata = to_inference_data(stacked, x)
    assert dict(idata.posterior_predictive.sizes) == {"chain": 1, "draw": 7, "sequence": 3, "time": 5, "feature": 2}


def test_stacking_names_the_sites_it_needs():
    with pytest.raises(ValueError, match="x_0, x_1"):
        stack_sequence_sites({"x_0": torch.zeros(2, 3, 1), "x_2": torch.zeros(2, 3, 1)})
    with pytest.raises(TypeError, match="dict Predictive returns"):
        stack_sequence_sites(torch.zeros(2))


def test_pit_band_is_a_simultaneous_band_for_uniform_pit_values():
    """About 94% of ECDFs of fresh uniform samples lie wholly inside the band; a too-narrow predictive leaves it."""
    from ppl_models.inference.calibration.plots import _uniform_ecdf_band

    grid = np.linspace(0, 1, 101)
    size, trials = 60, 2000
    half_width = _uniform_ecdf_band(size, grid, prob=0.94)
    rng = np.random.default_rng(123)  # not the band's own seed
    samples = rng.uniform(size=(trials, size))
    inside = [(np.abs((row[:, None] <= grid).mean(0) - grid) <= half_width + 1e-12).all() for row in samples]
    assert abs(np.mean(inside) - 0.94) < 3 * math.sqrt(0.94 * 0.06 / trials) + 0.01  # Monte Carlo and grid error
    overconfident = scipy.stats.norm.cdf(2 * rng.normal(size=size))  # PIT of N(0, 4) data under N(0, 1)
    assert (np.abs((overconfident[:, None] <= grid).mean(0) - grid) > half_width).any()

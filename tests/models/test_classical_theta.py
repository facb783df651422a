"""The Theta row (ppl_models.classical.theta) against statsforecast's dynamic Theta models fitted here on the same
history: one-step means over the history and forecasts after it, with and without a season; no step's mean reads a
later step."""

import numpy as np
import pytest
import torch
from statsforecast.models import AutoTheta

from ppl_models.classical import classical_model
from ppl_models.classical.theta import seasonal_indices

_MONTHS = np.arange(72)
_NOISE = np.random.default_rng(0).normal(0, 1.5, 72)
_SEASONAL = 50 + 0.05 * _MONTHS + 8 * np.sin(2 * np.pi * _MONTHS / 12) + _NOISE
_TRENDING = 20 + 0.5 * _MONTHS + np.cumsum(_NOISE) * 0.5
_CONTEXT = 60


def _tensor(values):
    return torch.from_numpy(np.asarray(values, dtype=np.float64)).view(1, -1, 1), torch.ones(1, len(values), dtype=bool)


def _statsforecast_best(history, season):
    """statsforecast's AutoTheta on ``history`` with its own seasonal test and decomposition, the dynamic model of the
    lower in-sample MSE (standard or optimised)."""
    fits = [AutoTheta(season_length=season, model=kind).fit(history) for kind in ("DSTM", "DOTM")]
    return min(fits, key=lambda fit: fit.model_["mse"])


@pytest.mark.parametrize(("series", "season"), [(_SEASONAL, 12), (_TRENDING, 1)])
def test_the_rows_means_over_its_history_and_forecast_are_statsforecasts(series, season):
    x, mask = _tensor(series[:_CONTEXT])
    forecaster = classical_model("theta", season=season).fit(x, mask)
    reference = _statsforecast_best(series[:_CONTEXT], season)
    in_sample = reference.predict_in_sample()["fitted"]
    ours = forecaster.one_step(x, mask).mean[0, :, 0].numpy()
    assert ours[5:] == pytest.approx(in_sample[5:], rel=1e-8)
    assert bool(reference.model_.get("decompose", False)) == (season == 12)
    ahead = reference.predict(h=6, level=[80])
    draws = forecaster.forecast(x, mask, 6, 8000, torch.Generator().manual_seed(1))[:, 0, :, 0].numpy()
    width = float((ahead["hi-80"] - ahead["lo-80"]).max())
    assert draws.mean(0) == pytest.approx(ahead["mean"], abs=0.05 * width)
    assert np.quantile(draws, 0.9, axis=0) == pytest.approx(ahead["hi-80"], abs=0.06 * width)


def test_the_one_step_variance_is_the_residuals_as_statsforecasts_intervals_take_it():
    """The row's one-step variance is that of statsforecast's fit's residuals after its 3-step burn-in (the noise of
    its own prediction intervals), not the fit's reported ``mse``, which on a noisy level far from its start is far
    from it."""
    rng = np.random.default_rng(3)
    series = 4.5 + np.cumsum(rng.normal(0, 0.1, 400)) + rng.normal(0, 0.6, 400)
    x, mask = _tensor(series)
    out = classical_model("theta").fit(x, mask).one_step(x, mask)
    reference = _statsforecast_best(series, 1)
    variance = float(np.var(np.asarray(reference.model_["residuals"], dtype=np.float64)[3:], ddof=1))
    mean = reference.predict_in_sample()["fitted"]
    want = -0.5 * np.log(2 * np.pi * variance) - (series - mean) ** 2 / (2 * variance)
    assert out.mean[0, 5:, 0].numpy() == pytest.approx(mean[5:], rel=1e-8)
    assert out.log_density[0, 5:].numpy() == pytest.approx(want[5:], rel=1e-8)


def test_no_one_step_mean_reads_a_later_step():
    x, mask = _tensor(_SEASONAL)
    scored = mask.clone()
    scored[:, :_CONTEXT] = False
    forecaster = classical_model("theta", season=12).fit(x[:, :_CONTEXT], mask[:, :_CONTEXT])
    before = forecaster.one_step(x, mask, scored).mean[0, :, 0]
    changed = x.clone()
    changed[0, 66:] += 40.0
    after = forecaster.one_step(changed, mask, scored).mean[0, :, 0]
    torch.testing.assert_close(after[:67], before[:67])  # step 66's mean reads steps up to 65
    assert (after[67:] - before[67:]).abs().min() > 1.0


def test_a_season_is_found_only_where_the_history_has_one():
    assert seasonal_indices(_TRENDING[:_CONTEXT], 12) is None
    season = seasonal_indices(_SEASONAL[:_CONTEXT], 12)
    assert season is not None and season.multiplicative and season.indices.shape == (12,)
    assert seasonal_indices(_SEASONAL[:20], 12) is None  # shorter than two seasons
    shifted = seasonal_indices(_SEASONAL[:_CONTEXT] - 80.0, 12)  # not positive: additive
    assert shifted is not None and not shifted.multiplicative
    assert "Theta (" in classical_model("theta", season=12).fit(*_tensor(_SEASONAL[:_CONTEXT])).describe()["pooled"][0]

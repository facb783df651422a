"""The statsforecast rows (ppl_models.classical.automatic) against statsforecast fitted here on the same histories,
Croston's means against statsforecast's CrostonClassic, and a log row's density against the log-normal's."""

import numpy as np
import pytest
import torch
from scipy.stats import norm
from statsforecast.models import AutoARIMA, AutoETS, CrostonClassic

from ppl_models.classical import classical_model
from ppl_models.classical.automatic import croston_means

#: a small seasonal series: 5 years of a monthly season on a trend, positive
_MONTHS = np.arange(60)
_SERIES = 50 + 0.8 * _MONTHS + 8 * np.sin(2 * np.pi * _MONTHS / 12) + np.random.default_rng(0).normal(0, 1.5, 60)
_CONTEXT = 48


def _one_row(values):
    x = torch.from_numpy(np.asarray(values, dtype=np.float64)).view(1, -1, 1)
    mask = torch.ones(1, len(values), dtype=torch.bool)
    scored = mask.clone()
    scored[:, :_CONTEXT] = False
    return x, mask, scored


@pytest.mark.parametrize("name", ["arima", "ets"])
def test_a_row_is_statsforecasts_fit_on_its_history_filtered_over_the_scored_steps(name):
    x, mask, scored = _one_row(_SERIES)
    forecaster = classical_model(name, season=12).fit(x[:, :_CONTEXT], mask[:, :_CONTEXT])
    out = forecaster.one_step(x, mask, scored)
    model = AutoARIMA(season_length=12) if name == "arima" else AutoETS(season_length=12, damped=None)
    model.fit(_SERIES[:_CONTEXT])
    fitted = model.forward(y=_SERIES, h=1, fitted=True)["fitted"][_CONTEXT:]
    sd = np.sqrt(model.model_["sigma2"]) * (np.abs(fitted) if model.model_.get("components", "A")[0] == "M" else 1)
    assert out.mean[0, _CONTEXT:, 0].numpy() == pytest.approx(fitted, rel=1e-9)
    density = norm.logpdf(_SERIES[_CONTEXT:], fitted, sd)
    assert out.log_density[0, _CONTEXT:].numpy() == pytest.approx(density, rel=1e-9)
    # the row's 80 % interval is statsforecast's one-step interval of its fit on the history (its first scored step)
    ahead = model.predict(h=1, level=[80])
    draws = forecaster.one_step(x, mask, scored, 4000, torch.Generator().manual_seed(0)).samples[:, 0, _CONTEXT, 0]
    low, high = np.quantile(draws.numpy(), [0.1, 0.9])
    width = ahead["hi-80"][0] - ahead["lo-80"][0]
    assert low == pytest.approx(ahead["lo-80"][0], abs=0.06 * width)
    assert high == pytest.approx(ahead["hi-80"][0], abs=0.06 * width)


def test_a_log_row_is_the_log_normal_of_the_gaussian_on_the_logs():
    x, mask, scored = _one_row(_SERIES)
    row = classical_model("arima", season=12, log=True).fit(x[:, :_CONTEXT], mask[:, :_CONTEXT])
    out = row.one_step(x, mask, scored)
    model = AutoARIMA(season_length=12).fit(np.log(_SERIES[:_CONTEXT]))
    mu = model.forward(y=np.log(_SERIES), h=1, fitted=True)["fitted"][_CONTEXT:]
    sigma = np.sqrt(model.model_["sigma2"])
    values = _SERIES[_CONTEXT:]
    log_normal = norm.logpdf(np.log(values), mu, sigma) - np.log(values)  # the Jacobian of x = exp(y)
    assert out.log_density[0, _CONTEXT:].numpy() == pytest.approx(log_normal, rel=1e-9)
    assert out.mean[0, _CONTEXT:, 0].numpy() == pytest.approx(np.exp(mu + sigma**2 / 2), rel=1e-9)
    with pytest.raises(ValueError, match="> 0"):
        classical_model("arima", log=True).fit(x - 100, mask)


def test_croston_means_are_statsforecasts_croston_forecasts_of_each_prefix():
    counts = np.random.default_rng(1).poisson(0.4, size=40).astype(float)
    counts[3] = 2.0
    means = croston_means(counts)
    first = int(np.argmax(counts != 0)) + 1
    assert np.isnan(means[:first]).all()
    for t in range(first, len(counts)):
        assert means[t] == pytest.approx(CrostonClassic().forecast(counts[:t], h=1)["mean"][0], rel=1e-12)


def test_the_arima_row_forecasts_statsforecasts_predictive():
    x, mask, _ = _one_row(_SERIES)
    forecaster = classical_model("arima", season=12).fit(x, mask)
    draws = forecaster.forecast(x, mask, 6, 6000, torch.Generator().manual_seed(2))[:, 0, :, 0].numpy()
    ahead = AutoARIMA(season_length=12).fit(_SERIES).predict(h=6, level=[80])
    width = ahead["hi-80"] - ahead["lo-80"]
    assert draws.mean(0) == pytest.approx(ahead["mean"], abs=0.05 * width.max())
    assert np.quantile(draws, 0.9, axis=0) == pytest.approx(ahead["hi-80"], abs=0.06 * width.max())

"""The classical forecasters (ppl_models.classical) against hand-computed values and statsmodels fitted here."""

import json
import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from statsmodels.tsa.api import VAR
from statsmodels.tsa.statespace.exponential_smoothing import ExponentialSmoothing
from statsmodels.tsa.statespace.sarimax import SARIMAX

from ppl_models.classical import CLASSICAL, classical_model, univariate_state_space


def _batch(rows):
    """``(x [N, T, D], mask [N, T])`` float64 of ``rows`` (each ``[L]`` or ``[L, D]``), padded with NaN."""
    rows = [np.asarray(r, dtype=np.float64).reshape(len(r), -1) for r in rows]
    x = torch.full((len(rows), max(len(r) for r in rows), rows[0].shape[1]), float("nan"), dtype=torch.float64)
    mask = torch.zeros(x.shape[:2], dtype=torch.bool)
    for i, row in enumerate(rows):
        x[i, : len(row)], mask[i, : len(row)] = torch.from_numpy(row), True
    return x, mask


def _scored(mask, contexts):
    """The valid steps of each row after its first ``contexts[i]`` steps."""
    steps = torch.arange(mask.shape[1])
    return mask & (steps >= torch.tensor(contexts)[:, None])


def _normal_log_density(value, mean, variance):
    return -0.5 * math.log(2 * math.pi * variance) - (value - mean) ** 2 / (2 * variance)


def _quiet_fit(model, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(disp=False, cov_type="none", **options)


# --------------------------------------------------------------------------- the naive forecasters


def test_last_value_is_the_previous_step_with_the_contexts_difference_noise():
    train_x, train_mask = _batch([[1, 2, 4], [0, -1]])  # mean 1.2, variance 2.96; differences 1, 2, -1: 2
    x, mask = _batch([[5, 6, 8, 7, 10], [3, 2, 4, 4], [1, 1, 2]])
    scored = _scored(mask, [3, 2, 0])  # contexts: [5, 6, 8] (differences 1, 2: 2.5), too short, none
    out = classical_model("last-value").fit(train_x, train_mask).one_step(x, mask, scored)
    expected = {
        0: ([1.2, 5, 6, 8, 7], [2.96, 2.5, 2.5, 2.5, 2.5]),
        1: ([1.2, 3, 2, 4], [2.96, 2, 2, 2]),
        2: ([1.2, 1, 1], [2.96, 2, 2]),
    }
    for row, (means, variances) in expected.items():
        steps = len(means)
        assert out.mean[row, :steps, 0].tolist() == pytest.approx(means)
        density = [_normal_log_density(float(x[row, t, 0]), m, v) for t, (m, v) in enumerate(zip(means, variances))]
        assert out.log_density[row, :steps].tolist() == pytest.approx(density, rel=1e-12)
        assert (out.log_density[row, steps:] == 0).all() and (out.mean[row, steps:] == 0).all()
    assert out.samples is None


@pytest.mark.parametrize("name", ["last-value", "arima", "var"])
def test_a_log_forecaster_takes_the_log_of_the_targets_and_reads_a_negative_covariate_as_it_is(name):
    """With ``modelled_features``, log is the targets': a covariate below 0 (a temperature) is no error, and a
    univariate row's figures of the targets are those of the targets alone."""
    rng = np.random.default_rng(0)
    targets = [np.exp(np.cumsum(rng.normal(0, 0.2, 30))) + 1.0 for _ in range(3)]
    covariate = [rng.normal(-5.0, 1.0, 30) for _ in range(3)]
    both = _batch([np.stack([y, c], -1) for y, c in zip(targets, covariate)])
    alone = _batch(targets)
    model = classical_model(name, log=True)
    model.modelled_features = 1
    out = model.fit(*both).one_step(*both, _scored(both[1], [20, 20, 20]))
    draws = model.forecast(*both, horizon=3, num_samples=4, generator=torch.Generator().manual_seed(0))
    assert bool(torch.isfinite(out.log_density).all()) and bool((draws[..., 0] > 0).all())
    if name != "var":  # a univariate row: the covariate changes nothing of the targets'
        single = classical_model(name, log=True).fit(*alone).one_step(*alone, _scored(alone[1], [20, 20, 20]))
        assert torch.allclose(out.log_density, single.log_density) and torch.allclose(out.mean[..., :1], single.mean)
    with pytest.raises(ValueError, match="models log x: every valid value of x must be > 0"):
        classical_model(name, log=True).fit(*both)  # every column a target: the covariate's values refuse log


def test_seasonal_naive_reads_one_season_back_and_sums_the_features():
    train = np.array([0, 1, 0, 1, 0, 2.0])  # mean 2/3, variance 5/9
    series = np.array([1, 3, 2, 5, 3, 6, 4.0])  # context: 5 steps, lag-1 differences 2 -1 3 -2, lag-2 ones 1 2 1
    train_x, train_mask = _batch([np.stack([train, 3 * train], 1)])
    x, mask = _batch([np.stack([series, 3 * series], 1)])
    forecaster = classical_model("seasonal-naive", season=2).fit(train_x, train_mask)
    out = forecaster.one_step(x, mask, _scored(mask, [5]), num_samples=3)
    means = [2 / 3, 1, 1, 3, 2, 5, 3]
    variances = [5 / 9, 4.5] + [2.0] * 5
    for scale, feature in ((1, 0), (3, 1)):
        assert out.mean[0, :, feature].tolist() == pytest.approx([scale * m for m in means])
    density = [
        _normal_log_density(s, m, v) + _normal_log_density(3 * s, 3 * m, 9 * v)
        for s, m, v in zip(series, means, variances)
    ]
    assert out.log_density[0].tolist() == pytest.approx(density, rel=1e-12)
    assert out.samples.shape == (3, 1, 7, 2)
    assert forecaster.describe()["season"] == 2 and forecaster.num_parameters == 4


def test_the_season_is_detected_on_the_training_split_or_none():
    rng = np.random.default_rng(0)
    pattern = np.array([0.0, 3.0, -1.0, 2.0, -4.0])
    seasonal = [np.tile(pattern, 12) + 0.1 * rng.normal(size=60) for _ in range(3)]
    forecaster = classical_model("seasonal-naive").fit(*_batch(seasonal))
    assert forecaster.period == 5 and forecaster.describe()["season_source"].startswith("detected")
    row = np.tile(pattern, 4) + 0.1 * rng.normal(size=20)
    x, mask = _batch([row])
    assert forecaster.one_step(x, mask).mean[0, 5:, 0].tolist() == pytest.approx(row[:-5].tolist())
    noise = classical_model("seasonal-naive").fit(*_batch([rng.normal(size=200)]))
    assert noise.period == 1 and "none" in noise.describe()["season_source"]


# --------------------------------------------------------------------------- against statsmodels


def _arima_panel(rows=2, steps=40, phi=0.6, seed=0):
    """ARIMA(1, 1, 0) series: differences an AR(1) with coefficient ``phi``."""
    rng = np.random.default_rng(seed)
    differences = np.zeros((rows, steps))
    noise = rng.normal(size=(rows, steps))
    for t in range(1, steps):
        differences[:, t] = phi * differences[:, t - 1] + noise[:, t]
    return np.cumsum(differences, 1)


ORDERS = [(p, d, q) for p in range(4) for d in range(2) for q in range(3)]


def _sarimax(series, order):
    return SARIMAX(series, order=order, trend="c" if order[1] == 0 else "n", loglikelihood_burn=1)


def _label(order):
    return f"ARIMA({order[0]},{order[1]},{order[2]})"


def test_arima_chooses_by_aic_and_filters_the_scored_steps_as_statsmodels_does(monkeypatch):
    series, context = _arima_panel(rows=3, steps=32), 24
    x, mask = _batch(list(series))
    scored = _scored(mask, [context, context, 5])  # row 2's context is too short for parameters of its own
    fits = {order: [_quiet_fit(_sarimax(row[:context], order)) for row in series[:2]] for order in ORDERS}

    def expected(row, fit, start):
        prediction = fit.apply(series[row]).get_prediction()
        mean, variance = prediction.predicted_mean[start:], prediction.var_pred_mean[start:]
        return mean, -0.5 * np.log(2 * np.pi * variance) - (series[row, start:] - mean) ** 2 / (2 * variance)

    # a few series: each row's order is its own AIC argmin on its context (the training split: rows 0 and 1)
    forecaster = classical_model("statsmodels-arima", season=1).fit(x[:2, :context], mask[:2, :context])
    out = forecaster.one_step(x, mask, scored)
    chosen = [min(ORDERS, key=lambda order: fits[order][row].aic) for row in range(2)]
    counts = {k: v for k, v in forecaster.describe()["rows_since_fit"].items() if k.startswith("ARIMA")}
    assert Counter(counts) == Counter(_label(order) for order in chosen)
    for row, order in enumerate(chosen):
        mean, density = expected(row, fits[order][row], context)
        assert out.mean[row, context:, 0].numpy() == pytest.approx(mean, abs=1e-6)
        assert out.log_density[row, context:].numpy() == pytest.approx(density, abs=1e-6)

    # a panel: one order, the AIC argmin summed over the training rows searched (here row 0 alone), its parameters
    # fitted on each context, and row 0's (the pooled fit) for the short one
    monkeypatch.setattr(univariate_state_space, "CHOICE_ROWS", 1)
    panel = classical_model("statsmodels-arima", season=1).fit(x[:2, :context], mask[:2, :context])
    order = min(ORDERS, key=lambda order: fits[order][0].aic)
    assert panel.describe()["pooled"] == [_label(order)]
    out = panel.one_step(x, mask, scored)
    for row, fit, start in ((0, fits[order][0], context), (1, fits[order][1], context), (2, fits[order][0], 5)):
        mean, density = expected(row, fit, start)
        assert out.log_density[row, start:].numpy() == pytest.approx(density, abs=1e-6)


def test_ets_chooses_by_aic_and_filters_the_scored_steps_as_statsmodels_does():
    rng = np.random.default_rng(1)
    steps, context = 40, 30
    series = np.cumsum(np.cumsum(0.1 * rng.normal(size=(2, steps)), 1) + rng.normal(size=(2, steps)), 1)
    x, mask = _batch(list(series))
    forecaster = classical_model("statsmodels-ets", season=1).fit(x[:, :context], mask[:, :context])
    out = forecaster.one_step(x, mask, _scored(mask, [context, context]))
    trends = {"N": {"trend": False}, "A": {"trend": True}, "Ad": {"trend": True, "damped_trend": True}}
    labels = []
    for row in range(2):
        fits = {
            name: _quiet_fit(ExponentialSmoothing(series[row, :context], **kw), method="powell")
            for name, kw in trends.items()
        }
        name = min(fits, key=lambda n: fits[n].aic)
        labels.append(f"ETS(A,{name},N)")
        full = ExponentialSmoothing(series[row], concentrate_scale=False, **trends[name])
        values = dict(zip(fits[name].model.param_names, fits[name].params), sigma2=fits[name].scale)
        result = full.filter(np.array([values[n] for n in full.param_names]))
        mean, variance = result.forecasts[0, context:], result.forecasts_error_cov[0, 0, context:]
        density = -0.5 * np.log(2 * np.pi * variance) - (series[row, context:] - mean) ** 2 / (2 * variance)
        assert out.mean[row, context:, 0].numpy() == pytest.approx(mean, abs=1e-6)
        assert out.log_density[row, context:].numpy() == pytest.approx(density, abs=1e-6)
    calls = forecaster.describe()["rows_since_fit"]
    assert Counter({k: v for k, v in calls.items() if k.startswith("ETS")}) == Counter(labels)


@pytest.mark.slow
def test_seasonal_arima_and_ets_choose_in_statsmodels_terms_and_forecast_its_distribution():
    rng = np.random.default_rng(5)
    season, steps, context = 4, 48, 40
    series = np.cumsum(0.5 * rng.normal(size=steps)) + np.tile([2.0, -1.0, 0.5, -1.5], steps // season)
    x, mask = _batch([series])
    scored = _scored(mask, [context])

    def check(out, result):
        mean, variance = result.forecasts[0, context:], result.forecasts_error_cov[0, 0, context:]
        density = -0.5 * np.log(2 * np.pi * variance) - (series[context:] - mean) ** 2 / (2 * variance)
        assert out.log_density[0, context:].numpy() == pytest.approx(density, abs=1e-6)

    # ARIMA: (p, d, q) first, then (P, D, Q) in {0, 1}^3 with it; every candidate burns 1 + m steps
    def sarimax(order, seasonal=(0, 0, 0)):
        trend = "c" if order[1] + seasonal[1] == 0 else "n"
        return SARIMAX(
            series[:context],
            order=order,
            seasonal_order=(*seasonal, season) if any(seasonal) else (0, 0, 0, 0),
            trend=trend,
            loglikelihood_burn=1 + season,
        )

    first = {(order, (0, 0, 0)): _quiet_fit(sarimax(order)) for order in ORDERS}
    best = min(first, key=lambda k: first[k].aic)[0]
    second = {(best, s): _quiet_fit(sarimax(best, s)) for s in np.ndindex(2, 2, 2) if any(s)}
    fits = {**first, **second}
    order, seasonal = min(fits, key=lambda k: fits[k].aic)
    arima = classical_model("statsmodels-arima", season=season).fit(x[:, :context], mask[:, :context])
    check(arima.one_step(x, mask, scored), fits[order, seasonal].apply(series))

    # ETS: trend none, additive or damped, season none or additive
    options = {
        (t, s): (
            {"trend": t != "N", "damped_trend": t == "Ad", "seasonal": season if s else None},
            "lbfgs" if s else "powell",
        )
        for t in ("N", "A", "Ad")
        for s in (False, True)
    }

    def ets_fit(values, key):
        return _quiet_fit(ExponentialSmoothing(values, **options[key][0]), method=options[key][1])

    fits = {key: ets_fit(series[:context], key) for key in options}
    key = min(fits, key=lambda k: fits[k].aic)
    full = ExponentialSmoothing(series, concentrate_scale=False, **options[key][0])
    values = dict(zip(fits[key].model.param_names, fits[key].params), sigma2=fits[key].scale)
    ets = classical_model("statsmodels-ets", season=season).fit(x[:, :context], mask[:, :context])
    check(ets.one_step(x, mask, scored), full.filter(np.array([values[n] for n in full.param_names])))

    draws = ets.forecast(x, mask, 4, 8000, generator=torch.Generator().manual_seed(2))[:, 0, :, 0].numpy()
    whole = {key: ets_fit(series, key) for key in options}
    forecast = whole[min(whole, key=lambda k: whole[k].aic)].get_forecast(4)
    spread = np.sqrt(forecast.var_pred_mean)
    assert draws.mean(0) == pytest.approx(forecast.predicted_mean, abs=0.1 * spread.max())
    assert draws.std(0) == pytest.approx(spread, rel=0.05)


def _var_series(steps, seed):
    rng = np.random.default_rng(seed)
    coefs = np.array([[0.5, 0.2], [-0.3, 0.4]])
    series = np.zeros((steps, 2))
    for t in range(1, steps):
        series[t] = 0.1 + coefs @ series[t - 1] + rng.normal(size=2) * [1.0, 0.5]
    return series


def test_var_matches_statsmodels_on_a_context_and_pooled_on_the_training_rows():
    train, context = _var_series(60, 0), 45
    rows = [_var_series(60, 1), _var_series(60, 2)]
    x, mask = _batch(rows)
    forecaster = classical_model("var").fit(*_batch([train]))
    out = forecaster.one_step(x, mask, _scored(mask, [context, 0]))  # row 1 has no context: the pooled fit
    # a context of 45 steps, D = 2: lags tried up to min(12, round(12 (45/100)^(1/4)), (45 - 6) // 3) = 10
    own = VAR(rows[0][:context]).fit(maxlags=10, ic="aic", trend="c")
    # the training row, 60 steps: up to min(12, round(12 (60/100)^(1/4)), (60 - 6) // 3) = 11
    pooled = VAR(train).fit(maxlags=11, ic="aic", trend="c")
    for row, result, first in ((0, own, context), (1, pooled, pooled.k_ar)):
        for t in range(first, 60):
            mean = result.forecast(rows[row][t - result.k_ar : t], 1)[0]
            assert out.mean[row, t].numpy() == pytest.approx(mean, abs=1e-9)
            density = multivariate_normal(mean, result.sigma_u).logpdf(rows[row][t])
            assert float(out.log_density[row, t]) == pytest.approx(density, abs=1e-9)
    # step 0 of the row without history: each missing lag at the training mean, its spread added
    centred = train - train.mean(0)
    mean = pooled.intercept + sum(a @ train.mean(0) for a in pooled.coefs)
    cov = pooled.sigma_u + sum(a @ (centred.T @ centred / len(train)) @ a.T for a in pooled.coefs)
    assert out.mean[1, 0].numpy() == pytest.approx(mean, abs=1e-9)
    assert float(out.log_density[1, 0]) == pytest.approx(multivariate_normal(mean, cov).logpdf(rows[1][0]), abs=1e-9)


# --------------------------------------------------------------------------- forecasts


def test_last_value_forecasts_are_a_random_walk_and_repeat_with_the_generator():
    x, mask = _batch([[0, 1, 3, 2, 4]])  # differences 1 2 -1 2: noise 2.5
    forecaster = classical_model("last-value").fit(x, mask)
    draws = forecaster.forecast(x, mask, 3, 20000, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (20000, 1, 3, 1)
    again = forecaster.forecast(x, mask, 3, 20000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)
    for h in range(3):
        variance = 2.5 * (h + 1)
        assert float(draws[:, 0, h, 0].mean()) == pytest.approx(4, abs=4 * math.sqrt(variance / 20000))
        assert float(draws[:, 0, h, 0].var()) == pytest.approx(variance, rel=0.05)


def test_arima_and_var_forecasts_draw_statsmodels_forecast_distribution():
    series = _arima_panel(rows=1, steps=40)[0]
    x, mask = _batch([series])
    arima = classical_model("statsmodels-arima", season=1).fit(x, mask)
    draws = arima.forecast(x, mask, 4, 8000, generator=torch.Generator().manual_seed(0))[:, 0, :, 0].numpy()
    (label,) = [k for k in arima.describe()["rows_since_fit"] if k.startswith("ARIMA")]
    order = next(order for order in ORDERS if _label(order) == label)
    forecast = _quiet_fit(_sarimax(series, order)).get_forecast(4)
    spread = np.sqrt(forecast.var_pred_mean)
    assert draws.mean(0) == pytest.approx(forecast.predicted_mean, abs=0.1 * spread.max())
    assert draws.std(0) == pytest.approx(spread, rel=0.05)

    rows = _var_series(80, 3)
    x, mask = _batch([rows])
    var = classical_model("var").fit(x, mask)
    draws = var.forecast(x, mask, 3, 8000, generator=torch.Generator().manual_seed(1))[:, 0].numpy()
    result = VAR(rows).fit(maxlags=11, ic="aic", trend="c")  # min(12, round(12 (0.8)^(1/4)), (80 - 6) // 3) = 11
    mean, cov = result.forecast(rows[-result.k_ar :], 3), result.forecast_cov(3)
    for h in range(3):
        assert draws[:, h].mean(0) == pytest.approx(mean[h], abs=0.1 * np.sqrt(cov[h].diagonal()).max())
        assert np.cov(draws[:, h].T) == pytest.approx(cov[h], abs=0.1 * cov[h].diagonal().max())


# --------------------------------------------------------------------------- the scored steps and the record


@pytest.mark.parametrize("name", [name for name in CLASSICAL if name != "logistic-ar"])  # real-valued data
def test_a_scored_step_changes_no_parameter_and_no_earlier_prediction(name):
    rng = np.random.default_rng(4)
    series = np.cumsum(rng.normal(size=(2, 36, 2 if name == "var" else 1)), 1)
    x, mask = _batch(list(series))
    context = 28
    forecaster = classical_model(name, season=1).fit(x[:, :context], mask[:, :context])
    scored = _scored(mask, [context, context])
    before = forecaster.one_step(x, mask, scored)
    record = {k: v for k, v in forecaster.describe().items() if k != "rows_since_fit"}
    changed = x.clone()
    changed[0, 31] += 50.0
    changed[1, 35] -= 50.0
    after = forecaster.one_step(changed, mask, scored)
    assert {k: v for k, v in forecaster.describe().items() if k != "rows_since_fit"} == record
    json.dumps(forecaster.describe())
    assert isinstance(forecaster.num_parameters, int) and forecaster.num_parameters > 0
    for row, step in ((0, 31), (1, 35)):  # statsforecast's filter rounds alike, not bit for bit, whatever follows
        assert torch.allclose(before.mean[row, : step + 1], after.mean[row, : step + 1], rtol=0, atol=1e-9)
        assert torch.allclose(before.log_density[row, :step], after.log_density[row, :step], rtol=0, atol=1e-9)
        assert before.log_density[row, step] != after.log_density[row, step]


# --------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_naming_the_argument():
    x, mask = _batch([[0.0, 1.0, 2.0, 1.5]])
    with pytest.raises(ValueError, match="classical model must be one of"):
        classical_model("prophet")
    with pytest.raises(ValueError, match="var .*D >= 2"):
        classical_model("var").fit(x, mask)
    with pytest.raises(ValueError, match="season"):
        classical_model("statsmodels-arima", season=0)
    forecaster = classical_model("last-value")
    with pytest.raises(ValueError, match="not fitted"):
        forecaster.one_step(x, mask)
    forecaster.fit(x, mask)
    with pytest.raises((TypeError, ValueError), match="scored"):
        forecaster.one_step(x, mask, scored=torch.ones(1, 4))
    padded = mask.clone()
    padded[0, 3] = False
    with pytest.raises(ValueError, match="scored"):
        forecaster.one_step(x, padded, scored=mask)
    with pytest.raises(ValueError, match="features"):
        forecaster.one_step(torch.zeros(1, 4, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="horizon"):
        forecaster.forecast(x, mask, 0, 10)


def test_a_stalled_ets_fit_is_fitted_again_and_the_best_likelihood_kept(monkeypatch):
    from statsforecast.utils import AirPassengers

    from ppl_models.classical.arima_ets import EtsSpec

    monkeypatch.setattr(univariate_state_space, "RETRY_METHODS", ("powell",))  # the faster of the two retries
    series = (AirPassengers - AirPassengers.mean()) / AirPassengers.std()  # L-BFGS stalls on a bound here
    ets = classical_model("statsmodels-ets", season=12)
    ets.period, ets._rows = 12, Counter()
    spec = EtsSpec("A", True)
    model = ets._make(series, spec, fitting=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        powell = model.fit(disp=False, cov_type="none", method="powell", maxiter=5000)
        settled = ets._settled_fit(model, spec)
    assert settled.llf == pytest.approx(powell.llf, abs=1e-6) and settled.mle_retvals["converged"]
    assert ets._rows == Counter({"optimiser: retried": 1, "optimiser: improved by a retry": 1})
    assert powell.llf > 120  # L-BFGS stops near 78 (its flag says it did not converge)

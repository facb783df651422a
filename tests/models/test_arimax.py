"""ArimaX against statsforecast's AutoARIMA fitted on the file's own columns, and against ARIMA without the
covariate, on y_t = 3 c_t + noise."""

import numpy as np
import pandas as pd
import pytest
from statsforecast.models import AutoARIMA

from ppl_models.classical.exogenous import ArimaX
from ppl_models.inference.data import SequenceDataset
from ppl_models.inference.data.covariates import CovariateLayout


def _file(steps=80, future=6, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=steps + future)
    y = 3 * c + 0.2 * rng.normal(size=steps + future)
    frame = pd.DataFrame({"t": np.arange(steps + future), "y": y, "c": c})
    truth = frame["y"].to_numpy()[steps:].copy()
    frame.loc[steps:, "y"] = np.nan
    return frame, c, y, truth


def test_arimax_matches_statsforecast_fitted_on_the_raw_columns():
    frame, c, y, _ = _file()
    data = SequenceDataset.from_dataframe(frame, time="t", covariates=["c"])
    row = data.sequences[0]
    model = ArimaX(data.covariates).fit(row)
    mean, sd = model.forecast(row, data.future["0"], 6)
    direct = AutoARIMA(season_length=1).fit(y[1:80], X=c[1:80, None])  # step 0 has no regressor in the layout
    expected = direct.predict(6, X=c[80:86, None], level=[80])
    np.testing.assert_allclose(mean[:, 0], expected["mean"], rtol=1e-6, atol=1e-8)
    width = (np.asarray(expected["hi-80"]) - np.asarray(expected["lo-80"])) / (2 * 1.2815515655446004)
    np.testing.assert_allclose(sd[:, 0], width, rtol=1e-6)
    assert model.forms[0].endswith("+ c")


def test_arimax_beats_arima_without_the_covariate_by_far():
    frame, c, y, truth = _file(seed=1)
    data = SequenceDataset.from_dataframe(frame, time="t", covariates=["c"])
    row = data.sequences[0]
    mean, _ = ArimaX(data.covariates).fit(row).forecast(row, data.future["0"], 6)
    alone = AutoARIMA(season_length=1).fit(y[:80]).predict(6)["mean"]
    assert np.abs(mean[:, 0] - truth).mean() < 0.2 * np.abs(alone - truth).mean()


def test_past_only_covariates_and_a_short_future_are_refused():
    with pytest.raises(ValueError, match="past_covariates: arimax takes future-known covariates only"):
        ArimaX(CovariateLayout(("y",), ("c",), ("p",)))
    frame, *_ = _file()
    data = SequenceDataset.from_dataframe(frame, time="t", covariates=["c"])
    model = ArimaX(data.covariates).fit(data.sequences[0])
    with pytest.raises(ValueError, match=r"future: expected the 8 next values of the covariates \['c'\]"):
        model.forecast(data.sequences[0], data.future["0"], 8)

"""Covariate columns of a user's frame: the layout row t = [y_t, c_{t+1}, p_t], the future rows, the refusals."""

import numpy as np
import pandas as pd
import pytest

from ppl_models.inference.data import SequenceDataset
from ppl_models.inference.validation import SettingError


def _frame(steps=8, future=2):
    rows = []
    for name, offset in (("a", 0.0), ("b", 100.0)):
        for t in range(steps + future):
            rows.append(
                {
                    "id": name,
                    "t": t,
                    "y": offset + t if t < steps else np.nan,
                    "c": offset + 10 * t,
                    "p": offset - t,
                }
            )
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # the reader orders by time


def test_known_covariates_are_read_one_step_ahead_and_past_ones_as_they_are():
    data = SequenceDataset.from_dataframe(_frame(), series="id", time="t", covariates=["c"], past_covariates=["p"])
    assert data.features == ["y", "c", "p"]
    assert data.covariates.targets == ("y",) and data.covariates.known == ("c",) and data.covariates.past == ("p",)
    a = data.sequences[data.ids.index("a")]
    assert len(a) == 8  # the two rows without a target are the future, not history
    np.testing.assert_array_equal(a[:, 0], np.arange(8))  # y_t
    np.testing.assert_array_equal(a[:, 1], 10 * np.arange(1, 9))  # c_{t+1}; the last row: the first future value
    np.testing.assert_array_equal(a[:, 2], -np.arange(8))  # p_t
    np.testing.assert_array_equal(data.future["b"][:, 0], [180.0, 190.0])


def test_without_future_rows_the_last_row_keeps_its_own_value():
    data = SequenceDataset.from_dataframe(_frame(future=0), series="id", time="t", covariates=["c"])
    assert data.features == ["y", "p", "c"]  # every other numeric column is a target
    a = data.sequences[data.ids.index("a")]
    np.testing.assert_array_equal(a[:, 2], [10, 20, 30, 40, 50, 60, 70, 70])
    assert data.future == {}


def test_named_features_lose_their_covariates():
    data = SequenceDataset.from_dataframe(_frame(), series="id", time="t", features=["y", "c"], covariates=["c"])
    assert data.features == ["y", "c"] and data.covariates.targets == ("y",)


@pytest.mark.parametrize("key", ["covariates", "past_covariates"])
def test_an_unknown_column_names_its_option_and_the_column(key):
    with pytest.raises(SettingError, match=rf"column 'price' \(given as {key}\) not found") as caught:
        SequenceDataset.from_dataframe(_frame(), series="id", time="t", **{key: ["price"]})
    assert caught.value.key == key


def test_a_covariate_that_is_the_time_column_is_refused():
    with pytest.raises(SettingError, match="also the time column"):
        SequenceDataset.from_dataframe(_frame(), series="id", time="t", covariates=["t"])


def test_a_missing_known_value_in_the_future_window_is_refused_with_its_row():
    frame = _frame().sort_index()
    frame.loc[(frame["id"] == "a") & (frame["t"] == 9), "c"] = np.nan  # a frame's rows count from 1: row 10
    with pytest.raises(
        SettingError, match=r"column 'c' \(given as covariates\), row 10 \(series 'a'\): no value after"
    ):
        SequenceDataset.from_dataframe(frame, series="id", time="t", features=["y"], covariates=["c"])


def test_a_missing_covariate_in_the_history_is_refused():
    frame = _frame().sort_index()
    frame.loc[(frame["id"] == "b") & (frame["t"] == 3), "p"] = np.nan
    with pytest.raises(SettingError, match=r"column 'p' \(given as past_covariates\).*series 'b'\): no value"):
        SequenceDataset.from_dataframe(frame, series="id", time="t", past_covariates=["p"])


def test_targets_and_covariates_are_refused_together():
    with pytest.raises(SettingError, match="does not take them"):
        SequenceDataset.from_dataframe(_frame(), series="id", time="t", targets=["y"], covariates=["c"])


def test_covariates_of_an_npz_file_are_refused(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, x=np.zeros((2, 5, 2)))
    with pytest.raises(SettingError, match=r"covariates name columns of a .csv or .parquet file"):
        SequenceDataset.from_file(path, covariates=["x1"])

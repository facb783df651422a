"""Counts on a board: the classical rows read the file's integers back exactly (a 0 is 0 after the standardisation's
round trip), so Croston's method, which needs the zeros, is a row of count data with zeros; real values keep theirs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments import own_data
from ppl_models.experiments.classical_rows import applicable_classical, data_units
from ppl_models.experiments.registry import DATASETS, build

TABLE = ['data.series="site"', 'data.time="t"', 'data.split_by="time"', 'data.transform="none"']


def _board_data(folder, values):
    """A file of 4 series of 40 steps of column ``y`` (``values``: [4, 40]) read as a board reads it."""
    rows = [{"site": f"s{s}", "t": t, "y": values[s][t]} for s in range(4) for t in range(40)]
    pd.DataFrame(rows).to_csv(folder / "f.csv", index=False)
    config = own_data.model_config("gru", folder / "f.csv", TABLE)
    return build(config["data"], DATASETS, "data")


def test_counts_come_back_as_integers_and_get_crostons_row(tmp_path):
    counts = np.random.default_rng(0).poisson(1.3, size=(4, 40))
    data = _board_data(tmp_path, counts.tolist())
    x, mask = data_units(data.levels, "train")
    values = x[mask].numpy()
    assert (values == np.round(values)).all() and (values == 0).any()
    assert sorted(set(values.ravel().tolist())) == sorted(set(counts[:, :28].ravel().tolist()))
    names, refused = applicable_classical(data)
    assert "croston" in names and "croston" not in refused


def test_real_values_keep_their_decimals_and_get_no_croston_row(tmp_path):
    rng = np.random.default_rng(1)
    real = np.round(np.abs(rng.normal(3.0, 1.0, size=(4, 40))), 3)
    real[:, ::5] = 0.0  # zeros, but not counts: croston is for non-negative data with zeros, so it still applies
    data = _board_data(tmp_path, real.tolist())
    x, mask = data_units(data.levels, "train")
    np.testing.assert_allclose(np.sort(x[mask].numpy().ravel()), np.sort(real[:, :28].ravel()), atol=1e-6)
    assert not (x[mask].numpy() == np.round(x[mask].numpy())).all()
    names, _ = applicable_classical(data)
    assert "croston" in names
    negative = real - 1.0
    names, refused = applicable_classical(_board_data(tmp_path, negative.tolist()))
    assert "croston" not in names and "negative" in refused["croston"]


@pytest.mark.parametrize("split", ["valid", "test"])
def test_held_out_counts_are_integers_too(tmp_path, split):
    counts = np.random.default_rng(2).poisson(0.7, size=(4, 40))
    x, mask = data_units(_board_data(tmp_path, counts.tolist()).levels, split)
    values = x[mask].numpy()
    assert (values == np.round(values)).all()

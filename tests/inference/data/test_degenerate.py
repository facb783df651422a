"""Features that carry no series of their own (``ppl_models.inference.data.degenerate``): constant, static per series
or collinear ones found with their relation, and a file read without them, saying so."""

import numpy as np
import pytest
from factories import site_walks, warned

from ppl_models.inference.data import SequenceDataset
from ppl_models.inference.data.degenerate import degenerate_features


def test_constant_static_and_collinear_features_are_found_with_their_relation():
    rng = np.random.default_rng(0)
    sequences = []
    for i in range(4):
        a, c = rng.normal(size=25).cumsum(), rng.normal(size=25)
        sequences.append(np.c_[a, np.full(25, 3.0), 2 * a + 1, np.full(25, float(i)), c, a - 0.5 * c])
    found = degenerate_features(sequences, ["a", "k", "b", "attr", "c", "d"])
    assert list(found) == ["k", "b", "attr", "d"]
    assert found["k"] == "constant (every value 3)"
    assert "b = 2 a + 1" in found["b"]
    assert "series attribute" in found["attr"]
    assert "d = 1 a - 0.5 c" in found["d"]
    assert degenerate_features([s[:, [0, 4]] for s in sequences], ["a", "c"]) == {}


def test_a_file_reads_without_its_degenerate_features_and_says_so(tmp_path):
    path = site_walks(tmp_path / "d.csv", const=lambda f: 5.0, double=lambda f: 2 * f["temp"] + 1)
    dataset, messages = warned(lambda: SequenceDataset.from_file(path, series="site", time="t"))
    assert dataset.features == ["temp"] and dataset.obs_dim == 1
    assert set(dataset.left_out) == {"const", "double"}
    assert len(messages) == 1 and "'const'" in messages[0] and "double = 2 temp + 1" in messages[0]
    kept = SequenceDataset.from_file(path, series="site", time="t", degenerate="keep")
    assert kept.features == ["temp", "const", "double"]
    with pytest.raises(ValueError, match="no feature moves on its own"):
        SequenceDataset.from_file(path, series="site", time="t", features=["const"])

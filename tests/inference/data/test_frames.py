"""A long-format frame as sequences (``ppl_models.inference.data.frames``): a split column's cells named by their
value, a column named twice or in two roles refused."""

import numpy as np
import pytest
from factories import site_walks

from ppl_models.inference.data import SequenceDataset


def test_a_numeric_split_column_is_named_by_its_value(tmp_path):
    path = site_walks(tmp_path / "n.csv", part=lambda f: (f["t"] >= 20).astype(int))
    with pytest.raises(ValueError, match=r"row 2: 0 is not a split name") as error:
        SequenceDataset.from_file(path, series="site", time="t", split="part")
    assert "np." not in str(error.value)


def test_a_column_named_twice_or_in_two_roles_is_refused(tmp_path):
    path = site_walks(tmp_path / "w.csv", wind=lambda f: np.random.default_rng(2).gamma(2.0, size=len(f)))
    with pytest.raises(ValueError, match="column 'temp' is named twice in features"):
        SequenceDataset.from_file(path, series="site", time="t", features=["temp", "temp"])
    with pytest.raises(ValueError, match="column 'site' is given both as series and as time"):
        SequenceDataset.from_file(path, series="site", time="site")
    with pytest.raises(ValueError, match=r"column 'site', row 2: 's0' is not a number"):
        SequenceDataset.from_file(path, series="site", time="t", features=["site"])

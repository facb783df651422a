"""The checks of the values read from a file (``ppl_models.inference.data.value_checks``): an extreme value is one far
beyond the robust spread or absolutely huge, named in one warning; a non-finite one is refused with its place."""

import warnings

import numpy as np
import pytest

from ppl_models.inference.data import DataWarning
from ppl_models.inference.data.value_checks import EXTREME_ABSOLUTE, check_values


def test_extreme_values_are_far_beyond_the_robust_spread_or_absolutely_huge():
    column = np.random.default_rng(0).normal(size=(1000, 1))  # median ~0, robust spread ~1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_values(np.concatenate([column, [[1e5]]]), "f", ["a"])  # 1e5 spreads: kept without a word
        check_values(np.array([[1.0], [np.nan], [2.0]]), "f", ["a"], allow_nan=True)  # NaN: a missing value
    with pytest.warns(DataWarning, match=r"f: extreme values .* in column 'a' \(1, first 1e\+07 at line 9\)"):
        check_values(np.concatenate([column[:6], [[1e7]]]), "f", ["a"], lines=range(3, 10))
    constant = np.full((10, 1), 2 * EXTREME_ABSOLUTE)  # no spread at all: only the absolute rule speaks
    with pytest.warns(DataWarning, match=r"column 'b' \(10, first 2e\+15"):
        check_values(constant, "f", ["b"])
    with pytest.raises(ValueError, match=r"f, column 'a', line 4: inf is not a finite float32 number \(1 such"):
        check_values(np.array([[1.0], [np.inf]]), "f", ["a"], lines=[3, 4], allow_nan=True)

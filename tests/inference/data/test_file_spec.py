"""The settings of a user's file (FileSpec): each bad one refused in one place, as a SettingError naming its key."""

import pytest

from ppl_models.inference.data import FileSpec, SettingTypeError
from ppl_models.inference.validation import SettingError

#: (settings, the key refused, what the message says)
BAD = [
    ({"missing": "skip"}, "missing", "missing: expected one of ['error', 'drop-series'], got 'skip'"),
    ({"time_order": "sorted"}, "time_order", "time_order: expected one of ['values', 'file']"),
    ({"degenerate": "maybe"}, "degenerate", "degenerate: expected one of ['drop', 'keep']"),
    ({"split_by": "random"}, "split_by", "split_by: expected 'series' or 'time', got 'random'"),
    ({"fractions": [0.5, 0.5]}, "fractions", "fractions: expected three positive numbers summing to 1"),
    ({"fractions": "abc"}, "fractions", "fractions: expected three numbers"),
    ({"split_seed": -1}, "split_seed", "split_seed must be >= 0, got -1"),
    ({"window": 1}, "window", "window must be >= 2, got 1"),
    ({"window": 4, "stride": 0}, "stride", "stride must be >= 1, got 0"),
    ({"stride": 2}, "stride", "stride: needs window"),
    ({"split": "part", "split_by": "time"}, "split", "split 'part' decides where each row goes, so split_by"),
    ({"split": "part", "fractions": [0.6, 0.2, 0.2]}, "split", "so fractions would not be used"),
]


@pytest.mark.parametrize("settings, key, says", BAD, ids=[key for _, key, _ in BAD])
def test_a_bad_setting_is_one_setting_error_naming_its_key(settings, key, says):
    with pytest.raises(SettingError) as raised:
        FileSpec(**settings)
    assert raised.value.key == key and says in str(raised.value), str(raised.value)
    assert f"<{key}>" in raised.value.spelled(lambda k, v: f"<{k}>")  # the key spelled by the caller


def test_a_setting_of_the_wrong_type_is_also_a_type_error():
    with pytest.raises(SettingTypeError, match=r"window must be an int >= 2, got float 2.5") as raised:
        FileSpec(window=2.5)
    assert isinstance(raised.value, TypeError) and raised.value.key == "window"


def test_the_spec_keeps_its_settings_and_replaces_some():
    spec = FileSpec(series="id", features=["a", "b"], fractions=[0.5, 0.25, 0.25], window=4)
    assert (
        spec.features == ("a", "b") and spec.fractions == (0.5, 0.25, 0.25) and spec.split_fractions == spec.fractions
    )
    assert FileSpec().split_fractions == (0.7, 0.15, 0.15)
    assert FileSpec.of(spec, stride=2) == FileSpec(
        series="id", features=("a", "b"), fractions=(0.5, 0.25, 0.25), window=4, stride=2
    )
    assert FileSpec.of(None, series="id").reading()["series"] == "id"
    with pytest.raises(SettingError, match="stride must be >= 1"):
        FileSpec.of(spec, stride=0)

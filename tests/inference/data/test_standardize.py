"""The standardisation of a user's data (``ppl_models.inference.data.standardize``): fit in float64, so a large offset
keeps its digits and a tiny scale its own spread; only a truly constant feature is left unscaled, named once."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from factories import warned

from ppl_models.inference.data.datasets import SequenceDataset


def _long_csv(tmp_path, name, columns, values, series=4):
    """``values [series * steps, len(columns)]`` as a long CSV of series ``s0..``, time ``t``; the path."""
    steps = len(values) // series
    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, "t", np.tile(np.arange(steps), series))
    frame.insert(0, "id", np.repeat([f"s{i}" for i in range(series)], steps))
    frame.to_csv(tmp_path / name, index=False, float_format="%.17g")
    return tmp_path / name


@pytest.mark.parametrize(("offset", "spread", "count"), [(1e9, 100.0, 700), (1e14, 1000.0, 560)])
def test_a_large_offset_keeps_its_digits_through_standardisation(tmp_path, offset, spread, count):
    raw = offset + np.random.default_rng(0).normal(0.0, spread, size=(count, 1))
    path = _long_csv(tmp_path, "big.csv", ["v"], raw)
    splits = SequenceDataset.from_file(path, series="id", time="t").split(by="time")
    series = raw[:, 0].reshape(4, -1)  # the file's four series, in time order
    train = np.concatenate([s[: len(part)] for s, part in zip(series, splits.train.sequences)])
    test = np.concatenate([s[len(s) - len(part) :] for s, part in zip(series, splits.test.sequences)])
    exact_mean = math.fsum(train) / len(train)
    exact_sd = math.sqrt(math.fsum((v - exact_mean) ** 2 for v in train) / len(train))
    assert abs(splits.standardizer.mean[0] - exact_mean) < 1e-12 * offset
    assert splits.standardizer.scale[0] == pytest.approx(exact_sd, rel=1e-9)
    (x, mask), _, (x_test, mask_test) = splits.tensors()
    z = x[mask][:, 0]
    assert x.dtype == torch.float32 and len(torch.unique(z)) == len(train)  # every value kept apart
    assert torch.allclose(z.double(), torch.tensor((train - exact_mean) / exact_sd), atol=1e-6)
    back = splits.standardizer.inverse(x_test, dtype=torch.float64)[mask_test][:, 0]
    assert back.dtype == torch.float64 and np.abs(back.numpy() - test).max() < 1e-5 * spread
    width = splits.standardizer.inverse_scale(torch.tensor([1.0]), dtype=torch.float64)
    assert width.dtype == torch.float64 and float(width) == pytest.approx(exact_sd, rel=1e-7)


def test_a_feature_on_a_tiny_scale_is_scaled_by_its_own_spread():
    rng = np.random.default_rng(1)
    sequences = [np.c_[1e-30 * rng.normal(size=20), rng.normal(size=20)] for _ in range(10)]
    splits = SequenceDataset.from_sequences(sequences).split(by="time")
    train = np.concatenate([s[:14, 0] for s in sequences])
    assert splits.standardizer.scale[0] == pytest.approx(train.std(), rel=1e-9)
    (x, mask), _, _ = splits.tensors()
    assert float(x[mask][:, 0].double().std(unbiased=False)) == pytest.approx(1.0, rel=1e-5)


def test_only_a_truly_constant_feature_is_left_unscaled_and_named_once():
    rng = np.random.default_rng(2)
    sequences = [np.c_[np.full(12, 5.5), 1e14 + rng.normal(size=12)] for _ in range(6)]
    dataset = SequenceDataset.from_sequences(sequences, features=["flat", "big"], source="flat.csv")
    splits, messages = warned(dataset.split)
    assert splits.standardizer.mean[0] == 5.5 and splits.standardizer.scale[0] == 1.0
    assert splits.standardizer.scale[1] != 1.0  # spread 1 on 1e14: small, but not nothing
    assert len(messages) == 1 and "flat.csv" in messages[0] and "'flat'" in messages[0] and "'big'" not in messages[0]
    assert warned(dataset.split)[1] == []  # the same finding is not repeated

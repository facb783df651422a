"""The library's data type: every format gives the same tensors, splits (a bad seed named), standardisation, bad
files."""

import numpy as np
import pandas as pd
import pytest
import torch
from factories import long_frame, write_file

from ppl_models.inference.data import SequenceDataset, Standardizer


def expected_tensors(frame: pd.DataFrame):
    """The padded tensors built by hand: each series sorted by time, in order of first appearance."""
    order = list(dict.fromkeys(frame["id"]))
    seqs = [frame[frame["id"] == i].sort_values("step")[["f0", "f1"]].to_numpy() for i in order]
    x = torch.zeros(len(seqs), max(map(len, seqs)), 2)
    for i, s in enumerate(seqs):
        x[i, : len(s)] = torch.tensor(s, dtype=torch.float32)
    return x, torch.tensor([[t < len(s) for t in range(x.shape[1])] for s in seqs])


def test_csv_parquet_npz_and_sequences_give_the_same_tensors(tmp_path):
    frame = long_frame()
    x, mask = expected_tensors(frame)
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_parquet(tmp_path / "d.parquet")
    np.savez(tmp_path / "d.npz", x=x.double().numpy(), mask=mask.numpy())
    np.savez(tmp_path / "each.npz", **{f"s{i}": x[i, : int(mask[i].sum())].double().numpy() for i in range(len(x))})
    sets = [
        SequenceDataset.from_file(tmp_path / "d.csv", series="id", time="step"),
        SequenceDataset.from_file(tmp_path / "d.parquet", series="id", time="step"),
        SequenceDataset.from_file(tmp_path / "d.npz"),
        SequenceDataset.from_file(tmp_path / "each.npz"),
        SequenceDataset.from_sequences([x[i, : int(mask[i].sum())] for i in range(len(x))]),
    ]
    for dataset in sets:
        got_x, got_mask = dataset.padded()
        assert torch.equal(got_mask, mask) and torch.allclose(got_x, x, atol=1e-6), dataset.source
    assert sets[0].features == ["f0", "f1"]  # the text column and the id / time columns are not features
    assert sets[0].ids == list(dict.fromkeys(frame["id"]))


def test_no_series_column_is_one_series_in_file_order(tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0.5, 0.25, 0.125]})
    frame.to_csv(tmp_path / "one.csv", index=False)
    dataset = SequenceDataset.from_file(tmp_path / "one.csv")
    assert len(dataset) == 1 and dataset.padded()[0][0].tolist() == frame.to_numpy().tolist()


def test_standardising_then_inverting_gives_the_original_units():
    frame = long_frame(lengths=(40, 30, 50, 45, 35, 38))
    splits = SequenceDataset.from_dataframe(frame, series="id", time="step").split(seed=3)
    raw = np.concatenate(splits.train.sequences)
    assert np.allclose(splits.standardizer.mean, raw.mean(0)) and np.allclose(splits.standardizer.scale, raw.std(0))
    (x, mask), _, (x_test, mask_test) = splits.tensors()
    assert torch.allclose(x[mask].mean(0), torch.zeros(2), atol=1e-5)
    assert torch.allclose(x[mask].std(0, unbiased=False), torch.ones(2), atol=1e-4)
    raw_test, _ = splits.test.padded()
    back = splits.standardizer.inverse(x_test)
    assert torch.allclose(back[mask_test], raw_test[mask_test], atol=1e-4)
    assert torch.equal(x_test[~mask_test], torch.zeros_like(x_test[~mask_test]))  # padding stays zero
    same = Standardizer.from_dict(splits.standardizer.to_dict())
    assert torch.allclose(same.inverse_scale(torch.ones(2)), torch.tensor(splits.standardizer.scale).float())


def test_targets_get_their_own_training_standardisation_kept_through_windows():
    frame = long_frame(lengths=(12, 9, 15, 10, 11, 8))
    frame["y"] = np.random.default_rng(5).choice([0.0, 1.0], size=len(frame)) * 50 + 1000  # binary-looking, shifted
    splits = SequenceDataset.from_dataframe(frame, series="id", time="step", targets=["y"]).split(seed=2)
    raw = np.concatenate(splits.train.targets)[:, 0]  # by hand: mean and sd (ddof 0) of the training targets
    assert splits.target_standardizer.features == ["y"] and splits.standardizer.features == ["f0", "f1"]
    assert np.allclose(splits.target_standardizer.mean, [raw.mean()]) and np.allclose(
        splits.target_standardizer.scale, [raw.std()]
    )
    _, mask = splits.test.padded()
    y = splits.test.padded_targets(splits.target_standardizer)
    expected = (splits.test.padded_targets().double() - raw.mean()) / raw.std()
    assert torch.allclose(y[mask].double(), expected[mask], atol=1e-5) and (y[~mask] == 0).all()
    windowed = splits.windows(4)
    assert windowed.target_standardizer == splits.target_standardizer
    assert windowed.to_dict()["target_standardizer"]["mean"] == [raw.mean()]
    assert SequenceDataset.from_dataframe(frame, series="id", time="step").split().target_standardizer is None


def test_binary_data_is_left_in_its_units_and_asks_for_bernoulli():
    rolls = [(np.random.default_rng(i).random((12, 5)) < 0.3).astype(float) for i in range(6)]
    dataset = SequenceDataset.from_sequences(rolls)
    assert dataset.binary and dataset.emission == "bernoulli"
    assert dataset.split().standardizer.identity
    assert SequenceDataset.from_sequences([r + 0.5 for r in rolls]).emission == "gaussian"


def test_splits_by_series_time_and_column_are_disjoint_and_recorded():
    frame = long_frame(lengths=(20,) * 10)
    dataset = SequenceDataset.from_dataframe(frame, series="id", time="step")
    by_series = dataset.split(fractions=(0.6, 0.2, 0.2), seed=0)
    ids = [set(part.ids) for part in by_series]
    assert [len(i) for i in ids] == [6, 2, 2] and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert by_series.to_dict()["how"] == {"by": "series", "fractions": [0.6, 0.2, 0.2], "seed": 0}
    assert dataset.split(seed=0).to_dict() == dataset.split(seed=0).to_dict()  # a seed gives the same split
    by_time = dataset.split(by="time", fractions=(0.5, 0.25, 0.25))
    # held-out segments keep their series' earlier steps as context: scored are 5, 5 steps
    assert [part.lengths for part in by_time] == [[10] * 10, [15] * 10, [20] * 10]
    assert [int(m.sum()) for m in by_time.scored().values()] == [50, 50]
    x, _ = dataset.padded()
    scored = by_time.scored()["test"]
    assert torch.equal(by_time.test.padded()[0][scored], x[:, 15:].float().flatten(0, 1))  # the last quarter
    frame["part"] = np.where(frame["step"] < 14, "train", np.where(frame["step"] < 17, "valid", "test"))
    by_column = SequenceDataset.from_dataframe(frame, series="id", time="step", split="part").split()
    assert [part.lengths[0] for part in by_column] == [14, 17, 20] and by_column.how == {"by": "column"}
    assert by_column.valid.context[0] == 14 and by_column.test.context[0] == 17


def test_windows_cut_training_sequences_and_cover_held_out_steps_once():
    dataset = SequenceDataset.from_sequences([np.arange(20.0)])
    train = dataset.windows(8, 4)
    assert [s[:, 0].tolist() for s in train.sequences] == [list(range(a, a + 8)) for a in (0, 4, 8, 12)]
    held_out = dataset.windows(8, cover=True)
    assert [len(s) for s in held_out.sequences] == [8, 8, 4]
    assert np.concatenate(held_out.sequences)[:, 0].tolist() == list(range(20))


BAD_FILES = [  # (file name, its text or None for absent, options, words the one line must hold)
    ("absent.csv", None, {}, ["absent.csv", "no such file"]),
    ("empty.csv", "", {}, ["empty.csv", "empty"]),
    ("data.xlsx", "a,b\n1,2\n", {}, ["data.xlsx", "unknown suffix", ".csv"]),
    ("header.csv", "a,b\n", {}, ["header.csv", "no data rows"]),
    ("col.csv", "id,t,v\na,0,1\na,1,2\n", {"series": "id", "features": ["w"]}, ["col.csv", "'w'", "not found"]),
    (
        "cell.csv",
        "id,t,v\na,0,1\na,1,oops\na,2,3\n",
        {"series": "id", "time": "t"},
        ["cell.csv", "'v'", "row 3", "'oops'", "not a number"],
    ),
    (
        "nan.csv",
        "id,t,v\na,0,1\na,1,\na,2,3\n",
        {"series": "id", "time": "t"},
        ["nan.csv", "'v'", "row 3", "series 'a'", "missing='drop-series'"],
    ),
    ("inf.csv", "id,t,v\na,0,1\na,1,inf\na,2,3\n", {"series": "id", "time": "t"}, ["inf.csv", "'v'", "row 3", "inf"]),
    (
        "dup.csv",
        "id,t,v\na,0,1\na,1,2\na,1,3\n",
        {"series": "id", "time": "t"},
        ["dup.csv", "rows 3 and 4", "duplicate (series, time)", "(a, 1)"],
    ),
    (
        "short.csv",
        "id,t,v\na,0,1\na,1,2\nb,0,3\n",
        {"series": "id", "time": "t"},
        ["short.csv", "series 'b'", "row 4", "at least 2 steps"],
    ),
    ("trunc.csv", "id,t,v\na,0,1\na,1,2\na,2", {"series": "id", "time": "t"}, ["trunc.csv", "'v'", "row 4"]),
    (
        "split.csv",
        "id,t,v,s\na,0,1,train\na,1,2,tset\n",
        {"series": "id", "split": "s"},
        ["split.csv", "'s'", "row 3", "'tset'"],
    ),
    (
        "both.csv",
        "id,v,y\na,0,1\na,1,2\n",
        {"series": "id", "features": ["v", "y"], "targets": ["y"]},
        ["both.csv", "'y'", "both as a feature and as a target"],
    ),
    ("bad.npz", "not a zip", {}, ["bad.npz", "not a readable .npz"]),
]


@pytest.mark.parametrize("name, text, options, words", BAD_FILES, ids=[row[0] for row in BAD_FILES])
def test_a_bad_file_gets_one_line_naming_file_column_and_row(tmp_path, name, text, options, words):
    path = tmp_path / name if text is None else write_file(tmp_path, name, text)
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(path, **options)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_missing_drop_series_drops_with_a_warning_and_windows_longer_than_a_series_are_refused(tmp_path):
    path = write_file(tmp_path, "gaps.csv", "id,t,v\na,0,1\na,1,\nb,0,3\nb,1,4\nb,2,5\n")
    with pytest.warns(UserWarning, match="dropped 1 series"):
        dataset = SequenceDataset.from_file(path, series="id", time="t", missing="drop-series")
    assert dataset.ids == ["b"]
    with pytest.raises(ValueError, match="window 4 is longer than series 'b' \\(3 steps\\)"):
        dataset.windows(4)
    with pytest.raises(ValueError, match="missing: expected one of"):
        SequenceDataset.from_file(path, series="id", missing="zero")


@pytest.mark.parametrize("seed", [None, -1, 1.5, "0", True])
def test_a_bad_split_seed_is_named(seed):
    dataset = SequenceDataset.from_sequences([np.arange(6.0)] * 6)
    with pytest.raises((ValueError, TypeError), match=r"seed must be (an int )?>= 0, got"):
        dataset.split(seed=seed)
    assert dataset.split(seed=np.int64(3)).how["seed"] == 3

"""A user's file is read as written: digits kept, time in order, odd cells and files named, warnings given once."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference.data.datasets import DataWarning, SequenceDataset


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _long_csv(tmp_path, name, columns, values, series=4):
    """``values [series * steps, len(columns)]`` as a long CSV of series ``s0..``, time ``t``; the path."""
    steps = len(values) // series
    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, "t", np.tile(np.arange(steps), series))
    frame.insert(0, "id", np.repeat([f"s{i}" for i in range(series)], steps))
    frame.to_csv(tmp_path / name, index=False, float_format="%.17g")
    return tmp_path / name


def _recorded(read):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = read()
    return result, [str(w.message) for w in caught if issubclass(w.category, DataWarning)]


# --- values: float64 before standardising ----------------------------------------------------
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
    splits, messages = _recorded(dataset.split)
    assert splits.standardizer.mean[0] == 5.5 and splits.standardizer.scale[0] == 1.0
    assert splits.standardizer.scale[1] != 1.0  # spread 1 on 1e14: small, but not nothing
    assert len(messages) == 1 and "flat.csv" in messages[0] and "'flat'" in messages[0] and "'big'" not in messages[0]
    assert _recorded(dataset.split)[1] == []  # the same finding is not repeated


# --- time order ------------------------------------------------------------------------------
def test_numbered_labels_are_ordered_by_their_number(tmp_path):
    rows = [(f"t{t}", float(t)) for t in range(12)]
    shuffled = [rows[i] for i in np.random.default_rng(3).permutation(12)]
    path = _write(tmp_path, "labels.csv", "id,t,v\n" + "".join(f"a,{t},{v}\n" for t, v in shuffled))
    dataset = SequenceDataset.from_file(path, series="id", time="t")
    assert dataset.sequences[0][:, 0].tolist() == list(range(12))


def test_dates_in_several_forms_are_ordered_as_dates(tmp_path):
    text = (
        "id,t,v\na,2024-01-02,3\nb,12/31/2023,1\na,12/31/2023 23:00,2\nb,2024-01-01,2\na,01/10/2024,4\nb,2023-12-30,0\n"
    )
    dataset = SequenceDataset.from_file(_write(tmp_path, "dates.csv", text), series="id", time="t")
    assert dataset.ids == ["a", "b"]
    assert [s[:, 0].tolist() for s in dataset.sequences] == [[2.0, 3.0, 4.0], [0.0, 1.0, 2.0]]


TIMES = [  # the time cells of series a (3) and b (2), the cell refused and its line
    (["01/29/2024", "02/30/2024", "2024-03-01"], ["2024-01-01", "2024-01-02"], "'02/30/2024'", 3),
    (["morning", "noon", "evening"], ["night", "dawn"], "'morning'", 2),
    (["1", "2", "three"], ["5", "6"], "'three'", 4),
    (["t1", "t2", "t3"], ["t1", "u2"], "'u2'", 6),
]


@pytest.mark.parametrize(("cells", "others", "bad", "row"), TIMES, ids=["date", "words", "number", "label"])
def test_a_time_cell_that_does_not_read_is_refused_unless_the_files_order_is_asked_for(
    tmp_path, cells, others, bad, row
):
    text = "id,t,v\n" + "".join(f"a,{c},{i}\n" for i, c in enumerate(cells)) + f"b,{others[0]},7\nb,{others[1]},8\n"
    path = _write(tmp_path, "times.csv", text)
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(path, series="id", time="t")
    message = str(error.value)
    assert all(word in message for word in ("times.csv", "'t'", f"row {row}", bad, "time_order='file'")), message
    dataset = SequenceDataset.from_file(path, series="id", time="t", time_order="file")
    assert [s[:, 0].tolist() for s in dataset.sequences] == [[0.0, 1.0, 2.0], [7.0, 8.0]]
    with pytest.raises(ValueError, match="time_order: expected one of"):
        SequenceDataset.from_file(path, series="id", time="t", time_order="sorted")


def test_the_own_file_data_setting_passes_the_files_order_through(tmp_path):
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliett",
        "kilo",
        "lima",
    ]
    text = "t,v\n" + "".join(f"{word},{v}\n" for v, word in enumerate(words))
    path = _write(tmp_path, "days.csv", text)
    with pytest.raises(ValueError, match="days.csv: column 't', row 2"):
        file_data(str(path), time="t", split_by="time", fractions=[0.5, 0.25, 0.25])
    data = file_data(str(path), time="t", split_by="time", fractions=[0.5, 0.25, 0.25], time_order="file")
    standardizer = data.standardizer
    train = standardizer.inverse(data.train[0], dtype=torch.float64)[0, :, 0]
    assert torch.allclose(train, torch.arange(6, dtype=torch.float64), atol=1e-5)


# --- columns ---------------------------------------------------------------------------------
def test_a_quoted_number_with_thousands_separators_is_read_as_a_number(tmp_path):
    text = "id,t,price,n\n" + "".join(f'a,{t},"1,23{t},567.5",{t * t}\n' for t in range(4))
    dataset = SequenceDataset.from_file(_write(tmp_path, "prices.csv", text), series="id", time="t")
    assert dataset.features == ["price", "n"]
    assert dataset.sequences[0][:, 0].tolist() == [1230567.5, 1231567.5, 1232567.5, 1233567.5]
    bad = 'id,t,price\na,0,"1,234.5"\na,1,"1,2,3"\na,2,7\n'
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(_write(tmp_path, "bad.csv", bad), series="id", time="t", features=["price"])
    assert all(word in str(error.value) for word in ("bad.csv", "'price'", "row 3", "'1,2,3'")), str(error.value)


def test_a_text_column_with_digits_left_out_of_the_features_is_named(tmp_path):
    text = "id,t,v,weight,colour\n" + "".join(f'a,{t},{t},"{t},5 kg",red\n' for t in range(4))
    dataset, messages = _recorded(
        lambda: SequenceDataset.from_file(_write(tmp_path, "kg.csv", text), series="id", time="t")
    )
    assert dataset.features == ["v"]
    assert len(messages) == 1 and "kg.csv" in messages[0] and "'weight'" in messages[0]
    assert "'colour'" not in messages[0]  # words (labels, categories) are left out without a word


def test_a_column_name_given_twice_is_refused(tmp_path):
    path = _write(tmp_path, "twice.csv", "id,t,v,w,v\na,0,1,2,3\na,1,4,5,6\n")
    with pytest.raises(ValueError, match=r"twice.csv: column name 'v' appears more than once"):
        SequenceDataset.from_file(path, series="id", time="t")
    frame = pd.DataFrame([[0, 1.0, 2.0], [1, 3.0, 4.0]], columns=["t", "v", "v"])
    with pytest.raises(ValueError, match=r"frame: column name 'v' appears more than once"):
        SequenceDataset.from_dataframe(frame, time="t", source="frame")
    renamed = _write(tmp_path, "dotted.csv", "t,v,v.1\n0,1,2\n1,3,4\n2,4,9\n")  # a name that only looks renamed
    assert SequenceDataset.from_file(renamed, time="t").features == ["v", "v.1"]


def test_an_empty_series_id_is_refused_naming_the_row(tmp_path):
    path = _write(tmp_path, "ids.csv", "id,t,v\na,0,1\na,1,2\n,2,3\nb,0,1\nb,1,2\n")
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(path, series="id", time="t")
    assert all(word in str(error.value) for word in ("ids.csv", "'id'", "row 4", "series")), str(error.value)


# --- arrays and folders ----------------------------------------------------------------------
def test_complex_and_featureless_arrays_are_refused_naming_the_array(tmp_path):
    np.savez(tmp_path / "complex.npz", x=np.ones((3, 5, 2)) * (1 + 2j))
    np.savez(tmp_path / "each.npz", first=np.ones((5, 2)), second=np.ones((5, 2), dtype=np.complex64))
    np.savez(tmp_path / "empty.npz", x=np.ones((5, 10, 0)))
    np.savez(tmp_path / "columns.npz", a=np.ones((5, 0)), b=np.ones((4, 0)))
    for name, words in (
        ("complex.npz", ["'x'", "complex128", "real numbers"]),
        ("each.npz", ["'second'", "complex64"]),
        ("empty.npz", ["'x'", "[5, 10, 0]", "D >= 1"]),
        ("columns.npz", ["no features", "D >= 1"]),
    ):
        with pytest.raises(ValueError) as error:
            SequenceDataset.from_file(tmp_path / name)
        assert name in str(error.value) and all(w in str(error.value) for w in words), str(error.value)


def test_an_unreadable_midi_file_is_skipped_with_a_warning_naming_it(tmp_path):
    pretty_midi = pytest.importorskip("pretty_midi")
    song = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(program=0)
    piano.notes.append(pretty_midi.Note(velocity=90, pitch=60, start=0.0, end=1.0))
    song.instruments.append(piano)
    song.write(str(tmp_path / "good.mid"))
    (tmp_path / "broken.mid").write_bytes(b"MThd this is not a MIDI file")
    dataset, messages = _recorded(lambda: SequenceDataset.from_file(tmp_path, fs=4))
    assert dataset.ids == ["good"] and dataset.sequences[0].shape == (4, 88)
    assert len(messages) == 1 and "broken.mid" in messages[0] and str(tmp_path) in messages[0]
    (tmp_path / "good.mid").unlink()
    with pytest.raises(ValueError, match="none of its 1 MIDI files is readable.*broken.mid"):
        SequenceDataset.from_file(tmp_path)


# --- arguments and repeated warnings ---------------------------------------------------------
@pytest.mark.parametrize("seed", [None, -1, 1.5, "0", True])
def test_a_bad_split_seed_is_named(seed):
    dataset = SequenceDataset.from_sequences([np.arange(6.0)] * 6)
    with pytest.raises((ValueError, TypeError), match=r"seed must be (an int )?>= 0, got"):
        dataset.split(seed=seed)
    assert dataset.split(seed=np.int64(3)).how["seed"] == 3


def test_an_extreme_value_warns_once_however_often_the_file_is_read(tmp_path):
    values = "".join(f"a,{t},{1e30 if t == 4 else t % 3}\n" for t in range(12))
    path = _write(tmp_path, "loud.csv", "id,t,v\n" + values)
    _, first = _recorded(lambda: SequenceDataset.from_file(path, series="id", time="t"))
    _, again = _recorded(lambda: SequenceDataset.from_file(path, series="id", time="t"))
    assert len(first) == 1 and "loud.csv" in first[0] and "column 'v' (1, first 1e+30 at line 6)" in first[0]
    assert again == []
    other = _write(tmp_path, "other.csv", "id,t,v\n" + values)  # another file: its own warning
    assert len(_recorded(lambda: SequenceDataset.from_file(other, series="id", time="t"))[1]) == 1
    gaps = _write(tmp_path, "gaps.csv", "id,t,v\na,0,1\na,1,\nb,0,3\nb,1,4\n")
    read = [
        _recorded(lambda: SequenceDataset.from_file(gaps, series="id", time="t", missing="drop-series"))[1]
        for _ in range(2)
    ]
    assert len(read[0]) == 1 and "gaps.csv: dropped 1 series" in read[0][0] and "'a'" in read[0][0] and read[1] == []


def test_many_series_are_grouped_in_order_of_first_appearance_and_sorted_in_time():
    rng = np.random.default_rng(4)
    ids, steps = rng.permutation(np.repeat(np.arange(400), 7)), rng.permutation(2800)
    frame = pd.DataFrame({"id": [f"s{i}" for i in ids], "t": steps, "v": steps * 2.0})
    dataset = SequenceDataset.from_dataframe(frame, series="id", time="t")
    by_series = {}
    for i, t in zip(ids, steps):  # dicts keep the order of first appearance
        by_series.setdefault(f"s{i}", []).append(2.0 * t)
    assert dataset.ids == list(by_series)
    assert [s[:, 0].tolist() for s in dataset.sequences] == [sorted(v) for v in by_series.values()]

"""The readers of a user's files (``ppl_models.inference.data.readers``), through ``SequenceDataset.from_file``: MIDI
folders (an unreadable file skipped with a warning), ``.npz`` arrays (complex or featureless ones refused by name), and
the warning about extreme values, given once per file however often it is read."""

import warnings

import numpy as np
import pytest
from factories import long_frame, warned, write_file

from ppl_models.inference.data.datasets import DataWarning, SequenceDataset


def test_a_midi_folder_reads_as_binary_piano_rolls(tmp_path):
    pretty_midi = pytest.importorskip("pretty_midi")
    for name, pitches in (("a", (60, 64)), ("b", (21, 108))):
        song = pretty_midi.PrettyMIDI()
        piano = pretty_midi.Instrument(program=0)
        piano.notes += [pretty_midi.Note(velocity=90, pitch=p, start=0.0, end=1.0) for p in pitches]
        song.instruments.append(piano)
        song.write(str(tmp_path / f"{name}.mid"))
    dataset = SequenceDataset.from_file(tmp_path, fs=4)
    assert dataset.binary and dataset.obs_dim == 88 and dataset.ids == ["a", "b"]
    first = dataset.sequences[0]
    assert first.shape[0] == 4 and set(np.flatnonzero(first[0])) == {60 - 21, 64 - 21}
    assert set(np.flatnonzero(dataset.sequences[1][0])) == {0, 87}


def test_bad_npz_arrays_are_named(tmp_path):
    np.savez(tmp_path / "rank.npz", x=np.zeros((3, 4)))
    np.savez(tmp_path / "mask.npz", x=np.zeros((2, 4, 1)), mask=np.array([[1, 1, 0, 1], [1, 1, 1, 1]], bool))
    for name, words in (("rank.npz", ["'x'", "[N, T, D]", "[3, 4]"]), ("mask.npz", ["'mask'", "row 0", "first"])):
        with pytest.raises(ValueError, match="|".join(words[:1])) as error:
            SequenceDataset.from_file(tmp_path / name)
        assert all(w in str(error.value) for w in words), str(error.value)


def test_an_extreme_value_is_named_in_a_warning(tmp_path):
    values = "\n".join(f"a,{t},{1e30 if t == 5 else float(t % 3)}" for t in range(20))
    path = write_file(tmp_path, "outlier.csv", "id,t,v\n" + values + "\n")
    with pytest.warns(DataWarning, match="outlier.csv: extreme values") as record:
        SequenceDataset.from_file(path, series="id", time="t")
    assert "column 'v' (1, first 1e+30 at line 7)" in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SequenceDataset.from_dataframe(long_frame(), series="id", time="step")  # ordinary data: no warning


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
    dataset, messages = warned(lambda: SequenceDataset.from_file(tmp_path, fs=4))
    assert dataset.ids == ["good"] and dataset.sequences[0].shape == (4, 88)
    assert len(messages) == 1 and "broken.mid" in messages[0] and str(tmp_path) in messages[0]
    (tmp_path / "good.mid").unlink()
    with pytest.raises(ValueError, match="none of its 1 MIDI files is readable.*broken.mid"):
        SequenceDataset.from_file(tmp_path)


def test_an_extreme_value_warns_once_however_often_the_file_is_read(tmp_path):
    values = "".join(f"a,{t},{1e30 if t == 4 else t % 3}\n" for t in range(12))
    path = write_file(tmp_path, "loud.csv", "id,t,v\n" + values)
    _, first = warned(lambda: SequenceDataset.from_file(path, series="id", time="t"))
    _, again = warned(lambda: SequenceDataset.from_file(path, series="id", time="t"))
    assert len(first) == 1 and "loud.csv" in first[0] and "column 'v' (1, first 1e+30 at line 6)" in first[0]
    assert again == []
    other = write_file(tmp_path, "other.csv", "id,t,v\n" + values)  # another file: its own warning
    assert len(warned(lambda: SequenceDataset.from_file(other, series="id", time="t"))[1]) == 1
    gaps = write_file(tmp_path, "gaps.csv", "id,t,v\na,0,1\na,1,\nb,0,3\nb,1,4\n")
    read = [
        warned(lambda: SequenceDataset.from_file(gaps, series="id", time="t", missing="drop-series"))[1]
        for _ in range(2)
    ]
    assert len(read[0]) == 1 and "gaps.csv: dropped 1 series" in read[0][0] and "'a'" in read[0][0] and read[1] == []

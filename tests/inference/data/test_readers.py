"""The readers of a user's files (``ppl_models.inference.data.readers``), through ``SequenceDataset.from_file``: MIDI
folders, ``.npz`` arrays, and the warning about extreme values."""

import warnings

import numpy as np
import pytest
from factories import long_frame, write_file

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

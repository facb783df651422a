"""Piano-roll plots and MIDI files, checked against hand-built rolls and pretty_midi's own reading."""

import sys

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from ppl_models.experiments.tasks.music import plot_piano_roll, read_midi_roll, write_midi

pretty_midi = pytest.importorskip("pretty_midi")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def random_roll(steps=40, keys=88, seed=0):
    """A seeded binary roll ``[steps, keys]`` whose last step sounds (MIDI stores no trailing silence)."""
    roll = (np.random.default_rng(seed).random((steps, keys)) < 0.1).astype(np.uint8)
    roll[-1, 0] = 1
    return roll


def two_note_roll():
    """Pitch 60 held over steps 0-2; pitch 64 on steps 1 and 3 (two separate notes)."""
    roll = np.zeros((4, 88), dtype=np.uint8)
    roll[0:3, 60 - 21] = 1
    roll[[1, 3], 64 - 21] = 1
    return roll


# --------------------------------------------------------------------------- MIDI


def test_write_midi_gives_the_expected_notes(tmp_path):
    path = write_midi(two_note_roll(), tmp_path / "song.mid", step_seconds=0.25, velocity=90, program=5)
    assert path == tmp_path / "song.mid"
    (instrument,) = pretty_midi.PrettyMIDI(str(path)).instruments
    assert instrument.program == 5 and not instrument.is_drum
    notes = sorted((note.start, note.end, note.pitch, note.velocity) for note in instrument.notes)
    expected = [(0.0, 0.75, 60, 90), (0.25, 0.5, 64, 90), (0.75, 1.0, 64, 90)]
    assert len(notes) == len(expected)
    for (start, end, pitch, velocity), (start_true, end_true, pitch_true, velocity_true) in zip(notes, expected):
        assert (pitch, velocity) == (pitch_true, velocity_true)
        assert start == pytest.approx(start_true, abs=1e-9) and end == pytest.approx(end_true, abs=1e-9)


def test_write_midi_leaves_no_temporary_file_and_creates_folders(tmp_path):
    write_midi(torch.from_numpy(two_note_roll()), tmp_path / "a" / "b" / "song.mid")
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["song.mid"]


@pytest.mark.parametrize("step_seconds", [0.25, 0.1, 1 / 3])
def test_midi_round_trip_reproduces_a_random_roll(tmp_path, step_seconds):
    roll = random_roll()
    path = write_midi(roll, tmp_path / "random.mid", step_seconds=step_seconds)
    back = read_midi_roll(path, step_seconds=step_seconds)
    assert back.dtype == np.uint8
    np.testing.assert_array_equal(back, roll)


def test_round_trip_with_another_key_layout(tmp_path):
    roll = random_roll(steps=30, keys=12, seed=1)
    path = write_midi(roll, tmp_path / "octave.mid", lowest_pitch=60)
    np.testing.assert_array_equal(read_midi_roll(path, lowest_pitch=60, num_keys=12), roll)


def test_read_midi_roll_rounds_times_and_keeps_short_notes(tmp_path):
    midi = pretty_midi.PrettyMIDI()
    instrument = pretty_midi.Instrument(program=0)
    instrument.notes.append(pretty_midi.Note(velocity=80, pitch=21, start=0.26, end=0.74))  # steps 1-2
    instrument.notes.append(pretty_midi.Note(velocity=80, pitch=108, start=1.0, end=1.05))  # shorter than a step
    midi.instruments.append(instrument)
    midi.write(str(tmp_path / "hand.mid"))
    expected = np.zeros((5, 88), dtype=np.uint8)
    expected[1:3, 0] = 1
    expected[4, 87] = 1
    np.testing.assert_array_equal(read_midi_roll(tmp_path / "hand.mid"), expected)


def test_read_midi_roll_rejects_notes_outside_the_keys(tmp_path):
    path = write_midi(two_note_roll(), tmp_path / "song.mid")
    with pytest.raises(ValueError, match="pitch 64.*num_keys=40"):
        read_midi_roll(path, num_keys=40)


def test_missing_pretty_midi_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pretty_midi", None)  # makes `import pretty_midi` raise ImportError
    with pytest.raises(ImportError, match=r'writing MIDI needs the optional extra: pip install "ppl-models\[midi\]"'):
        write_midi(two_note_roll(), tmp_path / "song.mid")
    assert not (tmp_path / "song.mid").exists()


# --------------------------------------------------------------------------- plots


def test_plot_piano_roll_draws_pitch_upwards_with_note_names(tmp_path):
    roll = random_roll()
    figure = plot_piano_roll(roll, tmp_path / "plots" / "roll.png", title="a chorale")
    assert isinstance(figure, Figure) and len(figure.axes) == 1
    assert (tmp_path / "plots" / "roll.png").read_bytes()[:8] == PNG_SIGNATURE
    (axes,) = figure.axes
    (image,) = axes.images
    assert image.origin == "lower"  # row 0 (MIDI 21) at the bottom
    np.testing.assert_array_equal(image.get_array(), roll.T)
    labels = {label.get_text(): tick for tick, label in zip(axes.get_yticks(), axes.get_yticklabels())}
    assert labels["C4"] == 60 - 21 and labels["C8"] == 108 - 21 and len(labels) == 8  # C1 .. C8
    assert axes.get_title() == "a chorale"


def test_plot_piano_roll_with_probabilities_adds_a_panel_and_colour_bar(tmp_path):
    roll = random_roll()
    probabilities = torch.rand(roll.shape, generator=torch.Generator().manual_seed(0))
    figure = plot_piano_roll(torch.from_numpy(roll), tmp_path / "roll.png", probabilities=probabilities)
    assert len(figure.axes) == 3  # roll, probabilities, colour bar
    assert (tmp_path / "roll.png").read_bytes()[:8] == PNG_SIGNATURE
    roll_axes, probability_axes, _ = figure.axes
    np.testing.assert_allclose(probability_axes.images[0].get_array(), probabilities.numpy().T)
    assert roll_axes.get_shared_x_axes().joined(roll_axes, probability_axes)


def test_plot_piano_roll_draws_only_the_valid_prefix():
    roll = random_roll()
    mask = torch.arange(roll.shape[0]) < 10
    figure = plot_piano_roll(roll, probabilities=np.full(roll.shape, 0.5), mask=mask)
    assert all(axes.images[0].get_array().shape == (88, 10) for axes in figure.axes[:2])


def test_plot_without_path_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(plot_piano_roll(two_note_roll()), Figure)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "roll, error, match",
    [
        (np.full((4, 88), 0.5), ValueError, r"roll must be binary.*0\.5"),
        (np.full((4, 88), np.nan), ValueError, "roll must be binary"),
        (np.zeros(88), ValueError, r"roll must have shape \[T, K\] \(2 dims\)"),
        (np.zeros((0, 88)), ValueError, "roll must have at least one time step"),
        ([[0, 1]], TypeError, "roll must be a numpy.ndarray or torch.Tensor.*got list"),
        (np.array([["a"]]), TypeError, "roll must hold numbers"),
    ],
)
def test_write_midi_rejects_a_bad_roll(tmp_path, roll, error, match):
    with pytest.raises(error, match=match):
        write_midi(roll, tmp_path / "out.mid")
    assert not (tmp_path / "out.mid").exists()


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"lowest_pitch": 50}, ValueError, "pitch out of range: the 88 keys of roll from lowest_pitch=50 reach.* 137"),
        ({"lowest_pitch": -1}, ValueError, r"lowest_pitch must be in 0\.\.127, got -1"),
        ({"step_seconds": 0}, ValueError, "step_seconds must be a finite number of seconds > 0, got 0"),
        ({"step_seconds": -0.5}, ValueError, "step_seconds must be .* > 0, got -0.5"),
        ({"step_seconds": "fast"}, TypeError, "step_seconds must be a number of seconds > 0, got str"),
        ({"velocity": 0}, ValueError, r"velocity must be in 1\.\.127, got 0"),
        ({"program": 1.5}, TypeError, "program must be an int in 0..127, got float"),
    ],
)
def test_write_midi_rejects_bad_options(tmp_path, options, error, match):
    with pytest.raises(error, match=match):
        write_midi(two_note_roll(), tmp_path / "out.mid", **options)
    assert not (tmp_path / "out.mid").exists()


@pytest.mark.parametrize(
    "options, match",
    [({"step_seconds": 0}, "step_seconds must be"), ({"lowest_pitch": 100}, "pitch out of range.*lowest_pitch=100")],
)
def test_read_midi_roll_rejects_bad_options(tmp_path, options, match):
    path = write_midi(two_note_roll(), tmp_path / "song.mid")
    with pytest.raises(ValueError, match=match):
        read_midi_roll(path, **options)


@pytest.mark.parametrize(
    "roll, options, error, match",
    [
        (np.full((4, 88), 2), {}, ValueError, r"roll must be binary.*\[2\]"),
        (np.zeros((2, 4, 88)), {}, ValueError, r"roll must have shape \[T, K\] \(2 dims\)"),
        (two_note_roll(), {"probabilities": np.full((4, 88), np.nan)}, ValueError, "probabilities must be finite"),
        (
            two_note_roll(),
            {"probabilities": np.zeros((5, 88))},
            ValueError,
            r"probabilities must have the roll's shape \(4, 88\), got shape \(5, 88\)",
        ),
        (two_note_roll(), {"probabilities": np.full((4, 88), 1.5)}, ValueError, r"probabilities must lie in \[0, 1\]"),
        (two_note_roll(), {"probabilities": 0.5}, TypeError, "probabilities must be a numpy.*got float"),
        (two_note_roll(), {"mask": np.ones(4)}, TypeError, "mask must be bool, got dtype float64"),
        (two_note_roll(), {"mask": np.ones(3, bool)}, ValueError, r"mask must have shape \[T\] = \(4,\)"),
        (two_note_roll(), {"mask": np.array([True, False, True, True])}, ValueError, "mask must mark a prefix"),
        (two_note_roll(), {"mask": np.zeros(4, bool)}, ValueError, "mask must mark at least one valid step"),
    ],
)
def test_plot_piano_roll_rejects_bad_input(roll, options, error, match):
    with pytest.raises(error, match=match):
        plot_piano_roll(roll, **options)

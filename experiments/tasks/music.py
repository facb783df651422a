"""Binary piano rolls: plots and MIDI files, the piano-roll outputs of a run, and the polyphonic music data sets.

A piano roll is ``[T, K]`` with rows as time steps and columns as keys, 1 where a key sounds.
The polyphonic music data sets use ``K = 88`` with column 0 = MIDI pitch 21 (A0), up to 108 (C8);
plots take rolls of any width (pitch names only at 88 keys, whose pitches are known).

Plots are drawn on matplotlib's Agg canvas without pyplot and written atomically as PNG.
MIDI files are encoded by ``pretty_midi``, an optional extra (``pip install "ppl-models[midi]"``).
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from ppl_models.inference.atomic_files import atomic_write, write_text
from ppl_models.inference.validation import check_positive_int

from ..data import ExperimentData, load_mat, pad_sequences

__all__ = [
    "NUM_KEYS",
    "LOWEST_PITCH",
    "POLYPHONIC",
    "polyphonic",
    "plot_piano_roll",
    "write_midi",
    "read_midi_roll",
    "piano_roll_outputs",
]

NUM_KEYS = 88
LOWEST_PITCH = 21  # A0, column 0 of the data sets' rolls
_MIDI_EXTRA = 'pip install "ppl-models[midi]"'


def plot_piano_roll(
    roll, path: str | os.PathLike | None = None, *, probabilities=None, title: str | None = None, mask=None
) -> Figure:
    """Draw a roll (time across, keys up), optionally over predicted probabilities.

    An 88-key roll is drawn as the piano (MIDI 21..108, C rows labelled by note name); a roll of
    another width by its column numbers, since its pitches are not known.

    Args:
        roll: binary ``[T, K]`` numpy array or torch tensor, any ``K >= 1``.
        path: optional PNG file to write (parent folders are created).
        probabilities: optional ``[T, K]`` values in [0, 1], drawn as a second panel with a colour bar.
        title: optional title of the top panel.
        mask: optional bool ``[T]``, ``True`` at valid steps (valid steps first); only those are drawn.

    Returns:
        The figure: one axes, or three (roll, probabilities, colour bar) with ``probabilities``.
    """
    roll = _check_roll(roll, name="roll")
    steps = _valid_steps(mask, roll.shape[0])
    if probabilities is None:
        figure = Figure(figsize=(8, 3.5), layout="constrained")
        roll_axes = figure.subplots()
    else:
        probabilities = _check_probabilities(probabilities, roll.shape)
        figure = Figure(figsize=(8, 6.5), layout="constrained")
        grid = figure.add_gridspec(2, 2, width_ratios=(40, 1))
        roll_axes = figure.add_subplot(grid[0, 0])
        probability_axes = figure.add_subplot(grid[1, 0], sharex=roll_axes)
        image = _draw_keys(probability_axes, probabilities[:steps])
        figure.colorbar(image, cax=figure.add_subplot(grid[1, 1]), label="probability")
        probability_axes.set(xlabel="time step", title="predicted note probabilities")
    _draw_keys(roll_axes, roll[:steps])
    roll_axes.set(xlabel="time step", title=title or "piano roll")
    if path is not None:
        atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))
    return figure


def write_midi(
    roll,
    path: str | os.PathLike,
    *,
    step_seconds: float = 0.25,
    velocity: int = 80,
    program: int = 0,
    lowest_pitch: int = LOWEST_PITCH,
) -> Path:
    """Write a binary roll ``[T, K]`` as a one-instrument MIDI file, atomically; return its path.

    Each maximal run of 1s in column ``k`` from step ``t`` to ``t_end`` is one note of pitch
    ``lowest_pitch + k`` from ``t * step_seconds`` to ``(t_end + 1) * step_seconds`` seconds.
    ``program`` is the General MIDI instrument (0: acoustic grand piano).
    """
    roll = _check_roll(roll, name="roll")
    step_seconds = _check_step_seconds(step_seconds)
    velocity = _check_int(velocity, name="velocity", low=1, high=127)
    program = _check_int(program, name="program", low=0, high=127)
    lowest_pitch = _check_pitch_span(lowest_pitch, roll.shape[1], name="roll")
    pretty_midi = _import_pretty_midi("writing")
    instrument = pretty_midi.Instrument(program=program)
    for key, start, end in _note_runs(roll):
        note = pretty_midi.Note(
            velocity=velocity, pitch=lowest_pitch + key, start=start * step_seconds, end=end * step_seconds
        )
        instrument.notes.append(note)
    midi = pretty_midi.PrettyMIDI()
    midi.instruments.append(instrument)
    return atomic_write(path, lambda tmp: midi.write(tmp))


def read_midi_roll(
    path: str | os.PathLike, *, step_seconds: float = 0.25, lowest_pitch: int = LOWEST_PITCH, num_keys: int = NUM_KEYS
) -> np.ndarray:
    """Read a MIDI file back into a binary roll, uint8 ``[T, num_keys]``: the inverse of :func:`write_midi`.

    Note times are rounded to the nearest step and every note covers at least one step; drum
    tracks are skipped. ``T`` is the end step of the last note (trailing silence is not stored
    in MIDI). Raises ``ValueError`` for a note outside the keys ``lowest_pitch .. lowest_pitch + num_keys - 1``.
    """
    step_seconds = _check_step_seconds(step_seconds)
    num_keys = _check_int(num_keys, name="num_keys", low=1, high=128)
    lowest_pitch = _check_pitch_span(lowest_pitch, num_keys, name="the roll (num_keys)")
    pretty_midi = _import_pretty_midi("reading")
    instruments = [instrument for instrument in pretty_midi.PrettyMIDI(str(path)).instruments if not instrument.is_drum]
    spans = []
    for note in (note for instrument in instruments for note in instrument.notes):
        if not lowest_pitch <= note.pitch < lowest_pitch + num_keys:
            raise ValueError(
                f"MIDI file {str(path)!r} has a note of pitch {note.pitch}, outside the roll's keys "
                f"{lowest_pitch}..{lowest_pitch + num_keys - 1} (lowest_pitch={lowest_pitch}, num_keys={num_keys})"
            )
        start = round(note.start / step_seconds)
        spans.append((note.pitch - lowest_pitch, start, max(round(note.end / step_seconds), start + 1)))
    roll = np.zeros((max((end for _, _, end in spans), default=0), num_keys), dtype=np.uint8)
    for key, start, end in spans:
        roll[start:end, key] = 1
    return roll


def piano_roll_outputs(
    model,
    roll: torch.Tensor,
    probabilities: torch.Tensor,
    run_dir: str | Path,
    *,
    seed: int = 0,
    prefix_steps: int = 16,
    generated_steps: int = 64,
) -> None:
    """Piano-roll pictures (and MIDI, with the ``midi`` extra) of a run on binary music data.

    Writes ``plots/test_piano_roll.png`` (a test piece ``roll [T, K]`` above the model's
    one-step ``probabilities [T, K]``) and, for a model with ``generate``, a continuation
    of the piece's first ``prefix_steps`` steps and an unconditional sample, each as a PNG
    and, when ``pretty_midi`` is installed and the rolls have the piano's 88 keys (whose
    pitches are known), a ``.mid`` file under ``generated/``. Rolls of another width get
    ``generated/no_midi.txt``, a one-line note, instead of MIDI files.
    """
    run_dir = Path(run_dir)
    plot_piano_roll(
        roll,
        run_dir / "plots" / "test_piano_roll.png",
        probabilities=probabilities,
        title="Test piece and one-step-ahead note probabilities",
    )
    if not model.supports("generate"):
        return
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    prefix = roll[:prefix_steps].unsqueeze(0).to(device)
    pieces = {
        "continuation": model.generate(generated_steps, prefix=prefix, generator=generator),
        "sample": model.generate(generated_steps + prefix.shape[1], generator=generator),
    }
    for name, piece in pieces.items():
        x, mean = piece.x[0].cpu(), None if piece.mean is None else piece.mean[0].cpu()
        title = f"Generated {name}" + (f" of the first {prefix.shape[1]} test steps" if name == "continuation" else "")
        plot_piano_roll(x, run_dir / "generated" / f"{name}.png", probabilities=mean, title=title)
        if x.shape[-1] != NUM_KEYS:
            write_text(
                run_dir / "generated" / "no_midi.txt",
                f"no MIDI files: the rolls have {x.shape[-1]} keys, "
                f"not the piano's {NUM_KEYS} (MIDI pitches unknown)\n",
            )
            continue
        try:
            write_midi(x, run_dir / "generated" / f"{name}.mid")
        except ImportError:
            pass  # the MIDI files need the optional extra; the PNGs say the same


# --------------------------------------------------------------------------- drawing


def _draw_keys(axes, values: np.ndarray):
    """Show ``[T, K]`` values with time across and keys up; at 88 keys, C rows labelled by note name."""
    image = axes.imshow(values.T, origin="lower", aspect="auto", cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
    if values.shape[1] != NUM_KEYS:
        axes.set_ylabel("key (column)")
        return image
    c_pitches = [pitch for pitch in range(LOWEST_PITCH, LOWEST_PITCH + NUM_KEYS) if pitch % 12 == 0]
    axes.set_yticks([pitch - LOWEST_PITCH for pitch in c_pitches], [f"C{pitch // 12 - 1}" for pitch in c_pitches])
    axes.set_ylabel("pitch")
    return image


def _note_runs(roll: np.ndarray) -> list[tuple[int, int, int]]:
    """Maximal runs of 1s in each column of ``[T, K]``, as ``(column, start step, end step exclusive)``."""
    edges = np.diff(np.pad(roll.astype(np.int8), ((1, 1), (0, 0))), axis=0).T  # [K, T + 1]: +1 on, -1 off
    keys, starts = np.nonzero(edges == 1)
    _, ends = np.nonzero(edges == -1)  # row-major order pairs each on with its off
    return [(int(k), int(s), int(e)) for k, s, e in zip(keys, starts, ends)]


# --------------------------------------------------------------------------- input checks


def _as_numpy(value, name: str, shape_text: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"{name} must be a numpy.ndarray or torch.Tensor of shape {shape_text}, got {type(value).__name__}"
        )
    if value.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (bool, int or float), got dtype {value.dtype}")
    return value


def _check_roll(roll, *, name: str) -> np.ndarray:
    """Return a binary ``[T, K]`` roll as uint8, with ``T, K >= 1``."""
    roll = _as_numpy(roll, name, "[T, K]")
    if roll.ndim != 2:
        raise ValueError(f"{name} must have shape [T, K] (2 dims), got shape {roll.shape}")
    if roll.shape[0] == 0 or roll.shape[1] == 0:
        raise ValueError(f"{name} must have at least one time step and one key, got shape {roll.shape}")
    binary = np.isin(roll, (0, 1))
    if not binary.all():
        odd = np.unique(roll[~binary])[:5]
        raise ValueError(f"{name} must be binary (only 0 and 1), got values such as {odd.tolist()}")
    return roll.astype(np.uint8)


def _check_probabilities(probabilities, shape: tuple[int, int]) -> np.ndarray:
    probabilities = _as_numpy(probabilities, "probabilities", f"[T, K] = {list(shape)}")
    if probabilities.shape != shape:
        raise ValueError(f"probabilities must have the roll's shape {shape}, got shape {probabilities.shape}")
    probabilities = probabilities.astype(np.float64)
    if not np.isfinite(probabilities).all():
        raise ValueError("probabilities must be finite numbers in [0, 1], got NaN or inf")
    if probabilities.min() < 0 or probabilities.max() > 1:
        raise ValueError(
            f"probabilities must lie in [0, 1], got values from {probabilities.min()} to {probabilities.max()}"
        )
    return probabilities


def _valid_steps(mask, steps: int) -> int:
    """Number of valid steps marked by an optional bool ``[T]`` prefix mask."""
    if mask is None:
        return steps
    mask = _as_numpy(mask, "mask", f"[T] = [{steps}]")
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be bool, got dtype {mask.dtype}")
    if mask.shape != (steps,):
        raise ValueError(f"mask must have shape [T] = ({steps},) to match roll, got shape {mask.shape}")
    valid = int(mask.sum())
    if valid == 0:
        raise ValueError("mask must mark at least one valid step, got all False")
    if not mask[:valid].all():
        raise ValueError(
            "mask must mark a prefix of the steps (valid steps first, padding after); got a True after a False"
        )
    return valid


def _check_step_seconds(step_seconds) -> float:
    if isinstance(step_seconds, bool) or not isinstance(step_seconds, numbers.Real):
        raise TypeError(f"step_seconds must be a number of seconds > 0, got {type(step_seconds).__name__}")
    if not (math.isfinite(step_seconds) and step_seconds > 0):
        raise ValueError(f"step_seconds must be a finite number of seconds > 0, got {step_seconds}")
    return float(step_seconds)


def _check_int(value, *, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int in {low}..{high}, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value}")
    return int(value)


def _check_pitch_span(lowest_pitch, num_keys: int, *, name: str) -> int:
    """Return ``lowest_pitch`` if pitches ``lowest_pitch .. lowest_pitch + num_keys - 1`` are MIDI pitches (0..127)."""
    lowest_pitch = _check_int(lowest_pitch, name="lowest_pitch", low=0, high=127)
    highest = lowest_pitch + num_keys - 1
    if highest > 127:
        raise ValueError(
            f"pitch out of range: the {num_keys} keys of {name} from lowest_pitch={lowest_pitch} reach MIDI pitch "
            f"{highest}, but MIDI pitches stop at 127"
        )
    return lowest_pitch


def _import_pretty_midi(action: str):
    try:
        import pretty_midi
    except ImportError as error:
        raise ImportError(f"{action} MIDI needs the optional extra: {_MIDI_EXTRA}") from error
    return pretty_midi


# --------------------------------------------------------------------------- the data sets

POLYPHONIC = {
    "jsb": "JSB_Chorales.mat",
    "nottingham": "Nottingham.mat",
    "musedata": "MuseData.mat",
    "piano": "Piano_midi.mat",
}


def polyphonic(
    name: str = "jsb",
    data_dir: str | os.PathLike | None = None,
    *,
    train_chunk: int | None = None,
    max_sequences: int | None = None,
) -> ExperimentData:
    """One of the four polyphonic music sets (88-key binary piano rolls, standard splits).

    Args:
        name: ``jsb``, ``nottingham``, ``musedata`` or ``piano``.
        data_dir: the shared data folder (see :func:`resolve_data_dir`).
        train_chunk: cut training sequences into pieces of at most this many steps (faster
            truncated training on the long pieces; validation and test stay whole).
        max_sequences: keep only the first this many sequences of each split (quick demos).
    """
    if name not in POLYPHONIC:
        raise ValueError(f"name must be one of {sorted(POLYPHONIC)}, got {name!r}")
    for key, value in (("train_chunk", train_chunk), ("max_sequences", max_sequences)):
        if value is not None:
            check_positive_int(value, name=key)
    relative = f"polyphonic/{POLYPHONIC[name]}"
    raw = load_mat(relative, data_dir, arrays=("traindata", "validdata", "testdata"))
    splits = []
    for key in ("traindata", "validdata", "testdata"):
        rolls = _piano_rolls(raw[key], f"{relative}: array {key!r}")[:max_sequences]
        if key == "traindata" and train_chunk is not None:
            rolls = [roll[start : start + train_chunk] for roll in rolls for start in range(0, len(roll), train_chunk)]
        splits.append(pad_sequences(rolls))
    notes = "".join(f", {k}={v}" for k, v in (("train_chunk", train_chunk), ("max_sequences", max_sequences)) if v)
    return ExperimentData(*splits, description=f"polyphonic music: {POLYPHONIC[name]} (88 keys{notes})", binary=True)


def _piano_rolls(cells, where: str) -> list[np.ndarray]:
    """The ``[T_i, 88]`` binary rolls of a MATLAB cell array; a ``ValueError`` naming ``where`` and the roll if not."""
    rolls = list(np.asarray(cells, dtype=object).ravel())
    if not rolls:
        raise ValueError(f"{where} holds no sequences")
    for i, roll in enumerate(rolls):
        try:
            roll = np.asarray(roll, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{where}, sequence {i} must be a [T, 88] piano roll of 0s and 1s, got entries that are not numbers"
            ) from None
        if roll.ndim != 2 or roll.shape[0] < 1 or roll.shape[1] != 88 or not np.isin(roll, (0.0, 1.0)).all():
            values = "" if roll.ndim != 2 or roll.shape[1] != 88 else " holding other values than 0 and 1"
            raise ValueError(
                f"{where}, sequence {i} must be a [T, 88] piano roll of 0s and 1s, got shape {list(roll.shape)}{values}"
            )
        rolls[i] = roll
    return rolls

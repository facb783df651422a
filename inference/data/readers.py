"""Reading a user's data files: tables, ``.npz`` archives and MIDI folders.

Every refusal is one ``ValueError`` naming the file, the column (or array) and the row (or line).
:mod:`ppl_models.inference.data.datasets` builds its :class:`~ppl_models.inference.data.datasets.SequenceDataset`
from what these read, through the table's columns (:mod:`.columns`), its time order (:mod:`.time_order`) and the
checks of its values (:mod:`.value_checks`: an extreme value gives one :class:`DataWarning`, once per file and
column in a process, :func:`warn_once`); their names are importable from here too. The loaders of the built-in
data sets (:mod:`ppl_models.experiments.tasks`) check their values by the same :func:`check_values`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .columns import mostly_numeric, numeric_columns, series_ids, unique_columns, value_columns
from .data_warnings import DataWarning, warn_once
from .spec import TIME_ORDERS
from .time_order import row_order, time_keys
from .value_checks import EXTREME_ABSOLUTE, EXTREME_SPREADS, check_values

__all__ = [
    "FILE_SUFFIXES",
    "EXTREME_ABSOLUTE",
    "EXTREME_SPREADS",
    "TIME_ORDERS",
    "DataWarning",
    "check_values",
    "warn_once",
    "read_table",
    "read_npz",
    "read_midi_folder",
    "mostly_numeric",
    "value_columns",
    "numeric_columns",
    "unique_columns",
    "series_ids",
    "time_keys",
    "row_order",
]

#: the file formats :meth:`SequenceDataset.from_file` reads, by suffix
FILE_SUFFIXES = {
    ".csv": "long-format table",
    ".parquet": "long-format table",
    ".npz": "x [N, T, D] (+ mask [N, T]) or one array per sequence",
    "folder of .mid": "piano rolls [T_i, 88] (needs the midi extra: pretty_midi)",
}


def read_table(path: Path, suffix: str, sep: str, text: Sequence[str] = ()):
    """A ``.csv`` (separator ``sep``) or ``.parquet`` file as a ``pandas.DataFrame``; one ``ValueError`` naming it.

    The ``text`` columns of a CSV are read as written (series ids: ``007`` and ``7`` stay two series). A CSV header
    that names a column twice is refused (pandas would rename the second ``a.1``).
    """
    import pandas as pd

    header = []
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        # round_trip: every float as written (the default C parser of pandas < 3 can be off in the last digit)
        frame = pd.read_csv(path, sep=sep, dtype={column: str for column in text}, float_precision="round_trip")
        if any(re.search(r"\.\d+$", str(name)) for name in frame.columns):  # how pandas renames a repeated name
            header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str).iloc[0].tolist()
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file holds no table (no header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as error:
        raise ValueError(f"{path}: not a readable {suffix[1:].upper()} table ({str(error).strip()})") from None
    except ImportError as error:
        raise ValueError(f"{path}: reading Parquet needs pyarrow ({error})") from None
    unique_columns(header, str(path))
    return frame


def read_npz(path: Path) -> tuple[list[np.ndarray], list[str] | None]:
    """The sequences of an ``.npz`` file: ``x [N, T, D]`` cut by its ``mask [N, T]``, or one array per sequence
    (with the arrays' names as ids). Arrays of other than real numbers (complex, text) are refused."""
    try:
        arrays = dict(np.load(path, allow_pickle=False))
    except Exception as error:  # zipfile.BadZipFile, ValueError, OSError: the file is not an npz
        raise ValueError(f"{path}: not a readable .npz archive ({type(error).__name__}: {error})") from None
    if not arrays:
        raise ValueError(f"{path}: the archive holds no arrays")
    for name, array in arrays.items():
        if name != "mask" and array.dtype.kind not in "biuf":
            raise ValueError(f"{path}: array {name!r} holds {array.dtype} values; expected real numbers")
    if "x" not in arrays:
        if "mask" in arrays:
            raise ValueError(f"{path}: a 'mask' array needs an 'x' array [N, T, D] beside it")
        return list(arrays.values()), list(arrays)
    x = arrays["x"]
    if x.ndim != 3 or 0 in x.shape:
        raise ValueError(f"{path}: array 'x' must have shape [N, T, D] with N, T, D >= 1, got {list(x.shape)}")
    mask = arrays.get("mask", np.ones(x.shape[:2], dtype=bool))
    if mask.shape != x.shape[:2] or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
        raise ValueError(
            f"{path}: array 'mask' must be boolean [N, T] = {list(x.shape[:2])}, got {mask.dtype} {list(mask.shape)}"
        )
    mask = mask.astype(bool)
    lengths = mask.sum(1)
    if not (mask == (np.arange(x.shape[1]) < lengths[:, None])).all():
        row = int(np.flatnonzero((mask != (np.arange(x.shape[1]) < lengths[:, None])).any(1))[0])
        raise ValueError(f"{path}: array 'mask', row {row}: valid steps must come first (padding at the end)")
    extra = sorted(set(arrays) - {"x", "mask"})
    if extra:
        raise ValueError(f"{path}: unexpected arrays {extra} beside 'x' (and 'mask')")
    return [x[i, : lengths[i]] for i in range(len(x))], None


def read_midi_folder(folder: Path, *, fs: float = 4.0) -> tuple[list[np.ndarray], list[str]]:
    """The piano rolls ``[T_i, 88]`` (0 / 1, MIDI keys 21..108, ``fs`` frames per second) of a folder's ``.mid``
    files, with the files' stems as ids. An unreadable file is skipped with a warning naming it; a folder
    without a readable one is refused."""
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".mid", ".midi"))
    if not files:
        raise ValueError(f"{folder}: a folder must hold .mid files; found none")
    try:
        import pretty_midi
    except ImportError:
        raise ValueError(f"{folder}: reading MIDI needs the midi extra: pip install '.[midi]'") from None
    rolls, ids, unreadable = [], [], []
    for file in files:
        try:
            roll = pretty_midi.PrettyMIDI(str(file)).get_piano_roll(fs=fs)
        except Exception as error:  # pretty_midi / mido raise many types on a bad file
            unreadable.append(f"{file.name} ({type(error).__name__}: {' '.join(str(error).split())})")
            continue
        rolls.append((roll[21:109].T > 0).astype(np.float64))  # 88 keys, MIDI 21..108
        ids.append(file.stem)
    if not rolls:
        raise ValueError(f"{folder}: none of its {len(files)} MIDI files is readable; the first: {unreadable[0]}")
    if unreadable:
        warn_once(str(folder), "skipped unreadable MIDI files:", unreadable, "the folder's other files are read")
    return rolls, ids

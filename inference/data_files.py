"""Reading a user's data files: tables, ``.npz`` archives and MIDI folders, and the checks of their values.

Every refusal is one ``ValueError`` naming the file, the column (or array) and the row (or line);
an extreme value gives one :class:`DataWarning`. :mod:`inference.datasets` builds its
:class:`~inference.datasets.SequenceDataset` from what these read; the loaders of the built-in
data sets (:mod:`experiments.tasks`) check their values by the same :func:`check_values`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["FILE_SUFFIXES", "EXTREME_ABSOLUTE", "EXTREME_SPREADS", "DataWarning", "check_values", "read_table",
           "read_npz", "read_midi_folder", "mostly_numeric", "numeric_columns", "time_order"]

#: the file formats :meth:`SequenceDataset.from_file` reads, by suffix
FILE_SUFFIXES = {".csv": "long-format table", ".parquet": "long-format table",
                 ".npz": "x [N, T, D] (+ mask [N, T]) or one array per sequence",
                 "folder of .mid": "piano rolls [T_i, 88] (needs the midi extra: pretty_midi)"}  # fmt: skip
#: a value whose magnitude exceeds this is extreme, whatever its column holds (float32 keeps ~7 digits: such a
#: value swamps every sum and standardisation it enters)
EXTREME_ABSOLUTE = 1e15
#: a value further than this many robust spreads (1.4826 times the median absolute deviation) from its column's
#: median is extreme; columns whose median absolute deviation is 0 (mostly constant) get the absolute rule only
EXTREME_SPREADS = 1e6


class DataWarning(UserWarning):
    """A data file holds extreme values (:func:`check_values`); the run goes on, but the file is likely wrong."""


def read_table(path: Path, suffix: str, sep: str):
    """A ``.csv`` (separator ``sep``) or ``.parquet`` file as a ``pandas.DataFrame``; one ``ValueError`` naming it."""
    import pandas as pd

    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, sep=sep)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file holds no table (no header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as error:
        raise ValueError(f"{path}: not a readable {suffix[1:].upper()} table ({str(error).strip()})") from None
    except ImportError as error:
        raise ValueError(f"{path}: reading Parquet needs pyarrow ({error})") from None


def read_npz(path: Path) -> tuple[list[np.ndarray], list[str] | None]:
    """The sequences of an ``.npz`` file: ``x [N, T, D]`` cut by its ``mask [N, T]``, or one array per sequence
    (with the arrays' names as ids)."""
    try:
        arrays = dict(np.load(path, allow_pickle=False))
    except Exception as error:  # zipfile.BadZipFile, ValueError, OSError: the file is not an npz
        raise ValueError(f"{path}: not a readable .npz archive ({type(error).__name__}: {error})") from None
    if not arrays:
        raise ValueError(f"{path}: the archive holds no arrays")
    if "x" not in arrays:
        if "mask" in arrays:
            raise ValueError(f"{path}: a 'mask' array needs an 'x' array [N, T, D] beside it")
        return list(arrays.values()), list(arrays)
    x = arrays["x"]
    if x.ndim != 3:
        raise ValueError(f"{path}: array 'x' must have shape [N, T, D], got {list(x.shape)}")
    mask = arrays.get("mask", np.ones(x.shape[:2], dtype=bool))
    if mask.shape != x.shape[:2] or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
        raise ValueError(f"{path}: array 'mask' must be boolean [N, T] = {list(x.shape[:2])}, got "
                         f"{mask.dtype} {list(mask.shape)}")  # fmt: skip
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
    files, with the files' stems as ids."""
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".mid", ".midi"))
    if not files:
        raise ValueError(f"{folder}: a folder must hold .mid files; found none")
    try:
        import pretty_midi
    except ImportError:
        raise ValueError(f"{folder}: reading MIDI needs the midi extra: pip install '.[midi]'") from None
    rolls = []
    for file in files:
        try:
            roll = pretty_midi.PrettyMIDI(str(file)).get_piano_roll(fs=fs)
        except Exception as error:  # pretty_midi / mido raise many types on a bad file
            raise ValueError(f"{file}: not a readable MIDI file ({type(error).__name__}: {error})") from None
        rolls.append((roll[21:109].T > 0).astype(np.float64))  # 88 keys, MIDI 21..108
    return rolls, [f.stem for f in files]


def mostly_numeric(column) -> bool:
    """A value column by default: numbers (or booleans) in at least half its non-empty cells.

    A text column (ids, categories) is left out; a number column with a stray bad cell is kept,
    so that :func:`numeric_columns` names the cell instead of silently dropping the column.
    """
    import pandas as pd

    if pd.api.types.is_numeric_dtype(column):
        return True
    filled = column.dropna()
    filled = filled[filled.astype(str).str.strip() != ""]
    return len(filled) > 0 and pd.to_numeric(filled, errors="coerce").notna().mean() >= 0.5


def numeric_columns(frame, columns: list[str], source: str, row_offset: int) -> np.ndarray:
    """``frame[columns]`` as float64 ``[rows, len(columns)]``; a cell that is not a number is one error."""
    import pandas as pd

    out = np.empty((len(frame), len(columns)))
    for k, column in enumerate(columns):
        raw = frame[column]
        if pd.api.types.is_bool_dtype(raw):
            out[:, k] = raw.to_numpy(dtype=np.float64)
            continue
        values = pd.to_numeric(raw, errors="coerce")
        bad = values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{source}: column {column!r}, row {row + row_offset}: {raw.iloc[row]!r} is not a number")
        out[:, k] = values.to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def time_order(frame, ids: np.ndarray, time: str | None, source: str, row_offset: int) -> np.ndarray:
    """Row order: by series of first appearance, then time (stable); duplicate (series, time) refused."""
    import pandas as pd

    if time is None:
        return np.arange(len(frame))
    raw = frame[time]
    if raw.isna().any():
        row = int(np.flatnonzero(raw.isna().to_numpy())[0])
        raise ValueError(f"{source}: column {time!r}, row {row + row_offset}: empty time")
    key = raw
    if not pd.api.types.is_numeric_dtype(raw):
        try:
            key = pd.to_datetime(raw, format="mixed")
        except (ValueError, TypeError):
            key = raw.astype(str)  # ordered as text (e.g. zero-padded labels)
    keyed = pd.DataFrame({"series": ids, "time": key.to_numpy(), "row": np.arange(len(frame))})
    duplicated = keyed.duplicated(["series", "time"], keep=False).to_numpy()
    if duplicated.any():
        first = np.flatnonzero(duplicated)[:2]
        rows = [int(r) + row_offset for r in first]
        raise ValueError(f"{source}: rows {rows[0]} and {rows[1]}: duplicate (series, time) = "
                         f"({ids[first[0]]}, {raw.iloc[first[0]]})")  # fmt: skip
    first_seen = {name: i for i, name in reversed(list(enumerate(ids)))}
    keyed["series_rank"] = [first_seen[name] for name in ids]
    return keyed.sort_values(["series_rank", "time"], kind="stable")["row"].to_numpy()


def check_values(values: np.ndarray, where: str, columns: Sequence[str], *, lines: Sequence[int] | None = None,
                 allow_nan: bool = False) -> None:
    """Refuse non-finite values and warn once about extreme ones of ``values [..., C]`` read from a file.

    ``where`` names the file (and array), ``columns`` the ``C`` columns, ``lines`` the file's
    line of each row of a 2-D table (else a value's place is its index). A NaN, an inf or a value
    beyond float32's range is a ``ValueError`` naming the first one's column and place
    (``allow_nan``: NaN marks a missing value and is skipped; the others are still refused). A
    finite value is extreme if ``|x| >`` :data:`EXTREME_ABSOLUTE` or ``|x - median| >``
    :data:`EXTREME_SPREADS` robust spreads of its column; the file then gets one
    :class:`DataWarning` naming each such column, its count and its first such value.
    """
    values = np.asarray(values, dtype=np.float64)
    flat = values.reshape(-1, values.shape[-1])

    def place(row: int) -> str:
        if lines is not None:
            return f"line {lines[row]}"
        return f"index {tuple(int(i) for i in np.unravel_index(row, values.shape[:-1]))}"

    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(flat) <= np.finfo(np.float32).max)  # the models compute in float32
    if allow_nan:
        bad &= ~np.isnan(flat)
    if bad.any():
        row, column = map(int, np.argwhere(bad)[0])
        raise ValueError(f"{where}, column {columns[column]!r}, {place(row)}: {flat[row, column]:g} is not a finite "
                         f"float32 number ({int(bad.sum())} such values in the file)")  # fmt: skip
    found = []
    for column in range(flat.shape[1]):
        finite = flat[:, column][np.isfinite(flat[:, column])]
        if finite.size == 0:
            continue
        median = np.median(finite)
        spread = 1.4826 * np.median(np.abs(finite - median))
        extreme = np.abs(flat[:, column]) > EXTREME_ABSOLUTE
        if spread > 0:
            extreme |= np.abs(flat[:, column] - median) > EXTREME_SPREADS * spread
        if extreme.any():
            row = int(np.argmax(extreme))
            found.append(f"column {columns[column]!r} ({int(extreme.sum())}, first {flat[row, column]:.3g} at "
                         f"{place(row)})")  # fmt: skip
    if found:
        warnings.warn(f"{where}: extreme values (|x| > {EXTREME_ABSOLUTE:g}, or > {EXTREME_SPREADS:g} robust spreads "
                      f"from the column's median) in {'; '.join(found)}: check the file", DataWarning, stacklevel=2)

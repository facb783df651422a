"""Reading a user's data files: tables, ``.npz`` archives and MIDI folders, and the checks of their values.

Every refusal is one ``ValueError`` naming the file, the column (or array) and the row (or line);
an extreme value gives one :class:`DataWarning`, once per file and column in a process
(:func:`warn_once`: a file read twice in a command warns once). :mod:`ppl_models.inference.data.datasets` builds its
:class:`~ppl_models.inference.data.datasets.SequenceDataset` from what these read; the loaders of the built-in
data sets (:mod:`ppl_models.experiments.tasks`) check their values by the same :func:`check_values`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

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
#: a value whose magnitude exceeds this is extreme, whatever its column holds (float32 keeps ~7 digits: such a
#: value swamps every sum and standardisation it enters)
EXTREME_ABSOLUTE = 1e15
#: a value further than this many robust spreads (1.4826 times the median absolute deviation) from its column's
#: median is extreme; columns whose median absolute deviation is 0 (mostly constant) get the absolute rule only
EXTREME_SPREADS = 1e6
#: how the rows of a series are put in time order: by the time column's values (numbers, dates, numbered labels;
#: :func:`time_keys`) or in the file's order (the time column is then only checked for duplicates)
TIME_ORDERS = ("values", "file")

#: a number written with thousands separators, such as ``1,234.5``
_GROUPED = r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?"
#: a numbered label: a prefix without digits, then a whole number (``t12``, ``week_3``)
_LABEL = r"^(\D*)(\d+)$"
#: a time step at least this many times the column's usual (median) step is a gap of missing steps
GAP_FACTOR = 2.0
#: gaps in more than this share of the steps are the data's own calendar (trading days), not missing steps
GAP_SHARE = 0.1
#: the findings already reported, as (file, what, finding)
_reported: set[tuple[str, str, str]] = set()


class DataWarning(UserWarning):
    """A data file holds extreme values (:func:`check_values`), a constant feature, a left-out column of text with
    digits in it or with no value at all, gaps in its time column, series dropped for their NaN, or an unreadable
    file among readable ones; the run goes on, but the file is likely wrong."""


def warn_once(where: str, what: str, findings: Sequence[str], advice: str, *, stacklevel: int = 3) -> None:
    """One :class:`DataWarning` ``"where: what finding; finding: advice"`` of the ``findings`` not yet reported for
    ``where`` and ``what`` in this process: a file read more than once in a command warns once."""
    new = [finding for finding in dict.fromkeys(findings) if (where, what, finding) not in _reported]
    if new:
        _reported.update((where, what, finding) for finding in new)
        warnings.warn(f"{where}: {what} {'; '.join(new)}: {advice}", DataWarning, stacklevel=stacklevel)


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
        frame = pd.read_csv(path, sep=sep, dtype={column: str for column in text})
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


def unique_columns(names: Sequence, source: str) -> list[str]:
    """``names`` as text; a name given twice is one ``ValueError`` naming it."""
    names = [str(name) for name in names]
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{source}: column name {name!r} appears more than once; give each column its own name")
        seen.add(name)
    return names


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


def _numbers(column) -> np.ndarray:
    """A column's cells as float64 ``[rows]``, NaN where empty or not a number; text with thousands separators
    (``"1,234.5"``) is a number."""
    import pandas as pd

    values = pd.to_numeric(column, errors="coerce")
    if not pd.api.types.is_numeric_dtype(column):
        text = column.astype(str).str.strip()
        grouped = (values.isna() & text.str.fullmatch(_GROUPED).eq(True)).to_numpy()
        if grouped.any():
            values = values.mask(grouped, pd.to_numeric(text.str.replace(",", "", regex=False), errors="coerce"))
    return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _filled(column) -> np.ndarray:
    """Which cells of a column hold something: ``[rows]`` bool (not NaN and not blank text)."""
    import pandas as pd

    filled = column.notna().to_numpy(dtype=bool, copy=True)
    if pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
        filled &= (column.astype(str).str.strip() != "").to_numpy(dtype=bool)
    return filled


def mostly_numeric(column) -> bool:
    """A value column by default: numbers (or booleans) in at least half its non-empty cells.

    A text column (ids, categories) is left out; a number column with a stray bad cell is kept,
    so that :func:`numeric_columns` names the cell instead of silently dropping the column.
    """
    import pandas as pd

    if pd.api.types.is_numeric_dtype(column):
        return True
    filled = _filled(column)
    return bool(filled.any()) and float(np.mean(~np.isnan(_numbers(column)[filled]))) >= 0.5


def value_columns(frame, reserved: set[str], source: str) -> list[str]:
    """The default features: every column not ``reserved`` that is :func:`mostly_numeric`.

    A column left out whose filled cells mostly hold digits (numbers with a unit, a decimal comma, an
    id) is named in a :class:`DataWarning`.
    """
    chosen, number_like, empty = [], [], []
    for name in frame.columns:
        if name in reserved:
            continue
        if not _filled(frame[name]).any():
            empty.append(repr(name))
            continue
        if mostly_numeric(frame[name]):
            chosen.append(name)
            continue
        text = frame[name][_filled(frame[name])].astype(str)
        if len(text) and text.str.contains(r"\d").mean() >= 0.5:
            number_like.append(repr(name))
    if number_like:
        warn_once(
            source,
            "columns of text with digits in them, left out of the features:",
            number_like,
            "name the value columns with features= to read them (each cell must then be a number)",
        )
    if empty:
        warn_once(
            source, "columns with no value in any row, left out of the features:", empty, "the other columns are read"
        )
    return chosen


def numeric_columns(frame, columns: list[str], source: str, row_offset: int) -> np.ndarray:
    """``frame[columns]`` as float64 ``[rows, len(columns)]`` (:func:`_numbers`); a cell that is not a number is
    one error."""
    out = np.empty((len(frame), len(columns)))
    for k, column in enumerate(columns):
        out[:, k] = _numbers(frame[column])
        bad = np.isnan(out[:, k])
        if not _filled(frame[column]).any():
            raise ValueError(
                f"{source}: column {column!r} has no value in any row: leave it out (name the value "
                "columns with features=, the targets with targets=)"
            )
        if bad.any() and (bad := bad & _filled(frame[column])).any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{source}: column {column!r}, row {row + row_offset}: {frame[column].iloc[row]!r} is not a number"
            )
    return out


def series_ids(frame, series: str | None, source: str, row_offset: int) -> np.ndarray:
    """Each row's series id as text ``[rows]`` (``"0"`` without a ``series`` column); an empty id is refused."""
    if series is None:
        return np.full(len(frame), "0", dtype=object)
    empty = ~_filled(frame[series])
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise ValueError(
            f"{source}: column {series!r}, row {row + row_offset}: empty series id; every row needs its series"
        )
    return frame[series].astype(str).to_numpy(dtype=object)


def time_keys(raw, column: str, source: str, row_offset: int) -> np.ndarray:
    """A time column's cells as sort keys ``[rows]``: numbers, numbered labels or dates, the first that reads them all.

    Dates are read in any common form (``2024-02-29``, ``02/29/2024 10:00``, with a time zone or
    not) and must name their year; numbered labels share a prefix and end in a whole number
    (``t0 .. t11``: ordered by the number, so ``t2`` before ``t10``). A cell that does not read
    like the others, or a column that is none of these, is one ``ValueError`` naming the row.
    """
    import pandas as pd

    if pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_datetime64_any_dtype(raw):
        return raw.to_numpy()
    text = raw.astype(str).str.strip()
    labels = text.str.extract(_LABEL)
    prefix = labels[0].mode()
    prefix = prefix[0] if len(prefix) else ""
    numbered = pd.to_numeric(labels[1], errors="coerce").where(labels[0] == prefix)
    reads = {
        "a number": lambda: pd.Series(_numbers(raw), index=raw.index),
        f"a label {prefix!r} + a whole number": lambda: numbered,
        "a date (with its year)": lambda: _dates(text),
    }
    expected, best = None, None
    for name, read in reads.items():  # the first that reads every cell, else the one that reads most
        keys = read()
        if bool(keys.notna().all()):
            return keys.to_numpy()
        if best is None or keys.notna().sum() > best.notna().sum():
            expected, best = name, keys
    if not best.notna().any():
        expected = "a number, a date (with its year) or a numbered label such as 't1'"
    row = int(np.flatnonzero(best.isna().to_numpy())[0])
    raise ValueError(
        f"{source}: column {column!r}, row {row + row_offset}: {raw.iloc[row]!r} is not {expected}; "
        "fix it, or pass time_order='file' to keep the file's order"
    )


def _dates(text):
    """Cells as dates in UTC (NaT where not a date, or a date without its year): ISO 8601 at once, others one by one."""
    import pandas as pd

    dates = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    rest = dates.isna().to_numpy()
    if rest.any():
        dates[rest] = pd.to_datetime(text[rest], format="mixed", errors="coerce", utc=True)
    return dates.where(dates.dt.year != 1).dt.tz_convert(None)  # a date that names no year is read as year 1


def row_order(
    frame, ids: np.ndarray, time: str | None, source: str, row_offset: int, order: str = "values"
) -> np.ndarray:
    """Row order ``[rows]``: series in order of first appearance, each in time (``order``, one of
    :data:`TIME_ORDERS`: ``"values"`` by :func:`time_keys` of the ``time`` column, ``"file"`` (or no
    ``time`` column) in the file's order); a duplicate (series, time) is refused."""
    import pandas as pd

    rank = pd.factorize(ids)[0]  # series by first appearance
    if time is None:
        return np.argsort(rank, kind="stable")
    raw = frame[time]
    if raw.isna().any():
        row = int(np.flatnonzero(raw.isna().to_numpy())[0])
        raise ValueError(f"{source}: column {time!r}, row {row + row_offset}: empty time")
    key = raw.to_numpy() if order == "file" else time_keys(raw, time, source, row_offset)
    keyed = pd.DataFrame({"series": rank, "time": key})
    duplicated = keyed.duplicated(["series", "time"], keep=False).to_numpy()
    if duplicated.any():
        first = np.flatnonzero(duplicated)[:2]
        rows = [int(r) + row_offset for r in first]
        raise ValueError(
            f"{source}: rows {rows[0]} and {rows[1]}: duplicate (series, time) = "
            f"({ids[first[0]]}, {raw.iloc[first[0]]})"
        )
    if order == "file":
        return np.argsort(rank, kind="stable")
    ordered = keyed.sort_values(["series", "time"], kind="stable")
    _warn_gaps(
        ordered["series"].to_numpy(), ordered["time"].to_numpy(), raw.to_numpy()[ordered.index], ids, time, source
    )
    return ordered.index.to_numpy()


def _warn_gaps(
    rank: np.ndarray, keys: np.ndarray, cells: np.ndarray, ids: np.ndarray, column: str, source: str
) -> None:
    """Warn once where the time ``keys [rows]`` (sorted within each series ``rank``) jump by at least
    :data:`GAP_FACTOR` usual steps (the median step) in a few places, under :data:`GAP_SHARE` of the steps: missing
    steps, which the models would take as one. A calendar that skips often (trading days) is its own step."""
    same = rank[1:] == rank[:-1]
    if not same.any():
        return
    numbers = keys.astype("datetime64[ns]").astype(np.int64) if np.issubdtype(keys.dtype, np.datetime64) else keys
    steps = np.diff(numbers.astype(np.float64))[same]
    usual = float(np.median(steps))
    gaps = np.flatnonzero(same)[steps >= GAP_FACTOR * usual] if usual > 0 else np.array([], dtype=int)
    if len(gaps) == 0 or len(gaps) > GAP_SHARE * len(steps):
        return
    shown = [f"series {ids[rank == rank[g]][0]!s}: {cells[g]} then {cells[g + 1]}" for g in gaps[:3]]
    warn_once(
        source,
        f"column {column!r} skips steps in {len(gaps)} place(s) (at least {GAP_FACTOR:g} times its usual step):",
        shown,
        "the models take consecutive rows as consecutive steps; fill the missing steps if their spacing matters",
        stacklevel=5,
    )


def check_values(
    values: np.ndarray,
    where: str,
    columns: Sequence[str],
    *,
    lines: Sequence[int] | None = None,
    allow_nan: bool = False,
) -> None:
    """Refuse non-finite values and warn once about extreme ones of ``values [..., C]`` read from a file.

    ``where`` names the file (and array), ``columns`` the ``C`` columns, ``lines`` the file's
    line of each row of a 2-D table (else a value's place is its index). A NaN, an inf or a value
    beyond float32's range is a ``ValueError`` naming the first one's column and place
    (``allow_nan``: NaN marks a missing value and is skipped; the others are still refused). A
    finite value is extreme if ``|x| >`` :data:`EXTREME_ABSOLUTE` or ``|x - median| >``
    :data:`EXTREME_SPREADS` robust spreads of its column; the file then gets one
    :class:`DataWarning` naming each such column, its count and its first such value, once in a
    process (:func:`warn_once`).
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
        raise ValueError(
            f"{where}, column {columns[column]!r}, {place(row)}: {flat[row, column]:g} is not a finite "
            f"float32 number ({int(bad.sum())} such values in the file)"
        )
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
            found.append(
                f"column {columns[column]!r} ({int(extreme.sum())}, first {flat[row, column]:.3g} at {place(row)})"
            )
    warn_once(
        where,
        f"extreme values (|x| > {EXTREME_ABSOLUTE:g}, or > {EXTREME_SPREADS:g} robust spreads from the "
        "column's median) in",
        found,
        "check the file",
    )

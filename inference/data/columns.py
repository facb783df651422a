"""The columns of a user's table: which are values (:func:`value_columns`), their cells as numbers
(:func:`numeric_columns`), the series ids (:func:`series_ids`) and the header's names (:func:`unique_columns`).

Every refusal is one ``ValueError`` naming the file, the column and the row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..validation import SettingError
from .data_warnings import warn_once

__all__ = [
    "as_numbers",
    "filled_cells",
    "mostly_numeric",
    "value_columns",
    "numeric_columns",
    "unique_columns",
    "series_ids",
]

#: a number written with thousands separators, such as ``1,234.5``
_GROUPED = r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?"


def unique_columns(names: Sequence, source: str) -> list[str]:
    """``names`` as text; a name given twice is one ``ValueError`` naming it."""
    names = [str(name) for name in names]
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{source}: column name {name!r} appears more than once; give each column its own name")
        seen.add(name)
    return names


def as_numbers(column) -> np.ndarray:
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


def filled_cells(column) -> np.ndarray:
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
    filled = filled_cells(column)
    return bool(filled.any()) and float(np.mean(~np.isnan(as_numbers(column)[filled]))) >= 0.5


def value_columns(frame, reserved: set[str], source: str) -> list[str]:
    """The default features: every column not ``reserved`` that is :func:`mostly_numeric`.

    A column left out whose filled cells mostly hold digits (numbers with a unit, a decimal comma, an
    id) is named in a :class:`DataWarning`.
    """
    chosen, number_like, empty = [], [], []
    for name in frame.columns:
        if name in reserved:
            continue
        if not filled_cells(frame[name]).any():
            empty.append(repr(name))
            continue
        if mostly_numeric(frame[name]):
            chosen.append(name)
            continue
        text = frame[name][filled_cells(frame[name])].astype(str)
        if len(text) and text.str.contains(r"\d").mean() >= 0.5:
            number_like.append(repr(name))
    if number_like:
        warn_once(
            source,
            "columns of text with digits in them, left out of the features:",
            number_like,
            "name the value columns with {features=} to read them (each cell must then be a number)",
            key="features",
        )
    if empty:
        warn_once(
            source, "columns with no value in any row, left out of the features:", empty, "the other columns are read"
        )
    return chosen


def numeric_columns(frame, columns: list[str], source: str, row_offset: int) -> np.ndarray:
    """``frame[columns]`` as float64 ``[rows, len(columns)]`` (:func:`as_numbers`); a cell that is not a number is
    one error."""
    out = np.empty((len(frame), len(columns)))
    for k, column in enumerate(columns):
        out[:, k] = as_numbers(frame[column])
        bad = np.isnan(out[:, k])
        if not filled_cells(frame[column]).any():
            raise SettingError(
                "features",
                f"{source}: column {column!r} has no value in any row: leave it out (name the value "
                "columns with {features=}, the targets with {targets=})",
            )
        if bad.any() and (bad := bad & filled_cells(frame[column])).any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{source}: column {column!r}, row {row + row_offset}: {frame[column].iloc[row]!r} is not a number"
            )
    return out


def series_ids(frame, series: str | None, source: str, row_offset: int) -> np.ndarray:
    """Each row's series id as text ``[rows]`` (``"0"`` without a ``series`` column); an empty id is refused."""
    if series is None:
        return np.full(len(frame), "0", dtype=object)
    empty = ~filled_cells(frame[series])
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise ValueError(
            f"{source}: column {series!r}, row {row + row_offset}: empty series id; every row needs its series"
        )
    return frame[series].astype(str).to_numpy(dtype=object)

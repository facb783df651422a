"""The time order of a table's rows: a time column's cells as sort keys (:func:`time_keys`: numbers, numbered
labels or dates), the rows of each series in time (:func:`row_order`) and a warning where the steps have gaps.

Every refusal is one ``ValueError`` naming the file, the column and the row.
"""

from __future__ import annotations

import numpy as np

from ..validation import SettingError
from .columns import as_numbers
from .data_warnings import warn_once

__all__ = ["time_keys", "row_order", "GAP_FACTOR", "GAP_SHARE"]

#: a numbered label: a prefix without digits, then a whole number (``t12``, ``week_3``)
_LABEL = r"^(\D*)(\d+)$"
#: a time step at least this many times the column's usual (median) step is a gap of missing steps
GAP_FACTOR = 2.0
#: gaps in more than this share of the steps are the data's own calendar (trading days), not missing steps
GAP_SHARE = 0.1


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
        "a number": lambda: pd.Series(as_numbers(raw), index=raw.index),
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
    raise SettingError(
        "time_order",
        f"{source}: column {column!r}, row {row + row_offset}: {raw.iloc[row]!r} is not {expected}; "
        "fix it, or pass {time_order='file'} to keep the file's order",
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

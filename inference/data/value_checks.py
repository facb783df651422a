"""The checks of the values read from a file: a non-finite value is refused, an extreme one named in one warning
(:func:`check_values`, also used by the loaders of the built-in data sets)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .data_warnings import warn_once

__all__ = ["EXTREME_ABSOLUTE", "EXTREME_SPREADS", "check_values"]

#: a value whose magnitude exceeds this is extreme, whatever its column holds (float32 keeps ~7 digits: such a
#: value swamps every sum and standardisation it enters)
EXTREME_ABSOLUTE = 1e15
#: a value further than this many robust spreads (1.4826 times the median absolute deviation) from its column's
#: median is extreme; columns whose median absolute deviation is 0 (mostly constant) get the absolute rule only
EXTREME_SPREADS = 1e6


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

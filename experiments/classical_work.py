"""How a board's classical rows do their slow work: a progress line every few seconds (:class:`ProgressLine`) and
the series of a row predicted in ``jobs`` processes (:func:`series_map`).

A forecaster (:class:`~ppl_models.classical.ClassicalForecaster`) tells its ``progress`` how far it is: statsmodels
fits made while fitting on the training split, then series predicted. Its series are independent given the fit
(each row's parameters come from its own context), so a process pool's ``map`` gives the figures of the serial one.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from ppl_models.classical.base import RowMap
from ppl_models.inference.validation import check_positive_int

__all__ = ["PROGRESS_EVERY", "PARALLEL_ROWS", "ProgressLine", "series_map"]

#: seconds between two progress lines of a classical row
PROGRESS_EVERY = 5.0
#: the classical rows whose series are predicted in ``jobs`` processes (each series a model search; the other rows
#: take well under a second a series)
PARALLEL_ROWS = ("arima", "ets", "arimax")


class ProgressLine:
    """A forecaster's ``progress`` that prints ``LABEL: 7 of 20 series, 41 s`` (or ``LABEL: fitting on the training
    split, 57 fits, 41 s``) when ``every`` seconds of ``clock`` have passed since the start or the last line."""

    def __init__(
        self,
        label: str,
        *,
        every: float = PROGRESS_EVERY,
        clock: Callable[[], float] = time.monotonic,
        write: Callable[[str], object] = lambda line: print(line, flush=True),
    ):
        self.label, self.every, self.clock, self.write = label, every, clock, write
        self.started = self.last = clock()

    def __call__(self, what: str, done: int, total: int | None) -> None:
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        where = f"{done} of {total} {what}" if total is not None else f"fitting on the training split, {done} {what}"
        self.write(f"{self.label}: {where}, {now - self.started:.0f} s")


@contextmanager
def series_map(jobs: int) -> Iterator[RowMap]:
    """A forecaster's ``row_map``: ``map`` for ``jobs`` 1, else the ordered ``map`` of a pool of ``jobs`` processes
    forked from a fresh server process that has imported :mod:`ppl_models.classical` once (none inherits the
    board's threads or torch state). The pool ends with the block."""
    jobs = check_positive_int(jobs, name="jobs")
    if jobs == 1:
        yield map
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["ppl_models.classical"])
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        yield pool.map

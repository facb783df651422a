"""A training run's progress, shown where it is read: a bar redrawn in place on a terminal (or a notebook), and a
plain line at most every :data:`LINE_INTERVAL` seconds where the output is no terminal (a pipe, a log file, a
child process whose output is kept), e.g. ``epoch 12/50, step 340/1000, loss 1.234, valid -2.345, 34 s``.

:func:`training_progress` picks the kind for its stream; the :class:`~ppl_models.inference.training.Trainer` calls
:meth:`Progress.start_epoch`, :meth:`Progress.advance` (once per optimizer step) and :meth:`Progress.end_epoch`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm.auto import tqdm as auto_tqdm
from tqdm.autonotebook import tqdm as notebook_or_console_tqdm  # after tqdm.auto, which silences its warning
from tqdm.std import tqdm as console_tqdm

__all__ = ["LINE_INTERVAL", "Progress", "training_progress"]

#: seconds between two progress lines where the output is no terminal
LINE_INTERVAL = 10.0


class Progress:
    """Progress that shows nothing (the base of the bar and the lines); a context manager that closes it."""

    def start_epoch(self, epoch: int, epochs: int) -> None:
        """Epoch ``epoch`` (1-based) of ``epochs`` begins."""

    def advance(self, loss: Callable[[], float]) -> None:
        """One optimizer step done; ``loss()`` gives the epoch's running mean loss (called only when shown: it may
        read a device)."""

    def end_epoch(self, loss: float, valid: float | None) -> None:
        """The epoch ended with mean loss ``loss`` and validation bound per step ``valid`` (``None``: not
        validated)."""

    def close(self) -> None:
        """Leave the output as it stands (a bar's last state stays on screen)."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Bar(Progress):
    """A tqdm bar over the run's optimizer steps, redrawn in place."""

    def __init__(self, total: int, initial: int, stream: TextIO):
        self.bar = auto_tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, file=stream)

    def start_epoch(self, epoch: int, epochs: int) -> None:
        self.bar.set_description(f"epoch {epoch}/{epochs}")

    def advance(self, loss: Callable[[], float]) -> None:
        self.bar.update()
        self.bar.set_postfix(loss=f"{loss():.4g}", refresh=False)

    def end_epoch(self, loss: float, valid: float | None) -> None:
        if valid is not None:
            self.bar.set_postfix(loss=f"{loss:.4g}", valid=f"{valid:.4g}")

    def close(self) -> None:
        self.bar.close()


class _Lines(Progress):
    """One plain line at most every ``interval`` seconds of ``clock``, none before the first interval has passed."""

    def __init__(self, total: int, initial: int, stream: TextIO, interval: float, clock: Callable[[], float]):
        self.total, self.done, self.stream, self.interval, self.clock = total, initial, stream, interval, clock
        self.start = self.shown = clock()
        self.epoch, self.valid = "", None

    def start_epoch(self, epoch: int, epochs: int) -> None:
        self.epoch = f"epoch {epoch}/{epochs}"

    def advance(self, loss: Callable[[], float]) -> None:
        self.done += 1
        now = self.clock()
        if now - self.shown < self.interval:
            return
        self.shown = now
        valid = "" if self.valid is None else f", valid {self.valid:.4g}"
        line = f"{self.epoch}, step {self.done}/{self.total}, loss {loss():.4g}{valid}, {now - self.start:.0f} s"
        print(line, file=self.stream, flush=True)

    def end_epoch(self, loss: float, valid: float | None) -> None:
        self.valid = valid if valid is not None else self.valid


def training_progress(
    total: int,
    initial: int = 0,
    *,
    show: bool = True,
    stream: TextIO | None = None,
    interval: float = LINE_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> Progress:
    """The progress of a run of ``total`` optimizer steps, ``initial`` of them done (a resumed run): on ``stream``
    (default ``sys.stderr``) a bar where it is a terminal or a notebook's output, else a line every ``interval``
    seconds of ``clock``; nothing where not ``show``."""
    if not show:
        return Progress()
    stream = sys.stderr if stream is None else stream
    if stream.isatty() or notebook_or_console_tqdm is not console_tqdm:  # a terminal, or Jupyter's output
        return _Bar(total, initial, stream)
    return _Lines(total, initial, stream, interval, clock)

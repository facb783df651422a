"""The engine's data messages in the command line's terms: keyword hints (``pass missing='drop-series'``) as the
data flags (``pass --missing drop-series``), and data warnings on one line."""

from __future__ import annotations

import re
import sys

from .data import DataWarning

__all__ = ["as_flags", "from_data", "data_warnings_on_one_line"]


#: the data modules, whose messages name the reader's keywords
DATA_MODULES = (
    "ppl_models.inference.data",
    "ppl_models.experiments.tasks.own_file",
    "ppl_models.experiments.tasks.file_regression",
)
#: (pattern, replacement): the keyword hints of the data messages as the data flags (DATA_FLAGS) or --set keys
FLAG_HINTS = (
    (r"\bpass missing='drop-series'", "pass --missing drop-series"),
    (r"\bpass time_order='file'", "pass --time-order file"),
    (r"\bwith features=", "with --features A,B"),
    (r"\bwith targets=", "with --targets C[,D]"),
    (r"\(split=\)", "(--split-column COL)"),
    (r"\(given as split\)", "(given as --split-column)"),
    (r"\bwindow (\d+) is longer than", r"--window \1 is longer than"),
    (r"\bchoose window <=", "choose --window <="),
    (r"\bfewer than window (\d+)", r"fewer than --window \1"),
    (r"\bnone was given \(season\)", "none was given (--set data.season=M)"),
    (r"^window must be", "--window must be"),
    (r"^stride must be", "data.stride must be"),
    (r"^seed must be", "data.split_seed must be"),
    (r"^missing: expected", "--missing: expected"),
    (r"^time_order: expected", "--time-order: expected"),
    (r"^by: expected", "--split: expected"),
    (r"^fractions: expected", "data.fractions: expected"),
    (r"\bother fractions, or split by time\b", "other data.fractions, or --split time"),
    (r"\bgive data\.targets \(e\.g\. --set 'data\.targets=\[\"y\"\]'\)", "give --targets (e.g. --targets y)"),
)


def as_flags(message: str) -> str:
    """``message`` with the reader's keyword hints (``pass missing='drop-series'``) as the command line's options
    (``pass --missing drop-series``): :data:`FLAG_HINTS`."""
    for pattern, replacement in FLAG_HINTS:
        message = re.sub(pattern, replacement, message)
    return message


def from_data(error: BaseException) -> bool:
    """Whether ``error`` was raised through :data:`DATA_MODULES` (a frame of its traceback, or of its cause's)."""
    while error is not None:
        frame = error.__traceback__
        while frame is not None:
            if frame.tb_frame.f_globals.get("__name__", "").startswith(DATA_MODULES):
                return True
            frame = frame.tb_next
        error = error.__cause__
    return False


def data_warnings_on_one_line(show, flags: bool):
    """A ``warnings.showwarning`` that prints a :class:`~ppl_models.experiments.data.DataWarning` as one line
    (``ppl-models: warning: ...``, its hints as the data flags where ``flags``: :func:`as_flags`) and leaves the
    others to ``show``."""

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DataWarning):
            text = " ".join(str(message).split())
            print(f"ppl-models: warning: {as_flags(text) if flags else text}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning

"""The engine's data messages in the command line's terms: a setting named by a
:class:`~ppl_models.inference.validation.SettingError` (or a :class:`~ppl_models.inference.data.DataWarning`) is
spelled as its data flag (``missing='drop-series'`` as ``--missing drop-series``, :data:`DATA_FLAGS`) or, without
one, as its ``data.KEY``; data warnings print on one line."""

from __future__ import annotations

import ast
import json
import sys

from ppl_models.inference.data import DataWarning
from ppl_models.inference.validation import SettingError

from .data_flags import DATA_FLAGS
from .processes import one_line

__all__ = ["spell_flag", "user_message", "data_warnings_on_one_line"]

#: the keys of the Python API's :meth:`~ppl_models.inference.data.SequenceDataset.split` that name a ``[data]`` key
#: of their own
API_KEYS = {"by": "split_by", "seed": "split_seed"}
#: ``{data key: (flag, metavar)}`` of :data:`DATA_FLAGS`
_FLAGS = {key: (flag, options.get("metavar")) for flag, key, options in DATA_FLAGS}


def spell_flag(key: str, value: str | None) -> str:
    """A setting of the ``[data]`` table as the command line gives it: ``--window`` for the bare key ``window``,
    ``--missing drop-series`` for ``value`` ``"'drop-series'"`` (as Python writes it), ``--features A,B`` for an
    empty ``value`` (a value to give); a key without a flag as ``data.KEY`` (``--set data.KEY=VALUE`` with a
    value). A key may carry the ``data.`` of the configuration (``data.targets``)."""
    key = API_KEYS.get(key, key.removeprefix("data."))
    if key not in _FLAGS:
        return (
            f"data.{key}" if value is None else f"--set data.{key}={_literal(value, json.dumps) if value else 'VALUE'}"
        )
    flag, metavar = _FLAGS[key]
    if value is None:
        return flag
    return f"{flag} {_literal(value, _as_argument) if value else metavar or 'VALUE'}"


def _literal(value: str, spell) -> str:
    """``spell`` of the Python literal ``value`` (``value`` itself where it is none)."""
    try:
        return spell(ast.literal_eval(value))
    except (ValueError, SyntaxError):
        return value


def _as_argument(literal) -> str:
    """A value as a flag's argument: a list joined by commas, anything else as text."""
    return ",".join(map(str, literal)) if isinstance(literal, (list, tuple)) else str(literal)


def user_message(error: BaseException, flags: bool) -> str:
    """``error`` as one line for the user; a :class:`~ppl_models.inference.validation.SettingError`'s settings as
    the data flags (:func:`spell_flag`) where ``flags`` (the command was given ``--data``), as the Python API's
    keyword arguments otherwise."""
    if flags and isinstance(error, SettingError):
        return " ".join(error.spelled(spell_flag).split())
    return one_line(error)


def data_warnings_on_one_line(show, flags: bool):
    """A ``warnings.showwarning`` that prints a :class:`~ppl_models.inference.data.DataWarning` as one line
    (``ppl-models: warning: ...``, its setting as its data flag where ``flags``: :func:`spell_flag`) and leaves the
    others to ``show``."""

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DataWarning):
            text = message.spelled(spell_flag if flags else None) if isinstance(message, DataWarning) else message
            print(f"ppl-models: warning: {' '.join(str(text).split())}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning

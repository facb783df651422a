"""The data's warnings: a :class:`DataWarning` that names the setting its advice speaks of, given once per file and
finding in a process (:func:`warn_once`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from ..validation import SettingError

__all__ = ["DataWarning", "warn_once"]

#: the findings already reported, as (file, what, finding)
_reported: set[tuple[str, str, str]] = set()


class DataWarning(UserWarning):
    """A data file holds extreme values, a constant feature, a left-out column of text with digits in it or with no
    value at all, gaps in its time column, series dropped for their NaN, or an unreadable file among readable ones;
    the run goes on, but the file is likely wrong.

    ``key``: the setting its advice names (``features``); the message is then a
    :class:`~ppl_models.inference.validation.SettingError` template (``{features=}``), spelled as the Python API's
    keyword arguments by ``str`` and in a caller's own terms by :meth:`spelled`.
    """

    def __init__(self, template: str, key: str | None = None):
        self.key, self.template = key, template
        super().__init__(self.spelled())

    def spelled(self, spell=None) -> str:
        """The message with each setting as ``spell(key, value)`` (:meth:`SettingError.spelled`; ``None``: as a
        keyword argument)."""
        if self.key is None:
            return self.template
        setting = SettingError(self.key, self.template)
        return str(setting) if spell is None else setting.spelled(spell)


def warn_once(
    where: str, what: str, findings: Sequence[str], advice: str, *, key: str | None = None, stacklevel: int = 3
) -> None:
    """One :class:`DataWarning` ``"where: what finding; finding: advice"`` of the ``findings`` not yet reported for
    ``where`` and ``what`` in this process: a file read more than once in a command warns once. ``key``: the setting
    ``advice`` names as a template (``{features=}``)."""
    new = [finding for finding in dict.fromkeys(findings) if (where, what, finding) not in _reported]
    if new:
        _reported.update((where, what, finding) for finding in new)
        message = DataWarning(f"{where}: {what} {'; '.join(new)}: {advice}", key)
        warnings.warn(message, stacklevel=stacklevel)

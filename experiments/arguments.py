"""The argument types and the parser class of the ``ppl-models`` commands (and of the commands plug-ins add)."""

from __future__ import annotations

import argparse
import re

__all__ = ["Parser", "HelpFormatter", "device_option", "count", "columns"]


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``ppl-models CMD: error: ...``), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help in which every option names its default: its own words where they say ``default``, else ``(default X)``
    from its value (``off`` for a flag, ``none`` for nothing or an empty list); a required option has none. A
    description of one paragraph is wrapped; one of several lines (the examples) is kept as written."""

    def _fill_text(self, text, width, indent):
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or action.required or action.default is argparse.SUPPRESS or "default" in text:
            return text
        shown = "off" if action.default is False else "none" if action.default in (None, []) else "%(default)s"
        return f"{text} (default {shown})"


def device_option(text: str) -> str:
    """``--device`` values: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"must be auto, cpu, cuda or cuda:N, got {text!r}")
    return text


def count(minimum: int, maximum: int | None = None):
    """An ``int >= minimum`` (and ``<= maximum`` where given) argument type."""
    expected = f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {value}")
        return value

    return parse


def columns(text: str) -> list[str]:
    """A comma-separated list of column names (``A,B``)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be comma-separated column names, got {text!r}")
    return names

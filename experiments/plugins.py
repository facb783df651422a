"""Commands other packages add to ``ppl-models``: the entry points of the group :data:`COMMANDS`.

An entry point names a function ``add(commands)`` that adds its parser to the ``ppl-models`` subparsers
(``commands``) and sets ``func`` (``args -> exit status``) as its default, and optionally ``interrupted`` (what the
Ctrl-C line adds, e.g. how to go on). This project's paper reproductions (``ppl-models reproduce``) come this way:
the wheel does not ship them, and a plug-in that cannot be imported gets a command that says so.
"""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint, entry_points

__all__ = ["COMMANDS", "add_plugin_commands"]

#: the entry-point group of the commands
COMMANDS = "ppl_models.commands"


def add_plugin_commands(commands) -> None:
    """Add every command of the group :data:`COMMANDS` to the subparsers ``commands``, in name order."""
    for entry in sorted(entry_points(group=COMMANDS), key=lambda entry: entry.name):
        try:
            add = entry.load()
        except ImportError as error:
            _add_missing(commands, entry, error)
        else:
            add(commands)


def _add_missing(commands, entry: EntryPoint, error: ImportError) -> None:
    """A command ``entry.name`` that explains, whatever its arguments, that its code is not installed."""
    commands.add_parser(entry.name, help=f"not installed here ({entry.value})")
    commands.choices[entry.name] = _Missing(entry, error)


class _Missing(argparse.ArgumentParser):
    """The parser of a command whose code is not installed: any arguments give a ``func`` that refuses the command."""

    def __init__(self, entry: EntryPoint, error: ImportError):
        super().__init__(prog=f"ppl-models {entry.name}")
        self.message = (
            f"{entry.name}: its code ({entry.value}) is not installed ({error}); the research commands "
            "come with a source checkout installed with pip install -e ."
        )

    def parse_known_args(self, args=None, namespace=None):
        namespace = namespace if namespace is not None else argparse.Namespace()
        namespace.func = self.refuse
        return namespace, []

    def refuse(self, args) -> int:
        raise ValueError(self.message)

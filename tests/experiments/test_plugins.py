"""Commands added to ``ppl-models`` through the entry-point group ``ppl_models.commands``."""

from importlib.metadata import EntryPoint

import pytest

from ppl_models.experiments import plugins
from ppl_models.experiments.cli import build_parser, main


def test_the_reproductions_are_a_plug_in_command_of_this_checkout():
    (entry,) = [e for e in plugins.entry_points(group=plugins.COMMANDS) if e.name == "reproduce"]
    assert entry.value == "ppl_models.experiments.claims.command:add_reproduce"
    assert "reproduce" in build_parser()._subparsers._group_actions[0].choices


def test_a_plug_in_whose_code_is_missing_is_a_command_that_says_so(monkeypatch, capsys):
    missing = EntryPoint("papers", "ppl_models_missing_research.command:add", plugins.COMMANDS)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [missing] if group == plugins.COMMANDS else [])
    assert main(["papers", "--list", "x"]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error.startswith(
            "ppl-models: error: papers: its code (ppl_models_missing_research.command:add) is not installed"
        )
        and "pip install -e ." in error
        and "\n" not in error
    )


def test_a_plug_in_adds_its_parser_and_its_function(monkeypatch, capsys):
    def add(commands):
        hello = commands.add_parser("hello", help="greets")
        hello.add_argument("name")
        hello.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)

    entry = EntryPoint("hello", "anything:add", plugins.COMMANDS)
    monkeypatch.setattr(EntryPoint, "load", lambda self: add)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [entry])
    assert main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    with pytest.raises(SystemExit):
        main(["reproduce", "--list"])  # the group's commands only

"""The commands a results file records, checked without running them: is each still a command today's code takes?

:func:`recorded_commands` collects the command lines of a results file (its ``commands`` / ``command`` fields and
any ``*_command(s)`` field, at any depth); :func:`command_problem` parses one as the shell would and checks each
``ppl-models ...`` in it through the CLI's parser (its ``--set`` overrides applied to the experiment's configuration
as :func:`~ppl_models.experiments.own_data.load_experiment` does, nothing trained) and each ``python -m MODULE ...``
by finding the module and parsing its arguments with the module's parser (``build_parser()`` or ``parser()``, else
the parser its ``main`` builds, stopped right after parsing). Other programs (``cp``, ``git``, the official code's
``python main.py``) are not checked. :func:`stale_commands` says, one line each, which commands of a folder of
results files are stale.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.util
import inspect
import io
import pkgutil
import re
import shlex
from pathlib import Path
from unittest import mock

__all__ = ["PLACEHOLDER", "recorded_commands", "command_problem", "stale_commands"]

#: what a ``<...>`` placeholder of a recorded command (``--set train.epochs=<epochs done>``) reads as; an override
#: set to it is not checked
PLACEHOLDER = "PLACEHOLDER"
_COMMAND_KEY = re.compile(r"(^|_)commands?$")
_SEPARATORS = {";", "&", "&&", "|", "||"}
_PREFIXES = {"time", "do", "then", "else", "exec", "nohup"}
_ENVIRONMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: the installed names of the project's top-level folders (pyproject's package-dir)
_PACKAGES = {"experiments": "ppl_models.experiments", "inference": "ppl_models.inference"}
#: modules renamed since results files recorded them: a recorded ``python -m OLD`` reads as ``python -m NEW``
RENAMED = {
    "ppl_models.experiments.benchmarks.psrnn": "ppl_models.experiments.benchmarks.psrnn_speed",
    "ppl_models.experiments.benchmarks.cuda_graphs": "ppl_models.experiments.benchmarks.cuda_graph_speed",
    "ppl_models.experiments.benchmarks.smc_transformer": "ppl_models.experiments.benchmarks.smc_transformer_speed",
}


def recorded_commands(data) -> list[str]:
    """Every command line recorded in a results file's JSON ``data``, in file order (an argv list joined)."""
    found = []

    def visit(value, under_command: bool):
        if isinstance(value, dict):
            for key, item in value.items():
                visit(item, under_command or bool(_COMMAND_KEY.search(str(key))))
        elif isinstance(value, list):
            if (
                under_command
                and value
                and all(isinstance(v, str) for v in value)
                and not any(c.isspace() for c in value[0])
            ):  # an argv list
                found.append(shlex.join(value))
            else:
                for item in value:
                    visit(item, under_command)
        elif isinstance(value, str) and under_command:
            found.append(value)

    visit(data, False)
    return found


def command_problem(command: str, parser: argparse.ArgumentParser, root: str | Path = ".") -> str | None:
    """Why ``command`` (a recorded shell line) would be refused today, in one line; ``None`` if it would not.

    ``parser``: the ``ppl-models`` parser (:func:`ppl_models.experiments.cli.build_parser`); ``root``: the folder
    the command runs in (relative experiment files are read from there).
    """
    try:
        segments = _segments(command)
    except ValueError as error:
        return f"not a shell command line ({error})"
    for words in segments:
        problem = None
        if words and (words[0] == "ppl-models" or words[0].endswith("/ppl-models")):
            problem = _cli_problem(words[1:], Path(root), parser)
        elif len(words) > 2 and re.fullmatch(r"(.*/)?python3?", words[0]) and words[1] == "-m":
            problem = _module_problem(words[2], words[3:])
        if problem:
            return problem
    return None


def stale_commands(results_dir: str | Path, parser: argparse.ArgumentParser, root: str | Path = ".") -> list[str]:
    """One line per recorded command of the results files ``results_dir/*.json`` that today's code refuses
    (``parser``: the ``ppl-models`` parser)."""
    from .results_files import read_results_file

    problems = []
    for path in sorted(Path(results_dir).glob("*.json")):
        for command in dict.fromkeys(recorded_commands(read_results_file(path))):
            problem = command_problem(command, parser, root)
            if problem:
                problems.append(f"docs/results/{path.name}: stale command {command!r}: {problem}")
    return problems


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line, each its words without environment assignments or ``time``; a trailing
    remark in parentheses (``... (killed after epoch 8)``) is dropped and ``<...>`` reads as :data:`PLACEHOLDER`."""
    text = re.sub(r"<[^<>]*>", PLACEHOLDER, _without_remark(command))
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    segments, words = [], []
    for token in lexer:
        if token in _SEPARATORS:
            segments.append(words)
            words = []
        elif words or not (token in _PREFIXES or _ENVIRONMENT.match(token)):
            words.append(token)
    return [*segments, words]


def _without_remark(command: str) -> str:
    """``command`` up to its first `` (`` outside quotes (a remark after it, not a shell group)."""
    quote = None
    for i, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(" and i and command[i - 1].isspace():
            return command[:i]
    return command


def _parsed(parse) -> tuple[object, str | None]:
    """``parse()``'s result, or ``None`` and the parser's one-line complaint (argparse exits on bad arguments)."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parse(), None
    except SystemExit as stop:
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        return None, (re.sub(r"^.*?error: ", "refused: ", lines[-1]) if lines else f"exit status {stop.code}")


def _cli_problem(argv: list[str], root: Path, parser: argparse.ArgumentParser) -> str | None:
    """Why ``ppl-models ARGV`` would be refused: by the parser, or by a ``--set`` against the experiment's config."""
    from .. import registry, suites

    args, problem = _parsed(lambda: parser.parse_args(argv))
    if problem:
        return problem
    sets = tuple(item for item in getattr(args, "set", []) if item.split("=", 1)[-1] != PLACEHOLDER)
    sets += (f'device="{args.device}"',) if getattr(args, "device", None) else ()
    if args.command == "train" and args.data is None:
        experiment = args.experiment
        if experiment not in registry.EXPERIMENTS:
            experiment = str(root / experiment)  # root / an absolute path is that path
            if not Path(experiment).is_file() and Path(args.experiment).parts[:1] != ("experiments",):
                return None  # a run's own experiment file (runs/...), not kept in the checkout
        return _config_problem(experiment, sets)
    if args.command == "suite":
        if args.suite not in suites.SUITES:
            return f"suite must be one of {sorted(suites.SUITES)}, got {args.suite!r}"
        return next(
            filter(
                None,
                (_config_problem(experiment, sets, own) for _, experiment, own in suites.SUITES[args.suite].members),
            ),
            None,
        )
    return None


@functools.cache
def _config_problem(experiment: str, sets: tuple[str, ...], own: tuple[str, ...] = ()) -> str | None:
    """Why ``load_experiment`` refuses ``experiment`` with its ``own`` settings and the overrides ``sets``."""
    from .. import own_data

    try:
        own_data.load_experiment(experiment, list(sets), own=list(own))
    except (ValueError, TypeError) as error:
        return " ".join(str(error).split())
    return None


def _module_problem(name: str, argv: list[str]) -> str | None:
    """Why ``python -m NAME ARGV`` would be refused: no such module, or arguments its parser refuses."""
    head, _, rest = name.partition(".")
    installed = f"{_PACKAGES[head]}.{rest}" if head in _PACKAGES and rest else name
    installed = RENAMED.get(installed, installed)
    try:
        found = importlib.util.find_spec(installed) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        moved = _moved(name.rpartition(".")[2])
        return f"no module {name}" + (f" (it is now {moved})" if moved else "")
    if not installed.startswith("ppl_models."):
        return None
    module = importlib.import_module(installed)
    build = getattr(module, "build_parser", None) or getattr(module, "parser", None)
    if callable(build):
        return _parsed(lambda: build().parse_args(argv))[1]
    main = getattr(module, "main", None)
    if callable(main) and "parse_args(" in inspect.getsource(main):
        return _parsed(lambda: _parse_only(main, argv))[1]
    return None


class _Parsed(Exception):
    """Raised by :func:`_parse_only`'s hook once ``main``'s arguments parsed."""


def _parse_only(main, argv: list[str]) -> None:
    """Run ``main(argv)`` up to its parser's ``parse_args`` and stop there (nothing after it runs)."""
    parse = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_and_stop):
        try:
            main(argv)
        except _Parsed:
            return


def _moved(leaf: str) -> str | None:
    """The project's module named ``leaf`` today (e.g. ``ppl_models.experiments.studies.psrnn_seeds``), if any."""
    import ppl_models.experiments as experiments

    for info in pkgutil.walk_packages(experiments.__path__, "ppl_models.experiments."):
        if info.name.rpartition(".")[2] == leaf:
            return info.name
    return None

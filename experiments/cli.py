"""The ``ppl-models`` command line: :func:`build_parser` (each command's parser: :mod:`.cli_parsers`; what it does:
:mod:`.cli_commands`) and :func:`main`, the console script, which turns a user's mistake into one line."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch

from . import processes
from .arguments import HelpFormatter, Parser
from .cli_messages import data_warnings_on_one_line, user_message
from .cli_parsers import COMMAND_PARSERS
from .data import DATA_ENV, resolve_data_dir
from .plugins import add_plugin_commands

__all__ = ["main", "build_parser", "USER_ERRORS"]

#: what a user's input or environment causes: one line, exit status 2 (:data:`.processes.USER_ERRORS`)
USER_ERRORS = processes.USER_ERRORS

DESCRIPTION = (
    "Train, evaluate, compare and forecast the stochastic sequence models of ppl_models, on the registered "
    "experiments or on your own file (--data). Each command has its own --help."
)
EXAMPLES = """examples:
  ppl-models list
  ppl-models demo
  ppl-models train lgssm-demo --set objective.gradient=\\"stop_weights\\" --run-dir runs/fisher
  ppl-models train gru --data my_series.csv --series site --time day --features temp,wind
  ppl-models train lgssm-demo --run-dir runs/fisher --resume --epochs 100
  ppl-models evaluate runs/fisher --set num_particles=5000
  ppl-models suite pfrnn-mazes --run-dir runs/mazes --only "PF-GRU / maze 18"
  ppl-models leaderboard --data my_series.csv --out runs/board
  ppl-models compare GRU=runs/a PSRNN=runs/b --out runs/gru-vs-psrnn
  ppl-models forecast SMC-T=runs/smct-covid LSTM=runs/lstm-covid --out runs/covid-forecasts
  ppl-models backtest runs/fisher --horizon 5 --origins 10
"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``ppl-models`` and of each of its commands (those plug-ins add included)."""
    parser = Parser(prog="ppl-models", description=DESCRIPTION, epilog=EXAMPLES, formatter_class=HelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of every error")
    commands = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for add in COMMAND_PARSERS:
        add(commands)
    add_plugin_commands(commands)
    for command in commands.choices.values():  # --debug also after the command's name
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks (default off)"
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppl-models`` console script: 0 on success, 2 on a user error (one line), 130 on Ctrl-C."""
    args = build_parser().parse_args(argv)
    flags = getattr(args, "data", None) is not None and hasattr(args, "data_series")  # the data flags apply
    try:
        with warnings.catch_warnings():
            warnings.showwarning = data_warnings_on_one_line(warnings.showwarning, flags)
            if getattr(args, "data_dir", None) is not None:  # checked here; the demos' and boards' processes inherit it
                os.environ[DATA_ENV] = str(resolve_data_dir(args.data_dir))
            return args.func(args)
    except USER_ERRORS as error:
        if args.debug:
            raise
        message = user_message(error, flags)
    except RuntimeError as error:  # running out of memory is the settings' doing, not a bug
        if args.debug or not _out_of_memory(error):
            raise
        message = (
            f"out of memory ({type(error).__name__}): lower the batch size, the number of particles or "
            "samples, or the sequence length"
        )
    except KeyboardInterrupt:
        if args.debug:
            raise
        hint = getattr(args, "interrupted", _CONTINUE.get(args.command, ""))
        print(f"ppl-models: interrupted{hint}", file=sys.stderr)
        return 130
    print(f"ppl-models: error: {message}", file=sys.stderr)
    return 2


#: how each command that can be interrupted goes on, as the Ctrl-C line says it
_CONTINUE = {
    "train": " (a training run continues with --resume)",
    "leaderboard": " (run the same command again: finished runs are kept, an interrupted one resumes)",
    "suite": " (run the same command again: finished members are kept, an interrupted one resumes)",
}


def _out_of_memory(error: RuntimeError) -> bool:
    """Whether ``error`` is torch's failure to allocate memory (CUDA's ``OutOfMemoryError`` or the CPU allocator's)."""
    return isinstance(error, torch.OutOfMemoryError) or "can't allocate memory" in str(error)


if __name__ == "__main__":
    sys.exit(main())

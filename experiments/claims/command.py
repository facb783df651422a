"""``ppl-models reproduce``: the papers' claims from the command line, a plug-in of the ``ppl-models`` commands.

pyproject.toml names :func:`add_reproduce` in the entry-point group :data:`ppl_models.experiments.plugins.COMMANDS`;
the command exists where the research is installed (a source checkout, ``pip install -e .``).
"""

from __future__ import annotations

from ..arguments import HelpFormatter, count, device_option
from ..cli import build_parser
from . import reproductions
from .recorded_commands import stale_commands

__all__ = ["add_reproduce"]


def add_reproduce(commands) -> None:
    """Add ``reproduce`` to the ``ppl-models`` subparsers ``commands``."""
    again = commands.add_parser(
        "reproduce",
        description="The papers' claims: list them, rerun one for its seeds (finished runs are kept, an interrupted "
        "one resumes), render docs/reproductions.md from the results files, or check the page and the files' recorded "
        "commands. Runs from a source checkout (the research is not in the wheel).",
        formatter_class=HelpFormatter,
        help="the papers' claims: list, rerun one for its seeds, render or check docs/reproductions.md",
    )
    again.add_argument(
        "claim",
        nargs="?",
        metavar="NAME",
        help="a claim to rerun, or transfer-RECIPE (see --list); writes its results file under docs/results/",
    )
    again.add_argument("--seeds", type=count(1), metavar="N", help="with NAME: seeds 0..N-1 (default the claim's)")
    again.add_argument("--run-dir", help="with NAME: folder of the runs (default runs/reproduce-NAME); rerun to resume")
    again.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto")
    again.add_argument("--list", action="store_true", help="list the claims")
    again.add_argument("--render", action="store_true", help="write docs/reproductions.md from the results files")
    again.add_argument(
        "--check",
        action="store_true",
        help="exit 1, one line per problem, when docs/"
        "reproductions.md is out of date or a results file lacks its command or seeds",
    )
    again.set_defaults(
        func=_reproduce, interrupted=" (run the same command again: finished runs are kept, an interrupted one resumes)"
    )


def _reproduce(args) -> int:
    modes = [flag for flag, on in (("--list", args.list), ("--render", args.render), ("--check", args.check)) if on]
    if len(modes) + (args.claim is not None) != 1:
        raise ValueError(
            "reproduce needs exactly one of NAME, --list, --render, --check, got "
            f"{modes + ([args.claim] if args.claim is not None else []) or 'none'}"
        )
    if (args.seeds is not None or args.run_dir is not None) and args.claim is None:
        raise ValueError("--seeds and --run-dir go with a claim NAME")
    if args.list:
        print(reproductions.listing())
        return 0
    if args.render:
        print(f"wrote {reproductions.write_page()}")
        return 0
    if args.check:
        root = reproductions.project_root()
        problems = reproductions.check() + stale_commands(root / "docs" / "results", build_parser(), root)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    path = reproductions.reproduce(args.claim, args.seeds, args.run_dir, device=args.device)
    published = path.parent.resolve() == (reproductions.project_root() / "docs" / "results").resolve()
    print(
        f"wrote {path}"
        + (
            "; ppl-models reproduce --render updates docs/reproductions.md"
            if published
            else " (docs/results is left as it was)"
        )
    )
    return 0

"""Where a results file comes from: the commit its figures were made from, the command and seeds that made them,
and the check that a results file records them.

Benchmarks, studies and ``ppl-models reproduce`` all record the commit through :func:`git_state` (git, or on a
copied tree the manifest named by ``PPL_MODELS_MANIFEST``); a script's ``commands`` and ``seeds`` fields come from
:func:`script_provenance`, and :func:`provenance_problems` says which of them a results file lacks.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

__all__ = ["REPO_ROOT", "git_state", "commit_label", "script_provenance", "provenance_problems"]

#: the project's checkout: the folder of ``inference/``, ``ppl_models/`` and ``experiments/`` (the research runs
#: from a checkout only; the wheel does not ship it)
REPO_ROOT = Path(__file__).resolve().parents[2]


def git_state() -> dict:
    """The commit measured and any uncommitted change to the engine or the models.

    On a copy of the tree sent to another machine (no git history there, or a stale one), the
    environment variable ``PPL_MODELS_MANIFEST`` names a file of ``git ls-files -s inference ppl_models`` output
    taken from the commit in its first line (``commit <sha>``): every engine file is then checked
    against its blob hash there, so a changed, added or missing file is listed. Without either: ``None``.
    """

    def git(*cmd):
        done = subprocess.run(["git", *cmd], capture_output=True, text=True, cwd=str(REPO_ROOT), check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    if os.environ.get("PPL_MODELS_MANIFEST"):
        return _manifest_state(Path(os.environ["PPL_MODELS_MANIFEST"]))
    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--", "inference", "ppl_models") if commit else None
    except OSError:
        commit = dirty = None
    return {
        "git_commit": commit,
        "git_uncommitted_engine_files": None if commit is None else (dirty.splitlines() if dirty else []),
    }


def _manifest_state(manifest: Path) -> dict:
    """:func:`git_state` from a manifest (see there): the commit and the engine files that differ from it."""
    lines = manifest.read_text().splitlines()
    if not lines or not lines[0].startswith("commit "):
        raise ValueError(f"PPL_MODELS_MANIFEST {manifest}: expected 'commit <sha>' on the first line")
    expected = {}
    for line in lines[1:]:
        meta, _, path = line.partition("\t")
        expected[path] = meta.split()[1]
    # os.walk leaves the package's links to the folders alone: each file is listed once, at its own path
    present = {
        str(Path(top, name).relative_to(REPO_ROOT))
        for folder in ("inference", "ppl_models")
        for top, _, names in os.walk(REPO_ROOT / folder)
        if "__pycache__" not in Path(top).parts
        for name in names
    }
    changed = []
    for path in sorted(present | set(expected)):
        if path not in expected:
            changed.append(f"?? {path}")
        elif path not in present:
            changed.append(f" D {path}")
        else:
            data = (REPO_ROOT / path).read_bytes()
            if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != expected[path]:
                changed.append(f" M {path}")
    return {
        "git_commit": lines[0].split()[1],
        "git_uncommitted_engine_files": changed,
        "git_checked_by": "blob hashes against the commit's manifest (no git history on this machine)",
    }


def commit_label() -> str:
    """The commit the runs were made from (:func:`git_state`), with ``+changes`` when an engine file differs from
    it; ``"unknown"`` without git or manifest."""
    state = git_state()
    if state["git_commit"] is None:
        return "unknown"
    return state["git_commit"] + ("+changes" if state["git_uncommitted_engine_files"] else "")


def script_provenance(module: str, argv: list[str] | None, seeds: tuple[int, ...] = (0,)) -> dict:
    """The ``commands`` and ``seeds`` fields of a script's results file: ``python -m module ARGS`` as run
    (``argv``; ``None``: the process's own arguments) and the seeds its data and draws used."""
    args = sys.argv[1:] if argv is None else list(argv)
    return {"commands": [" ".join(["python -m", module, *map(shlex.quote, args)])], "seeds": list(seeds)}


def provenance_problems(name: str, data: dict) -> list[str]:
    """What the results file ``docs/results/<name>`` (its JSON ``data``) lacks of its provenance: its command(s)
    and its seed(s)."""
    problems = []
    if not any(key in data for key in ("commands", "command")):
        problems.append(f"docs/results/{name}: no 'commands' (or 'command') field")
    if not any(key in data for key in ("seeds", "seed")):
        problems.append(f"docs/results/{name}: no 'seeds' (or 'seed') field")
    return problems

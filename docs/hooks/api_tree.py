"""MkDocs hook: the installed layout of the package, for the API reference.

The repository keeps ``ppl_models/``, ``inference/`` and ``experiments/`` side by side, and the
distribution installs the last two as ``ppl_models.inference`` and ``ppl_models.experiments``
(``package-dir`` in pyproject.toml). mkdocstrings reads modules from folders on disk, so before
the build this hook copies the three folders into ``build/api_tree/ppl_models`` as they are
installed; ``mkdocs.yml`` points mkdocstrings there.
"""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "api_tree"
#: folder of the repository -> where it sits in the installed package
LAYOUT = {"ppl_models": "ppl_models", "inference": "ppl_models/inference", "experiments": "ppl_models/experiments"}


def on_startup(command, dirty) -> None:
    shutil.rmtree(TREE, ignore_errors=True)
    for folder, installed in LAYOUT.items():
        shutil.copytree(ROOT / folder, TREE / installed, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)

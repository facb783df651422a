"""``docs/architecture.md`` names modules, objects and files that exist: a renamed or moved one fails here."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text()
#: the dotted names and the paths the page writes as code
NAMES = sorted(set(re.findall(r"`(ppl_models(?:\.\w+)*)`", PAGE)))
PATHS = sorted(set(re.findall(r"`((?:inference|experiments|ppl_models|tests|docs)/[\w/.]*)`", PAGE)))


def _resolve(name: str):
    """The module, or the object inside the longest module prefix, that a dotted ``name`` means."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(name)


def test_the_page_names_modules_and_paths():
    assert len(NAMES) >= 20 and "ppl_models.inference.defaults" in NAMES
    assert "tests/project/test_import_graph.py" in PATHS


@pytest.mark.parametrize("name", NAMES)
def test_each_dotted_name_resolves(name):
    assert _resolve(name) is not None


@pytest.mark.parametrize("path", PATHS)
def test_each_path_exists(path):
    assert (ROOT / path).exists(), path


def test_the_way_of_a_command_names_the_functions_it_calls():
    for name in ("SequenceDataset", "FileSpec", "Trainer", "SettingError", "MODELS"):
        assert name in PAGE
    assert _resolve("ppl_models.inference.data").FileSpec and _resolve("ppl_models.experiments.registry").MODELS

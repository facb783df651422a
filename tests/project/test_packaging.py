"""The distribution installs one top-level import package, ``ppl_models``: the product's modules of the checkout,
without the research (studies, benchmarks, paper claims)."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the research folders of the checkout, which the wheel does not ship
RESEARCH = ("ppl_models/experiments/studies", "ppl_models/experiments/benchmarks", "ppl_models/experiments/claims")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the checkout's tracked files (the build's own folders stay out of it)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if name.startswith(("docs/results/", "tests/")):
            continue
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_symlink():  # ppl_models/inference -> ../inference
            (source / name).symlink_to(os.readlink(ROOT / name))
        elif (ROOT / name).is_file():
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_installs_exactly_one_top_level_name(wheel):
    names = wheel.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"ppl_models"}
    (top_level,) = [name for name in names if name.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["ppl_models"]


def _package_files() -> list[str]:
    """Every module and config under ``ppl_models/`` as Python imports it (through the folder links)."""
    found = []
    for folder, _, files in os.walk(ROOT / "ppl_models", followlinks=True):
        if "__pycache__" not in folder:
            found += [Path(folder, f).relative_to(ROOT).as_posix() for f in files if f.endswith((".py", ".toml"))]
    return found


def test_the_wheel_holds_every_module_and_config_of_the_product_and_no_research(wheel):
    names, files = set(wheel.namelist()), _package_files()
    assert {"ppl_models/inference/protocol.py", "ppl_models/experiments/cli.py"} <= set(files)
    for path in files:
        assert (path in names) != path.startswith(RESEARCH), path
    assert not [name for name in names if name.startswith(RESEARCH)]


def test_the_source_tree_is_laid_out_as_python_imports_it():
    """The design card's folders are the engines and the command line; the package reaches them through links."""
    for folder in ("inference", "experiments"):
        link = ROOT / "ppl_models" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link
    assert "__path__" not in (ROOT / "ppl_models" / "__init__.py").read_text()


def test_the_console_script_points_into_the_package(wheel):
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    assert "ppl-models = ppl_models.experiments.cli:main" in wheel.read(entry_points).decode()


def test_the_checkout_imports_the_same_modules_as_the_installed_package():
    import ppl_models.experiments.cli
    import ppl_models.inference

    assert Path(ppl_models.inference.__file__).parent.name == "inference"
    assert Path(ppl_models.experiments.cli.__file__).parent.name == "experiments"
    assert "inference" not in sys.modules and "experiments" not in sys.modules  # no generic top-level names

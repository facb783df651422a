"""The distribution installs one top-level import package, ``ppl_models``, holding every module of the checkout."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: repository folder -> the package it installs as (pyproject.toml's package-dir)
FOLDERS = {"ppl_models": "ppl_models", "inference": "ppl_models/inference", "experiments": "ppl_models/experiments"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the checkout's tracked files (the build's own folders stay out of it)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if (ROOT / name).is_file() and not name.startswith(("docs/results/", "tests/")):
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_installs_exactly_one_top_level_name(wheel):
    names = wheel.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"ppl_models"}
    (top_level,) = [name for name in names if name.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["ppl_models"]


def test_the_wheel_holds_every_module_and_config_of_the_three_folders(wheel):
    names = set(wheel.namelist())
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
                assert f"{package}/{path.relative_to(ROOT / folder).as_posix()}" in names, path


def test_the_console_script_points_into_the_package(wheel):
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    assert "ppl-models = ppl_models.experiments.cli:main" in wheel.read(entry_points).decode()


def test_the_checkout_imports_the_same_modules_as_the_installed_package():
    import ppl_models.experiments.cli
    import ppl_models.inference

    assert Path(ppl_models.inference.__file__).parent.name == "inference"
    assert Path(ppl_models.experiments.cli.__file__).parent.name == "experiments"
    assert "inference" not in sys.modules and "experiments" not in sys.modules  # no generic top-level names

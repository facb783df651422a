"""Static tools read the package as Python imports it: mypy resolves every module, from the checkout and from
elsewhere through the (editable) install."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists(),
    reason="mypy is in the test extras",
)


def _mypy(*args: str, cwd: Path, cache: Path) -> list[str]:
    """mypy's error lines about the project's own modules not being found or not being typed."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(cache), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr
    codes = ("[import-not-found]", "[import-untyped]", "[import]")
    return [line for line in done.stdout.splitlines() if line.endswith(codes) and '"ppl_models' in line]


def test_mypy_resolves_every_module_of_the_package_from_the_checkout(tmp_path):
    errors = _mypy("--follow-imports", "silent", "-p", "ppl_models", cwd=ROOT, cache=tmp_path)
    assert errors == []


def test_mypy_resolves_the_package_from_elsewhere_through_the_install(tmp_path):
    (tmp_path / "use.py").write_text(
        "from ppl_models.experiments.cli import main\nfrom ppl_models.inference import "
        "protocol\nreveal_type(main)\nreveal_type(protocol.SequenceModel)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / ".mypy"), "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (
        "def (argv: builtins.list[builtins.str] | None =) -> builtins.int" in done.stdout
        or "def (argv: list[str] | None =) -> int" in done.stdout
    ), done.stdout
    assert "[import" not in done.stdout, done.stdout


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_finds_nothing(command):
    """The house style is ruff's (pyproject.toml's [tool.ruff]), with no per-line opt-outs of the formatter."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--quiet", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
    skips = subprocess.run(["git", "grep", "-l", "fmt: " + "skip"], cwd=ROOT, capture_output=True, text=True)
    assert skips.stdout == ""

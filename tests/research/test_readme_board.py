"""The README board benchmark times the text a user copies: it finds the README's file-writing block and board line."""

from pathlib import Path

import pytest

from ppl_models.experiments.benchmarks.readme_board import readme_example

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_example_is_its_file_writing_block_and_its_board_line():
    python, command = readme_example(README)
    assert '.to_csv("my.csv"' in python and python in README
    assert command.startswith("ppl-models leaderboard --data my.csv") and command in README.splitlines()


def test_a_readme_without_the_example_is_refused_by_name():
    with pytest.raises(ValueError, match="one Python block writing my.csv"):
        readme_example("# nothing here\n")

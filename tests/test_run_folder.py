"""The run folder's session: locked while it runs, marked finished only once its block is through."""

import json

import pytest

from ppl_models.experiments.run_folder import FINISHED, is_finished, run_session

CONFIG = {"name": "session", "device": "cpu", "train": {"epochs": 1}}


def test_a_session_that_fails_leaves_its_folder_unfinished_and_unlocked(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="killed"):
        with run_session(run, CONFIG, resume=False, change_epochs=False, experiment={}) as folder:
            (folder / "metrics.json").write_text("{}")
            raise RuntimeError("killed")
    assert not is_finished(run) and json.loads((run / "config.json").read_text()) == CONFIG
    with run_session(run, CONFIG, resume=True, change_epochs=False, experiment={"data_fingerprint": "sha256:ab"}):
        assert not is_finished(run)  # unfinished until the block is through
    record = json.loads((run / FINISHED).read_text())
    assert set(record) == {"time", "data_fingerprint"} and record["data_fingerprint"] == "sha256:ab"


def test_a_second_session_on_a_held_folder_is_refused_before_it_touches_it(tmp_path):
    run = tmp_path / "run"
    with run_session(run, CONFIG, resume=False, change_epochs=False, experiment={}):
        before = sorted(p.name for p in run.iterdir())
        with pytest.raises(ValueError, match=f"run_dir {run} is in use by another process"):
            with run_session(run, CONFIG, resume=True, change_epochs=False, experiment={}):
                pass
        assert sorted(p.name for p in run.iterdir()) == before
    assert is_finished(run) and not (run / "resume.jsonl").exists()

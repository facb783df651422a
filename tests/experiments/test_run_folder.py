"""The run folder's session: locked while it runs, marked finished only once its block is through; the lock file
there while it is held only."""

import json

import pytest

from ppl_models.experiments.run_folder import FINISHED, is_finished, run_session
from ppl_models.inference import atomic_files
from ppl_models.inference.atomic_files import LOCK_FILE, folder_lock

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


def test_the_lock_file_is_there_while_held_only_and_only_its_holder_removes_it(tmp_path):
    run = tmp_path / "run"
    with run_session(run, CONFIG, resume=False, change_epochs=False, experiment={}):
        assert (run / LOCK_FILE).is_file()
        with pytest.raises(ValueError, match="in use by another process"):
            with folder_lock(run, "run_dir"):
                pass
        assert (run / LOCK_FILE).is_file()  # the refused one left it to the holder
        with pytest.raises(ValueError, match="in use by another process"):  # which still holds it
            with folder_lock(run, "run_dir"):
                pass
    assert not (run / LOCK_FILE).exists() and is_finished(run)
    with pytest.raises(RuntimeError, match="killed"):
        with folder_lock(run):
            raise RuntimeError("killed")
    assert not (run / LOCK_FILE).exists()


def test_a_lock_file_removed_between_its_opening_and_its_locking_is_locked_anew(tmp_path, monkeypatch):
    """A holder that lets go (and removes the file) while a second process has it open: the second one locks the
    new file, or a third would find the folder free beside it."""
    path = tmp_path / LOCK_FILE
    flock = atomic_files.fcntl.flock
    calls = []

    def released_meanwhile(fd, operation):
        if not calls:  # the holder let go between this process's open and its lock
            path.unlink()
            path.touch()
        calls.append(fd)
        flock(fd, operation)

    monkeypatch.setattr(atomic_files.fcntl, "flock", released_meanwhile)
    with folder_lock(tmp_path):
        monkeypatch.setattr(atomic_files.fcntl, "flock", flock)
        assert len(calls) == 2  # the first file let go, the new one locked
        with pytest.raises(ValueError, match="in use by another process"):
            with folder_lock(tmp_path):
                pass
    assert not path.exists()

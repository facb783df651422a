"""The shared data folder is found from any working folder (its ``shared/data`` or a parent's), given by
``--data-dir`` / ``data_dir`` or ``PPL_MODELS_DATA``; the message of a missing one says how to give it."""

import pytest

from ppl_models.experiments.data import DATA_ENV, resolve_data_dir


def _data_folder(path):
    path.mkdir(parents=True)
    (path / "SHA256SUMS").write_text("")
    return path


def test_the_data_folder_is_found_from_a_working_folder_deep_inside_a_clone_beside_it(tmp_path, monkeypatch):
    data = _data_folder(tmp_path / "shared" / "data")
    (tmp_path / "clone" / "docs").mkdir(parents=True)
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path / "clone" / "docs")
    assert resolve_data_dir() == data.resolve()
    other = _data_folder(tmp_path / "elsewhere")
    monkeypatch.setenv(DATA_ENV, str(other))  # the variable before the search
    assert resolve_data_dir() == other.resolve()
    assert resolve_data_dir(data) == data.resolve()  # and the argument before both


def test_no_data_folder_names_the_flag_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"--data-dir DIR .*{DATA_ENV}=DIR"):
        resolve_data_dir()
    with pytest.raises(ValueError, match=r"data_dir \(--data-dir\): .* has no SHA256SUMS"):
        resolve_data_dir(tmp_path)
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=rf"{DATA_ENV}: .* has no SHA256SUMS"):
        resolve_data_dir()

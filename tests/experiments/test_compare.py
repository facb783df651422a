"""Suites of runs compared (``ppl_models.experiments.compare``) on a user's file: members that the data settings or
the overrides make the same run are refused before anything is written, distinct ones trained."""

import pytest
from factories import SITE_COLUMNS, sites_file

from ppl_models.experiments import compare, runner
from ppl_models.experiments.cli import main


def test_a_suite_whose_members_differ_only_in_data_settings_refuses_data_in_one_line(tmp_path, capsys):
    data = sites_file(tmp_path / "sites.csv")
    for suite, label, other, setting in (
        ("psrnn-ring", "KF / n=20", "KF / n=200", "data.num_train"),
        ("smct-ar1-folds", "SMC-T M=30 / fold 0", "SMC-T M=30 / fold 1", "data.fold"),
    ):
        root = tmp_path / suite
        assert main(["suite", suite, "--data", str(data), "--run-dir", str(root), *SITE_COLUMNS]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{label!r} and {other!r}" in err[0] and f"differ only in {setting}," in err[0]
        assert not root.exists()  # refused before anything is written


def test_suite_members_the_overrides_make_identical_are_refused_and_distinct_ones_trained(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(runner, "train", lambda config, folder, resume: trained.append(config["name"]))
    monkeypatch.setattr(compare, "compare", lambda folders, root: {})
    data, columns = sites_file(tmp_path / "sites.csv"), SITE_COLUMNS[1::2]
    by_data = (("A", "lgssm-demo", ("data.seed=1",)), ("B", "lgssm-demo", ("data.seed=2", "data.num_train=9")))
    with pytest.raises(
        ValueError,
        match=r"'A' and 'B' become the same run .* differ only in data.num_train, "
        r"data.seed, which the overrides replace",
    ):
        compare.run_suite(by_data, tmp_path / "suite", columns, data=data)
    assert trained == [] and not (tmp_path / "suite").exists()
    by_model = (("A", "lgssm-demo", ("data.seed=1",)), ("B", "lgssm-demo", ("data.seed=2", "model.latent_dim=3")))
    compare.run_suite(by_model, tmp_path / "suite", columns, data=data)
    assert trained == ["A", "B"]

"""A user's file through forecast, reproduce and suites: never refused for no reason, never lost or mixed up."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments import compare, forecasting, runner
from ppl_models.experiments.claims import CLAIMS, Claim, Within, reproductions, results_files, transfers
from ppl_models.experiments.claims.transfers import TRANSFERS, Transfer
from ppl_models.experiments.cli import main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

COLUMNS = ["--set", 'data.series="site"', "--set", 'data.time="step"']
TINY_GRU = [
    "train.epochs=1",
    "train.batch_size=4",
    "model.rnn_dim=8",
    "model.hidden_dim=8",
    "evaluate.predictive_samples=10",
]


def sites_file(path, *, shift=0.0, series=10, steps=12, seed=0):
    """Long format: ``series`` sites of ``steps`` steps, features ``a`` and ``b`` and a target ``y``, rows shuffled."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "site": f"s{s}",
            "step": t,
            "a": shift + s + 0.3 * t + rng.normal(),
            "b": shift - 2.0 * s + t,
            "y": 10.0 + s + rng.normal(),
        }
        for s in range(series)
        for t in range(steps)
    ]
    pd.DataFrame(rows).sample(frac=1.0, random_state=seed).to_csv(path, index=False)
    return path


def _sets(items):
    return [word for item in items for word in ("--set", item)]


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    """A one-epoch GRU trained by name on a file: ``(file, run folder)``."""
    folder = tmp_path_factory.mktemp("gru")
    data = sites_file(folder / "sites.csv")
    run = folder / "run"
    assert main(["train", "gru", "--data", str(data), "--run-dir", str(run), *COLUMNS, *_sets(TINY_GRU)]) == 0
    return data, run


# ---- forecasts of a run trained on a file -----------------------------------------------------------------------


def test_a_run_on_a_file_forecasts_that_file_and_a_new_one_in_its_own_units(gru_run, tmp_path, capsys):
    data, run = gru_run
    other = sites_file(tmp_path / "other.csv", shift=50.0, seed=1)  # the same columns, other values
    for path in (data, other):
        out = tmp_path / f"forecast-{path.stem}"
        assert (
            main(
                ["forecast", f"gru={run}", "--data", str(path), "--observed", "8", "--samples", "20", "--out", str(out)]
            )
            == 0
        ), capsys.readouterr().err
        assert np.isfinite(json.loads((out / "forecast.json").read_text())["metrics"]["gru"]["crps"])
    _, loaded, _ = forecasting.load_run("gru", run, "cpu", other)
    # the trained model's units: the training file's training series, not the new file's
    frame = pd.read_csv(data)
    train_ids = json.loads((run / "data_split.json").read_text())["train"]["ids"]
    expected = frame[frame["site"].isin(train_ids)][["a", "b", "y"]]
    assert loaded.standardizer.mean == pytest.approx(expected.mean().tolist())
    assert loaded.standardizer.scale == pytest.approx(expected.std(ddof=0).tolist())
    # the new file's test series come back as they are in the file
    new = pd.read_csv(other).sort_values(["site", "step"])
    test_ids = loaded.split_record["test"]["ids"]
    truth = np.stack([new[new["site"] == site][["a", "b", "y"]].to_numpy() for site in test_ids])
    restored = loaded.standardizer.inverse(loaded.test[0].double())
    np.testing.assert_allclose(restored.numpy(), truth, rtol=1e-5, atol=1e-4)


def test_a_checkpoint_of_another_run_is_still_refused_with_data(gru_run, tmp_path, capsys):
    data, run = gru_run
    copied = tmp_path / "run"
    shutil.copytree(run, copied)
    best = copied / "checkpoints" / "best.pt"
    checkpoint = torch.load(best, weights_only=True)
    checkpoint["experiment"]["data"]["path"] = "another.csv"  # a best.pt of a run on another file
    torch.save(checkpoint, best)
    assert (
        main(
            [
                "forecast",
                f"gru={copied}",
                "--data",
                str(data),
                "--observed",
                "8",
                "--samples",
                "20",
                "--out",
                str(tmp_path / "f"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another.csv" in err and "different runs" in err


# ---- reproduce: a rerun never replaces more evidence; a broken results file is named --------------------------


def _fake_training(monkeypatch):
    """``reproduce`` and transfers without training: each member's record is ``{"fake": True}``."""
    monkeypatch.setattr(compare, "run_suite", lambda members, *args, **kwargs: {label: {} for label, _, _ in members})
    monkeypatch.setattr(reproductions, "_run_record", lambda folder, row: {"fake": True})
    monkeypatch.setattr(transfers, "_split", lambda folder, transfer: {"fake": True})


def _results_file(path, seeds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"format": "reproduce/1", "commands": ["ppl-models train x"] * len(seeds), "seeds": seeds, "results": {}}
        )
    )
    return path.read_bytes()


def test_a_rerun_on_fewer_seeds_keeps_the_results_file_with_more_and_writes_beside_its_runs(
    tmp_path, monkeypatch, capsys
):
    _fake_training(monkeypatch)
    tiny = Claim(
        paper="psrnn",
        claim="a tiny run",
        paper_figure="-",
        metric="test MSE",
        tests=("lgssm-demo",),
        seeds=(0, 1, 2),
        rule=Within("LGSSM", 0.0, 1.0),
        members=(("LGSSM", "lgssm-demo", ()),),
    )
    monkeypatch.setitem(CLAIMS, "tiny", tiny)
    results, runs = tmp_path / "results", tmp_path / "runs"
    committed = results / "reproduce_tiny.json"
    before = _results_file(committed, [0, 1, 2])
    path = reproductions.reproduce("tiny", 1, runs, results_dir=results)
    assert committed.read_bytes() == before
    assert path == runs / "reproduce_tiny.json" and json.loads(path.read_text())["seeds"] == [0]
    out = capsys.readouterr().out
    assert f"{committed} holds seeds [0, 1, 2]" in out and str(path) in out
    # a file holding no seed the rerun lacks is replaced
    _results_file(committed, [0])
    assert reproductions.reproduce("tiny", 2, runs, results_dir=results) == committed
    assert json.loads(committed.read_text())["seeds"] == [0, 1]


def test_a_transfer_rerun_on_fewer_seeds_keeps_the_results_file_with_more(tmp_path, monkeypatch, capsys):
    _fake_training(monkeypatch)
    monkeypatch.setitem(TRANSFERS, "tiny", Transfer("lgssm-demo", "-", (("source", ()),), estimator="exact"))
    results, runs = tmp_path / "results", tmp_path / "runs"
    committed = results / "transfer_tiny.json"
    before = _results_file(committed, [0, 1, 2])
    path = reproductions.reproduce("transfer-tiny", 2, runs, results_dir=results)
    assert committed.read_bytes() == before and path == runs / "transfer_tiny.json"
    assert json.loads(path.read_text())["seeds"] == [0, 1] and "holds seeds [0, 1, 2]" in capsys.readouterr().out


def test_an_unreadable_results_file_is_kept_by_a_rerun(tmp_path, capsys):
    committed = tmp_path / "results" / "reproduce_x.json"
    committed.parent.mkdir()
    committed.write_text('{"seeds": [0, 1')
    elsewhere = tmp_path / "runs" / "x.json"
    assert results_files.results_destination(committed, (0,), elsewhere) == elsewhere
    assert "no readable list of seeds" in capsys.readouterr().out
    assert results_files.results_destination(tmp_path / "new.json", (0,), elsewhere) == tmp_path / "new.json"


@pytest.mark.parametrize("name", ["psrnn_ring_seeds.json", "a_benchmark.json"])  # read by a claim, and by none
def test_check_names_a_truncated_results_file_in_one_line(tmp_path, monkeypatch, capsys, name):
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    for kept in reproductions.load_results():
        shutil.copy(RESULTS / kept, results / kept)
    reproductions.write_page(results, tmp_path / "docs" / "reproductions.md")
    text = (RESULTS / "psrnn_ring_seeds.json").read_text()
    (results / name).write_text(text[: len(text) // 2])  # cut short
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{results / name}" in err[0] and "not valid JSON" in err[0]


# ---- suites on a user's file: members that --data makes the same run ------------------------------------------


def test_a_suite_whose_members_differ_only_in_data_settings_refuses_data_in_one_line(tmp_path, capsys):
    data = sites_file(tmp_path / "sites.csv")
    for suite, label, other, setting in (
        ("psrnn-ring", "KF / n=20", "KF / n=200", "data.num_train"),
        ("smct-ar1-folds", "SMC-T M=30 / fold 0", "SMC-T M=30 / fold 1", "data.fold"),
    ):
        root = tmp_path / suite
        assert main(["suite", suite, "--data", str(data), "--run-dir", str(root), *COLUMNS]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{label!r} and {other!r}" in err[0] and f"differ only in {setting}," in err[0]
        assert not root.exists()  # refused before anything is written


def test_suite_members_the_overrides_make_identical_are_refused_and_distinct_ones_trained(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(runner, "train", lambda config, folder, resume: trained.append(config["name"]))
    monkeypatch.setattr(compare, "compare", lambda folders, root: {})
    data, columns = sites_file(tmp_path / "sites.csv"), COLUMNS[1::2]
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


# ---- the printed table of a supervised run on a file ----------------------------------------------------------


def _described_rows(printed: str) -> dict[str, tuple[str, str]]:
    """``{metric: (value, what it is)}`` of a printed supervised table (columns found from its header)."""
    lines = printed.split("\n\nrun folder:")[0].strip().splitlines()
    header = lines[0]
    value_at, what_at = header.index("value"), header.index("what it is")
    return {line[:value_at].strip(): (line[value_at:what_at].strip(), line[what_at:].strip()) for line in lines[1:]}


def test_every_figure_a_pf_lstm_run_on_a_file_prints_says_what_it_is(tmp_path, capsys):
    data, run = sites_file(tmp_path / "sites.csv"), tmp_path / "run"
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "pf-lstm",
                "--data",
                str(data),
                "--run-dir",
                str(run),
                *COLUMNS,
                *_sets(
                    [
                        'data.targets=["y"]',
                        "train.epochs=1",
                        "train.batch_size=4",
                        "model.num_particles=4",
                        "model.hidden_size=8",
                    ]
                ),
            ]
        )
        == 0
    )
    rows = _described_rows(capsys.readouterr().out)
    assert "mean_rmse" in rows and all(what for _, what in rows.values()), rows
    value, what = rows["mean_rmse"]
    assert what == "RMSE of predicting the training mean (reference)"
    # its value: the test targets about the training series' mean target, from the file
    frame, split = pd.read_csv(data), json.loads((run / "data_split.json").read_text())
    train_mean = frame[frame["site"].isin(split["train"]["ids"])]["y"].mean()
    test = frame[frame["site"].isin(split["test"]["ids"])]["y"]
    assert float(value) == pytest.approx(float(np.sqrt(((test - train_mean) ** 2).mean())), rel=1e-3)


def test_figures_of_nested_tables_say_whose_they_are():
    from ppl_models.experiments.supervised import describe_metric

    assert describe_metric("by_target.y.mean_rmse") == (
        "RMSE of predicting the training mean (reference), of target y alone"
    )
    assert describe_metric("truth.nlpd").endswith("of the true predictive law (reference)")
    assert describe_metric("sigma.load") == "learned noise scale of target load, in its units"
    assert describe_metric("coverage_0.8").startswith("share of outcomes inside the central 0.8 predictive interval")

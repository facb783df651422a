"""Command line, configuration files, data loaders and run folders."""

import hashlib
import json

import pytest
import torch

from ppl_models.experiments import cli, compare, registry
from ppl_models.experiments.config import evaluation_options, load_config
from ppl_models.experiments.data import ExperimentData, pad_sequences, verified_path
from ppl_models.experiments.runner import evaluate_model
from ppl_models.experiments.tables import format_table
from ppl_models.experiments.tasks.air_quality import air_quality
from ppl_models.experiments.tasks.music import polyphonic
from ppl_models.experiments.tasks.swimmer import swimmer
from ppl_models.inference.atomic_files import read_jsonl
from ppl_models.rnn_baseline import GRUBaseline

DEMO = registry.EXPERIMENTS["lgssm-demo"].build


def test_demo_config_loads_with_overrides():
    config = load_config(DEMO, ["train.lr=0.005", "objective.gradient=stop_weights", "evaluate.estimators=['smc']"])
    assert config["train"]["lr"] == 0.005
    assert config["objective"]["gradient"] == "stop_weights"
    assert config["evaluate"]["estimators"] == ["smc"]
    assert config["train"]["optimizer"] == "adam"  # defaults are filled in


@pytest.mark.parametrize(
    "override, message",
    [
        ("trian.lr=0.1", "unknown top-level keys"),
        ("train.learning_rate=0.1", "unknown TrainConfig keys"),
        ("evaluate.particles=3", "unknown keys in \\[evaluate\\]"),
        ("evaluate.estimators=['exact', 'laplace']", "evaluate.estimators"),
        ("device='tpu'", "device must be"),
        ("nonsense", "section.key=value"),
    ],
)
def test_bad_configs_raise_value_errors_naming_the_key(override, message):
    with pytest.raises(ValueError, match=message):
        load_config(DEMO, [override])


def test_pad_sequences_pads_at_the_end():
    x, mask = pad_sequences([torch.ones(3, 2), 2 * torch.ones(1, 2)])
    assert x.shape == (2, 3, 2) and mask.tolist() == [[True, True, True], [True, False, False]]
    assert torch.all(x[1, 1:] == 0) and torch.all(x[1, 0] == 2)
    with pytest.raises(ValueError, match="feature size"):
        pad_sequences([torch.ones(3, 2), torch.ones(3, 4)])


def test_data_files_are_checked_against_their_checksums(tmp_path):
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "a.txt").write_text("hello")
    digest = hashlib.sha256(b"hello").hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  ./set/a.txt\n")
    assert verified_path("set/a.txt", tmp_path).read_text() == "hello"
    (tmp_path / "set" / "a.txt").write_text("tampered")
    with pytest.raises(ValueError, match="does not match its SHA-256"):
        verified_path("set/a.txt", tmp_path)
    with pytest.raises(ValueError, match="not listed"):
        verified_path("set/b.txt", tmp_path)
    with pytest.raises(ValueError, match="data_dir"):
        verified_path("set/a.txt", tmp_path / "missing")


def test_polyphonic_loader_reads_the_standard_splits():
    data = polyphonic("jsb")
    assert [split[0].shape[0] for split in (data.train, data.valid, data.test)] == [229, 76, 77]
    assert data.obs_dim == 88
    x, mask = data.train
    assert set(x.unique().tolist()) <= {0.0, 1.0} and torch.all(x[~mask] == 0)
    assert data.binary


def test_polyphonic_training_chunks_keep_every_step_and_leave_test_whole():
    whole, chunked = polyphonic("piano"), polyphonic("piano", train_chunk=200, max_sequences=5)
    assert chunked.train[0].shape[1] == 200 and chunked.test[0].shape[0] == 5
    assert int(chunked.train[1].sum()) == int(whole.train[1][:5].sum())
    torch.testing.assert_close(chunked.test[0], whole.test[0][:5, : chunked.test[0].shape[1]])
    with pytest.raises(ValueError, match="train_chunk"):
        polyphonic("jsb", train_chunk=0)


def test_swimmer_loader_standardises_by_the_training_split():
    data = swimmer()
    assert [s[0].shape for s in (data.train, data.valid, data.test)] == [(25, 100, 5)] * 3
    torch.testing.assert_close(data.train[0].mean((0, 1)), torch.zeros(5), atol=1e-5, rtol=0)
    torch.testing.assert_close(data.train[0].std((0, 1)), torch.ones(5), atol=1e-5, rtol=0)
    assert not data.binary
    with pytest.raises(ValueError, match="test must be one of"):
        swimmer(test="0.9")


def test_quick_demo_writes_a_complete_run_folder_and_evaluate_reuses_it(tmp_path, capsys):
    root = tmp_path / "demo"
    assert cli.main(["demo", "--quick", "--device", "cpu", "--run-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "smc-200" in out
    assert "\nlast_step_mse " in out and '"last_step_mse"' not in out  # the PF-RNN demo prints a table, not JSON
    summary = out[out.index("\nSummary: ") :]  # last, on one screen: figures with units, pictures, wall time
    assert len(summary.splitlines()) <= 20 and "cells² (squared distance at the last step)" in summary
    assert json.loads((root / "summary.json").read_text())["demos"].keys() == set(registry.DEMOS)
    assert "step/s" not in out  # no progress bar redrawn into the children's logs
    assert not list(root.glob("*/.lock"))  # a finished run keeps no lock file
    assert (root / "pfrnn-demo" / "plots" / "belief.png").is_file()
    _check_srnn_demo(root / "srnn-demo")
    _check_psrnn_demo(root / "psrnn-demo")
    _check_smct_demo(root / "smct-demo")
    run = root / "lgssm-demo"
    for name in [
        "config.json",
        "metrics.jsonl",
        "metrics.json",
        "metrics.md",
        "predictive.nc",
        "checkpoints/last.pt",
        "checkpoints/best.pt",
        "plots/learning_curve.png",
        "plots/pit_ecdf.png",
        "plots/coverage.png",
        "plots/predictive_bands.png",
        "plots/particles.png",
    ]:
        assert (run / name).is_file(), name
    metrics = json.loads((run / "metrics.json").read_text())
    loglik = metrics["loglik"]
    assert set(loglik) == {"exact", "exact (true parameters)", "elbo", "iwae-20", "smc-200"}
    assert loglik["elbo"]["per_step"] < loglik["iwae-20"]["per_step"] < loglik["exact"]["per_step"] + 0.01
    assert abs(loglik["smc-200"]["per_sequence"] - loglik["exact"]["per_sequence"]) < 0.5
    assert 0.8 < metrics["calibration"]["coverage_0.9"] < 0.97
    # a second train into the same folder is refused; evaluate re-reads it
    assert cli.main(["train", "lgssm-demo", "--run-dir", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    # resuming with other data is refused before anything is written
    saved = (run / "config.json").read_text()
    assert cli.main(["train", "lgssm-demo", "--run-dir", str(run), "--resume", "--set", "data.num_train=7"]) == 2
    assert "differs from the one saved" in capsys.readouterr().err and (run / "config.json").read_text() == saved
    before = (run / "metrics.json").read_text()
    assert cli.main(["evaluate", str(run), "--set", "estimators=['exact']", "--device", "cpu"]) == 0
    assert (run / "metrics.json").read_text() == before  # the run's own outputs are never overwritten
    (evaluation,) = (run / "evaluations").iterdir()  # evaluate writes a folder of its own
    again = json.loads((evaluation / "metrics.json").read_text())["loglik"]
    assert set(again) == {"exact", "exact (true parameters)"} and again["exact"] == loglik["exact"]


def _check_srnn_demo(run):
    """The SRNN part of the demo: bounds, note calibration, piano rolls, generated music."""
    for name in [
        "metrics.json",
        "checkpoints/best.pt",
        "plots/reliability.png",
        "plots/test_piano_roll.png",
        "generated/continuation.png",
        "generated/continuation.mid",
        "generated/sample.png",
    ]:
        assert (run / name).is_file(), name
    metrics = json.loads((run / "metrics.json").read_text())
    per_step = {k: v["per_step"] for k, v in metrics["loglik"].items()}
    assert set(per_step) == {"elbo", "iwae-20", "smc-200"}
    assert all(-30 < v < 0 for v in per_step.values())
    assert 0 < metrics["calibration"]["brier"] < 0.25  # better than a constant 0.5
    assert abs(metrics["calibration"]["frequency_of_ones"] - 0.044) < 0.01  # JSB: about 4 of 88 keys sound


def _check_psrnn_demo(run):
    """The PSRNN part of the demo: MSE before and after BPTT, the monitor's curve, calibration."""
    metrics = json.loads((run / "metrics.json").read_text())
    predictions = json.loads((run / "predictions.json").read_text())
    assert set(metrics["loglik"]) == {"exact"}
    assert metrics["mse"] == pytest.approx(predictions["final_mse"])
    assert metrics["mse"] < 0.5  # standardised data: far better than predicting the mean
    assert len(predictions["observed"]) == len(predictions["final"]) == len(predictions["initial"]) == 100
    curve = [r["monitor"]["test_mse"] for r in read_jsonl(run / "metrics.jsonl")]
    assert len(curve) == 3 and all(v > 0 for v in curve)
    assert 0.5 < metrics["calibration"]["coverage_0.9"] <= 1.0
    assert (run / "plots" / "pit_ecdf.png").is_file()


def _check_smct_demo(run):
    """The SMC Transformer part: the SMC bound beside the true model's likelihood, the paper's figures."""
    metrics = json.loads((run / "metrics.json").read_text())
    loglik = {k: v["per_step"] for k, v in metrics["loglik"].items()}
    assert set(loglik) == {"smc-200", "exact (true parameters)"}
    assert loglik["smc-200"] < loglik["exact (true parameters)"] + 0.05  # no model beats the truth by much
    truth = metrics["truth_metrics"]
    assert truth["true_predictive_mse"] == pytest.approx(0.5)  # Model I: sigma^2, from the true law
    assert truth["predictive_mse"] > 0.45 and 0 < truth["share_in_80"] <= 1
    assert (run / "predictive.nc").is_file() and (run / "plots" / "pit_ecdf.png").is_file()


def test_air_quality_loader_interpolates_gaps_and_splits_in_time_order():
    data = air_quality(window=50)
    for x, mask in (data.train, data.valid, data.test):
        assert x.shape[1:] == (50, 5) and mask.all() and torch.isfinite(x).all()
    sizes = [len(split[0]) for split in (data.train, data.valid, data.test)]
    assert sum(sizes) == 9357 // 50 and sizes[0] > sizes[2] > 0
    torch.testing.assert_close(data.train[0].mean((0, 1)), torch.zeros(5), atol=1e-4, rtol=0)
    assert float(data.train[0].min()) > -10  # no -200 sentinel left
    with pytest.raises(ValueError, match="fractions"):
        air_quality(fractions=(0.9, 0.2))


def test_fold_means_average_the_folds_of_each_group_by_hand():
    summary = {
        "A / fold 0": {"test_mse": 1.0, "truth_share_in_80": 0.7, "num_parameters": 10},
        "A / fold 1": {"test_mse": 3.0, "truth_share_in_80": 0.9, "num_parameters": 10},
        "A / fold 2": {"test_mse": 2.0, "truth_share_in_80": None, "num_parameters": 10},
        "B / fold 0": {"test_mse": 5.0},  # a group of one: no mean
        "C": {"test_mse": 7.0},
    }
    means = compare.fold_means(summary)
    assert set(means) == {"A"}
    assert set(means["A"]) == {"test_mse", "num_parameters"}  # a column one fold lacks is left out
    mean, sd = means["A"]["test_mse"]
    assert mean == pytest.approx(2.0) and sd == pytest.approx(1.0)  # sample sd of 1, 3, 2
    assert means["A"]["num_parameters"] == pytest.approx((10.0, 0.0))


def test_suite_trains_its_members_compares_them_and_keeps_finished_runs(tmp_path, capsys):
    members = (("KF", "kf-swimmer", ()), ("GRU", "recurrent-swimmer", ('model.cell="gru"',)))
    quick = ["train.epochs=2", "evaluate.predictive_samples=20", 'device="cpu"']
    summary = compare.run_suite(members, tmp_path, quick)
    assert set(summary) == {"KF", "GRU"}
    for label, row in summary.items():
        assert row["test_mse"] > 0 and row["initial_test_mse"] > 0 and row["num_parameters"] > 0
        loglik = json.loads((compare.member_folder(tmp_path, label) / "metrics.json").read_text())["loglik"]
        assert loglik and all(row[f"{name}_per_step"] == value["per_step"] for name, value in loglik.items())
    for name in ("comparison.md", "comparison.json", "mse_vs_epoch.png", "predictions.png"):
        assert (tmp_path / name).is_file(), name
    assert "| KF |" in (tmp_path / "comparison.md").read_text()
    capsys.readouterr()
    compare.run_suite(members, tmp_path, quick)
    assert capsys.readouterr().out.count("finished earlier") == 2
    assert cli.main(["compare", f"kf={tmp_path / 'kf'}", "--out", str(tmp_path / "again")]) == 0
    assert cli.main(["compare", "no-label-here", "--out", str(tmp_path / "x")]) == 2
    assert cli.main(["suite", "no-such-suite"]) == 2


def test_suite_runs_supervised_members_and_tabulates_their_test_metrics(tmp_path):
    tiny = [
        "data.num_train=16",
        "data.num_valid=8",
        "data.num_test=8",
        "data.steps=6",
        "model.hidden_size=8",
        "model.encoder_size=8",
        "train.epochs=1",
        "train.batch_size=8",
        'device="cpu"',
    ]
    members = (("PF-LSTM-P3", "pfrnn-maze10", ("model.num_particles=3",)), ("LSTM", "rnn-maze10", ()))
    with pytest.raises(ValueError, match="only must name members"):
        compare.run_suite(members, tmp_path, tiny, only=["GRU"])
    partial = compare.run_suite(members, tmp_path, tiny, only=["LSTM"])  # one process's share of the suite
    assert set(partial) == {"LSTM"} and not compare.member_folder(tmp_path, "PF-LSTM-P3").exists()
    summary = compare.run_suite(members, tmp_path, tiny)
    for label, particles in (("PF-LSTM-P3", 3), ("LSTM", 1)):
        metrics = json.loads((compare.member_folder(tmp_path, label) / "metrics.json").read_text())
        assert summary[label]["last_step_mse"] == metrics["last_step_mse"] > 0
        assert summary[label]["num_particles"] == particles and summary[label]["epochs"] == 1
    table = (tmp_path / "comparison.md").read_text()
    assert "last step mse" in table and "| PF-LSTM-P3 |" in table and "| LSTM |" in table


def test_evaluation_in_length_sorted_batches_keeps_the_test_order():
    """Probabilities computed in batches of similar length go back to their own sequences."""
    torch.manual_seed(0)
    mask = torch.arange(12) < torch.tensor([[3], [12], [7], [1], [9], [5], [11]])
    x = (torch.rand(7, 12, 4) < 0.3).float() * mask.unsqueeze(-1)
    data = ExperimentData(train=(x, mask), valid=(x, mask), test=(x, mask), description="random rolls", binary=True)
    model = GRUBaseline(4, rnn_dim=8, hidden_dim=8)
    with torch.no_grad():  # the whole padded set at once
        brier = float(((model.predictive(x, mask, 0).mean - x)[mask] ** 2).mean())
        exact = float(model.log_likelihood(x, mask).sum() / mask.sum())
    for batch_size in (2, 64):
        metrics = evaluate_model(model, data, evaluation_options({"estimators": ["exact"], "batch_size": batch_size}))
        assert metrics["calibration"]["brier"] == pytest.approx(brier, rel=1e-5)
        assert metrics["loglik"]["exact"]["per_step"] == pytest.approx(exact, rel=1e-5)


def test_estimators_a_model_cannot_serve_are_reported_with_its_reason():
    torch.manual_seed(0)
    x, mask = torch.randn(4, 6, 2), torch.ones(4, 6, dtype=torch.bool)
    data = ExperimentData(train=(x, mask), valid=(x, mask), test=(x, mask), description="noise")
    model = GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4)
    metrics = evaluate_model(model, data, evaluation_options({"predictive_samples": 5}))  # all four requested
    assert set(metrics["loglik"]) == {"exact"}
    assert metrics["skipped_estimators"] == {
        name: GRUBaseline.limitations[capability]
        for name, capability in (("elbo", "latent"), ("iwae", "latent"), ("smc", "particles"))
    }
    assert "not estimated: smc (no latent state to filter" in format_table(metrics)

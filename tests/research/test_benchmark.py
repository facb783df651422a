"""The benchmark script still runs (its quick configuration; timings are not checked)."""

import json

import pytest

from ppl_models.experiments.benchmarks import bootstrap_filter


def test_quick_benchmark_runs_and_reports_errors_against_the_kalman_value(tmp_path, capsys):
    out = tmp_path / "bench.json"
    bootstrap_filter.main(["--quick", "--skip-particles", "--skip-pyro", "--skip-memory", "--out", str(out)])
    result = json.loads(out.read_text())
    rows = result["compare"]
    assert set(rows) == {"ours float32", "ours float64"}
    for row in rows.values():
        assert row["best_s"] > 0 and abs(row["error_mean"]) < 5.0  # T = 50, K = 100: a few nats at most
    assert "Scaling with K" in capsys.readouterr().out


def test_quick_srnn_step_benchmark_runs_and_its_torch_elbo_matches_ours(tmp_path):
    import pyro
    import torch

    from ppl_models import SRNN
    from ppl_models.experiments.benchmarks import srnn_step
    from ppl_models.inference.objectives import ELBO

    out = tmp_path / "srnn.json"
    srnn_step.main(["--quick", "--out", str(out)])
    rows = json.loads(out.read_text())["sizes"]["quick"]["methods"]
    assert set(rows) == {"torch", "ours", "pyro svi"} and all(r["best_s"] > 0 for r in rows.values())
    # the hand-written torch ELBO is the same estimator: identical on the same random draws
    model = SRNN(88, latent_dim=4, rnn_dim=8, hidden_dim=8)
    x = (torch.rand(3, 7, 88) < 0.2).float()
    pyro.set_rng_seed(1)
    direct = srnn_step.direct_elbo(model, x)
    pyro.set_rng_seed(1)
    torch.testing.assert_close(ELBO(model, mean_field=True)(x).bound, direct)


def test_quick_psrnn_benchmark_runs_and_writes_its_results(tmp_path):
    from ppl_models.experiments.benchmarks import psrnn_speed

    out = tmp_path / "psrnn_speed.json"
    assert psrnn_speed.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["two_stage_regression"]["median_s"] > 0
    assert set(results["training_step"]["models"]) == {"psrnn", "psrnn rank 20", "gru"}
    assert all(row["sequence_steps_per_s"] > 0 for row in results["training_step"]["models"].values())
    assert results["commands"] == [f"python -m ppl_models.experiments.benchmarks.psrnn_speed --quick --out {out}"]
    assert results["seeds"] == [0]


def test_quick_pf_rnn_benchmark_runs_and_writes_its_results(tmp_path):
    from ppl_models.experiments.benchmarks import pf_rnn

    out = tmp_path / "pf_rnn.json"
    assert pf_rnn.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    rows = results["rows"]
    assert set(rows) == {
        "pf-lstm layer",
        "pf-gru layer",
        "lstmcell loop B*K",
        "grucell loop B*K",
        "nn.LSTM B*K",
        "nn.GRU B*K",
        "pf-lstm training step",
        "pf-gru training step",
    }
    assert rows["pf-gru layer"]["reference"] == "grucell loop B*K"
    assert rows["grucell loop B*K"]["ratio_to_reference"] == 1
    lstm_step = rows["pf-lstm training step"]
    assert lstm_step["epoch_s_extrapolated"] == lstm_step["median_s"] * results["paper_epoch"]["steps_per_epoch"]
    assert len(results["scaling"]["seconds_by_steps"]) == 3
    assert "peak_growth_mb" in results["memory"]["pf-lstm training step"]


def test_quick_smc_transformer_benchmark_runs_and_writes_its_results(tmp_path):
    from ppl_models.experiments.benchmarks import smc_transformer_speed

    out = tmp_path / "smct.json"
    assert smc_transformer_speed.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert set(results["training"]) == {"M=10", "M=30"} and set(results["predictive"]) == {"M=10", "M=30"}
    assert all(row["sequences_per_s"] > 0 for row in results["training"].values())
    assert len(results["scaling"]["seconds_by_particles"]) == 4


def test_cuda_graph_benchmark_needs_a_gpu_and_its_filter_rows_run_on_cpu(capsys):
    """Without CUDA the command stops with exit status 2; its filter rows run eagerly (the graph's fallback)."""
    import pytest
    import torch

    from ppl_models.experiments.benchmarks import cuda_graph_speed

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as stop:
            cuda_graph_speed.main(["--quick"])
        assert stop.value.code == 2 and "CUDA" in capsys.readouterr().err
    (row,) = cuda_graph_speed.filter_rows([50], steps=20, batch=3, repeats=1, device="cpu")
    assert row["num_particles"] == 50 and row["graph_ms_per_step"] > 0
    assert abs(row["eager_mean_error"]) < 3 and abs(row["graph_mean_error"]) < 3


def test_quick_speed_targets_report_every_ratio_beside_its_target(tmp_path, capsys):
    from ppl_models.experiments.benchmarks import speed_targets

    out = tmp_path / "targets.json"
    assert speed_targets.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    rows = results["pf_rnn"]["rows"]
    ratios = results["ratios"]
    # each ratio is the quotient of the medians it names (computed independently here)
    assert (
        ratios["pf-gru layer / grucell loop"] == rows["pf-gru layer"]["median_s"] / rows["grucell loop B*K"]["median_s"]
    )
    assert ratios["srnn step / hand-written torch"] == results["srnn_step"]["methods"]["ours"]["ratio_to_torch"]
    filters = results["bootstrap_filter"]["rows"]
    assert ratios["bootstrap filter / hand-written torch"] == (
        filters["ours float32"]["median_s"] / filters["hand-written torch float32"]["median_s"]
    )
    assert set(results["targets"]) <= set(ratios) and "target <= 1.5" in capsys.readouterr().out


def test_manifest_lists_engine_files_that_differ_from_the_commit(tmp_path, monkeypatch):
    """Without git history the engine files are checked against ``git ls-files -s`` blob hashes (git's own
    ``sha1("blob <size>\\0" + bytes)``, computed here by hand for a two-file tree)."""
    import hashlib

    from ppl_models.experiments.claims import provenance

    (tmp_path / "inference").mkdir()
    (tmp_path / "ppl_models").mkdir()
    (tmp_path / "inference" / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "ppl_models" / "b.py").write_bytes(b"y = 2\n")
    blob = hashlib.sha1(b"blob 6\0x = 1\n").hexdigest()
    manifest = tmp_path / "manifest.txt"
    manifest.write_text(
        f"commit abc123\n100644 {blob} 0\tinference/a.py\n100644 {'0' * 40} 0\tppl_models/b.py\n"
        f"100644 {blob} 0\tppl_models/gone.py\n"
    )
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("PPL_MODELS_MANIFEST", str(manifest))
    state = provenance.git_state()
    assert state["git_commit"] == "abc123"
    assert state["git_uncommitted_engine_files"] == [" M ppl_models/b.py", " D ppl_models/gone.py"]


@pytest.mark.slow
def test_quick_compile_ab_benchmark_writes_both_rows_of_each_cell(tmp_path):
    from ppl_models.experiments.benchmarks import compile_ab

    out = tmp_path / "ab.json"
    assert compile_ab.main(["--quick", "--threads", "1", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert set(results["comparisons"]) == {"pf-lstm", "pf-gru"}
    assert {"pf-lstm training step", "pf-lstm training step compiled", "lstmcell loop B*K"} <= set(results["rows"])


def test_the_hand_written_torch_filter_estimates_the_kalman_evidence():
    """The floor the engine is timed against is the same algorithm: its log-evidence is the exact Kalman value up to
    the particle noise (K = 20,000, 8 sequences of 50 steps: an error sd of a few hundredths)."""
    from ppl_models.experiments.benchmarks import lgssm_problem, reference_filters

    data = lgssm_problem.make_data(8, 50, 0)
    run, finish = reference_filters.prepare_torch(20_000, data, seed=0)
    row = finish([0.0], run())
    assert abs(row["error_mean"]) < 0.05 and row["error_max_abs"] < 0.15


def test_filter_step_parts_are_disjoint_slices_of_the_run_and_the_filter_is_left_as_it_was(tmp_path):
    from ppl_models.experiments.benchmarks import filter_step_parts
    from ppl_models.inference import particle_filter
    from ppl_models.inference.state_space import MarkovStateSpace

    before = (MarkovStateSpace.step, particle_filter._Sweep.resample, particle_filter._Sweep.weigh)
    out = tmp_path / "parts.json"
    assert filter_step_parts.main(["--quick", "--repeats", "2", "--out", str(out)]) == 0
    assert (MarkovStateSpace.step, particle_filter._Sweep.resample, particle_filter._Sweep.weigh) == before
    rows = json.loads(out.read_text())["rows"]
    parts = [name for name, _, _ in filter_step_parts.PARTS]
    for run in range(2):
        timed = [rows[name]["times_s"][run] for name in parts]
        assert all(seconds > 0 for seconds in timed)
        assert sum(timed) < rows["whole run"]["times_s"][run]  # the parts never overlap

"""The closed-form calibration of ppl_models.experiments.studies.psrnn_calibration, against hand counts."""

import pytest
import torch

from ppl_models.experiments.studies.psrnn_calibration import calibration_from_pit, main, pit


def test_coverage_pit_ks_and_mse_by_hand():
    # standardised errors 0.1, -0.5, 1.0, 1.5, -2.5 (scale 2): central-interval half-widths are
    # 0.674 (50%), 1.282 (80%), 1.960 (95%) standard deviations
    z = torch.tensor([0.1, -0.5, 1.0, 1.5, -2.5])
    x = 2 * z
    out = calibration_from_pit(pit(torch.distributions.Normal(torch.zeros(5), 2.0), x), x)
    assert out["coverage_0.5"] == pytest.approx(2 / 5)
    assert out["coverage_0.8"] == pytest.approx(3 / 5)
    assert out["coverage_0.95"] == pytest.approx(4 / 5)
    assert out["mse"] == pytest.approx(float((4 * z**2).mean()))
    # PIT values Phi(z) sorted: 0.0062, 0.3085, 0.5398, 0.8413, 0.9332; KS = max over i of
    # i/5 - p_i (largest 0.1938) and p_i - (i-1)/5 (largest 0.8413 - 0.6 = 0.2413)
    assert out["pit_ks"] == pytest.approx(0.2413, abs=1e-4)


def test_pit_of_another_distribution_is_a_type_error():
    with pytest.raises(TypeError, match="must have a cdf"):
        pit(torch.distributions.Beta(2.0, 2.0), torch.full((3,), 0.5))


def test_a_run_that_is_not_a_folder_is_one_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as error:
        main([f"A={tmp_path}"])
    assert error.value.code == 2
    assert "LABEL=RUN_DIR" in capsys.readouterr().err


def _fake_run(folder, mse, valid_bounds, test_curve):
    import json

    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"mse": mse, "calibration": {"coverage_0.5": 0.5, "pit_ks": 0.1}}))
    (folder / "predictions.json").write_text(json.dumps({"initial_mse": {"test_mse": 1.0}}))
    rows = [
        {"epoch": e + 1, "valid_bound_per_step": v, "monitor": {"test_mse": t}}
        for e, (v, t) in enumerate(zip(valid_bounds, test_curve))
    ]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_seed_summary_by_hand(tmp_path):
    from ppl_models.experiments.studies.psrnn_seeds import summarize

    _fake_run(tmp_path / "a-s0", 1.0, [0.1, 0.3, 0.2], [0.9, 0.5, 0.7])
    _fake_run(tmp_path / "a-s1", 3.0, [0.5, 0.1, 0.0], [0.4, 0.6, 0.8])
    (tmp_path / "a-s2").mkdir()  # unfinished: no metrics.json
    summary = summarize(tmp_path)
    assert list(summary) == ["a"]
    assert summary["a"]["mean_test_mse"] == 2.0
    assert summary["a"]["sd_test_mse"] == pytest.approx(2**0.5)  # sample sd of 1 and 3
    assert [r["best_epoch"] for r in summary["a"]["runs"]] == [2, 1]
    assert [r["lowest_test_mse_seen"] for r in summary["a"]["runs"]] == [0.5, 0.4]


def test_seed_summary_at_a_shorter_budget_reads_the_logs_by_hand(tmp_path):
    from ppl_models.experiments.studies.psrnn_seeds import run_summary, summarize

    _fake_run(tmp_path / "a-s0", 1.0, [0.1, 0.3, 0.2], [0.9, 0.5, 0.7])
    _fake_run(tmp_path / "a-s1", 3.0, [0.5, 0.1, 0.6], [0.4, 0.6, 0.8])
    # first 2 epochs: best validation at epoch 2 (test 0.5) and epoch 1 (test 0.4)
    summary = summarize(tmp_path, epochs=2)
    assert [r["test_mse"] for r in summary["a"]["runs"]] == [0.5, 0.4]
    assert [r["last_test_mse"] for r in summary["a"]["runs"]] == [0.5, 0.6]
    assert summary["a"]["mean_test_mse"] == pytest.approx(0.45)
    assert summarize(tmp_path, epochs=4) == {}
    with pytest.raises(ValueError, match="fewer than epochs=4"):
        run_summary(tmp_path / "a-s0", 4)

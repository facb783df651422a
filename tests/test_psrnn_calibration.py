"""The closed-form Gaussian calibration of experiments.psrnn_calibration, against hand counts."""

import pytest
import torch

from experiments.psrnn_calibration import gaussian_calibration, main


def test_coverage_pit_ks_and_mse_by_hand():
    # standardised errors 0.1, -0.5, 1.0, 1.5, -2.5 (scale 2): central-interval half-widths are
    # 0.674 (50%), 1.282 (80%), 1.960 (95%) standard deviations
    z = torch.tensor([0.1, -0.5, 1.0, 1.5, -2.5])
    x = (2 * z).reshape(1, 5, 1)
    mask = torch.tensor([[True] * 5])
    out = gaussian_calibration(torch.zeros_like(x), torch.tensor([2.0]), x, mask)
    assert out["coverage_0.5"] == pytest.approx(2 / 5)
    assert out["coverage_0.8"] == pytest.approx(3 / 5)
    assert out["coverage_0.95"] == pytest.approx(4 / 5)
    assert out["mse"] == pytest.approx(float((4 * z**2).mean()))
    # PIT values Phi(z) sorted: 0.0062, 0.3085, 0.5398, 0.8413, 0.9332; KS = max over i of
    # i/5 - p_i (largest 0.1938) and p_i - (i-1)/5 (largest 0.8413 - 0.6 = 0.2413)
    assert out["pit_ks"] == pytest.approx(0.2413, abs=1e-4)


def test_padding_is_ignored():
    x = torch.tensor([[[0.0], [100.0]]])
    out = gaussian_calibration(torch.zeros_like(x), torch.tensor([1.0]), x, torch.tensor([[True, False]]))
    assert out["coverage_0.5"] == 1.0 and out["mse"] == 0.0


def test_a_run_that_is_not_a_folder_is_one_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as error:
        main([f"A={tmp_path}"])
    assert error.value.code == 2
    assert "LABEL=RUN_DIR" in capsys.readouterr().err

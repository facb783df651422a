"""The pure helpers of ppl_models.experiments.studies.pfrnn_official (the official code itself is not run here)."""

import pickle

import pytest
import torch

from ppl_models.experiments.studies.pfrnn_official import (
    apply_edits,
    constant_last_step_mse,
    from_official,
    mean_sd,
    official_curve,
    official_dataset,
)


def _tiny():
    """One 2-step trajectory: inputs (dx, dy, dheading, 5 distances), normalised poses (x/10, y/10, heading/2pi)."""
    x = torch.tensor([[[0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                       [0.2, -0.1, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5]]])  # fmt: skip
    y = torch.tensor([[[0.25, 0.5, 0.25], [0.27, 0.49, 0.75]]])
    return x, y


def test_official_rows_hold_pose_in_cells_and_degrees_then_inputs():
    x, y = _tiny()
    data = official_dataset(x, y, 10)
    assert len(data["trajs"]) == 1 and data["trajs"][0].shape == (2, 11)
    first, second = data["trajs"][0]
    # by hand: (0.25, 0.5) of a 10-cell maze is (2.5, 5.0) cells; a quarter turn is 90 degrees
    assert first.tolist() == pytest.approx([2.5, 5.0, 90.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert second.tolist() == pytest.approx([2.7, 4.9, 270.0, 0.2, -0.1, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5])


def test_official_map_is_the_paper_layout_top_row_first():
    data = official_dataset(*_tiny(), 10)
    assert data["map"].shape == (10, 10)
    assert data["map"][0].tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 2, 0]
    assert data["map"][3].tolist() == [0, 1, 1, 2, 0, 0, 2, 1, 1, 0]


def test_official_format_round_trips_through_pickle():
    x, y = _tiny()
    back_x, back_y = from_official(pickle.loads(pickle.dumps(official_dataset(x, y, 10))), 10)
    torch.testing.assert_close(back_x, x)
    torch.testing.assert_close(back_y, y)


def test_official_dataset_refuses_wrong_shapes():
    x, y = _tiny()
    with pytest.raises(ValueError, match=r"x must be \[n, T, 8\]"):
        official_dataset(x[..., :5], y, 10)
    with pytest.raises(ValueError, match=r"y \[n, T, 3\]"):
        official_dataset(x, y[..., :2], 10)


def test_apply_edits_replaces_once_and_refuses_missing_or_repeated_text(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 1\n")
    apply_edits(tmp_path, [("a.py", "x = 1", "x = 2", "why")])
    assert (tmp_path / "a.py").read_text() == "x = 2\ny = 1\n"
    with pytest.raises(ValueError, match="found it 0 times"):
        apply_edits(tmp_path, [("a.py", "z = 1", "z = 2", "why")])
    with pytest.raises(ValueError, match="found it 2 times"):
        apply_edits(tmp_path, [("a.py", " = ", " == ", "why")])


def test_official_curve_pairs_each_epochs_validation_scalars():
    records = [{"tag": "start", "value": 0.0, "step": 0, "time": 100.0},
               {"tag": "train/loss", "value": 30.0, "step": 2, "time": 105.0},
               {"tag": "eval/loss_last", "value": 3.0, "step": 2, "time": 110.0},
               {"tag": "eval/loss", "value": 20.0, "step": 2, "time": 110.5},
               {"tag": "eval/loss_last", "value": 2.0, "step": 4, "time": 130.0},
               {"tag": "eval/loss", "value": 18.0, "step": 4, "time": 130.25}]  # fmt: skip
    assert official_curve(records) == [
        {"epoch": 1, "valid_last_step_mse": 3.0, "valid_loss": 20.0, "seconds": 10.5},
        {"epoch": 2, "valid_last_step_mse": 2.0, "valid_loss": 18.0, "seconds": 19.75}]


def test_mean_sd_is_the_sample_mean_and_sd():
    assert mean_sd([1.0, 2.0, 3.0]) == {"mean": 2.0, "sd": 1.0, "n": 3}
    assert mean_sd([4.0]) == {"mean": 4.0, "sd": 0.0, "n": 1}


def test_constant_predictor_error_by_hand():
    train_y = torch.tensor([[[0.0, 0.0, 0.0], [0.1, 0.2, 0.0]], [[0.0, 0.0, 0.0], [0.3, 0.4, 0.0]]])
    y = torch.tensor([[[0.9, 0.9, 0.5], [0.4, 0.3, 0.5]]])
    # training mean last position (2, 3) cells; truth (4, 3): squared errors 4 and 0, mean 2
    assert constant_last_step_mse(train_y, y, 10) == pytest.approx(2.0)

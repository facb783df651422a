"""The robot localization task of the PF-RNN paper and the supervised experiment runner."""

import json
import math

import numpy as np
import pytest
import torch

from ppl_models.experiments import cli
from ppl_models.experiments.tasks.localization import (
    OBSERVATION_NOISE,
    evaluate_localization,
    localization_data,
    simulate,
    symmetric_maze,
)
from ppl_models.pf_rnn import PFRNNPredictor


def test_maze_is_symmetric_and_landmarks_sit_on_half_the_obstacles():
    maze = symmetric_maze(10, np.random.default_rng(0))
    assert np.array_equal(maze.blocked, maze.blocked[::-1]) and np.array_equal(maze.blocked, maze.blocked[:, ::-1])
    obstacles = np.argwhere(maze.blocked)[:, ::-1]  # (x, y) lower-left corners
    corners = {tuple(p) for p in maze.landmarks}
    with_landmarks = [o for o in obstacles if all((o[0] + dx, o[1] + dy) in corners for dx in (0, 1) for dy in (0, 1))]
    assert len(with_landmarks) >= len(obstacles) // 2


def test_trajectories_follow_the_papers_motion_and_sensing():
    rng = np.random.default_rng(1)
    maze = symmetric_maze(10, rng)
    x, y = simulate(maze, 200, 30, rng, observation_noise=0.0)
    assert x.shape == (200, 30, 8) and y.shape == (200, 30, 4)
    assert maze.is_free(y[..., :2]).all()  # never inside an obstacle or outside
    step = np.linalg.norm(np.diff(y[..., :2], axis=1), axis=-1)
    assert np.allclose(step, x[:, 1:, 0])  # the action's distance is the distance moved
    moved = x[:, 1:, 0][x[:, 1:, 0] > 0]
    assert abs(moved.mean() - 0.2) < 0.01 and abs(moved.std() - 0.05) < 0.01
    heading = np.arctan2(y[..., 3], y[..., 2])
    turn = np.angle(np.exp(1j * (heading[:, 1:] - heading[:, :-1])))
    assert np.allclose(np.sin(turn), x[:, 1:, 1], atol=1e-9) and np.allclose(np.cos(turn), x[:, 1:, 2], atol=1e-9)
    # noiseless observations: sorted distances to the five nearest landmarks
    gaps = np.linalg.norm(y[0, :, None, :2] - maze.landmarks[None], axis=-1)
    assert np.allclose(x[0, :, 3:], np.sort(gaps, axis=1)[:, :5])
    assert np.allclose(np.linalg.norm(y[..., 2:], axis=-1), 1.0)


def test_observation_noise_has_the_papers_scale():
    assert OBSERVATION_NOISE == {10: 0.1, 18: 0.1, 27: 1.0}
    rng = np.random.default_rng(2)
    maze = symmetric_maze(18, rng)
    clean, _ = simulate(maze, 50, 5, np.random.default_rng(3), observation_noise=0.0)
    noisy, _ = simulate(maze, 50, 5, np.random.default_rng(3), observation_noise=0.1)
    assert abs((noisy[..., 3:] - clean[..., 3:]).std() - 0.1) < 0.01


def test_data_splits_share_one_maze_and_are_reproducible():
    maze, splits = localization_data(10, steps=12, num_train=20, num_valid=5, num_test=7, seed=4)
    again, splits2 = localization_data(10, steps=12, num_train=20, num_valid=5, num_test=7, seed=4)
    assert np.array_equal(maze.blocked, again.blocked)
    assert [len(splits[k][0]) for k in ("train", "valid", "test")] == [20, 5, 7]
    assert torch.equal(splits["test"][2], splits2["test"][2])
    with pytest.raises(ValueError, match="maze_size"):
        localization_data(0)


def test_supervised_experiment_trains_resumes_and_plots(tmp_path, capsys):
    def sets(*items):
        return [arg for item in items for arg in ("--set", item)]

    common = (
        "data.num_train=32",
        "data.num_valid=8",
        "data.num_test=8",
        "data.steps=10",
        "model.hidden_size=8",
        "model.encoder_size=8",
        "train.batch_size=16",
    )
    small = sets(*common, "model.num_particles=4")
    run = tmp_path / "run"
    assert cli.main(["train", "pfrnn-maze10", "--run-dir", str(run), *small, "--set", "train.epochs=1"]) == 0
    assert cli.main(["train", "pfrnn-maze10", "--run-dir", str(run), *small, "--epochs", "2", "--resume"]) == 0
    # train.epochs may change on resume, by --epochs (above); the model may not
    assert (
        cli.main(
            [
                "train",
                "pfrnn-maze10",
                "--run-dir",
                str(run),
                *small,
                "--set",
                "train.epochs=2",
                "--set",
                "model.hidden_size=9",
                "--resume",
            ]
        )
        != 0
    )
    assert "(in ['model'])" in capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epochs"] == 2 and metrics["num_particles"] == 4 and math.isfinite(metrics["last_step_mse"])
    assert (run / "plots" / "belief.png").stat().st_size > 0
    assert (run / "plots" / "belief_over_time.png").stat().st_size > 0
    assert len(metrics["position_mse_by_step"]) == len(metrics["particle_spread_by_step"]) == 10
    assert cli.main(["train", "pfrnn-maze10", "--run-dir", str(run), *small]) != 0
    assert "already holds a run" in capsys.readouterr().err
    baseline = tmp_path / "lstm"
    assert cli.main(["train", "rnn-maze10", "--run-dir", str(baseline), *sets(*common, "train.epochs=1")]) == 0
    assert json.loads((baseline / "metrics.json").read_text())["num_particles"] == 1
    assert cli.main(["train", "pfrnn-maze10", "--run-dir", str(tmp_path / "x"), "--set", "bogus=1"]) != 0
    assert "unknown top-level" in capsys.readouterr().err


def test_particle_spread_is_zero_for_identical_particles_and_the_by_step_error_matches_the_last_step():
    torch.manual_seed(0)
    _, splits = localization_data(10, steps=6, num_train=4, num_valid=4, num_test=9)
    equal = PFRNNPredictor(
        8, 4, hidden_size=8, encoder_size=8, num_particles=3, stochastic=False, resampling="none", learn_scale=False
    )
    metrics = evaluate_localization(equal, splits["test"], device="cpu", batch_size=4)
    assert metrics["particle_spread_by_step"] == pytest.approx([0.0] * 6, abs=1e-5)
    assert metrics["position_mse_by_step"][-1] == pytest.approx(metrics["last_step_position_mse"])
    noisy = PFRNNPredictor(8, 4, hidden_size=8, encoder_size=8, num_particles=3, learn_scale=False)
    spread = evaluate_localization(noisy, splits["test"], device="cpu")["particle_spread_by_step"]
    assert all(value > 0 for value in spread[1:])

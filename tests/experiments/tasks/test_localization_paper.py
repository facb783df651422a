"""The PF-RNN paper's own localization protocol (task ``localization-paper``), its loss options and metric."""

import json
import math

import numpy as np
import pytest
import torch

from ppl_models.experiments import cli
from ppl_models.experiments.tasks.localization_paper import (
    LAYOUTS,
    evaluate_localization_paper,
    layout_grid,
    localization_paper_data,
    paper_maze,
    simulate_paper,
)
from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.pf_rnn import ParticleBelief, PFRNNPredictor


def test_the_10x10_layout_has_the_papers_blocks_and_beacons():
    maze = paper_maze(10)
    assert maze.blocked.sum() == 32  # 2 + 4 + 4 + 6 + 0 + 0 + 6 + 4 + 4 + 2 blocks, row by row
    # 16 beacon blocks: four vertical stacks of three (2 x 4 distinct corners each) and four lone ones (4 each)
    assert len(maze.landmarks) == 4 * 8 + 4 * 4
    beacons = {tuple(p) for p in maze.landmarks}
    # top row, second column: the block [1, 2] x [9, 10]; 4th row, 4th column: [3, 4] x [6, 7]
    assert {(1, 9), (2, 9), (1, 10), (2, 10), (3, 6), (4, 6), (3, 7), (4, 7)} <= beacons
    assert (3, 8) not in beacons  # corner of a plain wall block ("1" at row 2, column 4) only
    assert not maze.is_free(np.array([[1.5, 9.5], [3.5, 6.5], [3.5, 8.5]])).any()
    assert maze.is_free(np.array([[0.5, 9.5], [4.5, 4.5], [2.5, 9.5]])).all()


@pytest.mark.parametrize("size", sorted(LAYOUTS))
def test_layouts_are_symmetric_and_their_free_space_is_connected(size):
    grid = layout_grid(size)
    assert grid.shape == (size, size) and set(np.unique(grid)) == {0, 1, 2}
    assert np.array_equal(grid, grid[::-1]) and np.array_equal(grid, grid[:, ::-1])
    beacons = {tuple(p) for p in paper_maze(size).landmarks}
    assert beacons == {(size - x, y) for x, y in beacons} == {(x, size - y) for x, y in beacons}
    free = list(zip(*np.nonzero(grid == 0)))
    seen, frontier = {free[0]}, [free[0]]
    while frontier:  # flood fill over 4-neighbours
        r, c = frontier.pop()
        for cell in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= cell[0] < size and 0 <= cell[1] < size and grid[cell] == 0 and cell not in seen:
                seen.add(cell)
                frontier.append(cell)
    assert len(seen) == len(free)


def test_motion_follows_the_protocol():
    maze = paper_maze(10)
    x, poses = simulate_paper(maze, 300, 40, np.random.default_rng(0))
    assert x.shape == (300, 40, 8) and poses.shape == (300, 40, 3)
    assert maze.is_free(poses[..., :2]).all()  # never in a block nor off the map
    moves = np.diff(poses[..., :2], axis=1)
    assert np.allclose(x[:, 1:, :2], moves) and (x[:, 0, :3] == 0).all()  # world-frame (dx, dy)
    length = np.linalg.norm(moves, axis=-1)
    assert length.min() >= 0.18 - 1e-9 and length.max() <= 0.22 + 1e-9
    direction = np.degrees(np.arctan2(moves[..., 1], moves[..., 0])) % 360
    assert np.allclose(np.cos(np.radians(direction - poses[:, 1:, 2])), 1.0)  # moves along the new heading
    turn = (np.diff(poses[..., 2], axis=1) + 180) % 360 - 180
    assert np.allclose(np.radians(turn), x[:, 1:, 2])
    small = np.abs(turn) <= 3.02 + 1e-9  # the heading noise: uniform +-0.02 plus +-3 degrees
    assert 0.5 < small.mean() < 1.0  # most steps go straight on; the others met a wall and turned
    # a step that turned further: the straight move with the old heading would have been blocked
    # for some speed and heading noise (checked on a grid of them)
    n, t = np.nonzero(~small)
    speeds, angles = np.linspace(0.18, 0.22, 5), np.radians(poses[n, t, 2][:, None] + np.linspace(-3.02, 3.02, 13))
    ends = (
        poses[n, t, None, None, :2]
        + speeds[None, :, None, None] * np.stack([np.cos(angles), np.sin(angles)], -1)[:, None]
    )
    assert (~maze.is_free(ends)).any(axis=(1, 2)).all()


def test_observations_are_the_five_nearest_beacon_distances_with_uniform_noise():
    maze = paper_maze(18)
    x, poses = simulate_paper(maze, 200, 20, np.random.default_rng(1))
    gaps = np.linalg.norm(poses[..., None, :2] - maze.landmarks, axis=-1)
    noise = x[..., 3:] - np.sort(gaps, axis=-1)[..., :5]
    assert np.abs(noise).max() <= 0.1 and noise.std() == pytest.approx(0.2 / math.sqrt(12), rel=0.03)
    assert abs(noise.mean()) < 0.003


def test_data_are_normalised_poses_reproducible_from_the_seed():
    _, splits = localization_paper_data(27, steps=5, num_train=6, num_valid=2, num_test=3, seed=3)
    _, again = localization_paper_data(27, steps=5, num_train=6, num_valid=2, num_test=3, seed=3)
    x, mask, y = splits["train"]
    assert x.shape == (6, 5, 8) and y.shape == (6, 5, 3) and mask is None
    assert ((y >= 0) & (y < 1)).all() and torch.equal(y, again["train"][2])
    with pytest.raises(ValueError, match="maze_size"):
        localization_paper_data(12)
    _, scaled = localization_paper_data(
        27, steps=5, num_train=6, num_valid=2, num_test=3, seed=3, standardize_inputs=True
    )
    flat = x.reshape(-1, 8)
    assert torch.allclose(scaled["test"][0], (splits["test"][0] - flat.mean(0)) / flat.std(0))
    assert torch.equal(scaled["test"][2], splits["test"][2])


def test_time_decay_and_output_weights_match_the_loss_by_hand():
    torch.manual_seed(0)
    model = PFRNNPredictor(8, 3, cell="lstm", hidden_size=5, encoder_size=4, learn_scale=False)
    x, y = torch.randn(2, 4, 8), torch.rand(2, 4, 3)
    prediction = model(x).detach()
    step = torch.exp(0.1 * torch.arange(4.0))
    step = step / step.sum()  # the paper's normalised weights exp(0.1 t) / sum_s exp(0.1 s)
    squared = (prediction - y).square() * torch.tensor([1.0, 1.0, 0.1])
    by_hand = (squared.sum(-1) * step).sum(1).mean()
    loss = DiscriminativeLoss(model, elbo_weight=0.0, time_decay=0.1, output_weights=[1.0, 1.0, 0.1])
    assert loss(x, None, y).loss.item() == pytest.approx(by_hand.item(), rel=1e-5)
    # the ELBO term: a Gaussian of precision w_o: 0.5 sum_o (w_o e_o^2 - log w_o + log 2 pi)
    elbo = DiscriminativeLoss(model, pred_weight=0.0, time_decay=0.1, output_weights=[1.0, 1.0, 0.1])
    nll = 0.5 * (squared.sum(-1) - math.log(0.1) + 3 * math.log(2 * math.pi))
    assert elbo(x, None, y).loss.item() == pytest.approx((nll * step).sum(1).mean().item(), rel=1e-5)
    for bad in ({"output_weights": [1.0, 0.0, 1.0]}, {"output_weights": [1.0]}, {"time_decay": math.nan}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DiscriminativeLoss(model, **bad)


class _FixedPredictor(torch.nn.Module):
    """Predicts given normalised poses ``[B, T, 3]`` (one particle), whatever the input."""

    num_particles = 1

    def __init__(self, poses):
        super().__init__()
        self.poses = poses
        self.head = torch.nn.Identity()

    def belief(self, x, mask=None, generator=None):
        mean = self.poses[: len(x)]
        return ParticleBelief(
            mean=mean,
            particles=mean.transpose(0, 1)[:, None],
            log_weights=torch.zeros(mean.shape[1], 1, len(x)),
            state=None,
        )


def test_metric_is_the_last_step_position_error_in_cells_averaged_over_x_and_y():
    maze = paper_maze(10)
    truth = torch.tensor([[[0.5, 0.5, 0.0], [0.25, 0.45, 0.5]], [[0.5, 0.5, 0.0], [0.65, 0.05, 0.25]]])
    guess = truth.clone()
    guess[0, -1, 0] += 0.1  # 1 cell off in x: (1^2 + 0^2) / 2
    guess[1, -1, :2] += torch.tensor([0.2, -0.3])  # (2^2 + 3^2) / 2
    guess[1, -1, 2] = 0.75  # heading off by pi
    data = (torch.zeros(3, 2, 8), None, torch.cat([truth, truth[:1]]))
    guess = torch.cat([guess, truth[:1]])
    guess[2, -1, 0] = 1 - truth[0, -1, 0]  # the mirror image about x = 5: x = 7.5 for 2.5
    metrics = evaluate_localization_paper(_FixedPredictor(guess), maze, data, device="cpu")
    assert metrics["last_step_mse"] == pytest.approx((0.5 + 6.5 + 25 / 2) / 3, rel=1e-5)
    assert metrics["last_step_heading_mse"] == pytest.approx(math.pi**2 / 3, rel=1e-5)
    assert metrics["position_mse_by_step"] == pytest.approx([0.0, (1 + 13 + 25) / 3], abs=1e-5)
    assert metrics["last_step_mirror_share"] == pytest.approx(1 / 3)


def test_paper_protocol_runs_from_the_command_line(tmp_path):
    run = tmp_path / "run"
    small = [
        "data.num_train=16",
        "data.num_valid=8",
        "data.num_test=8",
        "data.steps=6",
        "model.hidden_size=8",
        "model.encoder_size=8",
        "model.num_particles=3",
        "train.epochs=1",
        "train.valid_every=1",
    ]
    sets = [arg for item in small for arg in ("--set", item)]
    assert cli.main(["train", "pfrnn-paper-maze10", "--run-dir", str(run), *sets]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert math.isfinite(metrics["last_step_mse"]) and (run / "plots" / "belief.png").stat().st_size > 0
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(record["monitor"]["valid_last_step_mse"])  # the learning curve in the paper's metric


def test_valid_curves_read_the_monitor_records_from_a_first_epoch(tmp_path):
    from ppl_models.experiments.studies import pfrnn_curves

    records = [
        {"epoch": 1},
        {"epoch": 2, "monitor": {"valid_last_step_mse": 4.0}},
        {"epoch": 3, "monitor": {}},
        {"epoch": 4, "monitor": {"valid_last_step_mse": 2.5}},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert pfrnn_curves.valid_curve(tmp_path) == [(2, 4.0), (4, 2.5)]
    assert pfrnn_curves.valid_curve(tmp_path, first_epoch=3) == [(4, 2.5)]
    pfrnn_curves.main([str(tmp_path / "curves.png"), f"run={tmp_path}@3"])
    assert (tmp_path / "curves.png").stat().st_size > 0

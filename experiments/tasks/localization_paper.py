"""The PF-RNN paper's own robot localization protocol (task ``localization-paper``).

Built from the facts of the paper and its public code, unlike our variant
:mod:`ppl_models.experiments.tasks.localization` (relative odometry, Gaussian noise, random maze):

* **Maze**: fixed ``N x N`` layouts of unit cells (:data:`LAYOUTS`, top row first): ``1`` a wall
  block, ``2`` a wall block with a beacon on each of its 4 corners. The 10 x 10 one is the
  paper's; the 18 x 18 and 27 x 27 ones are ours, in the same style, symmetric about both
  mid-lines like it. Beacons are symmetric too: only the world-frame motion tells mirror
  images apart.
* **Robot**: starts at a uniform free point with a uniform heading in degrees. Each step
  adds uniform noise of +-0.02 and +-3 degrees to the heading and moves ``0.2 + U(-0.02, 0.02)``
  along it; if the end point lies in a block or off the map, it draws a new uniform heading
  and tries again (up to ``max_tries``; then it stays put).
* **Input** ``x_t`` (8 values): the world-frame action that led to pose ``t``,
  ``(dx, dy, dheading)`` (heading change in radians, wrapped to ``[-pi, pi)``; zeros at
  ``t = 0``), and the sorted distances to the 5 nearest beacons plus ``U(-0.1, 0.1)`` noise.
* **Target** ``y_t``: the pose normalised as in the paper's code, ``(x / N, y / N, heading / 2 pi)``
  with the heading in ``[0, 2 pi)``.
* **Metric**: last-step squared error of ``(x, y)`` in cells, averaged over the two coordinates
  and the test trajectories (the paper's 0.103 / 0.51 / 2.86 for PF-LSTM-P30 on 10 / 18 / 27).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ppl_models.inference.validation import check_choice, check_positive_int

from .localization import Maze, belief_figure, predict_poses

__all__ = [
    "LAYOUTS",
    "paper_maze",
    "simulate_paper",
    "localization_paper_data",
    "evaluate_localization_paper",
    "paper_belief_figure",
    "SPEED",
    "NUM_BEACONS_SEEN",
]

SPEED, SPEED_NOISE, HEADING_NOISE, TURN_NOISE_DEGREES, OBSERVATION_NOISE = 0.2, 0.02, 0.02, 3.0, 0.1
NUM_BEACONS_SEEN = 5

#: the maze layouts, top row first: 0 free, 1 wall block, 2 wall block with a beacon on each corner
LAYOUTS = {
    10: """
0,2,0,0,0,0,0,0,2,0
0,2,0,1,0,0,1,0,2,0
0,2,0,1,0,0,1,0,2,0
0,1,1,2,0,0,2,1,1,0
0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0
0,1,1,2,0,0,2,1,1,0
0,2,0,1,0,0,1,0,2,0
0,2,0,1,0,0,1,0,2,0
0,2,0,0,0,0,0,0,2,0
""",
    18: """
0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2,0
0,2,0,1,1,2,0,0,0,0,0,0,2,1,1,0,2,0
0,2,0,0,0,0,0,1,0,0,1,0,0,0,0,0,2,0
0,1,1,2,0,0,0,1,0,0,1,0,0,0,2,1,1,0
0,0,0,0,0,2,0,2,0,0,2,0,2,0,0,0,0,0
0,0,0,1,0,1,0,0,0,0,0,0,1,0,1,0,0,0
0,2,0,1,0,1,0,0,0,0,0,0,1,0,1,0,2,0
0,1,0,2,0,0,0,2,0,0,2,0,0,0,2,0,1,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,1,0,2,0,0,0,2,0,0,2,0,0,0,2,0,1,0
0,2,0,1,0,1,0,0,0,0,0,0,1,0,1,0,2,0
0,0,0,1,0,1,0,0,0,0,0,0,1,0,1,0,0,0
0,0,0,0,0,2,0,2,0,0,2,0,2,0,0,0,0,0
0,1,1,2,0,0,0,1,0,0,1,0,0,0,2,1,1,0
0,2,0,0,0,0,0,1,0,0,1,0,0,0,0,0,2,0
0,2,0,1,1,2,0,0,0,0,0,0,2,1,1,0,2,0
0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2,0
""",
    27: """
0,2,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0,2,0
0,2,0,1,0,0,1,0,0,2,0,1,0,0,0,1,0,2,0,0,1,0,0,1,0,2,0
0,2,0,1,0,0,1,0,0,1,0,1,0,0,0,1,0,1,0,0,1,0,0,1,0,2,0
0,1,1,2,0,0,2,1,0,0,0,2,0,0,0,2,0,0,0,1,2,0,0,2,1,1,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,1,1,2,0,0,2,1,1,0,0,2,1,0,1,2,0,0,1,1,2,0,0,2,1,1,0
0,2,0,1,0,0,0,0,2,0,0,0,0,0,0,0,0,0,2,0,0,0,0,1,0,2,0
0,2,0,1,0,0,0,0,1,0,2,0,0,0,0,0,2,0,1,0,0,0,0,1,0,2,0
0,2,0,0,0,2,1,0,1,0,1,0,0,0,0,0,1,0,1,0,1,2,0,0,0,2,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,1,1,2,0,0,0,2,1,1,0,0,2,0,2,0,0,1,1,2,0,0,0,2,1,1,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,1,1,2,0,0,0,2,1,1,0,0,2,0,2,0,0,1,1,2,0,0,0,2,1,1,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,2,0,0,0,2,1,0,1,0,1,0,0,0,0,0,1,0,1,0,1,2,0,0,0,2,0
0,2,0,1,0,0,0,0,1,0,2,0,0,0,0,0,2,0,1,0,0,0,0,1,0,2,0
0,2,0,1,0,0,0,0,2,0,0,0,0,0,0,0,0,0,2,0,0,0,0,1,0,2,0
0,1,1,2,0,0,2,1,1,0,0,2,1,0,1,2,0,0,1,1,2,0,0,2,1,1,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
0,1,1,2,0,0,2,1,0,0,0,2,0,0,0,2,0,0,0,1,2,0,0,2,1,1,0
0,2,0,1,0,0,1,0,0,1,0,1,0,0,0,1,0,1,0,0,1,0,0,1,0,2,0
0,2,0,1,0,0,1,0,0,2,0,1,0,0,0,1,0,2,0,0,1,0,0,1,0,2,0
0,2,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0,2,0
""",
}


def layout_grid(size: int) -> np.ndarray:
    """The layout of :data:`LAYOUTS` as an ``[N, N]`` int array, top row first."""
    check_choice(size, tuple(LAYOUTS), name="maze_size")
    return np.array([[int(v) for v in row.split(",")] for row in LAYOUTS[size].split()])


def paper_maze(size: int = 10) -> Maze:
    """The :class:`~ppl_models.experiments.tasks.localization.Maze` of a layout: rows flipped so row ``j`` is ``y in
    [j, j+1)``."""
    grid = layout_grid(size)[::-1]
    beacon_blocks = np.argwhere(grid == 2)[:, ::-1]  # (x, y) lower-left corners
    corners = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    beacons = np.unique((beacon_blocks[:, None] + corners[None]).reshape(-1, 2), axis=0).astype(float)
    return Maze(blocked=np.ascontiguousarray(grid > 0), landmarks=beacons)


def _uniform_free_points(maze: Maze, count: int, rng: np.random.Generator) -> np.ndarray:
    """``[count, 2]`` points uniform over the free area (rejection sampling)."""
    points = rng.uniform(0, maze.size, (count, 2))
    bad = ~maze.is_free(points)
    while bad.any():
        points[bad] = rng.uniform(0, maze.size, (int(bad.sum()), 2))
        bad = ~maze.is_free(points)
    return points


def _observe(maze: Maze, position: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sorted distances ``[n, 5]`` to the nearest beacons, plus uniform noise."""
    gaps = np.linalg.norm(position[:, None] - maze.landmarks[None], axis=-1)
    nearest = np.sort(gaps, axis=1)[:, :NUM_BEACONS_SEEN]
    return nearest + rng.uniform(-OBSERVATION_NOISE, OBSERVATION_NOISE, nearest.shape)


def simulate_paper(
    maze: Maze, num_trajectories: int, steps: int, rng: np.random.Generator, *, max_tries: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories: inputs ``[N, T, 8]`` (action 3 + distances 5), poses ``[N, T, 3]`` (x, y, heading in degrees)."""
    n = num_trajectories
    position = _uniform_free_points(maze, n, rng)
    heading = rng.uniform(0, 360, n)
    inputs = np.zeros((n, steps, 3 + NUM_BEACONS_SEEN))
    poses = np.zeros((n, steps, 3))
    for t in range(steps):
        if t > 0:
            old_position, old_heading = position, heading
            speed = SPEED + rng.uniform(-SPEED_NOISE, SPEED_NOISE, n)
            heading = (
                heading
                + rng.uniform(-HEADING_NOISE, HEADING_NOISE, n)
                + rng.uniform(-TURN_NOISE_DEGREES, TURN_NOISE_DEGREES, n)
            ) % 360
            pending = np.ones(n, dtype=bool)
            for _ in range(max_tries):
                radians = np.deg2rad(heading)
                target = old_position + speed[:, None] * np.stack([np.cos(radians), np.sin(radians)], 1)
                pending = ~maze.is_free(target)
                if not pending.any():
                    break
                heading = np.where(pending, rng.uniform(0, 360, n), heading)
            position = np.where(pending[:, None], old_position, target)
            turn = np.deg2rad((heading - old_heading + 180) % 360 - 180)
            inputs[:, t, :3] = np.concatenate([position - old_position, turn[:, None]], 1)
        inputs[:, t, 3:] = _observe(maze, position, rng)
        poses[:, t] = np.concatenate([position, heading[:, None]], 1)
    return inputs, poses


def localization_paper_data(
    maze_size: int = 10,
    steps: int = 80,
    num_train: int = 10_000,
    num_valid: int = 1_000,
    num_test: int = 1_000,
    seed: int = 0,
    standardize_inputs: bool = False,
):
    """``(maze, {"train" | "valid" | "test": (x [N, T, 8], mask None, y [N, T, 3])})``, float32 tensors.

    ``y`` is the normalised pose ``(x / N, y / N, heading / 2 pi)``; generated afresh from
    ``(seed, maze_size)`` (nothing cached). ``standardize_inputs`` (not in the paper) shifts and
    scales each input feature by the training split's mean and sd over all steps, so the small
    actions (about 0.2) weigh as much as the distances (up to several cells) at the first layer.
    """
    if not isinstance(standardize_inputs, bool):
        raise TypeError(f"standardize_inputs must be a bool, got {standardize_inputs!r}")
    for name, value in (("steps", steps), ("num_train", num_train), ("num_valid", num_valid), ("num_test", num_test)):
        check_positive_int(value, name=name)
    maze = paper_maze(maze_size)
    rng = np.random.default_rng([seed, maze_size])
    scale = np.array([maze_size, maze_size, 360.0])
    splits = {}
    for name, count in (("train", num_train), ("valid", num_valid), ("test", num_test)):
        x, poses = simulate_paper(maze, count, steps, rng)
        splits[name] = (torch.from_numpy(x).float(), None, torch.from_numpy(poses / scale).float())
    if standardize_inputs:
        flat = splits["train"][0].reshape(-1, splits["train"][0].shape[-1])
        mean, sd = flat.mean(0), flat.std(0)
        splits = {name: ((x - mean) / sd, mask, y) for name, (x, mask, y) in splits.items()}
    return maze, splits


def _to_cells(maze: Maze):
    """Map normalised outputs ``[..., 3]`` to poses ``(x, y, cos, sin)`` in cells."""

    def convert(outputs: torch.Tensor) -> torch.Tensor:
        angle = 2 * math.pi * outputs[..., 2:3]
        return torch.cat([maze.size * outputs[..., :2], angle.cos(), angle.sin()], -1)

    return convert


@torch.no_grad()
def evaluate_localization_paper(predictor, maze: Maze, data, *, device, seed: int = 0) -> dict:
    """Test metrics in cells: ``last_step_mse`` (the paper's: last-step (x, y) squared error averaged
    over the two coordinates), ``mse`` (the same over all steps), ``last_step_heading_mse``
    (radians squared, wrapped), ``last_step_mirror_share`` (share of sequences whose last
    predicted position is nearer a mirror image of the true one, about either mid-line or both,
    than the true one: the symmetry left unresolved), ``position_mse_by_step`` (summed over x, y)
    and, for particle models, ``particle_spread_by_step`` (weighted RMS distance of the particles
    from the prediction).
    """
    x, _, y = data
    predictions, spreads = predict_poses(predictor, x, device=device, seed=seed, to_pose=_to_cells(maze))
    truth = _to_cells(maze)(y)
    position_error = (predictions[..., :2] - truth[..., :2]).square()  # [N, T, 2]
    turn = torch.atan2(predictions[..., 3], predictions[..., 2]) - torch.atan2(truth[..., 3], truth[..., 2])
    turn = torch.remainder(turn + math.pi, 2 * math.pi) - math.pi
    last, n = truth[:, -1, :2], maze.size
    images = torch.stack(
        [last, torch.stack([n - last[:, 0], last[:, 1]], -1), torch.stack([last[:, 0], n - last[:, 1]], -1), n - last]
    )  # [4, N, 2]
    nearest = (predictions[None, :, -1, :2] - images).square().sum(-1).argmin(0)  # 0: the truth
    metrics = {
        "last_step_mse": position_error[:, -1].mean().item(),
        "mse": position_error.mean().item(),
        "last_step_mirror_share": (nearest > 0).double().mean().item(),
        "last_step_heading_mse": turn[:, -1].square().mean().item(),
        "test_sequences": len(x),
        "position_mse_by_step": position_error.sum(-1).mean(0).tolist(),
    }
    if spreads is not None:
        metrics["particle_spread_by_step"] = spreads.mean(0).tolist()
    return metrics


def paper_belief_figure(predictor, maze: Maze, data, path, device, index: int = 0) -> None:
    """The belief picture (paper's Figure 6) of test sequence ``index``."""
    x, mask, y = data
    belief_figure(predictor, maze, (x, mask, _to_cells(maze)(y)), path, device, index=index, to_pose=_to_cells(maze))

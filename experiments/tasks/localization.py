"""The PF-RNN paper's robot localization task: a robot in a symmetric maze, sensing landmark distances.

Generated as section "Robot Localization" describes (our choices where the paper is silent):

* **Maze**: an ``N x N`` grid of unit cells. Obstacles are drawn at random (density
  ``obstacle_density``) in one quadrant and mirrored about both axes, so the map is symmetric;
  the outer border is wall. Half of the obstacles, drawn at random (so *not* symmetrically,
  which is what makes localization possible at all), carry landmarks on their four corners.
* **Motion**: the robot starts at a uniform free position with a uniform heading. Each step
  it moves forward ``d ~ N(0.2, 0.05)``; when that move would hit a wall or an obstacle it
  turns to a new uniform heading instead (up to ``max_turns`` tries; it stays put if all fail).
* **Input** ``x_t``: the last action ``u_{t-1} = (d, sin dtheta, cos dtheta)`` (distance moved
  and heading change; zeros at ``t = 0``) and the observation ``o_t``: distances to the 5
  closest landmarks, ascending, plus Gaussian noise (sd 0.1 for N = 10 and 18, 1 for N = 27).
* **Target**: the pose ``(x, y, cos theta, sin theta)`` in cell units: heading as a unit
  vector so that the squared error has no wrap-around jump at ``2 pi``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ppl_models.inference.validation import check_positive_int

from ..run_plots import save_png

__all__ = [
    "Maze",
    "symmetric_maze",
    "simulate",
    "localization_data",
    "OBSERVATION_NOISE",
    "plot_belief",
    "plot_belief_over_time",
    "evaluate_localization",
    "belief_figure",
    "predict_poses",
]

#: the paper's observation noise sd per maze size
OBSERVATION_NOISE = {10: 0.1, 18: 0.1, 27: 1.0}
NUM_LANDMARKS_SEEN = 5


@dataclass(frozen=True)
class Maze:
    """``blocked [N, N]`` bool (row = y, column = x) and ``landmarks [L, 2]`` (x, y) points."""

    blocked: np.ndarray
    landmarks: np.ndarray

    @property
    def size(self) -> int:
        return self.blocked.shape[0]

    def is_free(self, xy: np.ndarray) -> np.ndarray:
        """Whether points ``[..., 2]`` lie inside the maze and outside every obstacle."""
        n = self.size
        inside = (xy[..., 0] > 0) & (xy[..., 0] < n) & (xy[..., 1] > 0) & (xy[..., 1] < n)
        cells = np.clip(np.floor(xy).astype(int), 0, n - 1)
        return inside & ~self.blocked[cells[..., 1], cells[..., 0]]


def symmetric_maze(size: int, rng: np.random.Generator, obstacle_density: float = 0.2) -> Maze:
    """A random maze symmetric about both mid-lines, landmarks on the corners of half its obstacles."""
    check_positive_int(size, name="size")
    if size < 4:
        raise ValueError(f"size must be >= 4, got {size}")
    half = (size + 1) // 2
    quadrant = rng.random((half, half)) < obstacle_density
    quadrant[0, 0] = False  # keep the corners free
    full = np.zeros((size, size), dtype=bool)
    full[:half, :half] = quadrant
    full[:half, size - half :] |= quadrant[:, ::-1]
    full[size - half :, :half] |= quadrant[::-1, :]
    full[size - half :, size - half :] |= quadrant[::-1, ::-1]
    obstacles = np.argwhere(full)  # (row, col)
    chosen = obstacles[rng.permutation(len(obstacles))[: max(1, len(obstacles) // 2)]]
    corners = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    points = (chosen[:, None, ::-1] + corners[None]).reshape(-1, 2).astype(float)  # (x, y)
    return Maze(blocked=full, landmarks=np.unique(points, axis=0))


def simulate(
    maze: Maze,
    num_trajectories: int,
    steps: int,
    rng: np.random.Generator,
    *,
    observation_noise: float,
    max_turns: int = 20,
) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories in ``maze``: inputs ``[N, T, 8]`` (action 3 + distances 5) and poses ``[N, T, 4]``."""
    n = num_trajectories
    free = np.argwhere(~maze.blocked)[:, ::-1]  # (x, y) of free cells
    position = free[rng.integers(len(free), size=n)] + rng.random((n, 2))
    heading = rng.uniform(0, 2 * math.pi, n)
    inputs = np.zeros((n, steps, 3 + NUM_LANDMARKS_SEEN))
    poses = np.zeros((n, steps, 4))
    for t in range(steps):
        if t > 0:
            distance = rng.normal(0.2, 0.05, n).clip(min=0.0)
            old_heading = heading.copy()
            moving = np.ones(n, dtype=bool)
            for _ in range(max_turns + 1):
                target = position + distance[:, None] * np.stack([np.cos(heading), np.sin(heading)], 1)
                blocked = ~maze.is_free(target) & moving
                if not blocked.any():
                    break
                heading = np.where(blocked, rng.uniform(0, 2 * math.pi, n), heading)
            blocked = ~maze.is_free(target)
            distance = np.where(blocked, 0.0, distance)
            position = np.where(blocked[:, None], position, target)
            turn = heading - old_heading
            inputs[:, t, :3] = np.stack([distance, np.sin(turn), np.cos(turn)], 1)
        gaps = np.linalg.norm(position[:, None] - maze.landmarks[None], axis=-1)
        nearest = np.sort(gaps, axis=1)[:, :NUM_LANDMARKS_SEEN]
        inputs[:, t, 3:] = nearest + observation_noise * rng.standard_normal(nearest.shape)
        poses[:, t] = np.concatenate([position, np.cos(heading)[:, None], np.sin(heading)[:, None]], 1)
    return inputs, poses


def localization_data(
    maze_size: int = 10,
    steps: int = 50,
    num_train: int = 10_000,
    num_valid: int = 1_000,
    num_test: int = 2_000,
    seed: int = 0,
    observation_noise: float | None = None,
):
    """The task's data: ``(maze, {"train" | "valid" | "test": (x [N, T, 8], mask None, y [N, T, 4])})``.

    One maze per ``(maze_size, seed)``; every split uses it. Float32 tensors.
    """
    for name, value in (
        ("maze_size", maze_size),
        ("steps", steps),
        ("num_train", num_train),
        ("num_valid", num_valid),
        ("num_test", num_test),
    ):
        check_positive_int(value, name=name)
    noise = OBSERVATION_NOISE.get(maze_size, 0.1) if observation_noise is None else float(observation_noise)
    rng = np.random.default_rng([seed, maze_size])
    maze = symmetric_maze(maze_size, rng)
    splits = {}
    for name, count in (("train", num_train), ("valid", num_valid), ("test", num_test)):
        x, y = simulate(maze, count, steps, rng, observation_noise=noise)
        splits[name] = (torch.from_numpy(x).float(), None, torch.from_numpy(y).float())
    return maze, splits


def plot_belief(
    maze: Maze, poses: np.ndarray, predicted: np.ndarray, particles: np.ndarray, steps: list[int], path=None
):
    """The paper's Figure 6: per chosen step, the maze, true pose (blue), predicted (red), particles (green).

    Args:
        poses, predicted: ``[T, 4]`` true and predicted poses of one trajectory.
        particles: ``[T, K, 4]`` the pose each particle predicts (``f_out`` of each particle).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(steps), figsize=(3.2 * len(steps), 3.4))
    for ax, t in zip(np.atleast_1d(axes), steps):
        ax.imshow(maze.blocked, cmap="Greys", origin="lower", extent=(0, maze.size, 0, maze.size), vmax=1.6)
        ax.scatter(*maze.landmarks.T, s=6, c="black", marker="s")
        for pose, colour, size in (
            (particles[t], "tab:green", 14),
            (predicted[t][None], "tab:red", 40),
            (poses[t][None], "tab:blue", 40),
        ):
            ax.quiver(pose[:, 0], pose[:, 1], pose[:, 2], pose[:, 3], color=colour, scale=18, width=0.012)
            ax.scatter(pose[:, 0], pose[:, 1], s=size, c=colour)
        ax.set_title(f"t = {t}")
        ax.set_xlim(0, maze.size)
        ax.set_ylim(0, maze.size)
        ax.set_xticks([])
        ax.set_yticks([])
    figure.tight_layout()
    if path is not None:
        save_png(figure, path)
        plt.close(figure)
    return figure


def plot_belief_over_time(position_mse: list[float], particle_spread: list[float] | None = None, path=None):
    """Position RMSE of the prediction and (for particle models) the particles' spread, against the step."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.5, 3.5))
    ax = figure.subplots()
    steps = np.arange(len(position_mse))
    ax.plot(steps, np.sqrt(position_mse), color="tab:red", label="position RMSE of the prediction")
    if particle_spread is not None:
        ax.plot(steps, particle_spread, color="tab:green", label="particle spread (weighted RMS distance)")
    ax.set(xlabel="step t", ylabel="cells", ylim=(0, None), title="test trajectories: the belief over time")
    ax.legend(fontsize="small")
    if path is not None:
        save_png(figure, path)
    return figure


# --------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict_poses(
    predictor, x: torch.Tensor, *, device, seed: int = 0, to_pose=None, batch_size: int = 250
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Poses predicted from the mean particle, ``[N, T, P]``, and for particle models the spread ``[N, T]``.

    ``to_pose`` maps the head's outputs ``[..., O]`` to poses whose first two entries are the
    position in cells (default: the outputs themselves). The spread is the weighted
    root-mean-square distance of the particles' predicted positions from their weighted mean.
    """
    to_pose = to_pose or (lambda outputs: outputs)
    predictor.eval().to(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    predictions, spreads = [], []
    for start in range(0, len(x), batch_size):
        belief = predictor.belief(x[start : start + batch_size].to(device), generator=generator)
        predictions.append(to_pose(predictor.head(belief.mean)).cpu())
        if predictor.num_particles > 1:
            positions = to_pose(predictor.head(belief.particles))[..., :2]  # [T, K, B, 2]
            weights = belief.log_weights.exp()
            centre = (weights.unsqueeze(-1) * positions).sum(1, keepdim=True)
            spread = (weights * (positions - centre).square().sum(-1)).sum(1).sqrt()  # [T, B]
            spreads.append(spread.T.cpu())
    return torch.cat(predictions), torch.cat(spreads) if spreads else None


def evaluate_localization(predictor, data, *, device, seed: int = 0, batch_size: int = 250) -> dict:
    """Test metrics of pose predictions from the mean particle, and how the belief narrows over time.

    ``last_step_mse``: squared error of the pose ``(x, y, cos, sin)`` at the last step, summed
    over its 4 entries, averaged over sequences (the paper's metric); ``last_step_position_mse``
    the same over ``(x, y)``; ``mse`` over all steps. Per step ``t``: ``position_mse_by_step``
    and, for particle models, ``particle_spread_by_step``: the weighted root-mean-square
    distance of the particles' predicted positions from the predicted position, averaged over
    sequences (a belief that converges has a falling spread).
    """
    x, _, y = data
    predictions, spreads = predict_poses(predictor, x, device=device, seed=seed, batch_size=batch_size)
    error = (predictions - y).square()
    metrics = {
        "last_step_mse": error[:, -1].sum(-1).mean().item(),
        "last_step_position_mse": error[:, -1, :2].sum(-1).mean().item(),
        "mse": error.sum(-1).mean().item(),
        "test_sequences": len(x),
        "position_mse_by_step": error[..., :2].sum(-1).mean(0).tolist(),
    }
    if spreads is not None:
        metrics["particle_spread_by_step"] = spreads.mean(0).tolist()
    return metrics


@torch.no_grad()
def belief_figure(predictor, maze, data, path, device, index: int = 0, to_pose=None) -> None:
    """:func:`plot_belief` of a predictor's belief on test sequence ``index`` at five steps.

    ``y`` of ``data`` holds poses ``(x, y, cos, sin)``; ``to_pose`` maps the head's outputs to them
    (default: the outputs are the poses).
    """
    to_pose = to_pose or (lambda outputs: outputs)
    x, _, y = data
    belief = predictor.belief(x[index : index + 1].to(device), generator=torch.Generator(device=device).manual_seed(0))
    particles = to_pose(predictor.head(belief.particles[:, :, 0])).cpu().numpy()  # [T, K, 4]
    predicted = _unit_heading(to_pose(predictor.head(belief.mean[0])).cpu().numpy())
    steps = x.shape[1]
    chosen = sorted({0, steps // 8, steps // 4, steps // 2, steps - 1})
    plot_belief(maze, y[index].numpy(), predicted, _unit_heading(particles), chosen, path)


def _unit_heading(poses: np.ndarray) -> np.ndarray:
    """Poses with the heading entries scaled to a unit vector (for arrows)."""
    norm = np.linalg.norm(poses[..., 2:], axis=-1, keepdims=True).clip(min=1e-6)
    return np.concatenate([poses[..., :2], poses[..., 2:] / norm], -1)

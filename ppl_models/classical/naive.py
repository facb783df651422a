"""The naive forecasters: the last value, and the value one season back.

Seasonal naive with season ``m`` predicts ``x_t ~ N(x_{t-m}, v_m)`` per feature; a step with fewer than ``m``
predecessors takes the last value, ``N(x_{t-1}, v_1)``, and step 0 (no history) the training split's
``N(mean, variance)``. Last value is seasonal naive with ``m = 1``. The noise ``v_k`` of a row is the mean square
of its context's lag-``k`` differences, the residuals of the naive method about a mean of ``x_{t-k}`` (no drift),
where the context holds at least two of them (``k + 2`` steps), else the same over the training split.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import ClassicalForecaster

__all__ = ["SeasonalNaive", "LastValue"]


def _mean_square_differences(rows: list[np.ndarray], lag: int, *, at_least: int = 1) -> np.ndarray | None:
    """``[D]``: the mean square of the lag-``lag`` differences of ``rows`` (each ``[L, D]``), ``None`` where they
    hold fewer than ``at_least``."""
    differences = [row[lag:] - row[:-lag] for row in rows if len(row) > lag]
    count = sum(len(d) for d in differences)
    if count < at_least:
        return None
    return sum((d**2).sum(0) for d in differences) / count


class SeasonalNaive(ClassicalForecaster):
    """``x_t ~ N(x_{t-m}, v_m)`` per feature (see the module docstring); parameters ``(v_1, v_m)``, each ``[D]``."""

    name = "seasonal-naive"

    def _fit(self, rows: list[np.ndarray]) -> None:
        last = _mean_square_differences(rows, 1)
        last = self.training.variance if last is None else last
        seasonal = _mean_square_differences(rows, self.period)
        self.pooled = (last, last if seasonal is None else seasonal)

    def _estimate(self, history: np.ndarray):
        last = _mean_square_differences([history], 1, at_least=2)
        if last is None:
            return None
        seasonal = _mean_square_differences([history], self.period, at_least=2)
        return last, self.pooled[1] if seasonal is None else seasonal

    def _predict(self, parameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        last, seasonal = parameters
        edge = min(self.period, len(row))
        mean, variance = np.empty_like(row), np.empty_like(row)
        mean[0], variance[0] = self.training.mean, self.training.variance
        mean[1:edge], variance[1:edge] = row[: edge - 1], last
        mean[edge:], variance[edge:] = row[: len(row) - edge], seasonal
        return mean, _diagonal(variance)

    def _draw(self, parameters, row: np.ndarray, horizon: int, num_samples: int, generator) -> torch.Tensor:
        last, seasonal = (torch.from_numpy(v) for v in parameters)
        period, steps = self.period, len(row)
        path = torch.from_numpy(row).expand(num_samples, *row.shape)
        path = torch.cat([path, path.new_zeros(num_samples, horizon, row.shape[1])], 1)
        for t in range(steps, steps + horizon):
            base, variance = (path[:, t - period], seasonal) if t >= period else (path[:, t - 1], last)
            noise = torch.randn(base.shape, generator=generator, dtype=torch.float64)
            path[:, t] = base + variance.sqrt() * noise
        return path[:, steps:]

    def _choices(self) -> dict:
        noise = "mean square of each row's context differences at lag 1"
        if self.period > 1:
            noise += f" and at lag {self.period} (steps with fewer than {self.period} predecessors: the last value)"
        return {"noise": noise + "; the training split's where a context holds fewer than 2"}

    @property
    def source(self) -> str:
        return "the last value per series" if self.period == 1 else f"the value {self.period} steps back per series"

    def _count_parameters(self) -> int:
        return len(self.training.mean) * (1 if self.period == 1 else 2)


class LastValue(SeasonalNaive):
    """``x_t ~ N(x_{t-1}, v_1)`` per feature: seasonal naive with ``m = 1``, whatever ``season`` says."""

    name = "last-value"
    uses_season = False


def _diagonal(variance: np.ndarray) -> np.ndarray:
    """``[L, D, D]`` diagonal covariances of the variances ``[L, D]``."""
    return variance[..., None] * np.eye(variance.shape[-1])

"""A logistic autoregression of binary data: each feature's next value given the previous frame, the classical row of
0/1 data (piano rolls, event indicators).

    p(x_{t, d} = 1 | x_{t-1}) = sigmoid(b_d + w_d . x_{t-1}),     p(x_{1, d} = 1) = the training frequency of x_d

One logistic regression per feature on the whole previous frame (``D + 1`` weights each), pooled over the training
split's transitions (counted per distinct previous frame) and fitted by Newton's method, with an L2 penalty
``penalty / 2 |w_d|^2`` on the weights (not the intercepts) that keeps the fit finite where a feature never changes
after some frame (complete separation). The features of a step are
independent given the previous frame, so the one-step log density is the sum of the features' Bernoulli terms.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from scipy.special import expit

from ppl_models.inference.protocol import OneStepPredictive, check_num_samples
from ppl_models.inference.validation import check_scored

from .base import ClassicalForecaster, rows_of

__all__ = ["LogisticAR", "DEFAULT_PENALTY"]

#: the L2 penalty on a feature's weights, in units of its summed log-likelihood
DEFAULT_PENALTY = 1.0
#: the first step's probabilities are kept this far from 0 and 1
_FREQUENCY_FLOOR = 1e-3


class LogisticAR(ClassicalForecaster):
    """The logistic autoregression of binary data on the previous frame (see the module docstring).

    Args:
        penalty: the L2 penalty on each feature's weights (``0``: maximum likelihood).
        season, log: refused (a binary row has no season and no log).
    """

    name: ClassVar[str] = "logistic-ar"
    uses_season: ClassVar[bool] = False

    def __init__(self, *, season: int | None = None, log: bool = False, penalty: float = DEFAULT_PENALTY):
        if log:
            raise ValueError("logistic-ar models binary (0/1) data: log=True is not available")
        super().__init__(season=season)
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not penalty >= 0:
            raise ValueError(f"penalty must be a number >= 0, got {penalty!r}")
        self.penalty = float(penalty)
        self.first: np.ndarray | None = None

    def fit(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> LogisticAR:
        _check_binary(x, mask)
        return super().fit(x, mask)

    def _fit(self, rows: list[np.ndarray]) -> None:
        features = rows[0].shape[1]
        self.first = np.clip(self.training.mean, _FREQUENCY_FLOOR, 1 - _FREQUENCY_FLOOR)
        pairs = [(row[:-1], row[1:]) for row in rows if len(row) > 1]
        if not pairs:
            raise ValueError("logistic-ar needs a training row of two steps or more: it regresses a step on the last")
        frames, inverse, counts = np.unique(
            np.concatenate([before for before, _ in pairs]), axis=0, return_inverse=True, return_counts=True
        )
        ones = np.zeros((len(frames), features))  # per distinct previous frame: how often each feature followed as 1
        np.add.at(ones, inverse.ravel(), np.concatenate([after for _, after in pairs]))
        self._report("fits", 0)
        self.pooled, self.converged = _newton(_with_intercept(frames), counts.astype(np.float64), ones, self.penalty)
        self._report("fits", 1)

    def _estimate(self, history: np.ndarray):
        return None  # D (D + 1) weights: always the pooled fit

    def probabilities(self, row: np.ndarray) -> np.ndarray:
        """``[L, D]``: the probability that each feature of each step of ``row [L, D]`` is 1, given the step before."""
        previous = _with_intercept(row[:-1])
        return np.concatenate([self.first[None], expit(previous @ self.pooled.T)]) if len(row) else row.copy()

    @torch.no_grad()
    def one_step(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        scored: torch.Tensor | None = None,
        num_samples: int = 0,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """The Bernoulli one-step predictive of every valid step of binary ``x [N, T, D]`` (``scored`` is checked;
        every row uses the pooled fit, so no step reads a later one)."""
        x, mask = self._checked(x, mask)
        _check_binary(x, mask)
        check_scored(scored, mask)
        num_samples = check_num_samples(num_samples)
        rows = rows_of(x, mask)
        self._rows["rows"] += len(rows)
        probability = np.zeros(x.shape, dtype=np.float64)
        for i, row in enumerate(rows):
            probability[i, : len(row)] = self.probabilities(row)
        p = torch.from_numpy(probability)
        values = x.detach().cpu().double()
        log_density = torch.where(values > 0.5, p.log(), torch.log1p(-p)).sum(-1)
        valid = mask.cpu()
        samples = None
        if num_samples:
            draws = torch.rand((num_samples, *p.shape), generator=generator, dtype=torch.float64) < p
            samples = (draws * valid.unsqueeze(-1)).to(dtype=x.dtype, device=x.device)
        return OneStepPredictive(
            samples,
            (p * valid.unsqueeze(-1)).to(dtype=x.dtype, device=x.device),
            torch.where(valid, log_density, 0.0).to(dtype=x.dtype, device=x.device),
            self.source,
        )

    def _draw(self, parameters, row: np.ndarray, horizon: int, num_samples: int, generator) -> torch.Tensor:
        """``[S, H, D]`` binary paths simulated on from the row's last frame."""
        frame = np.broadcast_to(row[-1], (num_samples, row.shape[1]))
        paths = []
        for _ in range(horizon):
            p = torch.from_numpy(expit(_with_intercept(frame) @ parameters.T))
            frame = (torch.rand(p.shape, generator=generator, dtype=torch.float64) < p).double().numpy()
            paths.append(torch.from_numpy(frame))
        return torch.stack(paths, 1)

    def _choices(self) -> dict:
        return {
            "pooled": f"one logistic regression per feature on the previous frame, L2 penalty {self.penalty:g}",
            "converged": self.converged,
        }

    @property
    def source(self) -> str:
        return "logistic autoregression on the previous frame (pooled)"

    def _count_parameters(self) -> int:
        return int(self.pooled.size)


def _check_binary(x: torch.Tensor, mask: torch.Tensor | None) -> None:
    values = x.detach()[mask] if mask is not None else x.detach().reshape(-1, x.shape[-1])
    if not ((values == 0) | (values == 1)).all():
        raise ValueError("logistic-ar models binary data: every valid value of x must be 0 or 1")


def _with_intercept(frames: np.ndarray) -> np.ndarray:
    """``[n, D] -> [n, 1 + D]``: a column of ones first."""
    return np.concatenate([np.ones((len(frames), 1)), frames], 1)


def _newton(inputs: np.ndarray, counts: np.ndarray, ones: np.ndarray, penalty: float, steps: int = 50):
    """The penalised maximum-likelihood weights ``[D, 1 + D]`` of the ``D`` logistic regressions, and whether Newton's
    method converged: ``inputs [u, 1 + D]`` are the distinct previous frames (intercept first), seen ``counts [u]``
    times, followed ``ones [u, D]`` times by a 1 in each feature. Each step solves every feature's Newton system at
    once and is halved until the penalised log-likelihood rises."""
    x, n, y = (torch.from_numpy(v) for v in (inputs, counts, ones))
    features, width = y.shape[1], x.shape[1]
    frequency = (y.sum(0) / n.sum()).clamp(_FREQUENCY_FLOOR, 1 - _FREQUENCY_FLOOR)
    weights = torch.zeros(features, width, dtype=torch.float64)
    weights[:, 0] = torch.log(frequency / (1 - frequency))
    ridge = torch.full((width,), penalty, dtype=torch.float64)
    ridge[0] = 0.0

    def objective(w):  # [D]: each feature's penalised negative log-likelihood
        logits = x @ w.T
        nll = (n[:, None] * torch.nn.functional.softplus(logits) - y * logits).sum(0)
        return nll + 0.5 * (ridge * w.square()).sum(1)

    current = objective(weights)
    for _ in range(steps):
        p = torch.sigmoid(x @ weights.T)  # [u, D]
        gradient = (n[:, None] * p - y).T @ x + ridge * weights  # [D, 1 + D]
        curvature = n[:, None] * p * (1 - p)
        hessian = torch.einsum("ud,ui,uj->dij", curvature, x, x) + torch.diag(ridge) + 1e-10 * torch.eye(width)
        step = torch.linalg.solve(hessian, gradient.unsqueeze(-1)).squeeze(-1)
        scale = torch.ones(features, 1, dtype=torch.float64)
        for _ in range(30):  # halve each feature's step until its objective does not rise
            trial = objective(weights - scale * step)
            worse = trial > current + 1e-12 * current.abs()
            if not bool(worse.any()):
                break
            scale[worse] /= 2
        weights, previous, current = weights - scale * step, current, objective(weights - scale * step)
        if bool(((previous - current).abs() <= 1e-12 * current.abs().clamp(min=1.0)).all()):
            return weights.numpy(), True
    return weights.numpy(), False

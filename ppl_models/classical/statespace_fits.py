"""The statsmodels state-space helpers of the classical forecasters: fits with their warnings kept quiet
(:func:`quiet`), whether a fit's likelihood is sound (:func:`sound_fit`), the pooled maximum-likelihood parameters of
one spec over many series (:func:`joint_mle`) and draws of a model's next steps (:func:`simulate`)."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import minimize

from .base import gaussian_draws

__all__ = ["quiet", "Trial", "Fitted", "joint_mle", "simulate", "sound_fit"]

#: the pooled fit's loss where a likelihood is not finite
_NOT_FINITE = 1e300


@contextlib.contextmanager
def quiet():
    """statsmodels' warnings (convergence, starting parameters, overflow in a trial) silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


class Trial(NamedTuple):
    """A fit of a candidate: its ``params`` (as the filtering model takes them) and ``aic``."""

    params: np.ndarray
    aic: float


@dataclass(frozen=True)
class Fitted:
    """A feature's model: its ``spec`` and statsmodels' (constrained) ``params`` of it."""

    spec: tuple
    params: np.ndarray


def joint_mle(models: list, params: list[np.ndarray]) -> np.ndarray:
    """The parameters shared by ``models`` (one spec, one row each) that maximise their summed log-likelihood, from
    the median of their own fits ``params`` (in the unconstrained space)."""
    with quiet():
        starts = [model.untransform_params(p) for model, p in zip(models, params)]
        starts = [start for start in starts if np.isfinite(start).all()]  # a fit on a bound has none
    if len(models) == 1 or not starts:
        return params[0]
    start = np.median(starts, 0)

    def loss(unconstrained):
        try:
            total = -sum(model.loglike(unconstrained, transformed=False) for model in models)
        except (np.linalg.LinAlgError, ValueError):
            return _NOT_FINITE
        return total if np.isfinite(total) else _NOT_FINITE

    with quiet():
        best = minimize(loss, start, method="L-BFGS-B", options={"maxiter": 200})
        return models[0].transform_params(best.x if best.fun < loss(start) else start)


def simulate(model, result, horizon: int, num_samples: int, generator) -> torch.Tensor:
    """``[S, H]`` draws of a univariate state-space ``model``'s next ``horizon`` observations after its filter
    ``result``, with its matrices of the last step (the models here have constant ones; SARIMAX keeps its constant
    in a time-varying state intercept)."""
    matrices = {
        name: _last_step(model.ssm[name], dims)
        for name, dims in (
            ("design", 2),
            ("obs_intercept", 1),
            ("obs_cov", 2),
            ("transition", 2),
            ("state_intercept", 1),
            ("selection", 2),
            ("state_cov", 2),
        )
    }
    state_noise = matrices["selection"] @ matrices["state_cov"] @ matrices["selection"].T
    mean, cov = result.predicted_state[:, -1].copy(), result.predicted_state_cov[:, :, -1].copy()
    state = gaussian_draws(torch.from_numpy(mean), torch.from_numpy(cov), num_samples, generator)
    zeros = torch.zeros(len(state_noise), dtype=torch.float64)
    path = []
    for _ in range(horizon):
        observation = matrices["obs_intercept"] + state @ matrices["design"].T
        path.append(
            observation
            + gaussian_draws(torch.zeros(1, dtype=torch.float64), matrices["obs_cov"], num_samples, generator)
        )
        state = matrices["state_intercept"] + state @ matrices["transition"].T
        state = state + gaussian_draws(zeros, state_noise, num_samples, generator)
    return torch.cat(path, 1)


def sound_fit(result) -> bool:
    """Whether a fit's log-likelihood is the sum of its one-step Gaussian log densities (after the burn) with
    positive variances: a fit whose filter broke down (a stationary start that could not be solved) is not."""
    variance, error = result.forecasts_error_cov[0, 0], result.forecasts_error[0]
    if not (np.isfinite(result.llf) and np.isfinite(variance).all() and (variance > 0).all()):
        return False
    burn = result.loglikelihood_burn
    total = -0.5 * float(np.sum(np.log(2 * np.pi * variance[burn:]) + error[burn:] ** 2 / variance[burn:]))
    return bool(np.isclose(total, result.llf, rtol=1e-6, atol=1e-6))


def _last_step(matrix, dims: int) -> torch.Tensor:
    """A state-space matrix (``dims`` dimensions, a last one more where it varies with time) at the last step."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return torch.from_numpy(np.ascontiguousarray(matrix[..., -1] if matrix.ndim > dims else matrix))

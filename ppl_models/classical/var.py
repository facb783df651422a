"""The vector autoregression: ``x_t ~ N(c + sum_j A_j x_{t-j}, Sigma)`` over all ``D >= 2`` features at once.

A row's history of ``n`` steps is fitted by statsmodels' ``VAR`` (a constant, the lag order by AIC up to
:func:`max_lags`) where that bound is at least 1, else the row takes the pooled fit: the same least squares on the
lagged regressions of every training row stacked, its lag order by the same AIC (Lütkepohl's, on a sample common to
every order). ``Sigma`` is the residual covariance with statsmodels' degrees-of-freedom correction (its ``sigma_u``,
the one its forecast intervals use). A step with fewer than ``p`` predecessors reads the training split's mean in
place of each missing lag and adds, for each, its term's spread under the training split's covariance
(``A_j V A_j^T``, the missing lags taken as independent draws of ``N(mean, V)``); a forecast draws those lags so.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .base import ClassicalForecaster, gaussian_draws
from .statespace_fits import quiet

__all__ = ["VectorAutoregression", "VarParameters", "max_lags", "MAX_LAGS"]

#: the highest lag order tried
MAX_LAGS = 12


class VarParameters(NamedTuple):
    """``intercept [D]``, ``coefs [p, D, D]`` (``coefs[j]`` multiplies ``x_{t-j-1}``) and ``sigma [D, D]``."""

    intercept: np.ndarray
    coefs: np.ndarray
    sigma: np.ndarray


def max_lags(steps: int, features: int) -> int:
    """The highest lag order tried on ``steps`` steps of ``features`` features: statsmodels' default
    ``round(12 (n / 100)^(1/4))``, at most :data:`MAX_LAGS`, and low enough to leave ``D + 1`` residual degrees of
    freedom per equation (can be below 1: too short to fit)."""
    return min(MAX_LAGS, round(12 * (steps / 100) ** 0.25), (steps - 2 * features - 2) // (features + 1))


def _lagged(rows: list[np.ndarray], lags: int, skip: int) -> tuple[np.ndarray, np.ndarray]:
    """The stacked regression of ``rows`` (each ``[L, D]``): targets ``[n, D]`` at steps ``t >= skip`` of each row
    and regressors ``[n, 1 + lags D]`` (a constant, then ``x_{t-1}, ..., x_{t-lags}``)."""
    targets, regressors = [], []
    for row in rows:
        if len(row) <= skip:
            continue
        targets.append(row[skip:])
        lagged = [row[skip - j : len(row) - j] for j in range(1, lags + 1)]
        regressors.append(np.concatenate([np.ones((len(row) - skip, 1)), *lagged], 1))
    return np.concatenate(targets), np.concatenate(regressors)


def _least_squares(targets: np.ndarray, regressors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(coefficients [1 + p D, D], residuals [n, D])`` of the regression."""
    coefficients = np.linalg.lstsq(regressors, targets, rcond=None)[0]
    return coefficients, targets - regressors @ coefficients


def pooled_var(rows: list[np.ndarray]) -> VarParameters:
    """The VAR of the stacked lagged regressions of ``rows``, its lag order by AIC (``log det Sigma_mle + 2 k / n``,
    ``k = p D^2 + D``) on the steps ``t >= p_max`` of every row."""
    features = rows[0].shape[1]
    top = max(max_lags(max(len(row) for row in rows), features), 0)
    criteria = []
    for lags in range(top + 1):
        targets, regressors = _lagged(rows, lags, top)
        residuals = _least_squares(targets, regressors)[1]
        sign, log_det = np.linalg.slogdet(residuals.T @ residuals / len(targets))
        criteria.append(log_det + 2 * (lags * features**2 + features) / len(targets) if sign > 0 else np.inf)
    lags = int(np.argmin(criteria))
    targets, regressors = _lagged(rows, lags, lags)
    coefficients, residuals = _least_squares(targets, regressors)
    sigma = residuals.T @ residuals / max(len(targets) - regressors.shape[1], 1)
    coefs = coefficients[1:].reshape(lags, features, features).transpose(0, 2, 1)
    return VarParameters(coefficients[0], coefs, sigma)


class VectorAutoregression(ClassicalForecaster):
    """statsmodels' ``VAR`` per row on its history (see the module docstring); multivariate data only."""

    name = "var"
    uses_season = False

    def _check_features(self, features: int) -> None:
        if features < 2:
            raise ValueError(
                "the var forecaster models several features together: x must have D >= 2 features, "
                "got D=1 (use arima or ets for one)"
            )

    def _fit(self, rows: list[np.ndarray]) -> None:
        self.pooled = pooled_var(rows)

    def _estimate(self, history: np.ndarray) -> VarParameters | None:
        from statsmodels.tsa.api import VAR  # where a row is fitted: a board that keeps its rows never pays it

        top = max_lags(len(history), history.shape[1])
        if top < 1:
            return None
        with quiet():
            try:
                result = VAR(history).fit(maxlags=top, ic="aic", trend="c")
            except (np.linalg.LinAlgError, ValueError):
                return None
        self._rows[f"VAR({result.k_ar})"] += 1
        return VarParameters(result.intercept, result.coefs, result.sigma_u)

    def _predict(self, parameters: VarParameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        intercept, coefs, sigma = parameters
        lags, steps = len(coefs), len(row)
        padded = np.concatenate([np.broadcast_to(self.training.mean, (lags, row.shape[1])), row])
        mean = intercept + sum(
            (padded[lags - j - 1 : lags - j - 1 + steps] @ coefs[j].T for j in range(lags)), np.zeros_like(row)
        )
        cov = np.broadcast_to(sigma, (steps, *sigma.shape)).copy()
        for t in range(min(lags, steps)):
            for j in range(t, lags):  # x_{t-j-1} precedes the row
                cov[t] += coefs[j] @ self.training.cov @ coefs[j].T
        return mean, cov

    def _draw(
        self, parameters: VarParameters, row: np.ndarray, horizon: int, num_samples: int, generator
    ) -> torch.Tensor:
        intercept, coefs, sigma = (torch.from_numpy(np.asarray(v, dtype=np.float64)) for v in parameters)
        lags, features = len(coefs), row.shape[1]
        path = torch.from_numpy(row).expand(num_samples, *row.shape)
        missing = max(lags - len(row), 0)
        if missing:
            mean = torch.from_numpy(self.training.mean).expand(missing, features)
            cov = torch.from_numpy(self.training.cov).expand(missing, features, features)
            path = torch.cat([gaussian_draws(mean, cov, num_samples, generator), path], 1)
        zeros = torch.zeros(features, dtype=torch.float64)
        for _ in range(horizon):
            recent = path[:, path.shape[1] - lags :].flip(1)  # [S, p, D], the latest first
            mean = intercept + torch.einsum("jde,sje->sd", coefs, recent)
            path = torch.cat([path, (mean + gaussian_draws(zeros, sigma, num_samples, generator)).unsqueeze(1)], 1)
        return path[:, -horizon:]

    @property
    def source(self) -> str:
        return "a VAR per series (lag order by AIC)"

    def _choices(self) -> dict:
        return {
            "pooled": f"VAR({len(self.pooled.coefs)})",
            "lag_order": f"AIC, up to {MAX_LAGS} lags as a history allows; the pooled fit where it allows none",
        }

    def _count_parameters(self) -> int:
        lags, features = len(self.pooled.coefs), len(self.training.mean)
        return lags * features**2 + features + features * (features + 1) // 2

"""What every classical forecaster shares: the checks, the training split's statistics and season, and the
Gaussian one-step predictive and forecasts assembled from each row's parameters.

A forecaster's parameters for a row come from the row's own history (its context, or all of its valid steps for a
forecast) when that is long enough for the model (``_estimate``), else from the pooled fit on the training split
(``pooled``); ``_predict`` then filters the row's valid steps with those parameters fixed, and ``_draw`` simulates on
from its last step. Everything is computed in float64 numpy (statsmodels' own) and handed back in the input's dtype.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ppl_models.inference.data.transforms import fundamental_lag
from ppl_models.inference.protocol import OneStepPredictive, check_num_samples
from ppl_models.inference.validation import check_positive_int, check_scored, check_sequences

__all__ = [
    "ClassicalForecaster",
    "Training",
    "detect_season",
    "gaussian_draws",
    "psd_root",
    "SEASON_THRESHOLD",
    "MAX_SEASON_LAG",
    "CHOICE_ROWS",
    "VARIANCE_FLOOR",
    "Progress",
    "RowMap",
]

#: a lag is the season only where the pooled autocorrelation of first differences there exceeds this
SEASON_THRESHOLD = 0.3
#: the longest season looked for (a year of daily steps)
MAX_SEASON_LAG = 400
#: a training split of at most this many rows (a few long series) has each row's model chosen on its own history;
#: a larger one (a panel) has one choice, made on at most this many of its rows
CHOICE_ROWS = 30
#: the smallest predictive variance (the tensors' units): a constant history would otherwise give a zero one
VARIANCE_FLOOR = 1e-12

#: told how far a forecaster is: ``(what, done, total)`` (``"series"``: rows predicted of ``total``; ``"fits"``:
#: statsmodels fits made while fitting, ``total`` ``None``)
Progress = Callable[[str, int, int | None], None]
#: maps a function over items, results in the items' order (``map``, or a process pool's map)
RowMap = Callable[[Callable, Iterable], Iterable]


@dataclass(frozen=True)
class Training:
    """The training split's pooled statistics: per-feature ``mean [D]`` and covariance ``cov [D, D]`` of its valid
    steps (the predictive of a step with no history)."""

    mean: np.ndarray
    cov: np.ndarray

    @classmethod
    def of(cls, rows: list[np.ndarray]) -> Training:
        values = np.concatenate(rows)
        centred = values - values.mean(0)
        return cls(values.mean(0), centred.T @ centred / len(values))

    @property
    def variance(self) -> np.ndarray:
        return np.diag(self.cov).copy()


def rows_of(x: torch.Tensor, mask: torch.Tensor) -> list[np.ndarray]:
    """The valid steps of each row of ``x [N, T, D]`` (``mask [N, T]``, valid steps first): float64 ``[L_i, D]``."""
    values = x.detach().to("cpu", torch.float64).numpy()
    return [values[i, :length] for i, length in enumerate(mask.sum(1).tolist())]


def normal_quantile(p: float) -> float:
    """The standard normal's quantile at ``p`` (scipy's ``norm.ppf``, imported where a row is fitted: a board that
    keeps its rows never pays for scipy.stats)."""
    from scipy.stats import norm

    return float(norm.ppf(p))


def detect_season(rows: list[np.ndarray]) -> tuple[int, float | None, int | None]:
    """``(m, autocorrelation, best lag)``: the lag in ``2..min(T/2, MAX_SEASON_LAG)`` (``T`` the longest row) where
    the autocorrelation of first differences, pooled over rows and features, is largest; ``m`` is that lag where
    the autocorrelation exceeds :data:`SEASON_THRESHOLD`, else 1 (no season)."""
    top = min(max(len(r) for r in rows) // 2, MAX_SEASON_LAG)
    if top < 2:
        return 1, None, None
    products, energy = np.zeros(top + 1), 0.0
    for row in rows:
        diffs = np.diff(row, axis=0)
        if len(diffs) < 2:
            continue
        diffs = diffs - diffs.mean(0)
        size = 1 << int(2 * len(diffs) - 1).bit_length()  # no wrap-around of the circular correlation
        spectrum = np.fft.rfft(diffs, n=size, axis=0)
        lagged = np.fft.irfft(np.abs(spectrum) ** 2, n=size, axis=0)[: top + 1].sum(1)
        products[: len(lagged)] += lagged
        energy += float((diffs**2).sum())
    if energy <= 0:
        return 1, None, None
    autocorrelation = products[2:] / energy
    lag = fundamental_lag(autocorrelation) + 2
    best = float(autocorrelation[lag - 2])
    return (lag if best > SEASON_THRESHOLD else 1), best, lag


def psd_root(cov: torch.Tensor) -> torch.Tensor:
    """``L`` with ``L L^T = cov`` for symmetric positive semi-definite ``cov [..., k, k]`` (eigenvalues below 0 by
    rounding count as 0)."""
    values, vectors = torch.linalg.eigh(cov)
    return vectors * values.clamp_min(0).sqrt().unsqueeze(-2)


def gaussian_draws(mean: torch.Tensor, cov: torch.Tensor, num_samples: int, generator) -> torch.Tensor:
    """``[S, *batch, k]`` draws of ``N(mean [*batch, k], cov [*batch, k, k])`` from ``generator``."""
    noise = torch.randn((num_samples, *mean.shape), generator=generator, dtype=torch.float64)
    return mean + (psd_root(cov) @ noise.unsqueeze(-1)).squeeze(-1)


def gaussian_log_density(x: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor) -> torch.Tensor:
    """``log N(x; mean, cov)`` over the last dimension of ``x``, ``mean`` ``[..., k]`` (``cov [..., k, k]``)."""
    values, vectors = torch.linalg.eigh(cov)
    values = values.clamp_min(VARIANCE_FLOOR)
    rotated = (vectors.transpose(-1, -2) @ (x - mean).unsqueeze(-1)).squeeze(-1)
    return -0.5 * ((rotated**2 / values).sum(-1) + values.log().sum(-1) + x.shape[-1] * np.log(2 * np.pi))


class ClassicalForecaster:
    """A classical forecaster of ``x [N, T, D]``: :meth:`fit` on the training split, then :meth:`one_step` and
    :meth:`forecast` row by row (see :mod:`ppl_models.classical`).

    A subclass sets ``name`` and ``uses_season`` and writes ``_fit`` (the pooled fit: sets ``pooled``),
    ``_estimate`` (a row's parameters from its history, ``None`` where it is too short), ``_predict`` (the one-step
    means ``[L, D]`` and covariances ``[L, D, D]`` of a row's valid steps), ``_draw`` (``[S, H, D]`` draws after
    them), ``_choices`` and ``_count_parameters``.

    ``row_map`` maps :meth:`one_step`'s work over its rows (``map``; a process pool's map gives the same figures)
    and ``progress`` (:data:`Progress`, or ``None``) is told how far it is; neither is pickled.
    """

    name: ClassVar[str] = ""
    #: whether the model reads the season (given, or detected on the training split)
    uses_season: ClassVar[bool] = True

    def __init__(self, *, season: int | None = None, log: bool = False):
        self.season = None if season is None else check_positive_int(season, name="season")
        if not isinstance(log, bool):
            raise TypeError(f"log must be a bool, got {type(log).__name__}")
        self.log = log
        self.training: Training | None = None
        self.period = 1
        self.pooled = None
        self._season_found: tuple[float | None, int | None] = (None, None)
        self._rows = Counter()
        self.row_map: RowMap = map
        self.progress: Progress | None = None
        #: how many leading columns are forecast and scored (``None``: all); the others are inputs, held as read
        self.modelled_features: int | None = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("row_map", "progress")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, row_map=map, progress=None)

    # --- the interface -----------------------------------------------------------------------------------------
    def fit(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> ClassicalForecaster:
        """Fit on the training split ``x [N, T, D]`` (``mask [N, T]``, valid steps first): the pooled statistics,
        the season and the pooled model. Returns the forecaster."""
        x, mask = check_sequences(x, mask)
        self._check_features(x.shape[-1])
        rows = [row for row in rows_of(self._modelled(x, mask), mask) if len(row)]
        if not rows:
            raise ValueError("mask marks no valid step: fit needs a training split with data")
        return self._fit_rows(rows, Training.of(rows))

    def _fit_rows(self, rows: list[np.ndarray], training: Training) -> ClassicalForecaster:
        """Fit on the valid steps ``rows`` (each ``[L, D]``) of a checked training split whose statistics are
        ``training``. Returns the forecaster."""
        self.training, self._rows = training, Counter()
        if self.uses_season:
            self.period = self.season if self.season is not None else self._detected(rows)
        self._fit(rows)
        return self

    @torch.no_grad()
    def one_step(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        scored: torch.Tensor | None = None,
        num_samples: int = 0,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """The Gaussian one-step predictive ``p(x_t | x_<t of its row)`` of every valid step of ``x [N, T, D]``.

        ``scored [N, T]`` (bool, within ``mask``; ``None``: every valid step): a row's parameters are estimated on
        its context (its valid steps before the scored ones) when that is long enough, else taken from the pooled
        fit; scored steps are only filtered through. Returns ``mean [N, T, D]``, ``log_density [N, T]`` (0 at
        padding) and, for ``num_samples > 0``, ``samples [S, N, T, D]`` drawn from ``generator``.
        """
        x, mask = self._checked(x, mask)
        scored = check_scored(scored, mask)
        num_samples = check_num_samples(num_samples)
        contexts = torch.zeros(len(mask), dtype=torch.long) if scored is None else (mask & ~scored).sum(1)
        rows = rows_of(self._modelled(x, mask), mask)
        self._rows["rows"] += len(rows)
        mean = np.zeros(x.shape, dtype=np.float64)
        cov = np.broadcast_to(np.eye(x.shape[-1]), (*x.shape, x.shape[-1])).copy()
        work = [(row, context) for row, context in zip(rows, contexts.tolist())]
        for i, (row_mean, row_cov, counts) in enumerate(self.row_map(self._row_predictive, work)):
            self._rows.update(counts)
            mean[i, : len(row_mean)], cov[i, : len(row_cov)] = row_mean, row_cov
            self._report("series", i + 1, len(rows))
        return self._predictive(x, mask, torch.from_numpy(mean), torch.from_numpy(cov), num_samples, generator)

    @torch.no_grad()
    def forecast(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        horizon: int = 1,
        num_samples: int = 100,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``[S, N, H, D]`` joint draws of the ``horizon`` steps after each row's last valid step of ``x [N, T, D]``,
        with parameters estimated on the row's valid steps (the pooled fit where they are too few)."""
        x, mask = self._checked(x, mask)
        horizon = check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        rows = rows_of(self._modelled(x, mask), mask)
        empty = [i for i, row in enumerate(rows) if not len(row)]
        if empty:
            raise ValueError(f"mask marks no valid step in row {empty[0]} of x: a forecast needs a history")
        self._rows["rows"] += len(rows)
        draws = torch.stack(
            [self._draw(self._parameters(row), row, horizon, num_samples, generator) for row in rows], 1
        )
        return self._in_units(draws).to(dtype=x.dtype, device=x.device)

    def describe(self) -> dict:
        """What was chosen, JSON-ready: the model, the season (and how it was found), the pooled fit, and how the
        rows predicted or forecast since the fit got their parameters (their own history or the pooled fit, and the
        models chosen on their histories)."""
        self._require_fit()
        record = {
            "model": self.name,
            "num_parameters": self.num_parameters,
            "transform": "log" if self.log else "none",
            **self._choices(),
        }
        if self.uses_season:
            record["season"] = self.period
            record["season_source"] = self._season_source()
        if self._rows:
            record["rows_since_fit"] = dict(self._rows)
        return record

    @property
    def source(self) -> str:
        """The predictive's origin in words, for reports."""
        return f"{self.name} per series"

    @property
    def num_parameters(self) -> int:
        """Parameters per fitted row."""
        self._require_fit()
        return self._count_parameters()

    # --- for the subclasses --------------------------------------------------------------------------------------
    def _check_features(self, features: int) -> None:
        """Raise ``ValueError`` where the model cannot serve ``D = features``."""

    def _fit(self, rows: list[np.ndarray]) -> None:
        raise NotImplementedError

    def _estimate(self, history: np.ndarray):
        raise NotImplementedError

    def _predict(self, parameters, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _draw(self, parameters, row: np.ndarray, horizon: int, num_samples: int, generator) -> torch.Tensor:
        raise NotImplementedError

    def _choices(self) -> dict:
        return {}

    def _count_parameters(self) -> int:
        raise NotImplementedError

    # --- the plumbing ------------------------------------------------------------------------------------------
    def _row_predictive(self, work: tuple[np.ndarray, int]) -> tuple[np.ndarray, np.ndarray, Counter]:
        """The one-step means ``[L, D]`` and covariances ``[L, D, D]`` of a row's valid steps ``[L, D]`` given
        its context's length, with what the row added to the counts of :meth:`describe` (its own, so that rows
        predicted in other processes add up to the same counts)."""
        row, context = work
        if not len(row):
            return row, row[:, :, None], Counter()
        before, self._rows = self._rows, Counter()
        try:
            mean, cov = self._predict(self._parameters(row[:context]), row)
            return mean, cov, self._rows
        finally:
            self._rows = before

    def _report(self, what: str, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(what, done, total)

    def _parameters(self, history: np.ndarray):
        """A row's parameters: from its ``history [c, D]`` where the model can estimate them there, else pooled."""
        own = self._estimate(history) if len(history) else None
        self._rows["own history" if own is not None else "pooled fit"] += 1
        return self.pooled if own is None else own

    def _checked(self, x, mask) -> tuple[torch.Tensor, torch.Tensor]:
        self._require_fit()
        return check_sequences(x, mask, feature_size=len(self.training.mean))

    def _require_fit(self) -> None:
        if self.training is None:
            raise ValueError(f"the {self.name} forecaster is not fitted: call fit(x, mask) on the training split first")

    def _detected(self, rows: list[np.ndarray]) -> int:
        period, best, lag = detect_season(rows)
        self._season_found = (best, lag)
        return period

    def _season_source(self) -> str:
        if self.season is not None:
            return "given"
        best, lag = self._season_found
        if best is None:
            return "none: the training rows are too short to look for one"
        verdict = "kept" if self.period > 1 else f"below {SEASON_THRESHOLD}, so none (m = 1)"
        return f"detected: autocorrelation of first differences {best:.3f} at lag {lag}, {verdict}"

    def _modelled(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` as the model sees it: with :attr:`log`, ``log`` of its :attr:`modelled_features` leading columns
        (every valid value of those must be positive; the covariates after them as they are), else ``x``."""
        if not self.log:
            return x
        columns = self.modelled_features or x.shape[-1]
        values = x.detach().double()
        if not (values[..., :columns][mask] > 0).all():
            raise ValueError(f"the {self.name} forecaster models log x: every valid value of x must be > 0")
        logged = torch.where(mask.unsqueeze(-1), values[..., :columns], 1.0).log()
        return torch.cat([logged, values[..., columns:]], -1)

    def _in_units(self, draws: torch.Tensor) -> torch.Tensor:
        """Draws ``[..., D]`` of :meth:`_modelled`'s columns back in ``x``'s units (``exp`` of the logged ones)."""
        if not self.log:
            return draws
        columns = self.modelled_features or draws.shape[-1]
        return torch.cat([draws[..., :columns].exp(), draws[..., columns:]], -1)

    def _predictive(self, x, mask, mean, cov, num_samples: int, generator) -> OneStepPredictive:
        """The :class:`OneStepPredictive` of ``N(mean [N, T, D], cov [N, T, D, D])`` at the valid steps of ``x``; with
        :attr:`log` that law is of ``log x``: the log density carries the Jacobian ``-sum_d log x_d``, the mean is
        the log-normal's ``exp(mean + var / 2)`` and the draws are ``exp`` of the Gaussian's. With
        :attr:`modelled_features` the law is of those leading columns; the others are held as read."""
        valid = mask.cpu()
        columns = self.modelled_features or x.shape[-1]
        inputs = x.detach().cpu().double()[..., columns:]
        values = self._modelled(x.detach().cpu().double(), valid)[..., :columns]
        mean, cov = mean[..., :columns], cov[..., :columns, :columns]
        log_density = gaussian_log_density(values, mean, cov)
        samples = None
        if num_samples:
            samples = gaussian_draws(mean, cov, num_samples, generator)
            samples = torch.cat([samples.exp() if self.log else samples, inputs.expand(num_samples, *inputs.shape)], -1)
            samples = (samples * valid.unsqueeze(-1)).to(dtype=x.dtype, device=x.device)
        if self.log:
            log_density = log_density - values.sum(-1)
            mean = (mean + torch.diagonal(cov, dim1=-2, dim2=-1) / 2).exp()
        mean = torch.cat([mean, inputs], -1)
        log_density = torch.where(valid, log_density, 0.0)
        return OneStepPredictive(
            samples,
            (mean * valid.unsqueeze(-1)).to(dtype=x.dtype, device=x.device),
            log_density.to(dtype=x.dtype, device=x.device),
            self.source,
        )

"""Recalibration of forecast samples, fitted on held-out sequences and applied to new forecasts.

A forecaster's samples ``[S, B, H, D]`` (``S`` paths, ``B`` sequences, ``H`` steps ahead) can
be too wide or too narrow. :func:`fit_recalibration` learns a correction from forecasts of
validation sequences whose outcomes are known; :meth:`Recalibration.apply` corrects the
samples of other sequences, so every metric of :mod:`ppl_models.inference.calibration` applies to the
result unchanged. Two methods:

* ``"scale"`` (variance scaling): the samples are stretched about their per-step median,
  ``m + c (s - m)``, with ``c^2 = mean((y - m)^2) / mean(Var s)`` over the validation
  forecasts: the factor that makes the mean squared error about the median equal to the
  spread. It keeps the forecast's shape and corrects its scale.
* ``"conformal"`` (quantile recalibration, Kuleshov et al. 2018, as split-conformal on the
  PIT): each validation outcome's PIT ``u = P_hat(X < y) + P_hat(X = y) / 2`` under its
  forecast is a conformity score. A new forecast's ``p``-quantile is replaced by its
  ``q(p)``-quantile, where ``q(p)`` is the order statistic of rank ``ceil((n + 1) p)``
  (``p >= 1/2``) or ``floor((n + 1) p)`` (``p < 1/2``) of the ``n`` validation PITs,
  with ``u_(0) = 0`` and ``u_(n + 1) = 1``. For exchangeable sequences, the central interval
  of level ``a`` then covers with probability at least ``a`` (split-conformal's guarantee);
  it corrects shape as well as scale. The remapped quantiles stay within the samples' range,
  so the samples are first variance-scaled (as ``"scale"``, fitted on the same validation
  forecasts) to bring the outcomes inside it; the PITs are those of the scaled samples. (The
  guarantee is exact for a fixed scale; fitting one factor per step on the same data bends it
  little.)

Both are fitted pooled over the steps ahead (the default, from ``B * H`` outcomes) or per step
ahead (``per_step=True``, one correction per horizon from the ``B`` validation sequences).
With few validation sequences, pool: a per-step conformal fit from ``n`` outcomes cannot
resolve levels beyond ``n / (n + 1)`` and turns them into the samples' whole range.
:func:`coverage_by_step` scores forecasts one step ahead at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .calibration import DEFAULT_LEVELS, coverage

__all__ = ["Recalibration", "fit_recalibration", "coverage_by_step", "RECALIBRATION_METHODS"]

RECALIBRATION_METHODS = ("scale", "conformal")


@dataclass(frozen=True)
class Recalibration:
    """A fitted correction of forecast samples (from :func:`fit_recalibration`).

    Attributes:
        method: ``"scale"`` or ``"conformal"``.
        per_step: whether each step ahead has its own correction.
        horizon: ``H`` of the forecasts it was fitted on (and applies to).
        factors: the spread factors ``c``, ``[H]`` (or ``[1]`` pooled).
        pits: ``"conformal"``: the sorted validation PITs of the scaled samples, ``[H, n]`` (or
            ``[1, n]`` pooled); ``None`` for ``"scale"``.
    """

    method: str
    per_step: bool
    horizon: int
    factors: torch.Tensor
    pits: torch.Tensor | None = None

    def apply(self, samples: torch.Tensor) -> torch.Tensor:
        """Corrected samples ``[S, B, H, D]`` from forecast samples of the same shape (and horizon ``H``)."""
        samples = _check_samples(samples, name="samples")
        if samples.shape[2] != self.horizon:
            raise ValueError(
                f"samples must forecast the fitted horizon H = {self.horizon} (shape [S, B, H, D]), "
                f"got H = {samples.shape[2]}"
            )
        samples = _scaled(samples, self.factors)
        if self.pits is None:
            return samples
        num_samples = samples.shape[0]
        grid = (torch.arange(num_samples, dtype=torch.float64) + 0.5) / num_samples  # [S]
        levels = torch.stack([_conformal_levels(pits, grid) for pits in self.pits.double()])  # [H or 1, S]
        return _quantiles_per_step(samples, levels.expand(self.horizon, -1).to(samples))


def fit_recalibration(
    samples: torch.Tensor, observed: torch.Tensor, method: str = "conformal", *, per_step: bool = False
) -> Recalibration:
    """Fit a :class:`Recalibration` from validation forecasts and what happened.

    Args:
        samples: forecast samples ``[S, B, H, D]`` of the validation sequences.
        observed: their outcomes ``[B, H, D]``.
        method: ``"scale"`` (variance scaling about the median) or ``"conformal"`` (quantile
            recalibration on the PIT); see the module docstring.
        per_step: one correction per step ahead (``True``) or one for all steps (the default).

    Returns:
        The fitted :class:`Recalibration`; apply it to forecasts of other sequences.
    """
    if method not in RECALIBRATION_METHODS:
        raise ValueError(f"method must be one of {RECALIBRATION_METHODS}, got {method!r}")
    if not isinstance(per_step, bool):
        raise TypeError(f"per_step must be a bool, got {per_step!r}")
    samples = _check_samples(samples, name="samples")
    if not torch.is_tensor(observed) or tuple(observed.shape) != tuple(samples.shape[1:]):
        shape = tuple(observed.shape) if torch.is_tensor(observed) else type(observed).__name__
        raise ValueError(
            f"observed must be a tensor [B, H, D] = {tuple(samples.shape[1:])} (the samples' outcomes), got {shape}"
        )
    if not bool(torch.isfinite(observed).all()):
        raise ValueError("observed must hold finite values")
    horizon = samples.shape[2]
    samples, observed = samples.double(), observed.double()
    median = samples.quantile(0.5, dim=0)
    steps = (0, 2) if per_step else (0, 1, 2)  # keep H when per step
    squared_error = ((observed - median) ** 2).mean(dim=steps)
    spread = samples.var(0).mean(dim=steps)
    if bool((spread <= 0).any()):
        raise ValueError("samples must spread (every sample of a step is equal): scaling cannot widen them")
    factors = (squared_error / spread).sqrt().reshape(-1).float()
    if method == "scale":
        return Recalibration(method, per_step, horizon, factors)
    scaled = _scaled(samples, factors)
    below = (scaled < observed).double().mean(0)
    equal = (scaled == observed).double().mean(0)
    pits = (below + equal / 2).transpose(0, 1).reshape(horizon, -1)  # [H, B * D]
    pits = (pits if per_step else pits.reshape(1, -1)).sort(-1).values
    return Recalibration(method, per_step, horizon, factors, pits.float())


def _scaled(samples: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """``m + c (s - m)`` about the per-step median ``m`` of ``samples [S, B, H, D]``; ``factors`` ``[H]`` or ``[1]``."""
    median = samples.quantile(0.5, dim=0, keepdim=True)
    return median + factors.to(samples).reshape(1, 1, -1, 1) * (samples - median)


def coverage_by_step(samples: torch.Tensor, observed: torch.Tensor, levels=DEFAULT_LEVELS) -> dict[float, list[float]]:
    """Coverage of the central intervals of forecasts ``[S, B, H, D]`` at each step ahead.

    Returns ``{level: [H rates]}``: entry ``h`` is the share of the outcomes ``observed [B, H, D]``
    at step ``h + 1`` ahead (pooled over sequences and features) inside the samples' central
    interval of that level (:func:`ppl_models.inference.calibration.coverage` on that step alone).
    """
    samples = _check_samples(samples, name="samples")
    by_step = [coverage(samples[:, :, h : h + 1], observed[:, h : h + 1], levels) for h in range(samples.shape[2])]
    return {level: [rates[level] for rates in by_step] for level in levels}


def _conformal_levels(pits: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """The recalibrated quantile levels ``q(p)`` of ``grid`` from sorted PITs ``[n]`` (see the module docstring)."""
    n = pits.shape[0]
    padded = torch.cat([pits.new_zeros(1), pits, pits.new_ones(1)])  # u_(0) = 0, u_(1..n), u_(n+1) = 1
    ranks = torch.where(grid >= 0.5, torch.ceil((n + 1) * grid - 1e-9), torch.floor((n + 1) * grid + 1e-9))
    return padded[ranks.long().clamp(0, n + 1)]


def _quantiles_per_step(samples: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """``[len(levels[h]), B, H, D]``: the empirical quantiles of ``samples [S, B, H, D]`` at ``levels [H, L]``.

    Linear interpolation between order statistics, as ``torch.quantile``.
    """
    ordered = samples.sort(0).values
    position = levels.T * (samples.shape[0] - 1)  # [L, H]
    low = position.floor().long()
    high = position.ceil().long()
    fraction = (position - low).reshape(*position.shape[:1], 1, -1, 1)

    def take(index):
        expanded = index.reshape(index.shape[0], 1, -1, 1).expand(-1, *samples.shape[1:])
        return ordered.gather(0, expanded)

    return take(low) + fraction * (take(high) - take(low))


def _check_samples(samples, *, name: str) -> torch.Tensor:
    if not torch.is_tensor(samples) or samples.dim() != 4 or samples.shape[0] < 2 or samples.numel() == 0:
        shape = tuple(samples.shape) if torch.is_tensor(samples) else type(samples).__name__
        raise ValueError(f"{name} must be a tensor [S, B, H, D] with S >= 2 forecast samples, got {shape}")
    if not torch.is_floating_point(samples) or not bool(torch.isfinite(samples).all()):
        raise ValueError(f"{name} must hold finite floating-point values")
    return samples

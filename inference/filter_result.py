"""What a particle-filter run returns: :class:`FilterResult`, the weights and records of the run, with the
genealogy's paths and its filtering and smoothing means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .resampling import gather_particles

__all__ = ["FilterResult", "weighted_sum"]


@dataclass
class FilterResult:
    """Output of :meth:`ParticleFilter.run`.

    Attributes:
        log_evidence: ``[B]`` SMC estimate of ``log p(x_{1:T_b})`` per sequence (nats); finite: a step
            whose every incremental weight fell below the dtype's range is held at its lowest
            value (with a ``RuntimeWarning``), and so is the sum.
        log_evidence_steps: ``[B, T]`` increments ``log p̂(x_t | x_{<t})``; 0 at padding.
        num_steps: ``[B]`` valid steps per sequence.
        state: final particle state, tensors ``[K, B, ...]``.
        log_weights: ``[K, B]`` final normalised log-weights.
        ess: ``[B, T]`` effective sample size after each weighting, in ``[1, K]``.
        resampled: ``[B, T]`` bool, whether step ``t`` began with a resampling.
        fisher_objective: ``[B]`` surrogate whose gradient is the Fisher-identity
            estimate of ``∇ log p(x)`` (``stop_weights`` mode), else ``None``.
        ancestors: ``[T, K, B]`` ancestor of each particle at step ``t`` among those of
            step ``t - 1`` (identity at ``t = 0``), if ancestry was kept.
        history_log_weights: ``[T, K, B]`` normalised log-weights after each weighting.
        history: dict of ``[T, K, B, ...]`` particle states after each step.
        means: dict of ``[B, T, ...]`` filtering means ``E[z_t | x_{1:t}]`` of the states named
            by ``keep_means``, recorded without keeping the particles (at padding, the carried state's).
        predictive: ``[S, B, T, D]`` one-step-ahead predictive samples, if requested.
        predictive_mean: ``[B, T, D]`` one-step-ahead predictive means ``E[x_t | x_{<t}]``,
            if requested (0 at padding).
        context: what the model's ``start`` returned besides the state (for forecasts).
        num_steps_total: ``T``, the padded length of the filtered batch.
    """

    log_evidence: torch.Tensor
    log_evidence_steps: torch.Tensor
    num_steps: torch.Tensor
    state: dict
    log_weights: torch.Tensor
    ess: torch.Tensor
    resampled: torch.Tensor
    fisher_objective: torch.Tensor | None = None
    ancestors: torch.Tensor | None = None
    history_log_weights: torch.Tensor | None = None
    history: dict | None = None
    means: dict | None = None
    predictive: torch.Tensor | None = None
    predictive_mean: torch.Tensor | None = None
    context: Any = None
    num_steps_total: int = 0

    def _require_ancestry(self, key: str) -> torch.Tensor:
        if self.history is None:
            raise ValueError("this result kept no ancestry: run the filter with keep_ancestry=True")
        if key not in self.history:
            raise ValueError(f"key must be one of the recorded states {sorted(self.history)}, got {key!r}")
        return self.history[key]

    def _ancestor_indices(self, end: int, start: int) -> torch.Tensor:
        """``[K, B]`` index, among step ``start``'s particles, of the ancestor of each particle of step ``end``."""
        index = torch.arange(self.ancestors.shape[1], device=self.ancestors.device).unsqueeze(-1)
        index = index.expand_as(self.ancestors[0])
        for s in range(end, start, -1):
            index = torch.gather(self.ancestors[s], 0, index)
        return index

    def paths(self, key: str, end: int | None = None) -> torch.Tensor:
        """Genealogical trajectories ``[end + 1, K, B, ...]`` of the particles at step ``end``.

        Row ``s`` holds the ancestor at step ``s`` of each particle alive at ``end``
        (default: the last step), following the recorded ancestor indices.
        """
        values = self._require_ancestry(key)
        end = values.shape[0] - 1 if end is None else end
        index = self._ancestor_indices(end, end)
        rows = []
        for s in range(end, -1, -1):
            rows.append(gather_particles(values[s], index))
            if s > 0:
                index = torch.gather(self.ancestors[s], 0, index)
        return torch.stack(rows[::-1])

    def filtered_mean(self, key: str) -> torch.Tensor:
        """Filtering means ``E[z_t | x_{1:t}]`` as ``[B, T, ...]`` (recorded by ``keep_means``, or from the history)."""
        if self.means is not None and key in self.means:
            return self.means[key]
        values = self._require_ancestry(key)
        return self._weighted_mean(values, self.history_log_weights).transpose(0, 1)

    def smoothed_mean(self, key: str, lag: int | None = None) -> torch.Tensor:
        """Smoothing means ``[B, T, ...]`` from the particle genealogy.

        With ``lag=None`` every step uses the final weighted paths
        (``E[z_t | x_{1:T}]``, subject to path degeneracy); with ``lag=L`` step
        ``t`` uses the paths of the particles at ``min(t + L, T - 1)``
        (fixed-lag smoothing, Olsson et al. 2008). Cost ``O(T min(L, T))`` gathers.
        """
        values = self._require_ancestry(key)
        steps = values.shape[0]
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, int) or lag < 0):
            raise ValueError(f"lag must be None or an int >= 0, got {lag!r}")
        if lag is None or lag >= steps - 1:
            paths = self.paths(key)
            return self._weighted_mean(paths, self.history_log_weights[-1].expand(steps, -1, -1)).transpose(0, 1)
        means = []
        for t in range(steps):
            end = min(t + lag, steps - 1)
            traced = gather_particles(values[t], self._ancestor_indices(end, t))
            means.append(self._weighted_mean(traced, self.history_log_weights[end]))
        return torch.stack(means, dim=1)

    @staticmethod
    def _weighted_mean(values: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
        """Sum over the particle dim of ``values [..., K, B, ...]`` weighted by ``log_weights [..., K, B]``."""
        return weighted_sum(values, log_weights.exp())


def weighted_sum(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Sum over the particle dim of ``values [..., K, B, ...]`` weighted by ``weights [..., K, B]``."""
    particle_dim = weights.dim() - 2
    weights = weights.reshape(weights.shape + (1,) * (values.dim() - weights.dim()))
    return (weights * values).sum(particle_dim)

"""The per-step helpers of a particle-filter run: the choice between a step's new and carried values per
sequence (:func:`select`), the records kept step by step (:class:`AncestryRecord`, :class:`MeanRecord`,
:class:`FisherScore`) and the report of failed or saturated weights after the run (:func:`report_failures`)."""

from __future__ import annotations

from collections import deque

import torch

from .filter_result import weighted_sum
from .particle_model import FilterFailed
from .resampling import gather_particles
from .saturation import raise_failures, warn_saturated

__all__ = ["select", "report_failures", "AncestryRecord", "MeanRecord", "FisherScore"]


def report_failures(increments: torch.Tensor, lowest: float) -> None:
    """Raise for the first NaN/+inf weight; warn where every particle's weight fell below the dtype's range.

    ``increments [B, T]`` are the per-step log-evidence increments (0 at padding): NaN or +inf
    where some incremental weight was, ``lowest`` (log K is below its round-off) where every
    one was held there. Checked once after the loop, so the hot loop reads nothing per step;
    reported as every engine reports them (:mod:`ppl_models.inference.saturation`), a failure as :class:`FilterFailed`.
    """
    raise_failures(
        ~torch.isfinite(increments),
        what="the model's incremental log-weight",
        error=FilterFailed,
        cause="a model or proposal that cannot score this observation, or whose network overflowed on "
        "it or on an earlier value of the sequence; rescale the data or use float64",
    )
    warn_saturated(
        increments == lowest,
        dtype=increments.dtype,
        what="every particle's log-weight",
        consequence="the weights there are held at the dtype's lowest value (uniform), so the "
        "log-evidence is an upper bound",
        stacklevel=4,
    )


def select(valid: torch.Tensor | None, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` where ``valid [B]`` (or everywhere when ``valid`` is None), else ``old``.

    Works for per-sequence tensors ``[B]`` and particle tensors ``[K, B, ...]``.
    """
    if valid is None:
        return new
    return torch.where(valid.reshape(valid.shape + (1,) * max(new.dim() - 2, 0)), new, old)


class AncestryRecord:
    """Per-step records of ancestors, weights and states (``keep_ancestry``), stacked to ``[T, K, B, ...]``.

    Lists stacked once at the end, not writes into a preallocated buffer: under autograd each
    write into a buffer would copy the whole buffer's gradient in the backward pass (O(T^2)).
    """

    def __init__(self, keys: bool | tuple[str, ...]):
        self.keys = None if keys is True else tuple(keys)
        self.ancestors, self.log_w = [], []
        self.states: dict[str, list[torch.Tensor]] = {}

    def record(self, ancestors, log_w, state):
        self.ancestors.append(ancestors)
        self.log_w.append(log_w)
        for key, value in state.items():
            if self.keys is None or key in self.keys:
                self.states.setdefault(key, []).append(value)

    def finish(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        if self.keys is not None and set(self.keys) - set(self.states):
            raise ValueError(
                f"keep_ancestry names states {sorted(set(self.keys) - set(self.states))} "
                f"that the model does not have; its states are {sorted(self.states)}"
            )
        states = {key: torch.stack(values) for key, values in self.states.items()}
        return torch.stack(self.ancestors), torch.stack(self.log_w), states


class MeanRecord:
    """Weighted means over the particles of the states named by ``keep_means``, step by step, ``[B, T, ...]``."""

    def __init__(self, keys):
        if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
            raise TypeError(f"keep_means must be a tuple of state keys, got {keys!r}")
        self.keys = tuple(keys)
        self.steps: dict[str, list[torch.Tensor]] = {key: [] for key in self.keys}

    def record(self, weights: torch.Tensor, state: dict) -> None:
        if not self.keys:
            return
        missing = set(self.keys) - set(state)
        if missing:
            raise ValueError(
                f"keep_means names states {sorted(missing)} that the model does not have; "
                f"its states are {sorted(state)}"
            )
        for key in self.keys:
            self.steps[key].append(weighted_sum(state[key], weights))

    def finish(self) -> dict[str, torch.Tensor] | None:
        return {key: torch.stack(values, dim=1) for key, values in self.steps.items()} if self.keys else None


class FisherScore:
    """Fisher-identity surrogate: complete-data log-densities carried along each genealogy.

    A term ``log p(z_t, x_t | past)`` [K, B] is weighted by the detached normalised
    weights of step ``t + lag`` (``lag=None``: of the last step); terms travel with
    their particles through every resampling.
    """

    def __init__(self, like: torch.Tensor, lag: int | None):
        self.lag = lag
        self.path = torch.zeros_like(like)
        self.pending = deque()
        self.total = like.new_zeros(like.shape[1])

    def resample(self, ancestors):
        self.path = gather_particles(self.path, ancestors)
        self.pending = deque(gather_particles(term, ancestors) for term in self.pending)

    def add(self, term, log_w):
        if self.lag is None:
            self.path = self.path + term
            return
        self.pending.append(term)
        if len(self.pending) > self.lag:
            self.total = self.total + (log_w.detach().exp() * self.pending.popleft()).sum(0)

    def finish(self, log_w) -> torch.Tensor:
        """``[B]`` surrogate; remaining terms get the final weights."""
        path = self.path + sum(self.pending, torch.zeros_like(self.path))
        return self.total + (log_w.detach().exp() * path).sum(0)

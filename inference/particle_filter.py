"""Sequential Monte Carlo over a batch of sequences.

A *particle model* is any object with two methods (see :class:`ParticleModel`):

* ``start(x, mask, num_particles) -> (state, context)``: the state before the
  first step, a dict of tensors ``[K, B, ...]``, and any per-sequence context the
  steps need (precomputed features, for instance);
* ``step(state, t, x_t, context, *, reparameterize=True) -> Step``: propose the
  state at step ``t`` from ``state`` and ``x_t [B, D]`` and return the new state
  with its incremental log-weight ``log p(z_t, x_t | past) - log q(z_t | past, x_t)``
  and its complete-data log-density ``log p(z_t, x_t | past)``, each ``[K, B]``.
  ``reparameterize=False`` asks for Fisher's identity: the proposed state must be
  sampled without a gradient path (``sample`` rather than ``rsample``) and
  ``log_joint`` is required; otherwise ``log_joint`` may be ``None``.

and optionally (:data:`PARTICLE_OPTIONS`) ``simulate(state, t, context) -> (state, x_t)``,
a draw from the model one step ahead, used for predictive samples and forecasts, and
``predict_mean(state, t, context) -> [K, B, D]``, the mean of ``x_t`` given each
particle, used for one-step predictive means (note probabilities, for instance). A model
declares the optional methods it defines in its class attribute ``particle_options``
(``frozenset({"simulate", "predict_mean"})``; none when absent); the filter and forecasts
read that declaration (:func:`particle_option`).

Models written as distribution-returning modules get these methods from
:class:`ppl_models.inference.state_space.MarkovStateSpace`; Pyro ``init``/``step``
programs in the style of ``pyro.infer.SMCFilter`` get them from
:class:`ppl_models.inference.pyro_programs.PyroProgramModel`.

A run that fails (a NaN or ``+inf`` incremental log-weight at a valid step) raises
:class:`FilterFailed`, a ``ValueError`` naming the step and the sequence, as Pyro's
``SMCFailed`` is one for ``SMCFilter``.

The filter resamples (adaptively, per sequence) *before* each propagation, so the
final particle set stays weighted. It accumulates the log-evidence estimate

    log p̂(x_{1:t}) = sum_s logsumexp_k( log w̄_{s-1}^k + log α_s^k )

per sequence, where ``w̄`` are the normalised weights after resampling and ``α``
the incremental weights. ``exp`` of it is unbiased for every scheme here.

Gradient modes:

* ``reparam``: states are sampled with ``rsample``; resampling indices are
  constants (AESMC / FIVO / PF-RNN). ``-log_evidence`` is the training loss.
* ``soft``: as ``reparam`` with soft resampling, so gradients also flow through
  the importance-corrected weights (PF-RNN).
* ``stop_weights``: Fisher's identity (SMC Transformer). Sampled latents are
  constants (the model's ``step`` draws them without a gradient path);
  :attr:`FilterResult.fisher_objective` is the weighted sum, with detached final
  (or fixed-lag) weights, of the complete-data log-densities along each particle's
  genealogy. Its gradient estimates ``∇ log p(x)``: ``∇_θ log p_θ(x, z)`` at fixed
  ``z``, so deterministic parts of the state computed from the latents and ``θ`` (a
  VRNN's ``h_t``) keep their gradient path across steps.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import pyro
import torch

from .resampling import SCHEMES, gather_particles, normalize, normalize_with_total, resample_adaptive
from .saturation import raise_failures, warn_saturated
from .validation import (
    InputTypeError,
    check_choice,
    check_positive_int,
    check_probability,
    check_sequences,
    value_checks_enabled,
)

__all__ = [
    "Step",
    "ParticleModel",
    "ParticleFilter",
    "FilterResult",
    "FilterFailed",
    "GRADIENT_MODES",
    "PARTICLE_OPTIONS",
    "particle_option",
]

GRADIENT_MODES = ("reparam", "soft", "stop_weights")
#: the optional methods of the particle-model interface -> their signature; a model lists those it defines
#: in ``particle_options``
PARTICLE_OPTIONS = {
    "simulate": "simulate(state, t, context) -> (state, x_t)",
    "predict_mean": "predict_mean(state, t, context) -> [K, B, D]",
}


class FilterFailed(ValueError):
    """A particle-filter run failed: a NaN or ``+inf`` incremental log-weight at a valid step.

    The message names the first failed step and sequence (``x[b, t]``) and the likely cause. A
    ``ValueError``, as Pyro's ``SMCFailed`` is, so code that catches bad values catches it too.
    """


class Step(NamedTuple):
    """What a particle model's ``step`` returns (all tensors lead with ``[K, B]``).

    ``log_joint`` is needed only when ``step`` was called with ``reparameterize=False``.
    """

    state: dict[str, torch.Tensor]
    log_weight: torch.Tensor
    log_joint: torch.Tensor | None


class ParticleModel(Protocol):
    """The interface the filter drives; see the module docstring."""

    #: the optional methods it defines (keys of :data:`PARTICLE_OPTIONS`); a model without the attribute has none
    particle_options: frozenset[str] = frozenset()

    def start(self, x: torch.Tensor, mask: torch.Tensor, num_particles: int) -> tuple[dict, Any]: ...

    def step(self, state: dict, t: int, x_t: torch.Tensor, context: Any, *, reparameterize: bool = True) -> Step: ...


def particle_option(model, name: str, *, needed_for: str | None = None):
    """The optional method ``name`` (a key of :data:`PARTICLE_OPTIONS`) of a particle model that declares it.

    Raises ``ValueError`` naming the model and the method when its ``particle_options`` do not
    declare ``name`` (``needed_for``: what asked for it, for the message), and ``TypeError`` when
    they declare it but the model defines no such method.
    """
    declared = _declared_options(model)
    if name not in declared:
        asker = f"{needed_for} needs" if needed_for else "this call needs"
        raise ValueError(
            f"{asker} {PARTICLE_OPTIONS[name]}, which {type(model).__name__} does not declare in "
            f"its particle_options ({sorted(declared)})"
        )
    return getattr(model, name)


def _declared_options(model) -> frozenset[str]:
    """``model.particle_options``, checked: known names, each a method the model defines."""
    declared = getattr(model, "particle_options", frozenset())
    name = type(model).__name__
    if not isinstance(declared, (set, frozenset)) or not declared <= PARTICLE_OPTIONS.keys():
        raise TypeError(f"{name}.particle_options must be a frozenset of {sorted(PARTICLE_OPTIONS)}, got {declared!r}")
    for option in sorted(declared):
        if not callable(getattr(model, option, None)):
            raise TypeError(
                f"{name} declares {option!r} in its particle_options but defines no method {PARTICLE_OPTIONS[option]}"
            )
    return declared


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
        return _weighted_sum(values, log_weights.exp())


class ParticleFilter:
    """Batched, differentiable particle filter.

    Args:
        num_particles: ``K >= 1``.
        resampling: one of ``multinomial, stratified, systematic, soft, none``
            (default ``systematic``, or ``soft`` when ``gradient='soft'``).
        ess_threshold: resample a sequence when its ESS falls below this fraction
            of ``K`` (``1`` = always, ``0`` = never).
        gradient: ``reparam``, ``soft`` or ``stop_weights`` (see module docstring).
        soft_alpha: mixing weight of soft resampling.
        fisher_lag: in ``stop_weights`` mode, weight the complete-data term of step
            ``t`` with the weights of step ``t + fisher_lag`` (fixed-lag smoothing)
            instead of the final ones (``None``).
        generator: ``torch.Generator`` for the resampling draws.
    """

    def __init__(
        self,
        num_particles: int,
        resampling: str | None = None,
        ess_threshold: float = 0.5,
        gradient: str = "reparam",
        soft_alpha: float = 0.5,
        fisher_lag: int | None = None,
        generator: torch.Generator | None = None,
    ):
        self.num_particles = check_positive_int(num_particles, name="num_particles")
        self.gradient = check_choice(gradient, GRADIENT_MODES, name="gradient")
        if resampling is None:
            resampling = "soft" if gradient == "soft" else "systematic"
        self.resampling = check_choice(resampling, SCHEMES, name="resampling")
        if gradient == "soft" and resampling != "soft":
            raise ValueError(f"gradient='soft' needs resampling='soft', got resampling={resampling!r}")
        self.ess_threshold = check_probability(ess_threshold, name="ess_threshold")
        self.soft_alpha = check_probability(soft_alpha, name="soft_alpha", open_left=True)
        if fisher_lag is not None:
            check_positive_int(fisher_lag, name="fisher_lag")
        self.fisher_lag = fisher_lag
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputTypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.generator = generator

    def run(
        self,
        model: ParticleModel,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        keep_ancestry: bool | tuple[str, ...] = False,
        keep_means: tuple[str, ...] = (),
        predictive_samples: int = 0,
        predictive_mean: bool = False,
        initial_log_weights: torch.Tensor | None = None,
    ) -> FilterResult:
        """Filter the batch ``x [B, T, D]`` (``mask [B, T]``, valid steps first).

        Args:
            model: a :class:`ParticleModel`.
            keep_ancestry: record states, weights and ancestors of every step
                (memory ``O(T K B state)``) for :meth:`FilterResult.paths` and smoothing;
                a tuple of state keys records only those states (weights and ancestors always).
                Records keep their gradient path, so losses on them can be trained.
            keep_means: state keys whose weighted means over the particles are recorded after
                every step (memory ``O(T B state)``, with their gradient path), for
                :attr:`FilterResult.means` and :meth:`FilterResult.filtered_mean`.
            predictive_samples: ``S > 0`` draws ``S`` one-step-ahead predictive
                samples of ``x_t`` per step; needs ``simulate`` in ``model.particle_options``.
            predictive_mean: record ``E[x_t | x_{<t}]``, the weighted mean over particles of
                ``model.predict_mean`` (declared in ``model.particle_options``) before step ``t``'s
                observation is weighed in.
            initial_log_weights: ``[K, B]`` weights of the state ``model.start`` returns, to
                continue a filter from its final particle set (truncated BPTT). The set is
                then resampled before the first step, as before any other; default uniform.

        Raises:
            FilterFailed: a NaN or ``+inf`` incremental log-weight at a valid step (the first is named).
        """
        if not (callable(getattr(model, "start", None)) and callable(getattr(model, "step", None))):
            raise InputTypeError(
                "model must be a particle model with start(x, mask, num_particles) and "
                "step(state, t, x_t, context) methods (a SequenceModel declaring 'particles'), "
                f"got {type(model).__name__}"
            )
        all_valid = mask is None
        x, mask = check_sequences(x, mask, model=model)
        _declared_options(model)
        if predictive_samples:
            check_positive_int(predictive_samples, name="predictive_samples")
            particle_option(model, "simulate", needed_for="predictive_samples > 0")
        if predictive_mean:
            particle_option(model, "predict_mean", needed_for="predictive_mean=True")
        num_particles = self.num_particles
        batch, steps, _ = x.shape
        stop = self.gradient == "stop_weights"
        all_valid = all_valid or (value_checks_enabled() and bool(mask.all()))  # no device read in a graph capture
        state, context = model.start(x, mask, num_particles)
        x_steps = x.unbind(1)  # views; one backward node for all steps if x needs gradients
        log_w = torch.full((num_particles, batch), -math.log(num_particles), dtype=x.dtype, device=x.device)
        continuing = initial_log_weights is not None
        if continuing:
            log_w = self._initial_log_weights(initial_log_weights, log_w)
        ess = 1.0 / log_w.exp().square().sum(0)
        identity = torch.arange(num_particles, device=x.device).unsqueeze(-1).expand(num_particles, batch)
        no_resampling = torch.zeros(batch, dtype=torch.bool, device=x.device)
        fisher = _FisherScore(log_w, self.fisher_lag) if stop else None
        # per-step records, preallocated: no small tensor per step outlives the step (per-step lists
        # fragment glibc's heap: the RSS grew by 16-37 MiB, docs/benchmarks.md)
        increments = x.new_zeros(batch, steps)
        ess_steps = x.new_empty(batch, steps)
        lowest = torch.finfo(x.dtype).min
        resampled_steps = torch.zeros(batch, steps, dtype=torch.bool, device=x.device)
        history = _History(keep_ancestry) if keep_ancestry else None
        means = _Means(keep_means)
        predictive, predicted_means = [], x.new_zeros(x.shape) if predictive_mean else None

        with pyro.validation_enabled(False):
            for t in range(steps):
                valid = None if all_valid else mask[:, t]
                ancestors, resampled = identity, no_resampling
                if (t > 0 or continuing) and self._may_resample(ess, valid):
                    ancestors, new_log_w, resampled = resample_adaptive(
                        log_w,
                        self.resampling,
                        ess_threshold=self.ess_threshold,
                        alpha=self.soft_alpha,
                        generator=self.generator,
                        ess=ess,
                    )
                    ancestors = _select(valid, ancestors, identity)
                    log_w = _select(valid, new_log_w, log_w)
                    resampled = _select(valid, resampled, no_resampling)
                    state = {k: gather_particles(v, ancestors) for k, v in state.items()}
                    if stop:
                        fisher.resample(ancestors)
                if predictive_samples:
                    predictive.append(self._predict(model, state, log_w, t, context, predictive_samples))
                if predictive_mean:
                    with torch.no_grad():
                        step_mean = FilterResult._weighted_mean(model.predict_mean(state, t, context), log_w)
                        predicted_means[:, t] = step_mean if valid is None else step_mean * valid.unsqueeze(-1)

                new_state, log_alpha, log_joint = model.step(state, t, x_steps[t], context, reparameterize=not stop)
                state = {k: _select(valid, v, state.get(k, v)) for k, v in new_state.items()}
                # below the dtype's range (an outlier's log-density overflowing to -inf) saturates
                weighted = (log_w + log_alpha).clamp(min=lowest)
                normalized, step_evidence = normalize_with_total(weighted)
                log_w = _select(valid, normalized, log_w)
                weights = log_w.exp()
                ess = (1.0 / weights.square().sum(0)).clamp(1.0, num_particles)  # log_w is normalised
                means.record(weights, state)
                if stop:
                    fisher.add(_select(valid, log_joint, torch.zeros_like(log_joint)), log_w)

                increments[:, t] = step_evidence if valid is None else step_evidence.masked_fill(~valid, 0.0)
                ess_steps[:, t] = ess
                resampled_steps[:, t] = resampled
                if keep_ancestry:
                    history.record(ancestors, log_w, state)

        if value_checks_enabled():
            _report_failures(increments, lowest)
        result = FilterResult(
            log_evidence=increments.sum(1).clamp(min=lowest),
            log_evidence_steps=increments,
            num_steps=mask.sum(1),
            state=state,
            log_weights=log_w,
            ess=ess_steps,
            resampled=resampled_steps,
            fisher_objective=fisher.finish(log_w) if stop else None,
            context=context,
            num_steps_total=steps,
        )
        if keep_ancestry:
            result.ancestors, result.history_log_weights, result.history = history.finish()
        if predictive_samples:
            result.predictive = torch.stack(predictive, dim=2)
        result.predictive_mean = predicted_means
        result.means = means.finish()
        return result

    def _initial_log_weights(self, value, like: torch.Tensor) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"initial_log_weights must be a torch.Tensor [K, B], got {type(value).__name__}")
        if value.shape != like.shape:
            raise ValueError(
                f"initial_log_weights must have shape [K, B] = {tuple(like.shape)}, got {tuple(value.shape)}"
            )
        if value_checks_enabled() and not bool(torch.isfinite(torch.logsumexp(value.detach(), 0)).all()):
            raise ValueError("initial_log_weights must give every sequence a finite total weight")
        return normalize(value.to(like))

    def _may_resample(self, ess: torch.Tensor, valid: torch.Tensor | None) -> bool:
        """Whether any sequence may need resampling now.

        On an accelerator this is always ``True``: reading a flag would synchronise
        the device at every step. On the CPU, where the read is free, the draws and
        gathers are skipped at the steps where every ESS is above the threshold.
        """
        if self.resampling == "none" or self.ess_threshold <= 0:
            return False
        if ess.device.type != "cpu" or self.ess_threshold >= 1:
            return True
        needs = ess < self.ess_threshold * self.num_particles
        return bool((needs if valid is None else needs & valid).any())

    def _predict(self, model, state, log_w, t, context, num_samples):
        """``[S, B, D]`` draws of ``x_t`` from the particle predictive at step ``t``."""
        with torch.no_grad():
            batch = log_w.shape[1]
            weights = torch.nan_to_num(log_w.detach().exp().T, nan=1.0)  # a failed sequence (reported later)
            picks = torch.multinomial(weights, num_samples, replacement=True, generator=self.generator).T
            _, x_t = model.simulate({k: gather_particles(v, picks) for k, v in state.items()}, t, context)
            return x_t.reshape(num_samples, batch, -1)


def _report_failures(increments: torch.Tensor, lowest: float) -> None:
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


def _select(valid: torch.Tensor | None, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` where ``valid [B]`` (or everywhere when ``valid`` is None), else ``old``.

    Works for per-sequence tensors ``[B]`` and particle tensors ``[K, B, ...]``.
    """
    if valid is None:
        return new
    return torch.where(valid.reshape(valid.shape + (1,) * max(new.dim() - 2, 0)), new, old)


def _weighted_sum(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Sum over the particle dim of ``values [..., K, B, ...]`` weighted by ``weights [..., K, B]``."""
    particle_dim = weights.dim() - 2
    weights = weights.reshape(weights.shape + (1,) * (values.dim() - weights.dim()))
    return (weights * values).sum(particle_dim)


class _History:
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


class _Means:
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
            self.steps[key].append(_weighted_sum(state[key], weights))

    def finish(self) -> dict[str, torch.Tensor] | None:
        return {key: torch.stack(values, dim=1) for key, values in self.steps.items()} if self.keys else None


class _FisherScore:
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

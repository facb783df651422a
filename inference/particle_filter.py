"""Sequential Monte Carlo over a batch of sequences: :class:`ParticleFilter`.

The filter drives a *particle model* (:class:`~ppl_models.inference.particle_model.ParticleModel`: ``start``,
``step`` and optionally ``simulate`` and ``predict_mean``) and returns a
:class:`~ppl_models.inference.filter_result.FilterResult`; the per-step records it keeps are in
:mod:`ppl_models.inference.filter_steps`. Those names are importable from here too.

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

import pyro
import torch

from .filter_result import FilterResult
from .filter_steps import AncestryRecord, FisherScore, MeanRecord, report_failures, select
from .particle_model import PARTICLE_OPTIONS, FilterFailed, ParticleModel, Step, declared_options, particle_option
from .resampling import SCHEMES, gather_particles, normalize, normalize_with_weights, resample_adaptive
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
        all_valid = mask is None
        x, mask = self._checked_input(model, x, mask, predictive_samples, predictive_mean)
        all_valid = all_valid or (value_checks_enabled() and bool(mask.all()))  # no device read in a graph capture
        state, context = model.start(x, mask, self.num_particles)
        x_steps = x.unbind(1)  # views; one backward node for all steps if x needs gradients
        sweep = _Sweep(self, x, initial_log_weights, keep_ancestry, keep_means, predictive_mean)
        with pyro.validation_enabled(False):
            for t in range(x.shape[1]):
                valid = None if all_valid else mask[:, t]
                state = sweep.resample(state, t, valid)
                if predictive_samples:
                    sweep.predictive.append(self._predict(model, state, sweep.log_w, t, context, predictive_samples))
                if predictive_mean:
                    sweep.predict_mean(model, state, t, context, valid)
                step = model.step(state, t, x_steps[t], context, reparameterize=not sweep.stop)
                state = sweep.weigh(step, state, t, valid)
        if value_checks_enabled():
            report_failures(sweep.increments, sweep.lowest)
        return sweep.result(state, mask, context)

    def _checked_input(self, model, x, mask, predictive_samples, predictive_mean):
        """``(x, mask)`` checked for ``model``, a particle model declaring what the run's options need."""
        if not (callable(getattr(model, "start", None)) and callable(getattr(model, "step", None))):
            raise InputTypeError(
                "model must be a particle model with start(x, mask, num_particles) and "
                "step(state, t, x_t, context) methods (a SequenceModel declaring 'particles'), "
                f"got {type(model).__name__}"
            )
        x, mask = check_sequences(x, mask, model=model)
        declared_options(model)
        if predictive_samples:
            check_positive_int(predictive_samples, name="predictive_samples")
            particle_option(model, "simulate", needed_for="predictive_samples > 0")
        if predictive_mean:
            particle_option(model, "predict_mean", needed_for="predictive_mean=True")
        return x, mask

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


class _Sweep:
    """One run's weights (``log_w`` and, as of the last weighting, their ``exp``) and ESS, carried from step to
    step, and its per-step records (preallocated: no small tensor per step outlives the step; per-step lists
    fragment glibc's heap: the RSS grew by 16-37 MiB, docs/benchmarks.md)."""

    def __init__(self, pf: ParticleFilter, x, initial_log_weights, keep_ancestry, keep_means, predictive_mean: bool):
        num_particles, (batch, steps, _) = pf.num_particles, x.shape
        self.pf, self.stop = pf, pf.gradient == "stop_weights"
        self.log_w = torch.full((num_particles, batch), -math.log(num_particles), dtype=x.dtype, device=x.device)
        self.continuing = initial_log_weights is not None
        if self.continuing:
            self.log_w = pf._initial_log_weights(initial_log_weights, self.log_w)
        self.weights = self.log_w.exp()
        self.ess = 1.0 / self.weights.square().sum(0)
        self.identity = torch.arange(num_particles, device=x.device).unsqueeze(-1).expand(num_particles, batch)
        self.no_resampling = torch.zeros(batch, dtype=torch.bool, device=x.device)
        self.fisher = FisherScore(self.log_w, pf.fisher_lag) if self.stop else None
        self.increments = x.new_zeros(batch, steps)
        self.ess_steps = x.new_empty(batch, steps)
        self.lowest = torch.finfo(x.dtype).min
        self.resampled_steps = torch.zeros(batch, steps, dtype=torch.bool, device=x.device)
        self.history = AncestryRecord(keep_ancestry) if keep_ancestry else None
        self.means = MeanRecord(keep_means)
        self.predictive, self.predicted_means = [], x.new_zeros(x.shape) if predictive_mean else None
        self.ancestors, self.resampled = self.identity, self.no_resampling

    def resample(self, state: dict, t: int, valid: torch.Tensor | None) -> dict:
        """``state`` after step ``t``'s resampling of the sequences ``valid [B]`` whose ESS fell (none at the start,
        unless continuing)."""
        pf = self.pf
        self.ancestors, self.resampled = self.identity, self.no_resampling
        if not ((t > 0 or self.continuing) and pf._may_resample(self.ess, valid)):
            return state
        ancestors, new_log_w, resampled = resample_adaptive(
            self.log_w,
            pf.resampling,
            ess_threshold=pf.ess_threshold,
            alpha=pf.soft_alpha,
            generator=pf.generator,
            ess=self.ess,
            weights=self.weights.detach(),
        )
        self.ancestors = select(valid, ancestors, self.identity)
        self.log_w = select(valid, new_log_w, self.log_w)
        self.resampled = select(valid, resampled, self.no_resampling)
        if self.stop:
            self.fisher.resample(self.ancestors)
        return {k: gather_particles(v, self.ancestors) for k, v in state.items()}

    def predict_mean(self, model, state: dict, t: int, context, valid: torch.Tensor | None) -> None:
        """Record ``E[x_t | x_{<t}] [B, D]``, the weighted mean of ``model.predict_mean`` (0 at padding)."""
        with torch.no_grad():
            step_mean = FilterResult._weighted_mean(model.predict_mean(state, t, context), self.log_w)
            self.predicted_means[:, t] = step_mean if valid is None else step_mean * valid.unsqueeze(-1)

    def weigh(self, step: Step, state: dict, t: int, valid: torch.Tensor | None) -> dict:
        """The state after ``step`` (the carried one at padding), its weights, ESS and records of step ``t``."""
        new_state, log_alpha, log_joint = step
        state = {k: select(valid, v, state.get(k, v)) for k, v in new_state.items()}
        # below the dtype's range (an outlier's log-density overflowing to -inf) saturates
        weighted = (self.log_w + log_alpha).clamp(min=self.lowest)
        normalized, step_evidence, weights = normalize_with_weights(weighted)
        self.log_w = select(valid, normalized, self.log_w)
        self.weights = select(valid, weights, self.weights)
        self.ess = self.weights.square().sum(0).reciprocal().clamp(1.0, self.pf.num_particles)
        self.means.record(self.weights, state)
        if self.stop:
            self.fisher.add(select(valid, log_joint, torch.zeros_like(log_joint)), self.log_w)
        self.increments[:, t] = step_evidence if valid is None else step_evidence.masked_fill(~valid, 0.0)
        self.ess_steps[:, t] = self.ess
        self.resampled_steps[:, t] = self.resampled
        if self.history is not None:
            self.history.record(self.ancestors, self.log_w, state)
        return state

    def result(self, state: dict, mask: torch.Tensor, context) -> FilterResult:
        """The :class:`FilterResult` of the run, ending in ``state``."""
        result = FilterResult(
            log_evidence=self.increments.sum(1).clamp(min=self.lowest),
            log_evidence_steps=self.increments,
            num_steps=mask.sum(1),
            state=state,
            log_weights=self.log_w,
            ess=self.ess_steps,
            resampled=self.resampled_steps,
            fisher_objective=self.fisher.finish(self.log_w) if self.stop else None,
            context=context,
            num_steps_total=self.increments.shape[1],
        )
        if self.history is not None:
            result.ancestors, result.history_log_weights, result.history = self.history.finish()
        if self.predictive:
            result.predictive = torch.stack(self.predictive, dim=2)
        result.predictive_mean = self.predicted_means
        result.means = self.means.finish()
        return result

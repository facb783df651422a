"""The pass of an evaluation over the data in batches (:func:`gather`): each batch's log-likelihood estimates
(``exact``, ``elbo``, ``iwae-K``, ``smc-K``, the truth's) and one-step predictive, kept in :class:`Gathered`."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..objectives import ELBO, IWAE
from ..protocol import OneStepPredictive, model_device, particle_predictive
from ..saturation import each_warning_once
from ..training import trim_padding
from .data_layout import Units, batches, packed_layout
from .figures import squared_error
from .options import EvaluationOptions, Plan

__all__ = ["Gathered", "gather", "TRUE_LOG_LIKELIHOOD"]

#: the name of the truth's exact log-likelihood among the estimates (``truth`` given)
TRUE_LOG_LIKELIHOOD = "exact (true parameters)"


@dataclass
class Gathered:
    """What one pass over the data gathers, a piece per batch: the batches' ``indices``, the log-likelihood
    estimates ``per_sequence`` (``{name: [b]}``, in the data's units), the one-step ``draws`` ``[S, b, T', D]``,
    their ``log_density`` ``[b, T']``, the ``probabilities`` ``[b, T', D]`` (binary data), the ``squared_errors``
    of the predictive mean and the predictive's ``source``. ``packed``: the per-step pieces are kept at the scored
    steps only (``[S, n_b, D]``, ``[n_b]``, ``[n_b, D]``), with the data there (``observed`` ``[n_b, D]``, in its
    units) and the ``positions`` ``[2, n_b]`` (row, time step) of those steps."""

    packed: bool = False
    indices: list[torch.Tensor] = field(default_factory=list)
    per_sequence: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    draws: list[torch.Tensor] = field(default_factory=list)
    log_density: list[torch.Tensor] = field(default_factory=list)
    probabilities: list[torch.Tensor] = field(default_factory=list)
    squared_errors: list[float] = field(default_factory=list)
    observed: list[torch.Tensor] = field(default_factory=list)
    positions: list[torch.Tensor] = field(default_factory=list)
    source: str | None = None

    def add(self, index, estimates: dict, step: OneStepPredictive, xb, sb, units: Units, plan: Plan) -> None:
        """One batch ``xb [b, T', D]`` (scored steps ``sb [b, T']``, rows ``index`` of the data): its ``estimates``
        and ``step``."""
        self.indices.append(index)
        for name, bound in estimates.items():
            self.per_sequence.setdefault(name, []).append(
                units.sequence_log_density(bound.detach().double().cpu(), sb, index)
            )
        self.source = step.source
        sb = sb.cpu()
        if self.packed:
            rows, times = sb.nonzero(as_tuple=True)
            self.positions.append(torch.stack([index[rows], times]))
            self.observed.append(units.observed(xb, index).cpu()[sb])
        if plan.binary:
            self.probabilities.append(self._kept(units.kept(step.mean.cpu()), sb))
            return
        if step.log_density is not None:
            self.log_density.append(self._kept(units.step_log_density(step.log_density.cpu(), index), sb))
        self.squared_errors.append(squared_error(step.mean, xb, sb, units, index))
        if plan.samples:
            self.draws.append(self._kept(units.values(step.samples, index).cpu(), sb, batch_dim=1))

    def _kept(self, values: torch.Tensor, sb: torch.Tensor, batch_dim: int = 0) -> torch.Tensor:
        """A batch's per-step ``values`` (its rows at ``batch_dim``, then its steps): whole, or where packed, at its
        scored steps ``sb [b, T']`` only."""
        return values[(slice(None),) * batch_dim + (sb,)] if self.packed else values


def gather(model, x, mask, scored, options: EvaluationOptions, plan: Plan, units: Units, truth) -> Gathered:
    """One pass over ``x [N, T, D]`` in batches: each batch's estimates and one-step predictive, of the ``scored``
    steps ``[N, T]``."""
    gathered = Gathered(packed=packed_layout(mask))
    with each_warning_once():  # the estimators score the same steps: one warning, not one per estimator
        for index, xb, mb in batches(x, mask, options.batch_size, model_device(model)):
            sb = scored[index][:, : xb.shape[1]].to(mb.device)
            step = _one_step(model, xb, mb, sb, options, plan)
            estimates = _estimates(model, xb, mb, sb, options, plan, truth)
            if plan.by_filter:  # the filter's log-evidence [b] of the scored steps given the earlier ones
                estimates[f"smc-{options.num_particles}"] = (step.log_density * sb).sum(1)
            if "exact" in estimates and model.fits_context:  # its parameters come from each row's context
                estimates["exact"] = (step.log_density * sb).sum(1)
            gathered.add(index, estimates, step, xb, sb, units, plan)
    return gathered


def _estimates(model, xb, mb, sb, options: EvaluationOptions, plan: Plan, truth) -> dict[str, torch.Tensor]:
    """``{name: [b]}``: the estimates of ``log p(x)`` of a batch (of its scored steps ``sb`` given the earlier ones)
    that ``plan`` asks for but SMC's (it comes with the filter's predictive, :func:`_one_step`), and the truth's
    exact one."""
    estimates = {}
    if "exact" in plan.wanted and not model.fits_context:
        estimates["exact"] = _given_context(model.log_likelihood, xb, mb, sb)
    elif "exact" in plan.wanted:
        estimates["exact"] = None  # the one-step predictive's, below
    if truth is not None:
        estimates[TRUE_LOG_LIKELIHOOD] = _given_context(truth.to(xb.device).log_likelihood, xb, mb, sb)
    if "elbo" in plan.wanted:
        estimates["elbo"] = ELBO(model, mean_field=True)(xb, mb).bound
    if "iwae" in plan.wanted:
        iwae = IWAE(model, options.iwae_particles, particle_chunk=options.particle_chunk)
        estimates[f"iwae-{options.iwae_particles}"] = iwae(xb, mb).bound
    return estimates


def _given_context(log_likelihood, xb, mb, sb) -> torch.Tensor:
    """``log p(x_scored | x_context) [b]`` from an exact ``log_likelihood(x, mask) -> [b]``: that of every valid step
    less that of each row's context (its valid steps before ``sb``)."""
    total = log_likelihood(xb, mb)
    context = mb & ~sb
    rows = context.any(1)
    if bool(rows.any()):
        total = total.clone()
        total[rows] = total[rows] - log_likelihood(*trim_padding(xb[rows], context[rows]))
    return total


def _one_step(model, xb, mb, sb, options: EvaluationOptions, plan: Plan) -> OneStepPredictive:
    """The one-step predictive of a batch: the SMC filter's (``plan.by_filter``), else the model's own (told the
    scored steps ``sb`` where it estimates its parameters on each row's context)."""
    if plan.by_filter:
        return particle_predictive(model, xb, mb, plan.samples, num_particles=options.num_particles)
    if model.fits_context:
        return model.predictive(xb, mb, plan.samples, scored=sb)
    return model.predictive(xb, mb, plan.samples)

"""One call judges a trained sequence model on held-out data: :func:`evaluate`, and the :class:`Evaluation` it
returns.

The call checks its data and settings, then runs in three parts: one pass over the data in batches gathers each
batch's log-likelihood estimates (``_estimates``) and one-step predictive (``_one_step``); the figures of the
estimates (``_likelihood_figures``) and of the predictive's draws or probabilities (``_predictive_figures``) follow,
then PSIS-LOO / WAIC over the guide's draws (``_posterior_figures``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pyro
import torch

from .. import calibration
from ..objectives import ELBO, IWAE
from ..protocol import OneStepPredictive, model_device, particle_predictive
from ..saturation import each_warning_once
from ..training import trim_padding
from ..validation import InputTypeError, check_memory, check_scored, check_sequences
from .data_layout import Units, batches, check_some_valid, in_order, packed_layout
from .figures import (
    binary_calibration,
    categorical_figures,
    gap_to_truth,
    is_one_hot,
    loo_metrics,
    mean_squared_error,
    squared_error,
)
from .memory import evaluation_memory
from .options import EvaluationOptions, Plan

__all__ = ["evaluate", "Evaluation"]


@dataclass
class Evaluation:
    """What :func:`evaluate` found: ``metrics`` (a JSON-ready dict) and the draws behind it.

    ``predictive``: one-step draws ``[S, N, T, D]`` (real-valued data, ``predictive_samples > 0``);
    ``log_density``: their per-step log density ``[N, T]`` where the model gives one;
    ``probabilities``: ``E[x_t | x_<t]`` ``[N, T, D]`` (binary data); ``posterior``: the guide's
    draws as ``InferenceData`` (``posterior_draws > 0``); ``x``, ``mask``: the data, ``[N, T, D]``, ``[N, T]``;
    ``scored``: the steps judged ``[N, T]`` (the valid steps after each row's context; ``mask`` where there is none).

    That is the padded layout. Where the data's lengths are skewed
    (:func:`~ppl_models.inference.evaluation.data_layout.packed_layout`: padding its rows to the longest would hold more
    than :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` times their valid steps), the per-step arrays hold
    the ``n`` scored steps only, in data order (by row, then step), as one row: ``x [1, n, D]``, ``mask`` and
    ``scored`` ``[1, n]`` (all true), ``predictive [S, 1, n, D]``, ``log_density [1, n]``, ``probabilities
    [1, n, D]``; ``positions [2, n]`` then gives each step's row and time step in the data (``None`` in the padded
    layout). Either way the figures are those of the scored steps, and
    :meth:`predictive_data` stores them alike.
    """

    metrics: dict
    x: torch.Tensor
    mask: torch.Tensor
    predictive: torch.Tensor | None = None
    log_density: torch.Tensor | None = None
    probabilities: torch.Tensor | None = None
    posterior: Any = None
    scored: torch.Tensor | None = None
    positions: torch.Tensor | None = None

    def __getitem__(self, key: str):
        return self.metrics[key]

    def steps_of(self, row: int) -> tuple[int, torch.Tensor]:
        """``(held, steps)``: where data row ``row``'s scored steps are held, ``x[held][steps]`` (``steps``: bool
        ``[T]``, or ``[n]`` in the packed layout)."""
        if self.positions is None:
            return row, (self.mask if self.scored is None else self.scored)[row]
        return 0, self.positions[0] == row

    def predictive_data(self):
        """ArviZ ``InferenceData`` of the one-step draws (posterior predictive) and the observed data at the scored
        steps (:func:`~ppl_models.inference.calibration.to_inference_data`; padded and packed layouts alike)."""
        if self.positions is not None:
            return calibration.to_inference_data(self.predictive, self.x, positions=self.positions)
        return calibration.to_inference_data(
            self.predictive, self.x, mask=self.mask if self.scored is None else self.scored
        )

    def to_inference_data(self):
        """ArviZ ``InferenceData``: the observed data with the one-step predictive draws as posterior
        predictive (:meth:`predictive_data`), and the guide's draws with their pointwise log-likelihood where they
        were taken."""
        if self.predictive is None:
            if self.posterior is not None:
                return self.posterior
            raise ValueError(
                "evaluate() took no predictive draws: pass predictive_samples > 0 (real-valued data) "
                "or posterior_draws > 0"
            )
        idata = self.predictive_data()
        if self.posterior is not None:
            idata.extend(self.posterior)
        return idata


@torch.no_grad()
def evaluate(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    options: EvaluationOptions | None = None,
    *,
    valid: tuple[torch.Tensor, torch.Tensor] | None = None,
    truth=None,
    truth_metrics=None,
    standardizer=None,
    binary: bool | None = None,
    description: str = "data",
    scored=None,
    **settings,
) -> Evaluation:
    """Judge ``model`` on ``x [N, T, D]`` (``mask [N, T]``, valid steps first), as the model sees it.

    Args:
        options: how to evaluate (:class:`EvaluationOptions`: estimators, particle and draw counts, batches, the
            noise refit, the seed); ``settings``: any of its fields as keywords, in place of its values
            (``evaluate(model, x, mask, estimators=["smc"], num_particles=500)``).
        valid: the validation split ``(x, mask)``, on which ``options.noise_refit`` refits a model's noise.
        truth: the data's source, a model with an exact ``log_likelihood``: adds ``exact (true
            parameters)`` and ``gap_to_truth``. ``truth_metrics``: ``(draws, x) -> {name: value}``.
        standardizer: the :class:`~ppl_models.inference.data.Standardizer` under which ``x`` is held (or
            its ``to_dict()``): every figure is then reported in the data's own units (log
            densities by the change of variables, ``- sum_d log scale_d`` per step; draws, means,
            MSE and CRPS mapped back). For transformed data (log, differencing, per-series scaling), the
            :class:`~ppl_models.inference.data.DataUnits` of ``x``'s rows (``DataSplits.units``): each step's Jacobian
            and value by its row's map and level; :attr:`Evaluation.x` is then the data as read at ``x``'s steps.
        binary: judge as binary data (Brier score, reliability); default: every valid value is 0 or 1.
        description: names the data in the metrics.
        scored: ``[N, T]`` bool, the steps to judge (held-out segments), each row's earlier valid steps its
            context: read, not scored (:func:`~ppl_models.inference.validation.check_scored`). Every figure is then
            of the scored steps given their context: ``exact`` is ``log p(x) - log p(context)``, ``smc`` the sum of
            the filter's increments over the scored steps; ``elbo`` / ``iwae`` (bounds on whole sequences) and
            PSIS-LOO are skipped, with the reason. ``None``: every valid step is scored.

    The one-step predictive comes from the SMC filter when ``smc`` is requested of a particle
    model, else from the model's own ``predictive``. Settings whose draws cannot fit in the memory
    available are refused by name before anything is drawn
    (:func:`~ppl_models.inference.evaluation.evaluation_memory`); an unknown keyword is a ``TypeError`` naming it.
    Returns an :class:`Evaluation`: its per-step arrays padded like ``x``, or packed to the scored steps where the
    lengths are skewed (:func:`~ppl_models.inference.evaluation.data_layout.packed_layout`), so that its memory follows
    the scored steps rather than the rows times the longest.
    """
    options = _with_settings(options, settings)
    x, mask, binary = _checked_data(model, x, mask, binary=binary, description=description, valid=valid)
    scored = check_scored(scored, mask)
    if scored is not None:
        check_some_valid(scored, "evaluate")
    units = Units(standardizer, x)
    scored_steps = mask if scored is None else scored
    plan = _checked_plan(model, x, mask, scored_steps, options, binary, given_context=scored is not None)
    if options.seed is not None:
        pyro.set_rng_seed(options.seed)
    refit = _refit_noise(model, valid, options.noise_refit)
    model.eval()
    gathered = _gather(model, x, mask, scored_steps, options, plan, units, truth)
    result = _held(
        _likelihood_figures(model, x, scored_steps, description, gathered, plan, units, refit),
        gathered,
        x,
        mask,
        scored,
        units,
    )
    _predictive_figures(result, gathered.source, plan, truth_metrics)
    if plan.posterior:
        _posterior_figures(result, model, x, mask, options.posterior_draws)
    return result


#: the name of the truth's exact log-likelihood among the estimates (``truth`` given)
TRUE_LOG_LIKELIHOOD = "exact (true parameters)"


@dataclass
class _Gathered:
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
            self.probabilities.append(self._kept(step.mean.cpu(), sb))
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


def _gather(model, x, mask, scored, options: EvaluationOptions, plan: Plan, units: Units, truth) -> _Gathered:
    """One pass over ``x [N, T, D]`` in batches: each batch's estimates and one-step predictive, of the ``scored``
    steps ``[N, T]``."""
    gathered = _Gathered(packed=packed_layout(mask))
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


def _likelihood_figures(
    model, x, scored, description: str, gathered: _Gathered, plan: Plan, units: Units, refit: dict | None
) -> dict:
    """The metrics of the estimates (nats per scored step, per sequence, and ``per_sequence_step``: each sequence's
    nats per its own scored steps, averaged over the sequences with any, as the SRNN authors' code does; the gap to
    the truth), the noise refit and the predictive mean's squared error."""
    steps = int(scored.sum())
    lengths = scored.sum(1).cpu().double()  # [N] scored steps of each sequence
    some = lengths > 0
    estimates = {name: in_order(pieces, gathered.indices, 1) for name, pieces in gathered.per_sequence.items()}
    metrics = {
        "data": description,
        "test_sequences": int(x.shape[0]),
        "test_steps": steps,
        "num_parameters": model.parameter_count(),
        "loglik": {
            k: {
                "per_step": float(v.sum()) / steps,
                "per_sequence": float(v.sum()) / x.shape[0],
                "per_sequence_step": float((v.double()[some] / lengths[some]).mean()),
            }
            for k, v in estimates.items()
        },
    }
    if refit:
        metrics["noise_refit"] = refit
    if TRUE_LOG_LIKELIHOOD in estimates:
        true = estimates.pop(TRUE_LOG_LIKELIHOOD)
        metrics["gap_to_truth"] = gap_to_truth(estimates, true, steps)
    if plan.skipped:
        metrics["skipped_estimators"] = plan.skipped
    if gathered.squared_errors:
        metrics["mse"] = mean_squared_error(sum(gathered.squared_errors), scored, x.shape[-1])
    if units.changed:
        undone = "transform and standardisation" if units.transform is not None else "standardisation"
        metrics["units"] = f"the data's own units (the model's {undone} undone)"
    return metrics


def _held(metrics: dict, gathered: _Gathered, x, mask, scored, units: Units) -> Evaluation:
    """The :class:`Evaluation` of ``metrics`` and the ``gathered`` pieces put in data order: padded like ``x [N, T, D]``
    (``mask``, ``scored`` ``[N, T]``), or packed to the scored steps (:attr:`_Gathered.packed`)."""
    steps = x.shape[1]
    if gathered.packed:
        return _packed(metrics, gathered, steps)
    draws = in_order(gathered.draws, gathered.indices, steps, batch_dim=1) if gathered.draws else None
    log_density = (
        in_order(gathered.log_density, gathered.indices, steps) if draws is not None and gathered.log_density else None
    )
    probabilities = in_order(gathered.probabilities, gathered.indices, steps) if gathered.probabilities else None
    return Evaluation(metrics, units.observed(x), mask, draws, log_density, probabilities, scored=scored)


def _packed(metrics: dict, gathered: _Gathered, steps: int) -> Evaluation:
    """The :class:`Evaluation` in the packed layout: the ``n`` scored steps of rows of ``steps`` steps as one row, by
    row then time step."""
    positions = torch.cat(gathered.positions, 1)
    order = (positions[0] * steps + positions[1]).argsort()

    def put(pieces: list[torch.Tensor], dim: int = 0) -> torch.Tensor | None:
        return torch.cat(pieces, dim).index_select(dim, order).unsqueeze(dim) if pieces else None

    every = torch.ones(1, len(order), dtype=torch.bool)
    draws = put(gathered.draws, 1)
    log_density = put(gathered.log_density) if draws is not None else None
    return Evaluation(
        metrics,
        put(gathered.observed),
        every,
        draws,
        log_density,
        put(gathered.probabilities),
        scored=every,
        positions=positions[:, order],
    )


def _predictive_figures(result: Evaluation, source: str | None, plan: Plan, truth_metrics) -> None:
    """The calibration of the one-step predictive (of ``source``), from its draws (real-valued data) or
    probabilities (binary)."""
    metrics = result.metrics
    scored = result.mask if result.scored is None else result.scored
    if result.predictive is not None:
        metrics["calibration"] = calibration.calibration_summary(
            result.predictive, result.x, scored, result.log_density
        )
        metrics["calibration_source"] = (
            f"one-step-ahead predictive of {source}, {plan.samples} samples "
            "per step; nlpd from its per-step log density"
        )
        if truth_metrics is not None and result.positions is None:
            metrics["truth_metrics"] = truth_metrics(result.predictive, result.x)
        elif truth_metrics is not None:
            metrics["skipped_figures"] = {
                "truth_metrics": "they read each step's history, and the draws of data of "
                "skewed lengths are kept at the scored steps only"
            }
    if result.probabilities is not None:
        metrics["calibration"] = binary_calibration(result.probabilities, result.x, scored)
        metrics["calibration_source"] = f"one-step-ahead note probabilities E[x_t | x_<t] from {source}"
        if is_one_hot(result.x, scored):  # symbols: bits per symbol and one-step accuracy of the scored steps
            figures = categorical_figures(result.probabilities, result.x, scored)
            metrics["test_bpc"], metrics["test_accuracy"] = figures["bpc"], figures["accuracy"]


def _posterior_figures(result: Evaluation, model, x: torch.Tensor, mask: torch.Tensor, draws: int) -> None:
    """``draws`` draws of the guide on ``x [N, T, D]`` (``mask [N, T]``) as the model sees it (``result.posterior``)
    and their PSIS-LOO / WAIC (the ``loo`` metrics)."""
    device = model_device(model)
    result.posterior = calibration.posterior_inference_data(model, x.to(device), mask.to(device), draws)
    result.metrics["loo"] = loo_metrics(result.posterior, result.metrics["test_steps"])


def _refit_noise(model, valid, how: str) -> dict | None:
    """The model's refit of its noise on the validation split ``valid`` (``(x, mask)``,
    :meth:`~ppl_models.inference.protocol.SequenceModel.refit_noise`): its record, or ``None`` for ``how="none"``
    and a model with no noise to refit."""
    if how == "none":
        return None
    if valid is None:
        raise ValueError(f"noise_refit={how!r} needs the validation split: pass valid=(x, mask)")
    return model.refit_noise(*valid, how)


def _checked_data(model, x, mask, *, binary, description, valid) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(x, mask, binary)`` checked for ``model`` (not a conditional one; a valid step at least), with ``binary``
    by default whether every valid value is 0 or 1; the other arguments checked."""
    if model.conditional:
        raise ValueError(
            f"model {type(model).__name__} is conditional (it predicts targets y from inputs x); "
            "evaluate() judges models of x: score its predictive of y with "
            "ppl_models.inference.calibration.calibration_summary"
        )
    x, mask = check_sequences(x, mask, model=model)
    check_some_valid(mask, "evaluate")
    _check_arguments(binary, description, valid)
    if binary is None:
        binary = bool(((x[mask] == 0) | (x[mask] == 1)).all())
    return x, mask, binary


def _checked_plan(
    model,
    x: torch.Tensor,
    mask: torch.Tensor,
    scored: torch.Tensor,
    options: EvaluationOptions,
    binary: bool,
    *,
    given_context: bool,
) -> Plan:
    """What ``options`` ask of ``model`` on ``x`` (``mask``; ``scored`` steps given their context where
    ``given_context``, else every valid step), refused where its draws cannot fit in memory or the model has no
    one-step predictive to judge."""
    check_memory(evaluation_memory(model, x, options, binary=binary, mask=mask, scored=scored))
    plan = options.plan(model, binary=binary)
    if given_context:
        plan = plan.given_context()
    if not plan.by_filter and not model.supports("predictive"):
        raise ValueError(f"model {type(model).__name__} has neither a particle form (for smc) nor a predictive")
    return plan


def _with_settings(options: EvaluationOptions | None, settings: dict) -> EvaluationOptions:
    """``options`` (default: :class:`EvaluationOptions`'s defaults) with the keyword ``settings`` in place."""
    if options is not None and not isinstance(options, EvaluationOptions):
        raise InputTypeError(f"options must be an EvaluationOptions or None, got {type(options).__name__}")
    known = [f.name for f in dataclasses.fields(EvaluationOptions)]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise InputTypeError(
            f"evaluate() got unknown keyword arguments {unknown}: its settings are the fields of "
            f"EvaluationOptions, {known}"
        )
    if options is None:
        return EvaluationOptions(**settings)
    return dataclasses.replace(options, **settings) if settings else options


def _check_arguments(binary, description, valid) -> None:
    """Raise ``TypeError`` unless ``binary`` is ``None`` or a bool, ``description`` a str and ``valid`` a pair."""
    if binary is not None and not isinstance(binary, bool):
        raise InputTypeError(f"binary must be None, True or False, got {type(binary).__name__} {binary!r}")
    if not isinstance(description, str):
        raise InputTypeError(f"description must be a str, got {type(description).__name__}")
    if valid is not None and (not isinstance(valid, (tuple, list)) or len(valid) != 2):
        raise InputTypeError(f"valid must be None or a pair (x [N, T, D], mask [N, T]), got {type(valid).__name__}")

"""One call judges a trained sequence model on held-out data: :func:`evaluate` (the data and settings as
arguments), or :func:`evaluate_held_out` (a :class:`~ppl_models.inference.evaluation.held_out.HeldOutData` and an
:class:`~ppl_models.inference.evaluation.options.EvaluationOptions`).

The call checks its data and settings, then runs in three parts: one pass over the data in batches gathers each
batch's log-likelihood estimates and one-step predictive
(:func:`~ppl_models.inference.evaluation.batch_estimates.gather`); the figures of the estimates
(``_likelihood_figures``) and of the predictive's draws or probabilities (``_predictive_figures``) follow, then
PSIS-LOO / WAIC over the guide's draws (``_posterior_figures``). The result is an
:class:`~ppl_models.inference.evaluation.evaluation_result.Evaluation`.
"""

from __future__ import annotations

import pyro
import torch

from .. import calibration
from ..keyword_settings import field_names, options_with, sorted_keywords
from ..protocol import model_device
from ..validation import InputTypeError, check_memory, check_scored, check_sequences
from .batch_estimates import TRUE_LOG_LIKELIHOOD, Gathered, gather
from .data_layout import Units, check_some_valid, in_order, modelled_columns
from .evaluation_result import Evaluation, held_in_order
from .figures import (
    binary_calibration,
    categorical_figures,
    gap_to_truth,
    is_one_hot,
    loo_metrics,
    mean_squared_error,
)
from .held_out import HeldOutData
from .memory import evaluation_memory
from .options import EvaluationOptions, Plan

__all__ = ["evaluate", "evaluate_held_out", "Evaluation"]

#: the settings :func:`evaluate` takes as keywords: the fields of :class:`EvaluationOptions`, and those of the
#: :class:`HeldOutData` judged but its sequences
OPTION_NAMES = field_names(EvaluationOptions)
DATA_NAMES = field_names(HeldOutData, without=("x", "mask"))


def evaluate(
    model, x: torch.Tensor, mask: torch.Tensor | None = None, options: EvaluationOptions | None = None, **settings
) -> Evaluation:
    """Judge ``model`` on ``x [N, T, D]`` (``mask [N, T]``, valid steps first), as the model sees it.

    Args:
        options: how to evaluate (:class:`EvaluationOptions`: estimators, particle and draw counts, batches, the
            noise refit, the seed).
        settings: any field of :class:`EvaluationOptions` as a keyword, in place of its value in ``options``
            (``evaluate(model, x, mask, estimators=["smc"], num_particles=500)``), and the fields of the
            :class:`HeldOutData` judged but ``x`` and ``mask``, as follows.
        valid: the validation split ``(x, mask)``, on which ``options.noise_refit`` refits a model's noise.
        covariates: the data's :class:`~ppl_models.inference.data.covariates.CovariateLayout`: only its targets are
            scored (as for a model that declares ``modelled_features``,
            :func:`~ppl_models.inference.evaluation.data_layout.modelled_columns`).
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

    ``x``, ``mask`` and the data's keywords make a :class:`HeldOutData`, judged by :func:`evaluate_held_out`.
    """
    chosen, given = sorted_keywords(
        "evaluate", settings, {"EvaluationOptions": OPTION_NAMES, "HeldOutData": DATA_NAMES}
    )
    options = options_with(EvaluationOptions, options, chosen)
    return evaluate_held_out(model, HeldOutData(x, mask, **given), options)


@torch.no_grad()
def evaluate_held_out(model, data: HeldOutData, options: EvaluationOptions | None = None) -> Evaluation:
    """Judge ``model`` on ``data`` as ``options`` say (default: :class:`EvaluationOptions`'s defaults); see
    :func:`evaluate`."""
    options = options_with(EvaluationOptions, options, {})
    x, mask, binary = _checked_data(model, data)
    scored = check_scored(data.scored, mask)
    if scored is not None:
        check_some_valid(scored, "evaluate")
    units = Units(data.standardizer, x, modelled_columns(model, data.covariates, x.shape[-1]))
    scored_steps = mask if scored is None else scored
    context = scored is not None and _reads_context(model, mask, scored)
    plan = _checked_plan(model, x, mask, scored_steps, options, binary, given_context=context)
    if options.seed is not None:
        pyro.set_rng_seed(options.seed)
    refit = _refit_noise(model, data.valid, options.noise_refit)
    model.eval()
    gathered = gather(model, x, mask, scored_steps, options, plan, units, data.truth)
    figures = _likelihood_figures(model, x, scored_steps, data.description, gathered, plan, units, refit)
    result = held_in_order(figures, gathered, x, mask, scored, units)
    _predictive_figures(result, gathered.source, plan, data.truth_metrics)
    if plan.posterior:
        _posterior_figures(result, model, x, mask, options.posterior_draws)
    return result


def _likelihood_figures(
    model, x, scored, description: str, gathered: Gathered, plan: Plan, units: Units, refit: dict | None
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
        metrics["mse"] = mean_squared_error(sum(gathered.squared_errors), scored, units.columns)
    if units.columns < x.shape[-1]:
        metrics["scored_columns"] = _scored_columns(model, units.columns, x.shape[-1])
    if units.changed:
        undone = "transform and standardisation" if units.transform is not None else "standardisation"
        metrics["units"] = f"the data's own units (the model's {undone} undone)"
    return metrics


def _scored_columns(model, columns: int, features: int) -> str:
    """What the figures of data whose leading ``columns`` of ``features`` are targets are of."""
    what = f"the first {columns} of {features} columns (the targets; the covariates are inputs, not scored)"
    if getattr(model, "modelled_features", None) is None:
        what += f"; the log-likelihood estimates are {type(model).__name__}'s of every column"
    return what


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


def _checked_data(model, data: HeldOutData) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(x, mask, binary)`` of ``data`` checked for ``model`` (not a conditional one; a valid step at least), with
    ``binary`` by default whether every valid value is 0 or 1; the other fields checked."""
    if not isinstance(data, HeldOutData):
        raise InputTypeError(f"data must be a HeldOutData, got {type(data).__name__}")
    if model.conditional:
        raise ValueError(
            f"model {type(model).__name__} is conditional (it predicts targets y from inputs x); "
            "evaluate() judges models of x: score its predictive of y with "
            "ppl_models.inference.calibration.calibration_summary"
        )
    x, mask = check_sequences(data.x, data.mask, model=model)
    check_some_valid(mask, "evaluate")
    binary = data.binary
    _check_arguments(binary, data.description, data.valid)
    if binary is None:
        binary = bool(((x[mask] == 0) | (x[mask] == 1)).all())
    return x, mask, binary


def _reads_context(model, mask: torch.Tensor, scored: torch.Tensor) -> bool:
    """Whether some row's scored steps follow modelled steps: a context beyond the model's input-only first steps
    (``input_steps``), which whole-sequence bounds do not leave out."""
    return bool(((mask & ~scored).sum(1) > getattr(model, "input_steps", 0)).any())


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


def _check_arguments(binary, description, valid) -> None:
    """Raise ``TypeError`` unless ``binary`` is ``None`` or a bool, ``description`` a str and ``valid`` a pair."""
    if binary is not None and not isinstance(binary, bool):
        raise InputTypeError(f"binary must be None, True or False, got {type(binary).__name__} {binary!r}")
    if not isinstance(description, str):
        raise InputTypeError(f"description must be a str, got {type(description).__name__}")
    if valid is not None and (not isinstance(valid, (tuple, list)) or len(valid) != 2):
        raise InputTypeError(f"valid must be None or a pair (x [N, T, D], mask [N, T]), got {type(valid).__name__}")

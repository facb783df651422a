"""The figures an evaluation reports beside its log-likelihood estimates: the one-step mean squared error
(:func:`one_step_mse`), the gap to a known truth (:func:`gap_to_truth`), the calibration of binary predictions
(:func:`binary_calibration`), bits per symbol and accuracy of one-hot symbols (:func:`categorical_figures`) and
PSIS-LOO / WAIC (:func:`loo_metrics`)."""

from __future__ import annotations

import math

import torch

from .. import calibration
from ..arviz_compat import loo_summary, waic_summary
from ..validation import check_positive_int, check_scored, check_sequences
from .data_layout import Units, batches, check_some_valid, modelled_columns

__all__ = [
    "one_step_mse",
    "squared_error",
    "mean_squared_error",
    "gap_to_truth",
    "binary_calibration",
    "is_one_hot",
    "categorical_figures",
    "loo_metrics",
    "EXCESS_STANDARD_ERRORS",
]

#: an estimate is flagged ``above_truth`` when its mean gap exceeds this many standard errors
EXCESS_STANDARD_ERRORS = 2.0


@torch.no_grad()
def one_step_mse(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    standardizer=None,
    batch_size: int = 256,
    scored: torch.Tensor | None = None,
) -> float:
    """Mean squared error of the one-step predictive mean ``E[x_t | x_<t]`` over the valid steps and features of
    ``x [N, T, D]`` (``mask [N, T]``; the leading ``modelled_features`` of a model that declares them), in the
    data's units under a ``standardizer`` (a
    :class:`~ppl_models.inference.data.Standardizer`, its ``to_dict()`` or, for transformed data, the
    :class:`~ppl_models.inference.data.DataUnits` of ``x``'s rows): the ``mse`` of
    :func:`~ppl_models.inference.evaluation.evaluate` where the mean is the model's own ``predictive``.

    The model runs as it is (call ``model.eval()`` first where dropout or batch norms should not draw),
    ``batch_size`` sequences of similar lengths at a time. ``scored [N, T]``: only these steps count, each row's
    earlier valid steps are its context (:func:`~ppl_models.inference.validation.check_scored`).
    """
    x, mask = check_sequences(x, mask, model=model)
    scored = mask if scored is None else check_scored(scored, mask)
    check_some_valid(scored, "one_step_mse")
    batch_size = check_positive_int(batch_size, name="batch_size")
    units = Units(standardizer, x, modelled_columns(model, None, x.shape[-1]))
    device = next(model.parameters()).device
    total = sum(
        squared_error(model.predictive(xb, mb, 0).mean, xb, scored[index][:, : xb.shape[1]].to(mb.device), units, index)
        for index, xb, mb in batches(x, mask, batch_size, device)
    )
    return mean_squared_error(total, scored, units.columns)


def squared_error(
    mean: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, units: Units, index: torch.Tensor | None = None
) -> float:
    """``sum (mean - x)^2`` over the valid steps of ``mask [B, T]`` and the features of ``mean, x [B, T, D]`` (rows
    ``index`` of the data), in the data's units, in double precision."""
    difference = units.values(mean, index) - units.observed(x, index)
    return float((difference[mask.to(difference.device)].double() ** 2).sum())


def mean_squared_error(total: float, mask: torch.Tensor, features: int) -> float:
    """A :func:`squared_error` ``total`` per entry: over the valid steps of ``mask [N, T]`` times ``features``."""
    return total / (int(mask.sum()) * features)


def gap_to_truth(estimates: dict[str, torch.Tensor], truth: torch.Tensor, num_steps: int) -> dict[str, dict]:
    """Per estimator, the mean gap to a known source's exact log-likelihood, nats per step, with its standard error.

    On data drawn from a source whose ``log p(x)`` is known, ``d_i = estimate_i - log p_true(x_i)``
    is a trained model's modelling plus inference gap; its mean can be positive only by chance
    (each bound is at most the model's ``log p(x)`` in expectation, and that at most the truth in
    expectation over held-out data). The standard error covers the estimators' Monte Carlo noise
    and the sampling of the sequences.

    Args:
        estimates: ``{name: [N]}`` per-sequence estimates of ``log p(x_i)``.
        truth: ``[N]`` exact ``log p_true(x_i)`` of the same sequences.
        num_steps: valid steps in the data (the per-step unit).

    Returns ``{name: {"gap_per_step", "standard_error_per_step", "above_truth"}}``: the gap is
    ``sum_i d_i / num_steps``, its standard error ``sd(d) sqrt(N) / num_steps``, and
    ``above_truth`` flags a gap over :data:`EXCESS_STANDARD_ERRORS` standard errors.
    """
    out = {}
    for name, estimate in estimates.items():
        if estimate.shape != truth.shape:
            raise ValueError(
                f"estimates[{name!r}] must have the truth's shape {tuple(truth.shape)}, got {tuple(estimate.shape)}"
            )
        difference = estimate.double() - truth.double()
        spread = float(difference.std()) if difference.numel() > 1 else math.nan
        gap = float(difference.sum()) / num_steps
        error = spread * math.sqrt(difference.numel()) / num_steps
        out[name] = {
            "gap_per_step": gap,
            "standard_error_per_step": error,
            "above_truth": bool(gap > EXCESS_STANDARD_ERRORS * error),
        }
    return out


def binary_calibration(probabilities: torch.Tensor, observed: torch.Tensor, mask: torch.Tensor, bins: int = 10) -> dict:
    """Brier score and expected calibration error of predicted probabilities of 1s ``[N, T, D]``.

    ``ece`` is the count-weighted mean, over ``bins`` equal-width bins, of the gap between the
    frequency of 1s and the mean predicted probability in the bin.
    """
    curve = calibration.reliability_curve(probabilities, observed, mask, bins=bins)
    prob = probabilities[mask].flatten().double()
    index = (prob * bins).long().clamp(max=bins - 1)
    prob_sums = torch.bincount(index, weights=prob, minlength=bins).numpy()
    valid = curve.counts > 0
    gaps = abs(curve.observed_frequency[valid] - prob_sums[valid] / curve.counts[valid])
    return {
        "brier": calibration.brier_score(probabilities, observed, mask),
        "ece": float((curve.counts[valid] * gaps).sum() / curve.counts.sum()),
        "mean_probability": float(prob.mean()),
        "frequency_of_ones": float(observed[mask].mean()),
    }


def is_one_hot(observed: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether every step of ``observed [N, T, K]`` that ``mask [N, T]`` marks is one-hot (one symbol of ``K``)."""
    valid = observed[mask]
    return bool(((valid == 0) | (valid == 1)).all()) and bool((valid.sum(-1) == 1).all())


def categorical_figures(probabilities: torch.Tensor, observed: torch.Tensor, mask: torch.Tensor) -> dict:
    """Bits per symbol and one-step accuracy of predicted symbol probabilities ``[N, T, K]`` on one-hot
    ``observed [N, T, K]``, over the steps ``mask [N, T]`` marks.

    ``bpc``: the mean of ``-log2 p_t(x_t)`` (nats per symbol over ``ln 2``; bits per character on text);
    ``accuracy``: the share of steps whose most probable symbol is the observed one (ties: the first).
    """
    prob, symbols = probabilities[mask].double(), observed[mask].argmax(-1)
    chosen = prob.gather(-1, symbols.unsqueeze(-1)).squeeze(-1).clamp(min=torch.finfo(torch.float64).tiny)
    return {
        "bpc": float(-chosen.log().mean() / math.log(2)),
        "accuracy": float((prob.argmax(-1) == symbols).double().mean()),
    }


def loo_metrics(idata, steps: int) -> dict:
    """PSIS-LOO (and WAIC on ArviZ 0.x) of ``idata``, elpd in nats per step, with the largest Pareto ``k``."""
    loo, waic = loo_summary(idata), waic_summary(idata)
    metrics = {"elpd_loo_per_step": loo["elpd"] / steps, "p_loo": loo["p"], "max_pareto_k": loo["max_pareto_k"]}
    if waic is not None:
        metrics["elpd_waic_per_step"] = waic["elpd"] / steps
    metrics["source"] = (
        "PSIS-LOO and WAIC over the guide's draws of the latent sites (posterior.nc); the unit is "
        "one entry x_{t,d}, whose chain-rule factors sum to the step's log-likelihood"
    )
    return metrics

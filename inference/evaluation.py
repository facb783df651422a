"""One call to judge a trained sequence model on held-out data: :func:`evaluate`.

It computes every log-likelihood estimate the model declares it can give (``exact``, ``elbo``,
``iwae-K``, ``smc-K``; :data:`ppl_models.inference.protocol.ESTIMATORS`), per time step and per sequence,
in nats; the calibration of its one-step-ahead predictive (coverage, CRPS, PIT, NLPD for
real-valued data; Brier score and reliability for binary data); PSIS-LOO / WAIC over the guide's
draws; and, where the data's source is known, each estimate's gap to the exact log-likelihood
under the true parameters. The :class:`Evaluation` it returns holds the figures
(:attr:`Evaluation.metrics`, the ``metrics.json`` of a run folder), the draws behind them, a
printable :meth:`~Evaluation.table` and :meth:`~Evaluation.to_inference_data` for ArviZ.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyro
import torch
from torch import nn

from . import calibration
from .arviz_compat import loo_summary, waic_summary
from .data.datasets import Standardizer
from .objectives import ELBO, IWAE
from .protocol import ESTIMATORS, particle_predictive
from .saturation import each_warning_once
from .training import length_batches, trim_padding
from .validation import InputTypeError, check_draw_count, check_memory, check_positive_int, check_seed, check_sequences

__all__ = ["evaluate", "Evaluation", "evaluation_memory", "refit_noise", "gap_to_truth", "binary_calibration",
           "format_table", "EXCESS_STANDARD_ERRORS"]

#: an estimate is flagged ``above_truth`` when its mean gap exceeds this many standard errors
EXCESS_STANDARD_ERRORS = 2.0


@dataclass
class Evaluation:
    """What :func:`evaluate` found: ``metrics`` (a JSON-ready dict) and the draws behind it.

    ``predictive``: one-step draws ``[S, N, T, D]`` (real-valued data, ``predictive_samples > 0``);
    ``log_density``: their per-step log density ``[N, T]`` where the model gives one;
    ``probabilities``: ``E[x_t | x_<t]`` ``[N, T, D]`` (binary data); ``posterior``: the guide's
    draws as ``InferenceData`` (``posterior_draws > 0``); ``x``, ``mask``: the data, ``[N, T, D]``, ``[N, T]``.
    """

    metrics: dict
    x: torch.Tensor
    mask: torch.Tensor
    predictive: torch.Tensor | None = None
    log_density: torch.Tensor | None = None
    probabilities: torch.Tensor | None = None
    posterior: Any = None

    def __getitem__(self, key: str):
        return self.metrics[key]

    def table(self, *, markdown: bool = False) -> str:
        """The figures as a text (or Markdown) table (:func:`format_table`)."""
        return format_table(self.metrics, markdown=markdown)

    def to_inference_data(self):
        """ArviZ ``InferenceData``: the observed data with the one-step predictive draws as posterior
        predictive, and the guide's draws with their pointwise log-likelihood where they were taken."""
        if self.predictive is None:
            if self.posterior is not None:
                return self.posterior
            raise ValueError("evaluate() took no predictive draws: pass predictive_samples > 0 (real-valued data) "
                             "or posterior_draws > 0")  # fmt: skip
        idata = calibration.to_inference_data(self.predictive, self.x, mask=self.mask)
        if self.posterior is not None:
            idata.extend(self.posterior)
        return idata


@torch.no_grad()
def evaluate(model, x: torch.Tensor, mask: torch.Tensor | None = None, *,
             estimators=tuple(ESTIMATORS), num_particles: int = 1000, iwae_particles: int = 100,
             predictive_samples: int = 200, posterior_draws: int = 0, batch_size: int = 64,
             particle_chunk: int | None = 25, binary: bool | None = None, truth=None, truth_metrics=None,
             description: str = "data", seed: int | None = None, standardizer=None, noise_refit: str = "none",
             valid: tuple[torch.Tensor, torch.Tensor] | None = None) -> Evaluation:  # fmt: skip
    """Judge ``model`` on ``x [N, T, D]`` (``mask [N, T]``, valid steps first), as the model sees it.

    Args:
        estimators: which of ``exact``, ``elbo``, ``iwae``, ``smc`` to compute; those the model
            cannot give are listed under ``skipped_estimators`` with its reasons.
        num_particles: ``K`` of the SMC estimate (and of its predictive draws).
        iwae_particles: ``K`` of the IWAE bound; ``particle_chunk`` IWAE particles per pass (``None``: all).
        predictive_samples: one-step-ahead draws per step for calibration (real-valued data; 0: none,
            else at least 2: coverage and interval widths need a spread).
        posterior_draws: draws of the guide for PSIS-LOO / WAIC (0: none, else at least 2).
        batch_size: sequences per batch (taken in order of length, each batch cut to its longest).
        binary: judge as binary data (Brier score, reliability); default: every valid value is 0 or 1.
        truth: the data's source, a model with an exact ``log_likelihood``: adds ``exact (true
            parameters)`` and ``gap_to_truth``. ``truth_metrics``: ``(draws, x) -> {name: value}``.
        description: names the data in the table. ``seed``: Pyro's seed, for repeatable draws.
        standardizer: the :class:`~ppl_models.inference.data.datasets.Standardizer` under which ``x`` is held (or
            its ``to_dict()``): every figure is then reported in the data's own units (log
            densities by the change of variables, ``- sum_d log scale_d`` per step; draws, means,
            MSE and CRPS mapped back).
        noise_refit: for a one-step predictor (:class:`~ppl_models.predictors.OneStepPredictor`), first
            refit its noise on ``valid = (x, mask)`` (:func:`refit_noise`; this changes the model), kept
            only where it improves held-out NLPD; ``"none"`` (the default) keeps the trained noise.

    The one-step predictive comes from the SMC filter when ``smc`` is requested of a particle
    model, else from the model's own ``predictive``. Settings whose draws cannot fit in the memory
    available are refused by name before anything is drawn (:func:`evaluation_memory`). Returns an
    :class:`Evaluation`.
    """
    if getattr(model, "conditional", False):
        raise ValueError(f"model {type(model).__name__} is conditional (it predicts targets y from inputs x); "
                         "evaluate() judges models of x: score its predictive of y with "
                         "ppl_models.inference.calibration.calibration_summary")  # fmt: skip
    x, mask = check_sequences(x, mask, model=model)
    if not bool(mask.any()):
        raise ValueError("mask has no valid step: evaluate() needs at least one True entry")
    estimators = _check_estimators(estimators)
    num_particles = check_positive_int(num_particles, name="num_particles")
    iwae_particles = check_positive_int(iwae_particles, name="iwae_particles")
    predictive_samples = check_draw_count(predictive_samples, name="predictive_samples")
    posterior_draws = check_draw_count(posterior_draws, name="posterior_draws")
    batch_size = check_positive_int(batch_size, name="batch_size")
    if particle_chunk is not None:
        particle_chunk = check_positive_int(particle_chunk, name="particle_chunk")
    seed = check_seed(seed)
    _check_options(binary, description, valid)
    units = _Units(standardizer, x)
    if binary is None:
        binary = bool(((x[mask] == 0) | (x[mask] == 1)).all())
    check_memory(evaluation_memory(model, x, binary=binary, estimators=estimators, num_particles=num_particles,
                                   iwae_particles=iwae_particles, predictive_samples=predictive_samples,
                                   posterior_draws=posterior_draws, batch_size=batch_size,
                                   particle_chunk=particle_chunk))  # fmt: skip
    if seed is not None:
        pyro.set_rng_seed(seed)
    refit = refit_noise(model, *valid, noise_refit) if valid is not None else None
    if refit is None and noise_refit != "none" and _one_step_predictor(model):
        raise ValueError(f"noise_refit={noise_refit!r} needs the validation split: pass valid=(x, mask)")
    device = next(model.parameters()).device
    steps = int(mask.sum())
    wanted = [name for name in estimators if model.supports(ESTIMATORS[name])]
    skipped = {name: model.limitations.get(ESTIMATORS[name], f"no {ESTIMATORS[name]}")
               for name in estimators if name not in wanted}  # fmt: skip
    by_filter = "smc" in wanted
    if not by_filter and not model.supports("predictive"):
        raise ValueError(f"model {type(model).__name__} has neither a particle form (for smc) nor a predictive")
    samples = 0 if binary else predictive_samples
    per_sequence: dict[str, list[torch.Tensor]] = {}
    draws, log_density, probabilities, squared_errors, indices = [], [], [], [], []
    source = None
    model.eval()
    with each_warning_once():  # the estimators score the same steps: one warning, not one per estimator
        for index in length_batches(mask, batch_size):
            xb, mb = (t.to(device) for t in trim_padding(x[index], mask[index]))
            indices.append(index)
            lengths = mb.sum(1).cpu()

            def add(name, bound, lengths=lengths):
                per_sequence.setdefault(name, []).append(units.log_density(bound.detach().double().cpu(), lengths))

            if "exact" in wanted:
                add("exact", model.log_likelihood(xb, mb))
            if truth is not None:
                add("exact (true parameters)", truth.to(device).log_likelihood(xb, mb))
            if "elbo" in wanted:
                add("elbo", ELBO(model, mean_field=True)(xb, mb).bound)
            if "iwae" in wanted:
                add(f"iwae-{iwae_particles}", IWAE(model, iwae_particles, particle_chunk=particle_chunk)(xb, mb).bound)
            if by_filter:
                step = particle_predictive(model, xb, mb, samples, num_particles=num_particles)
                add(f"smc-{num_particles}", step.log_density.sum(1))  # the filter's log-evidence [B]
            else:
                step = model.predictive(xb, mb, samples)
            source = step.source
            if binary:
                probabilities.append(step.mean.cpu())
                continue
            if step.log_density is not None:
                log_density.append(units.log_density(step.log_density.cpu(), 1))
            squared_errors.append(float(((units.values(step.mean) - units.values(xb))[mb].double() ** 2).sum()))
            if samples:
                draws.append(units.values(step.samples).cpu())

    estimates = {name: _in_order(pieces, indices, 1) for name, pieces in per_sequence.items()}
    metrics = {
        "data": description,
        "test_sequences": int(x.shape[0]),
        "test_steps": steps,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "loglik": {k: {"per_step": float(v.sum()) / steps, "per_sequence": float(v.sum()) / x.shape[0]}
                   for k, v in estimates.items()},  # fmt: skip
    }
    if refit:
        metrics["noise_refit"] = refit
    if truth is not None:
        true = estimates.pop("exact (true parameters)")
        metrics["gap_to_truth"] = gap_to_truth(estimates, true, steps)
    if skipped:
        metrics["skipped_estimators"] = skipped
    if squared_errors:
        metrics["mse"] = sum(squared_errors) / (steps * x.shape[-1])
    if units.standardizer is not None:
        metrics["units"] = "the data's own units (the model's standardisation undone)"
    result = Evaluation(metrics, units.values(x), mask)
    if draws:
        result.predictive = _in_order(draws, indices, x.shape[1], batch_dim=1)
        result.log_density = _in_order(log_density, indices, x.shape[1]) if log_density else None
        metrics["calibration"] = calibration.calibration_summary(result.predictive, result.x, mask,
                                                                 result.log_density)  # fmt: skip
        metrics["calibration_source"] = (f"one-step-ahead predictive of {source}, {samples} samples per step; "
                                         "nlpd from its per-step log density")  # fmt: skip
        if truth_metrics is not None:
            metrics["truth_metrics"] = truth_metrics(result.predictive, result.x)
    if posterior_draws and model.supports("programs") and not model.conditional:
        result.posterior = calibration.posterior_inference_data(model, x.to(device), mask.to(device), posterior_draws)
        metrics["loo"] = _loo_metrics(result.posterior, steps)
    if probabilities:
        result.probabilities = _in_order(probabilities, indices, x.shape[1])
        metrics["calibration"] = binary_calibration(result.probabilities, result.x, mask)
        metrics["calibration_source"] = f"one-step-ahead note probabilities E[x_t | x_<t] from {source}"
    return result


def evaluation_memory(model, x: torch.Tensor, *, binary: bool, estimators, predictive_samples: int,
                      posterior_draws: int, num_particles: int, iwae_particles: int, batch_size: int,
                      particle_chunk: int | None) -> dict[str, tuple[int, int, str]]:  # fmt: skip
    """Lower bounds of the memory that :func:`evaluate`'s sample counts make it hold on ``x [N, T, D]``.

    Returns ``{setting: (value, bytes, how)}`` (for :func:`~ppl_models.inference.validation.check_memory`) for
    each setting that applies to ``model``, the bytes counting only the tensors that grow with the
    setting, of ``x``'s element size ``e`` (``b``: sequences a batch):

    * ``predictive_samples`` ``S``: the one-step draws, gathered then put in order, ``2 S N T D e``;
    * ``posterior_draws`` ``S``: replicates and pointwise log-likelihoods, ``2 S N T D e``;
    * ``num_particles`` ``K`` (``smc``): one step's particle predictions of a batch, ``K b D e``;
    * ``iwae_particles`` ``K`` (``iwae``): one log-density per step of ``min(K, particle_chunk)``
      particles, ``K b T e``.
    """
    n, steps, features = (int(size) for size in x.shape)
    size, batch = x.element_size(), min(batch_size, n)
    wanted = {name for name in estimators if model.supports(ESTIMATORS[name])}
    slice_ = f"{steps} steps x {features} features x {size} bytes"
    needs = {}
    if not binary and predictive_samples:
        needs["predictive_samples"] = (predictive_samples, 2 * predictive_samples * n * steps * features * size,
                                       f"{predictive_samples} draws x 2 copies x {n} test sequences x {slice_}")
    if posterior_draws and model.supports("programs") and not getattr(model, "conditional", False):
        needs["posterior_draws"] = (posterior_draws, 2 * posterior_draws * n * steps * features * size,
                                    f"{posterior_draws} draws x 2 (replicates, log-likelihoods) x {n} test sequences "
                                    f"x {slice_}")  # fmt: skip
    if "smc" in wanted:
        needs["num_particles"] = (num_particles, num_particles * batch * features * size,
                                  f"{num_particles} particles x {batch} sequences x {features} features x {size} bytes")
    if "iwae" in wanted:
        chunk = min(iwae_particles, particle_chunk or iwae_particles)
        needs["iwae_particles"] = (iwae_particles, chunk * batch * steps * size,
                                   f"{chunk} particles a pass x {batch} sequences x {steps} steps x {size} bytes")
    return needs


def _check_options(binary, description, valid) -> None:
    """Raise ``TypeError`` unless ``binary`` is ``None`` or a bool, ``description`` a str and ``valid`` a pair."""
    if binary is not None and not isinstance(binary, bool):
        raise InputTypeError(f"binary must be None, True or False, got {type(binary).__name__} {binary!r}")
    if not isinstance(description, str):
        raise InputTypeError(f"description must be a str, got {type(description).__name__}")
    if valid is not None and (not isinstance(valid, (tuple, list)) or len(valid) != 2):
        raise InputTypeError(f"valid must be None or a pair (x [N, T, D], mask [N, T]), got {type(valid).__name__}")


def _check_standardizer(standardizer, features: int) -> Standardizer | None:
    """``standardizer`` (a :class:`Standardizer`, its ``to_dict()`` or ``None``) checked against ``features``."""
    if isinstance(standardizer, Mapping):
        if not {"mean", "scale", "features"} <= set(standardizer):
            raise ValueError("standardizer must have the keys 'mean', 'scale' and 'features' of "
                             f"Standardizer.to_dict(), got {sorted(map(str, standardizer))}")  # fmt: skip
        try:
            standardizer = Standardizer.from_dict(standardizer)
        except TypeError:
            raise ValueError("standardizer's 'mean', 'scale' and 'features' must be lists, got "
                             f"{ {k: type(v).__name__ for k, v in standardizer.items()} }") from None
    if standardizer is None:
        return None
    if not isinstance(standardizer, Standardizer):
        raise InputTypeError("standardizer must be a Standardizer or its to_dict() (ppl_models.inference.data), "
                             f"got {type(standardizer).__name__}")  # fmt: skip
    for name in ("mean", "scale"):
        if len(getattr(standardizer, name)) != features:
            raise ValueError(f"standardizer: {len(getattr(standardizer, name))} features for data of {features} "
                             f"(in its {name})")  # fmt: skip
    if not all(_finite(m) for m in standardizer.mean):
        raise ValueError(f"standardizer.mean must be finite numbers, got {standardizer.mean}")
    if not all(_finite(s) and s > 0 for s in standardizer.scale):
        raise ValueError(f"standardizer.scale must be finite and positive, got {standardizer.scale}")
    return None if standardizer.identity else standardizer


def _finite(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


class _Units:
    """The way from the model's (standardised) units back to the data's: values and log densities."""

    def __init__(self, standardizer, like: torch.Tensor):
        self.standardizer = _check_standardizer(standardizer, like.shape[-1])
        scale = torch.tensor(self.standardizer.scale if self.standardizer else [1.0], dtype=torch.float64)
        self.log_jacobian = -float(scale.log().sum())  # log |d z / d x| per step

    def values(self, z: torch.Tensor) -> torch.Tensor:
        return z if self.standardizer is None else self.standardizer.inverse(z, dtype=torch.float64)

    def log_density(self, log_density: torch.Tensor, steps) -> torch.Tensor:
        """Log densities of ``steps`` steps (``[B]`` counts or a number) in the data's units."""
        if self.standardizer is None:
            return log_density
        steps = steps.to(log_density) if isinstance(steps, torch.Tensor) else steps
        return log_density + self.log_jacobian * steps


def _one_step_predictor(model) -> bool:
    from ppl_models.predictors import OneStepPredictor

    return isinstance(model, OneStepPredictor)


def refit_noise(model, x: torch.Tensor, mask: torch.Tensor | None, refit: str) -> dict | None:
    """Refit a one-step predictor's noise on validation data ``x [N, T, D]`` (:meth:`OneStepPredictor.calibrate`).

    The refit is checked first: kept only if its two-fold held-out NLPD on ``x`` (fit on one half
    of the steps, scored on the other) beats the trained noise's. Returns the verdict (``kept``,
    ``nlpd_refit``, ``nlpd_unrefit`` in nats per step) and the noise in use after it, or ``None``
    for ``refit="none"`` and models that are not one-step predictors. Fewer than 4 valid steps
    cannot judge a refit: the trained noise is kept and the reason recorded.
    """
    if refit == "none" or not _one_step_predictor(model):
        return None
    device = next(model.parameters()).device
    x, mask = check_sequences(x, mask, name="valid", model=model)
    model.eval()
    if int(mask.sum()) < 4:
        return {"refit": refit, "kept": False, "reason": f"{int(mask.sum())} validation steps: at least 4 are needed "
                "to check a refit on held-out steps; the trained noise is kept"}  # fmt: skip
    model.calibrate(x.to(device), mask.to(device), refit, check=True)
    return {**model.refit_check, "split": "valid", "check": "two-fold on the validation split",
            "log_scale": model.log_noise_scale.tolist(), "state_weight": model.noise_weight.tolist(),
            "log_scale_range": model.noise_log_scale_range.tolist(), "df": model.noise_df.tolist()}


def _check_estimators(estimators) -> list[str]:
    names = [estimators] if isinstance(estimators, str) else list(estimators)
    if not names or any(name not in ESTIMATORS for name in names):
        raise ValueError(f"estimators: expected a non-empty list from {list(ESTIMATORS)}, got {estimators!r}")
    return names


def _in_order(pieces: list[torch.Tensor], indices: list[torch.Tensor], steps: int, batch_dim: int = 0):
    """Per-batch outputs (time at ``batch_dim + 1``, where there is one) padded to ``steps``, in data order."""
    if pieces[0].dim() > batch_dim + 1:
        pieces = [nn.functional.pad(p, (0, 0) * (p.dim() - batch_dim - 2) + (0, steps - p.shape[batch_dim + 1]))
                  for p in pieces]  # fmt: skip
    order = torch.cat(indices).argsort()
    return torch.cat(pieces, batch_dim).index_select(batch_dim, order)


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
            raise ValueError(f"estimates[{name!r}] must have the truth's shape {tuple(truth.shape)}, "
                             f"got {tuple(estimate.shape)}")  # fmt: skip
        difference = estimate.double() - truth.double()
        spread = float(difference.std()) if difference.numel() > 1 else math.nan
        gap = float(difference.sum()) / num_steps
        error = spread * math.sqrt(difference.numel()) / num_steps
        out[name] = {"gap_per_step": gap, "standard_error_per_step": error,
                     "above_truth": bool(gap > EXCESS_STANDARD_ERRORS * error)}  # fmt: skip
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


def _loo_metrics(idata, steps: int) -> dict:
    """PSIS-LOO (and WAIC on ArviZ 0.x) of ``idata``, elpd in nats per step, with the largest Pareto ``k``."""
    loo, waic = loo_summary(idata), waic_summary(idata)
    metrics = {"elpd_loo_per_step": loo["elpd"] / steps, "p_loo": loo["p"], "max_pareto_k": loo["max_pareto_k"]}
    if waic is not None:
        metrics["elpd_waic_per_step"] = waic["elpd"] / steps
    metrics["source"] = ("PSIS-LOO and WAIC over the guide's draws of the latent sites (posterior.nc); the unit is "
                         "one entry x_{t,d}, whose chain-rule factors sum to the step's log-likelihood")
    return metrics


def format_table(metrics: dict, *, markdown: bool = False) -> str:
    """``metrics`` (an :attr:`Evaluation.metrics`) as a text or Markdown table: estimators in nats, then calibration."""
    rows = [("estimator", "nats / step", "nats / sequence")]
    rows += [(k, f"{v['per_step']:.4f}", f"{v['per_sequence']:.2f}") for k, v in metrics["loglik"].items()]
    cal = [("one-step mse", f"{metrics['mse']:.5f}")] if "mse" in metrics else []
    source = metrics.get("calibration_source", "the one-step predictive mean")
    cal += [(k, f"{v:.4f}") for k, v in metrics.get("calibration", {}).items()]
    cal += [(f"truth: {k}", f"{v:.4f}") for k, v in metrics.get("truth_metrics", {}).items()]
    head = f"{metrics['data']}: {metrics['test_sequences']} test sequences, {metrics['test_steps']} steps"
    skipped = [f"not estimated: {name} ({reason})" for name, reason in metrics.get("skipped_estimators", {}).items()]
    gaps = [(k, f"{v['gap_per_step']:+.4f}", f"{v['standard_error_per_step']:.4f}{' above' * v['above_truth']}")
            for k, v in metrics.get("gap_to_truth", {}).items()]  # fmt: skip
    gap_title = "Gap to the truth: estimate minus exact (true parameters), nats per step, with its standard error"
    if markdown:
        lines = [f"# Results\n\n{head}\n", "| " + " | ".join(rows[0]) + " |", "|---|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        lines += ["", *skipped] if skipped else []
        if gaps:
            lines += ["", f"{gap_title}.", "", "| estimator | gap / step | standard error |", "|---|---:|---:|"]
            lines += ["| " + " | ".join(r) + " |" for r in gaps]
        if cal:
            lines += ["", f"Calibration: {source}.", "", "| metric | value |", "|---|---:|"]
            lines += [f"| {k} | {v} |" for k, v in cal]
        return "\n".join(lines) + "\n"
    width = max(len(r[0]) for r in rows + cal) + 2
    lines = [head] + [f"{r[0]:<{width}}{r[1]:>16}{r[2]:>18}" for r in rows] + skipped
    if gaps:
        lines += ["", gap_title.lower()] + [f"{k:<{width}}{g:>16}{'± ' + e:>18}" for k, g, e in gaps]
    if cal:
        lines += ["", f"calibration: {source}"]
        lines += [f"{k:<{width}}{v:>16}" for k, v in cal]
    return "\n".join(lines)

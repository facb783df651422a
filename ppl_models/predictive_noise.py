"""Maximum-likelihood refits of a one-step predictor's observation noise to held-out residuals.

For residuals ``r_nd = x_nd - mu_nd`` of fixed means and optional features ``f_n`` (a
model's states), the noise model is

    r_nd = sigma_nd * eps_nd,   log sigma_nd = b_d + f_n^T W[:, d],   eps_nd ~ N(0, 1) or StudentT(nu_d),

a per-feature scale that may depend on the state (heteroscedastic errors) and may have
Student-t tails. :func:`fit_noise` fits ``b``, ``W`` and ``nu`` by maximum likelihood;
:class:`~ppl_models.predictors.OneStepPredictor.calibrate` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.distributions import Normal, StudentT

__all__ = ["NOISE_REFITS", "DF_RANGE", "NoiseFit", "fit_noise", "parse_refit"]

#: refits of :func:`fit_noise` by name: (Student-t tails?, scale depends on the state?)
NOISE_REFITS = {"student-t+state": (True, True), "normal+state": (False, True),
                "student-t": (True, False), "normal": (False, False)}  # fmt: skip
#: bounds of the fitted degrees of freedom (``> 1``, so the mean exists; at the top it is a Gaussian in all but name)
DF_RANGE = (1.05, 1000.0)


@dataclass
class NoiseFit:
    """``log_scale [D]`` (``b``), ``weight [F, D]`` (``W``, zeros without features), ``df [D]`` (``inf``: Gaussian)."""

    log_scale: torch.Tensor
    weight: torch.Tensor
    df: torch.Tensor


def parse_refit(name: str) -> tuple[bool, bool]:
    """``(student_t, on_state)`` of a refit name in :data:`NOISE_REFITS`; ``ValueError`` naming the others."""
    if name not in NOISE_REFITS:
        raise ValueError(f"noise refit must be one of {list(NOISE_REFITS)}, got {name!r}")
    return NOISE_REFITS[name]


def fit_noise(residuals: torch.Tensor, features: torch.Tensor | None = None, *, student_t: bool = True,
              ridge: float = 1e-3, max_iter: int = 500) -> NoiseFit:  # fmt: skip
    """Maximum-likelihood noise for ``residuals [N, D]``, optionally log-linear in ``features [N, F]``.

    The Gaussian without features is the closed form ``b_d = log sqrt(mean_n r_nd^2)``; the
    others are fitted by L-BFGS in float64 from it (``nu = 10``), on standardised features
    with the penalty ``ridge * |W|^2`` (in standardised units) added to the mean negative
    log-likelihood per step.
    """
    if not isinstance(residuals, torch.Tensor) or residuals.dim() != 2 or residuals.shape[0] < 2:
        got = tuple(residuals.shape) if isinstance(residuals, torch.Tensor) else type(residuals).__name__
        raise ValueError(f"residuals must be a tensor [N >= 2, D], got {got}")
    if features is not None and (not isinstance(features, torch.Tensor) or features.dim() != 2
                                 or features.shape[0] != residuals.shape[0]):  # fmt: skip
        got = tuple(features.shape) if isinstance(features, torch.Tensor) else type(features).__name__
        raise ValueError(f"features must be a tensor [N = {residuals.shape[0]}, F] or None, got {got}")
    r = residuals.detach().double()
    f = r.new_zeros(r.shape[0], 0) if features is None else features.detach().double()
    mean, std = (f.mean(0), f.std(0, correction=0).clamp(min=1e-6)) if f.shape[1] else (f.new_zeros(0), f.new_ones(0))
    z = (f - mean) / std
    log_rms = r.pow(2).mean(0).sqrt().clamp(min=1e-12).log()
    if not student_t and f.shape[1] == 0:
        return _in_dtype(NoiseFit(log_rms, r.new_zeros(0, r.shape[1]), torch.full_like(log_rms, math.inf)), residuals)
    low, high = DF_RANGE
    bias = log_rms.clone().requires_grad_()
    weight = r.new_zeros(z.shape[1], r.shape[1], requires_grad=True)
    logit_df = torch.full_like(log_rms, math.log((10.0 - low) / (high - 10.0)), requires_grad=student_t)
    optimizer = torch.optim.LBFGS([bias, weight, *([logit_df] if student_t else [])], max_iter=max_iter,
                                  line_search_fn="strong_wolfe")  # fmt: skip

    def noise():
        scale = (bias + z @ weight).exp()
        return StudentT(low + (high - low) * torch.sigmoid(logit_df), 0.0, scale) if student_t else Normal(0.0, scale)

    def closure():
        optimizer.zero_grad()
        loss = -noise().log_prob(r).mean(0).sum() + ridge * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    df = low + (high - low) * torch.sigmoid(logit_df.detach()) if student_t else torch.full_like(log_rms, math.inf)
    weight = weight.detach()
    # undo the standardisation: z @ W = f @ (W / std) - (mean / std) @ W
    fit = NoiseFit(bias.detach() - (mean / std) @ weight, weight / std[:, None], df)
    return _in_dtype(fit, residuals)


def _in_dtype(fit: NoiseFit, like: torch.Tensor) -> NoiseFit:
    return NoiseFit(*(t.to(like.dtype) for t in (fit.log_scale, fit.weight, fit.df)))

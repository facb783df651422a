"""Maximum-likelihood refits of a one-step predictor's observation noise to held-out residuals.

For residuals ``r_nd = x_nd - mu_nd`` of fixed means and optional features ``f_n`` (a
model's states), the noise model is

    r_nd = sigma_nd * eps_nd,   log sigma_nd = b_d + f_n^T W[:, d],

a per-feature scale that may depend on the state (heteroscedastic errors), with ``eps`` of
one of three shapes: ``normal``; ``student-t`` with ``nu_d`` degrees of freedom (heavy
tails); or ``empirical``: the standardised residuals ``r / sigma`` themselves, summarised by
:data:`SHAPE_POINTS` quantiles per feature and smoothed by a Gaussian kernel (any shape:
skewed, bimodal); or ``auto``: of Student-t and empirical, the one with the higher two-fold
held-out likelihood (:func:`choose_shape`). :func:`fit_noise` fits ``b``, ``W`` and ``nu`` by
maximum likelihood (the empirical shape takes the Gaussian fit's scale);
:meth:`~ppl_models.predictors.OneStepPredictor.calibrate` applies it and
:func:`noise_distribution` builds the distribution.

A state-dependent scale is not trusted beyond its data (a linear log-scale extrapolates
exponentially): :meth:`NoiseFit.log_scales` clamps each feature ``f`` to the range it spans on
the rows fit, and ``log sigma`` to the range the fit spans there (floored at
:data:`SCALE_FLOOR`), so states unlike the fitting data cannot give absurd scales.
:func:`check_refit` judges a refit against the noise in place by two-fold held-out log
predictive density.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from pyro.distributions import Categorical, MixtureSameFamily, Normal, StudentT

from ppl_models.inference.protocol import NOISE_REFITS

__all__ = [
    "AUTO_SHAPES",
    "DF_RANGE",
    "SHAPE_POINTS",
    "SCALE_FLOOR",
    "NoiseFit",
    "RefitCheck",
    "fit_noise",
    "choose_shape",
    "check_refit",
    "parse_refit",
    "noise_distribution",
    "bounded_log_scale",
]

#: the shapes ``auto`` chooses from, by two-fold held-out likelihood
AUTO_SHAPES = ("student-t", "empirical")
#: bounds of the fitted degrees of freedom (``> 1``, so the mean exists; at the top it is a Gaussian in all but name)
DF_RANGE = (1.05, 1000.0)
#: quantiles per feature that summarise an empirical shape
SHAPE_POINTS = 200
#: the smallest scale a refit gives
SCALE_FLOOR = 1e-3


@dataclass
class NoiseFit:
    """A fitted noise: ``log_scale [D]`` (``b``), ``weight [F, D]`` (``W``), ``df [D]`` (``inf`` unless Student-t),
    ``shape_points [D, Q]`` and ``bandwidth [D]`` of an empirical shape (``Q = 0`` otherwise), and the
    bounds of a state-dependent scale: ``log_scale_range [2, D]``, the lowest and highest ``b + f^T W`` on
    the rows fit (``-inf, inf`` without features, where the scale is one number per feature), and
    ``feature_range [2, F]``, the lowest and highest ``f`` there."""

    log_scale: torch.Tensor
    weight: torch.Tensor
    df: torch.Tensor
    shape_points: torch.Tensor
    bandwidth: torch.Tensor
    log_scale_range: torch.Tensor
    feature_range: torch.Tensor

    def log_scales(self, features: torch.Tensor | None) -> torch.Tensor:
        """``log sigma [N, D]`` (``[D]`` without features) at ``features [N, F]``, both clamped to their ranges."""
        if features is None:
            return self.log_scale
        return bounded_log_scale(
            self.log_scale, self.weight, features.to(self.weight), self.log_scale_range, self.feature_range
        )

    def log_density(self, residuals: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """``log p(r_n) [N]`` of ``residuals [N, D]`` (summed over ``D``), at ``features [N, F]`` when fit with them."""
        r = residuals.to(self.log_scale)
        noise = noise_distribution(
            torch.zeros_like(r),
            self.log_scales(features).exp().expand_as(r),
            self.df,
            self.shape_points,
            self.bandwidth,
        )
        return noise.log_prob(r).sum(-1)


@dataclass
class RefitCheck:
    """:func:`check_refit`'s verdict: NLPD (nats per step, lower is better) of the refit and of the noise in
    place, each on the rows the refit was not fit to; ``kept``: the refit's is lower."""

    nlpd_refit: float
    nlpd_unrefit: float
    kept: bool


def bounded_log_scale(
    log_scale: torch.Tensor,
    weight: torch.Tensor,
    features: torch.Tensor,
    log_scale_range: torch.Tensor,
    feature_range: torch.Tensor,
) -> torch.Tensor:
    """``clamp(b + clamp(f, feature_range)^T W, log_scale_range)``: ``[..., D]`` for ``features [..., F]``."""
    f = torch.maximum(torch.minimum(features, feature_range[1]), feature_range[0])
    return torch.maximum(torch.minimum(log_scale + f @ weight, log_scale_range[1]), log_scale_range[0])


def parse_refit(name: str) -> tuple[str, bool]:
    """``(shape of eps, does the scale depend on the state?)`` of a refit name of
    :data:`~ppl_models.inference.protocol.NOISE_REFITS` (``"auto+state"``: ``("auto", True)``); ``ValueError``
    naming the others."""
    if name not in NOISE_REFITS:
        raise ValueError(f"noise refit must be one of {list(NOISE_REFITS)}, got {name!r}")
    shape, _, state = name.partition("+")
    return shape, state == "state"


def noise_distribution(
    loc: torch.Tensor, scale: torch.Tensor, df: torch.Tensor, shape_points: torch.Tensor, bandwidth: torch.Tensor
):
    """``loc + scale * eps`` elementwise: a Pyro distribution of the batch shape of ``loc``, ``eps`` as fit.

    ``df``, ``bandwidth [D]`` and ``shape_points [D, Q]`` follow the last dimension of ``loc``;
    the empirical shape is the mixture ``(1/Q) sum_q N(z_dq, h_d^2)``.
    """
    if shape_points.shape[-1]:
        mixing = Categorical(logits=loc.new_zeros(shape_points.shape[-1]).expand(*loc.shape, -1))
        components = Normal(loc[..., None] + scale[..., None] * shape_points, scale[..., None] * bandwidth[:, None])
        return MixtureSameFamily(mixing, components)
    if torch.isinf(df).all():
        return Normal(loc, scale)
    return StudentT(df, loc, scale)


def fit_noise(
    residuals: torch.Tensor,
    features: torch.Tensor | None = None,
    *,
    shape: str = "student-t",
    ridge: float = 1e-3,
    max_iter: int = 500,
) -> NoiseFit:
    """Maximum-likelihood noise for ``residuals [N, D]``, optionally log-linear in ``features [N, F]``.

    The Gaussian without features is the closed form ``b_d = log sqrt(mean_n r_nd^2)``; the
    others are fitted by L-BFGS in float64 from it (``nu = 10``), on standardised features
    with the penalty ``ridge * |W|^2`` (in standardised units) added to the mean negative
    log-likelihood per step. The ``empirical`` shape keeps the Gaussian fit's scale and
    smooths the standardised residuals' :data:`SHAPE_POINTS` quantiles with Silverman's
    bandwidth ``0.9 min(sd, IQR / 1.349) N^(-1/5)``.
    """
    if shape not in ("normal", "student-t", "empirical", "auto"):
        raise ValueError(f"shape must be 'normal', 'student-t', 'empirical' or 'auto', got {shape!r}")
    if not isinstance(residuals, torch.Tensor) or residuals.dim() != 2 or residuals.shape[0] < 2:
        got = tuple(residuals.shape) if isinstance(residuals, torch.Tensor) else type(residuals).__name__
        raise ValueError(f"residuals must be a tensor [N >= 2, D], got {got}")
    if features is not None and (
        not isinstance(features, torch.Tensor) or features.dim() != 2 or features.shape[0] != residuals.shape[0]
    ):
        got = tuple(features.shape) if isinstance(features, torch.Tensor) else type(features).__name__
        raise ValueError(f"features must be a tensor [N = {residuals.shape[0]}, F] or None, got {got}")
    if shape == "auto":
        shape = choose_shape(residuals, features, ridge=ridge, max_iter=max_iter)
    r = residuals.detach().double()
    f = r.new_zeros(r.shape[0], 0) if features is None else features.detach().double()
    log_scale, weight, df = _fit_scale(r, f, student_t=shape == "student-t", ridge=ridge, max_iter=max_iter)
    floor = math.log(SCALE_FLOOR)
    if features is None:
        log_scale = log_scale.clamp(min=floor)
        bounds = torch.tensor([-math.inf, math.inf], dtype=r.dtype, device=r.device)[:, None].repeat(1, r.shape[1])
        feature_range = r.new_zeros(2, 0)
    else:
        fitted = log_scale + f @ weight
        low = fitted.min(0).values.clamp(min=floor)
        bounds = torch.stack([low, torch.maximum(fitted.max(0).values, low)])
        feature_range = torch.stack([f.min(0).values, f.max(0).values])
    points, bandwidth = r.new_zeros(r.shape[1], 0), r.new_zeros(r.shape[1])
    fit = NoiseFit(log_scale, weight, df, points, bandwidth, bounds, feature_range)
    if shape == "empirical":
        fit.shape_points, fit.bandwidth = _smoothed_quantiles(r / fit.log_scales(None if features is None else f).exp())
    return NoiseFit(*(t.to(residuals.dtype) for t in vars(fit).values()))


def choose_shape(residuals: torch.Tensor, features: torch.Tensor | None = None, **options) -> str:
    """The shape of :data:`AUTO_SHAPES` with the highest two-fold held-out log-likelihood.

    The rows are split into their first and second halves (for a model's residuals, earlier
    and later sequences); each shape is fit on one half and scored on the other, both ways.
    """
    scores = {shape: float(_two_fold_log_density(residuals, features, shape, **options).sum()) for shape in AUTO_SHAPES}
    return max(scores, key=scores.get)


def check_refit(
    residuals: torch.Tensor, features: torch.Tensor | None, unrefit_log_density: torch.Tensor, *, shape: str, **options
) -> RefitCheck:
    """Is a refit better than the noise in place on data it was not fit to? Two-fold held-out NLPD per row.

    The rows of ``residuals [N, D]`` (and ``features [N, F]``) are split into their first and
    second halves (for a model's residuals, earlier and later sequences); the refit ``shape``
    (``options`` as :func:`fit_noise`'s) is fit on each half and scored on the other, and
    compared with ``unrefit_log_density [N]``, the noise in place's log density of every row
    (fit elsewhere, so held out everywhere). ``kept`` when the refit's NLPD is lower.
    """
    if unrefit_log_density.shape != residuals.shape[:1]:
        raise ValueError(
            f"unrefit_log_density must have shape [N = {residuals.shape[0]}], got {tuple(unrefit_log_density.shape)}"
        )
    if residuals.shape[0] < 4:
        raise ValueError(f"checking a refit needs at least 4 residual rows (2 per half), got {residuals.shape[0]}")
    refit = -float(_two_fold_log_density(residuals, features, shape, **options).mean())
    unrefit = -float(unrefit_log_density.double().mean())
    return RefitCheck(refit, unrefit, refit < unrefit)


def _two_fold_log_density(residuals, features, shape: str, **options) -> torch.Tensor:
    """``[N]`` log density of each row under the ``shape`` fit to the other half of the rows (first / second)."""
    half = residuals.shape[0] // 2
    halves = (slice(None, half), slice(half, None))
    out = residuals.new_empty(residuals.shape[0], dtype=torch.float64)
    for fit_rows, score_rows in (halves, halves[::-1]):
        rows = (features[fit_rows], features[score_rows]) if features is not None else (None, None)
        fit = fit_noise(residuals[fit_rows], rows[0], shape=shape, **options)
        fit = NoiseFit(*(t.double() for t in vars(fit).values()))
        out[score_rows] = fit.log_density(residuals[score_rows].double(), None if rows[1] is None else rows[1].double())
    return out


def _fit_scale(r, f, *, student_t: bool, ridge: float, max_iter: int):
    """``(b [D], W [F, D], df [D])`` of the Gaussian or Student-t noise (float64 inputs ``r [N, D]``, ``f [N, F]``)."""
    log_rms = r.pow(2).mean(0).sqrt().clamp(min=1e-12).log()
    inf = torch.full_like(log_rms, math.inf)
    if not student_t and f.shape[1] == 0:
        return log_rms, r.new_zeros(0, r.shape[1]), inf
    mean, std = (f.mean(0), f.std(0, correction=0).clamp(min=1e-6)) if f.shape[1] else (f.new_zeros(0), f.new_ones(0))
    z = (f - mean) / std
    low, high = DF_RANGE
    bias = log_rms.clone().requires_grad_()
    weight = r.new_zeros(z.shape[1], r.shape[1], requires_grad=True)
    logit_df = torch.full_like(log_rms, math.log((10.0 - low) / (high - 10.0)), requires_grad=student_t)
    optimizer = torch.optim.LBFGS(
        [bias, weight, *([logit_df] if student_t else [])], max_iter=max_iter, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        scale = (bias + z @ weight).exp()
        noise = StudentT(low + (high - low) * torch.sigmoid(logit_df), 0.0, scale) if student_t else Normal(0.0, scale)
        loss = -noise.log_prob(r).mean(0).sum() + ridge * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    df = low + (high - low) * torch.sigmoid(logit_df.detach()) if student_t else inf
    weight = weight.detach()
    # undo the standardisation: z @ W = f @ (W / std) - (mean / std) @ W
    return bias.detach() - (mean / std) @ weight, weight / std[:, None], df


def _smoothed_quantiles(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:data:`SHAPE_POINTS` quantiles ``[D, Q]`` of each column of ``z [N, D]`` and Silverman's bandwidth ``[D]``."""
    levels = (torch.arange(SHAPE_POINTS, dtype=z.dtype, device=z.device) + 0.5) / SHAPE_POINTS
    points = torch.quantile(z, levels, dim=0).T
    iqr = torch.quantile(z, 0.75, dim=0) - torch.quantile(z, 0.25, dim=0)
    spread = torch.minimum(z.std(0), iqr / 1.349)
    return points, 0.9 * spread * z.shape[0] ** -0.2

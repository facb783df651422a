"""Calibration of predictive distributions, judged from Monte Carlo samples, with ArviZ.

Every metric takes samples of the predictive distribution, samples first, and the observations:

- ``predictive``: ``[S, B, T, D]`` (S samples of B sequences of T steps of D features),
- ``observed``: ``[B, T, D]``,
- ``mask``: optional bool ``[B, T]``, ``True`` at valid steps (valid steps first, padding after).

Tensors and numpy arrays are both accepted (integer data, e.g. counts, is converted to float).
Padded steps never enter a metric; where a function returns values per step, padded steps hold NaN.
Pooled metrics average over all valid entries (valid steps times features).

Metrics (:mod:`ppl_models.inference.calibration.metrics`): :func:`pit`, :func:`coverage`, :func:`interval_width`,
:func:`crps`, :func:`nlpd`, :func:`brier_score`, :func:`reliability_curve` and the table
:func:`calibration_summary`.
Storage (:mod:`ppl_models.inference.calibration.storage`): :func:`to_inference_data`, :func:`save_inference_data`;
:func:`stack_sequence_sites` turns the per-step sites of ``pyro.infer.Predictive`` output into one
``[S, B, T, D]`` tensor; :func:`posterior_inference_data` gives any model with Pyro programs the groups
``az.loo``, ``az.waic`` and ``az.plot_loo_pit`` read (posterior draws, pointwise log-likelihood, replicates).
Plots (:mod:`ppl_models.inference.calibration.plots`; each returns a ``matplotlib.figure.Figure`` drawn on the Agg
canvas, not registered with pyplot, and writes a PNG atomically when given ``path``): :func:`plot_pit_ecdf`,
:func:`plot_coverage`, :func:`plot_predictive_bands`, :func:`plot_reliability`.
"""

from .metrics import (
    DEFAULT_LEVELS,
    ReliabilityCurve,
    brier_score,
    calibration_summary,
    coverage,
    crps,
    interval_width,
    nlpd,
    pit,
    reliability_curve,
)
from .plots import plot_coverage, plot_pit_ecdf, plot_predictive_bands, plot_reliability
from .storage import (
    SEQUENCE_DIMS,
    posterior_inference_data,
    save_inference_data,
    stack_sequence_sites,
    to_inference_data,
)

__all__ = [
    "DEFAULT_LEVELS",
    "SEQUENCE_DIMS",
    "ReliabilityCurve",
    "to_inference_data",
    "posterior_inference_data",
    "save_inference_data",
    "stack_sequence_sites",
    "pit",
    "coverage",
    "interval_width",
    "crps",
    "nlpd",
    "brier_score",
    "reliability_curve",
    "calibration_summary",
    "plot_pit_ecdf",
    "plot_coverage",
    "plot_predictive_bands",
    "plot_reliability",
]

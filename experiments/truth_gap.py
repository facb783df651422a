"""Held-out gap of each log-likelihood estimate to the exact log-likelihood of a known source.

On data drawn from a source whose ``log p(x)`` we compute ourselves (an HMM by the forward
algorithm, a switching linear-Gaussian system by enumeration), the per-sequence difference
``d_i = estimate_i - log p_true(x_i)`` of a trained model's ELBO, IWAE-K or SMC-K is its
modelling plus inference gap. Its test-set mean can be positive only by chance: each bound is at
most the model's own ``log p(x)`` in expectation, and that is at most the truth in expectation
over held-out data (Gibbs' inequality). The standard error below covers both the Monte Carlo
noise of the estimators and the sampling of the test sequences.
"""

from __future__ import annotations

import math

import torch

__all__ = ["gap_to_truth", "EXCESS_STANDARD_ERRORS"]

#: an estimate is flagged ``above_truth`` when its mean gap exceeds this many standard errors
EXCESS_STANDARD_ERRORS = 2.0


def gap_to_truth(estimates: dict[str, torch.Tensor], truth: torch.Tensor, num_steps: int) -> dict[str, dict]:
    """Per estimator, the mean gap to the truth in nats per step and its standard error.

    Args:
        estimates: ``{name: [N]}`` per-sequence estimates of ``log p(x_i)`` on the test set.
        truth: ``[N]`` exact ``log p_true(x_i)`` of the same sequences.
        num_steps: valid steps in the test set (the per-step unit).

    Returns ``{name: {"gap_per_step", "standard_error_per_step", "above_truth"}}``; the gap is
    ``sum_i d_i / num_steps`` and its standard error ``sd(d) sqrt(N) / num_steps``.
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

"""The filtering problem of the bootstrap-filter benchmarks: a 1-d linear-Gaussian state-space model, its data and
the errors of log-evidence estimates against its exact Kalman value.

    z_1 ~ N(0, s0^2),  z_t = rho z_{t-1} + sx e_t,  x_t = z_t + sy v_t   (rho=0.9, sx=0.5, sy=1, s0 stationary)

Shared by :mod:`~ppl_models.experiments.benchmarks.bootstrap_filter`, its memory probes
(:mod:`~ppl_models.experiments.benchmarks.filter_memory`) and
:mod:`~ppl_models.experiments.benchmarks.cuda_graph_speed`. These benchmarks run on one CPU thread: importing this
module sets the thread variables of OpenMP, MKL, OpenBLAS, numexpr and numba to 1 (inherited by the probes'
fresh processes).
"""

from __future__ import annotations

import os

# One thread everywhere: set before numpy / torch load their thread pools.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["NUMEXPR_NUM_THREADS"] = "1"
os.environ["VECLIB_MAXIMUM_THREADS"] = "1"
os.environ["NUMBA_NUM_THREADS"] = "1"

import math

import numpy as np
import torch

from ppl_models import LinearGaussianSSM

__all__ = ["RHO", "SIGMA_X", "SIGMA_Y", "SIGMA_0", "ESS_THRESHOLD", "make_model", "make_data", "evidence_errors"]

RHO, SIGMA_X, SIGMA_Y = 0.9, 0.5, 1.0
SIGMA_0 = SIGMA_X / math.sqrt(1.0 - RHO**2)
#: every filter of the benchmarks resamples (systematic) when the ESS falls below this share of the particles
ESS_THRESHOLD = 0.5


def make_model(dtype: torch.dtype = torch.float32, device: str = "cpu") -> LinearGaussianSSM:
    """The 1-d LGSSM (all matrices ``[1, 1]``) with the bootstrap proposal, frozen."""

    def m(value):
        return torch.tensor([[value]], dtype=dtype)

    model = LinearGaussianSSM(m(RHO), m(1.0), m(SIGMA_X**2), m(SIGMA_Y**2), m(SIGMA_0**2), proposal="bootstrap")
    model.requires_grad_(False)
    return model.to(device)


def make_data(num_sequences: int, num_steps: int, seed: int):
    """``(x32 [B, T, 1], x64, exact [B])``: data drawn in float64, rounded to float32 once so every
    method sees the same numbers, and its exact Kalman log-likelihood (float64)."""
    model64 = make_model(torch.float64)
    x, _ = model64.sample(num_sequences, num_steps, generator=torch.Generator().manual_seed(seed))
    x32 = x.float()
    x64 = x32.double()
    with torch.no_grad():
        exact = model64.log_likelihood(x64)
    return x32, x64, exact


def evidence_errors(estimate: np.ndarray, exact: np.ndarray) -> dict:
    """Mean, sd and largest absolute value over sequences of log-evidence estimates minus the exact values
    (``[B]`` each)."""
    err = np.asarray(estimate, dtype=np.float64) - np.asarray(exact, dtype=np.float64)
    return {
        "error_mean": float(err.mean()),
        "error_sd": float(err.std(ddof=1)) if err.size > 1 else 0.0,
        "error_max_abs": float(np.abs(err).max()),
    }

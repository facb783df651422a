"""Sequences from a random stable linear-Gaussian SSM whose true parameters are kept (the engines' oracle)."""

from __future__ import annotations

import torch

from ppl_models.inference.validation import check_positive_int

from ..data import ExperimentData

__all__ = ["lgssm_synthetic"]


def lgssm_synthetic(
    latent_dim: int = 2,
    obs_dim: int = 2,
    num_train: int = 64,
    num_valid: int = 16,
    num_test: int = 32,
    num_steps: int = 50,
    seed: int = 0,
) -> ExperimentData:
    """Sequences from a random stable LGSSM (its parameters are kept in ``truth``)."""
    from ppl_models import LinearGaussianSSM

    for name, value in (
        ("latent_dim", latent_dim),
        ("obs_dim", obs_dim),
        ("num_train", num_train),
        ("num_valid", num_valid),
        ("num_test", num_test),
        ("num_steps", num_steps),
    ):
        check_positive_int(value, name=name)
    generator = torch.Generator().manual_seed(seed)
    truth = LinearGaussianSSM.random(latent_dim, obs_dim, generator=generator)
    splits = []
    for n in (num_train, num_valid, num_test):
        x, _ = truth.sample(n, num_steps, generator=generator)
        splits.append((x, torch.ones(n, num_steps, dtype=torch.bool)))
    return ExperimentData(
        *splits, description=f"LGSSM synthetic (Dz={latent_dim}, Dx={obs_dim}, T={num_steps})", truth=truth
    )

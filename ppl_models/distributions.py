"""Distributions tuned for the particle filter's hot loop.

:class:`MultivariateNormal` is Pyro's multivariate normal, faster when one
``scale_tril [D, D]`` is shared by every batch element (a state-space model's noise
covariance, for instance): it is built without broadcasting ``L`` over the batch,
samples with ``loc + eps @ L^T`` and scores with one matrix product by ``L^{-1}``
(elementwise products in one dimension),
where the parent class runs batched triangular solves over the whole ``[K, B]``
batch. With a covariance, a precision or a batched ``scale_tril`` it is the parent.
"""

from __future__ import annotations

import math

import pyro.distributions as dist
import torch
from torch.distributions import Distribution

__all__ = ["MultivariateNormal", "times_transpose"]


class MultivariateNormal(dist.MultivariateNormal):
    """Drop-in ``pyro.distributions.MultivariateNormal``; see the module docstring."""

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        shared = scale_tril is not None and scale_tril.dim() == 2 and loc.dim() >= 1
        if not shared or covariance_matrix is not None or precision_matrix is not None:
            super().__init__(loc, covariance_matrix, precision_matrix, scale_tril, validate_args)
            return
        if loc.shape[-1] != scale_tril.shape[-1]:
            size = scale_tril.shape[-1]
            raise ValueError(f"loc must end with size {size} to match scale_tril, got shape {tuple(loc.shape)}")
        self.loc = loc
        self._unbroadcasted_scale_tril = scale_tril
        self.scale_tril = scale_tril.expand(loc.shape[:-1] + scale_tril.shape)
        Distribution.__init__(self, loc.shape[:-1], loc.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(MultivariateNormal, _instance))

    def _shared_tril(self) -> torch.Tensor | None:
        tril = self._unbroadcasted_scale_tril
        return tril if tril.dim() == 2 else None

    def rsample(self, sample_shape=()):
        tril = self._shared_tril()
        if tril is None:
            return super().rsample(sample_shape)
        shape = self._extended_shape(sample_shape)
        eps = torch.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        if tril.shape == (1, 1):  # loc + eps * sigma in one pass
            return torch.addcmul(self.loc, eps, tril[0])
        return self.loc + times_transpose(eps, tril)

    def log_prob(self, value):
        tril = self._shared_tril()
        if tril is None:
            return super().log_prob(value)
        if self._validate_args:
            self._validate_sample(value)
        log_norm = tril.diagonal().log().sum() + 0.5 * tril.shape[0] * math.log(2 * math.pi)
        if tril.shape[0] == 1:  # -log_norm - (x - loc)^2 / (2 sigma^2) in three passes
            z = (value - self.loc).squeeze(-1) / tril[0, 0]
            return torch.addcmul(log_norm.neg(), z, z, value=-0.5)
        eye = torch.eye(tril.shape[0], dtype=tril.dtype, device=tril.device)
        z = times_transpose(value - self.loc, torch.linalg.solve_triangular(tril, eye, upper=False))
        return -0.5 * z.pow(2).sum(-1) - log_norm


def times_transpose(vectors: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """``vectors [..., D] @ matrix.T``; elementwise when ``D = 1`` (a 1x1 matrix product costs a gemm call)."""
    return vectors * matrix[0] if matrix.shape == (1, 1) else vectors @ matrix.T

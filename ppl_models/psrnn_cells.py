"""The PSRNN's state updates (Downey et al. 2017): the full bilinear cell of eq. 5 and the factorized cell of eq. 8,
both normalised to unit 2-norm (:func:`normalize`); :class:`~ppl_models.psrnn.PSRNNLayer` runs them over time."""

from __future__ import annotations

import torch
from torch import nn

from ppl_models.inference.validation import check_positive_int

__all__ = ["PSRNNCell", "FactorizedPSRNNCell", "normalize"]


def normalize(v: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Divisive 2-norm normalization over the last dimension."""
    return v / v.norm(dim=-1, keepdim=True).clamp(min=eps)


class PSRNNCell(nn.Module):
    """Eq. 5: ``q' = normalize(W x_2 o x_3 q + b)`` with ``W [S, P, S]`` (out state, observation, in state).

    ``transition`` sets ``W`` (default: random normal with variance ``1 / (S P)``); the bias starts at 0.
    """

    def __init__(self, state_dim: int, obs_dim: int, transition: torch.Tensor | None = None):
        super().__init__()
        if transition is None:
            transition = torch.randn(state_dim, obs_dim, state_dim) / (state_dim * obs_dim) ** 0.5
        elif tuple(transition.shape) != (state_dim, obs_dim, state_dim):
            want, got = (state_dim, obs_dim, state_dim), tuple(transition.shape)
            raise ValueError(f"transition must have shape {want}, got {got}")
        self.transition = nn.Parameter(transition.detach().clone())
        self.bias = nn.Parameter(torch.zeros(state_dim, dtype=transition.dtype, device=transition.device))

    def prepare(self, o: torch.Tensor) -> torch.Tensor:
        """The observation's contraction ``W x_2 o``, ``[..., P] -> [..., S, S]``, for all steps at once."""
        return torch.einsum("ijk,...j->...ik", self.transition, o)

    def preactivation(self, prepared: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``(W x_2 o) q + b``: ``[B, S, S]``, ``[B, S] -> [B, S]``."""
        return (prepared @ q.unsqueeze(-1)).squeeze(-1) + self.bias

    def forward(self, o: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """One update: ``o [B, P]``, ``q [B, S] -> q' [B, S]`` of unit norm."""
        return normalize(self.preactivation(self.prepare(o), q))


class FactorizedPSRNNCell(nn.Module):
    """Eq. 8: ``q' = normalize(A^T (B o * C q) + b)``; ``A [R, S]``, ``B [R, P]``, ``C [R, S]``."""

    def __init__(self, state_dim: int, obs_dim: int, rank: int):
        super().__init__()
        check_positive_int(rank, name="rank")
        self.out_factor = nn.Parameter(torch.randn(rank, state_dim) / rank**0.5)
        self.obs_factor = nn.Parameter(torch.randn(rank, obs_dim) / obs_dim**0.5)
        self.state_factor = nn.Parameter(torch.randn(rank, state_dim) / state_dim**0.5)
        self.bias = nn.Parameter(torch.zeros(state_dim))

    @classmethod
    def from_factors(cls, factors, bias: torch.Tensor) -> FactorizedPSRNNCell:
        """The cell of CP factors ``(A [R, S], B [R, P], C [R, S])`` of ``W`` (see ``cp_decompose``)."""
        a, b, c = factors
        cell = cls(a.shape[1], b.shape[1], a.shape[0])
        with torch.no_grad():
            for parameter, value in zip(
                (cell.out_factor, cell.obs_factor, cell.state_factor, cell.bias), (a, b, c, bias)
            ):
                parameter.copy_(value)
        return cell

    def prepare(self, o: torch.Tensor) -> torch.Tensor:
        """``B o``, ``[..., P] -> [..., R]``."""
        return o @ self.obs_factor.T

    def preactivation(self, prepared: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (prepared * (q @ self.state_factor.T)) @ self.out_factor + self.bias

    def forward(self, o: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return normalize(self.preactivation(self.prepare(o), q))

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
    ``observation_bias`` adds a bias linear in the observation, ``+ B o`` with ``B [S, P]`` (the authors' code: the
    intercept of its stage-2 regression); ``True`` starts it at 0, a tensor at its value.
    """

    def __init__(
        self,
        state_dim: int,
        obs_dim: int,
        transition: torch.Tensor | None = None,
        observation_bias: bool | torch.Tensor = False,
    ):
        super().__init__()
        if transition is None:
            transition = torch.randn(state_dim, obs_dim, state_dim) / (state_dim * obs_dim) ** 0.5
        elif tuple(transition.shape) != (state_dim, obs_dim, state_dim):
            want, got = (state_dim, obs_dim, state_dim), tuple(transition.shape)
            raise ValueError(f"transition must have shape {want}, got {got}")
        self.transition = nn.Parameter(transition.detach().clone())
        self.bias = nn.Parameter(torch.zeros(state_dim, dtype=transition.dtype, device=transition.device))
        self.observation_bias = _observation_bias(observation_bias, state_dim, obs_dim, self.bias)

    def prepare(self, o: torch.Tensor) -> torch.Tensor:
        """The observation's contraction ``W x_2 o``, ``[..., P] -> [..., S, S]``, for all steps at once
        (``[..., S, S + 1]`` with an observation bias, ``B o`` last)."""
        prepared = torch.einsum("ijk,...j->...ik", self.transition, o)
        if self.observation_bias is None:
            return prepared
        return torch.cat([prepared, (o @ self.observation_bias.T).unsqueeze(-1)], -1)

    def preactivation(self, prepared: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``(W x_2 o) q + b`` (``+ B o``): ``[B, S, S]`` (``[B, S, S + 1]``), ``[B, S] -> [B, S]``."""
        if self.observation_bias is None:
            return (prepared @ q.unsqueeze(-1)).squeeze(-1) + self.bias
        return (prepared[..., :-1] @ q.unsqueeze(-1)).squeeze(-1) + prepared[..., -1] + self.bias

    def forward(self, o: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """One update: ``o [B, P]``, ``q [B, S] -> q' [B, S]`` of unit norm."""
        return normalize(self.preactivation(self.prepare(o), q))


class FactorizedPSRNNCell(nn.Module):
    """Eq. 8: ``q' = normalize(A^T (B o * C q) + b)``; ``A [R, S]``, ``B [R, P]``, ``C [R, S]``.

    ``observation_bias`` as in :class:`PSRNNCell` (``+ B_o o``, ``B_o [S, P]``).
    """

    def __init__(self, state_dim: int, obs_dim: int, rank: int, observation_bias: bool | torch.Tensor = False):
        super().__init__()
        check_positive_int(rank, name="rank")
        self.out_factor = nn.Parameter(torch.randn(rank, state_dim) / rank**0.5)
        self.obs_factor = nn.Parameter(torch.randn(rank, obs_dim) / obs_dim**0.5)
        self.state_factor = nn.Parameter(torch.randn(rank, state_dim) / state_dim**0.5)
        self.bias = nn.Parameter(torch.zeros(state_dim))
        self.observation_bias = _observation_bias(observation_bias, state_dim, obs_dim, self.bias)

    @classmethod
    def from_factors(
        cls, factors, bias: torch.Tensor, observation_bias: torch.Tensor | None = None
    ) -> FactorizedPSRNNCell:
        """The cell of CP factors ``(A [R, S], B [R, P], C [R, S])`` of ``W`` (see ``cp_decompose``), its bias ``[S]``
        and observation bias ``[S, P]`` (``None``: none)."""
        a, b, c = factors
        cell = cls(a.shape[1], b.shape[1], a.shape[0], False if observation_bias is None else observation_bias)
        with torch.no_grad():
            for parameter, value in zip(
                (cell.out_factor, cell.obs_factor, cell.state_factor, cell.bias), (a, b, c, bias)
            ):
                parameter.copy_(value)
        return cell

    def prepare(self, o: torch.Tensor) -> torch.Tensor:
        """``B o``, ``[..., P] -> [..., R]`` (``[..., R + S]`` with an observation bias, ``B_o o`` last)."""
        prepared = o @ self.obs_factor.T
        if self.observation_bias is None:
            return prepared
        return torch.cat([prepared, o @ self.observation_bias.T], -1)

    def preactivation(self, prepared: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``A^T (B o * C q) + b`` (``+ B_o o``): ``[B, R]`` (``[B, R + S]``), ``[B, S] -> [B, S]``."""
        if self.observation_bias is None:
            return (prepared * (q @ self.state_factor.T)) @ self.out_factor + self.bias
        rank = self.out_factor.shape[0]
        return (prepared[..., :rank] * (q @ self.state_factor.T)) @ self.out_factor + prepared[..., rank:] + self.bias

    def forward(self, o: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return normalize(self.preactivation(self.prepare(o), q))


def _observation_bias(value: bool | torch.Tensor, state_dim: int, obs_dim: int, like: torch.Tensor):
    """The parameter ``B [S, P]`` of a bias linear in the observation, or ``None`` for ``False``."""
    if isinstance(value, bool):
        return nn.Parameter(torch.zeros(state_dim, obs_dim, dtype=like.dtype, device=like.device)) if value else None
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != (state_dim, obs_dim):
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else value
        raise ValueError(f"observation_bias must be a bool or a tensor of shape {(state_dim, obs_dim)}, got {got!r}")
    return nn.Parameter(value.detach().clone().to(like))

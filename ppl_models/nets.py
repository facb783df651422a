"""Building blocks shared by the neural sequence models: feed-forward nets, emissions, recurrences.

:class:`SplitInputMLP` is a feed-forward net over a concatenation ``[a, b]`` whose
first layer is split in two, so the part that reads ``b`` (a deterministic RNN state
known for every time step) runs once over the whole sequence and only the part that
reads ``a`` (a sampled latent state, one per particle) runs inside the time loop.
"""

from __future__ import annotations

import pyro.distributions as dist
import torch
from torch import nn
from torch.nn import functional as F

from ppl_models.inference.validation import check_choice, check_positive_int, value_checks_enabled

__all__ = [
    "EMISSIONS",
    "SplitInputMLP",
    "clipped_leaky_relu",
    "diagonal_normal",
    "emission_distribution",
    "emission_params",
    "reverse_padded",
    "shifted_inputs",
    "check_binary",
    "EmissionChecks",
]

EMISSIONS = ("bernoulli", "gaussian")


def clipped_leaky_relu(x: torch.Tensor) -> torch.Tensor:
    """Leaky ReLU with slope 1/3, clipped to ``[-3, 3]`` (the SRNN paper's nonlinearity).

    The clip is ``hardtanh``, whose backward is one kernel (``clamp``'s is four: two comparisons,
    an ``and``, a ``where``); the values are the same, the gradient differs only at exactly ``±3``.
    """
    return F.hardtanh(F.leaky_relu(x, 1.0 / 3.0), -3.0, 3.0)


class SplitInputMLP(nn.Module):
    """``out = W_o h_L``, ``h_{l+1} = act(W_l h_l + c_l)``, ``h_1 = act(W_a a + W_b b + c)``.

    Args:
        a_dim: size of the per-particle input ``a`` (0: the net reads ``b`` only).
        b_dim: size of the per-step input ``b``, projected once by :meth:`project`.
        hidden_dim: units of each hidden layer.
        out_dim: output size.
        num_hidden_layers: hidden layers (1: the "two-layer" nets of the papers).
    """

    def __init__(self, a_dim: int, b_dim: int, hidden_dim: int, out_dim: int, num_hidden_layers: int = 1):
        super().__init__()
        check_positive_int(num_hidden_layers, name="num_hidden_layers")
        self.input_a = nn.Linear(a_dim, hidden_dim, bias=False) if a_dim > 0 else None
        self.input_b = nn.Linear(b_dim, hidden_dim)
        self.hidden = nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(num_hidden_layers - 1))
        self.output = nn.Linear(hidden_dim, out_dim)

    def project(self, b: torch.Tensor) -> torch.Tensor:
        """``W_b b + c``: ``[..., b_dim] -> [..., hidden_dim]`` (run once for all steps)."""
        return self.input_b(b)

    def forward(self, a: torch.Tensor | None, b_projected: torch.Tensor) -> torch.Tensor:
        """``a [..., a_dim]`` (or ``None``) and ``project(b)`` (broadcastable) to ``[..., out_dim]``."""
        h = b_projected if self.input_a is None else self.input_a(a) + b_projected
        h = clipped_leaky_relu(h)
        for layer in self.hidden:
            h = clipped_leaky_relu(layer(h))
        return self.output(h)


def emission_params(kind: str, obs_dim: int) -> int:
    """Net outputs an emission of ``kind`` needs: logits ``D`` (bernoulli) or mean and log-variance ``2D``."""
    check_choice(kind, EMISSIONS, name="emission")
    return obs_dim if kind == "bernoulli" else 2 * obs_dim


def diagonal_normal(mean: torch.Tensor, log_var: torch.Tensor):
    """``N(mean, diag exp(log_var))`` with event shape ``[D]``."""
    return dist.Normal(mean, (0.5 * log_var).exp()).to_event(1)


def emission_distribution(kind: str, params: torch.Tensor):
    """``p(x_t | ...)`` with event shape ``[D]`` from the net output ``params [..., emission_params]``."""
    if kind == "bernoulli":
        return dist.Bernoulli(logits=params).to_event(1)
    return diagonal_normal(*params.chunk(2, dim=-1))


def shifted_inputs(x: torch.Tensor) -> torch.Tensor:
    """``u_t = x_{t-1}`` with ``u_1 = 0``: ``[B, T, D] -> [B, T, D]``."""
    return F.pad(x, (0, 0, 1, 0))[:, :-1]


def reverse_padded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence of ``x [B, T, ...]`` within its valid prefix (padding stays after it).

    The map is its own inverse, so applying it twice gives back ``x``.
    """
    steps = x.shape[1]
    lengths = mask.sum(1, keepdim=True)
    index = (lengths - 1 - torch.arange(steps, device=x.device)) % steps  # [B, T]
    index = index.reshape(index.shape + (1,) * (x.dim() - 2)).expand_as(x)
    return torch.gather(x, 1, index)


class EmissionChecks:
    """Mixin for models with an ``emission_kind`` of :data:`EMISSIONS`.

    Its ``check_values`` (the :class:`~ppl_models.inference.protocol.SequenceModel` hook that every entry
    point calls) refuses data the emission cannot score: non-binary entries for ``"bernoulli"``.
    """

    def check_values(self, x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
        if self.emission_kind == "bernoulli":
            check_binary(x, mask, name=name)


def check_binary(x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
    """Raise ``ValueError`` unless every valid entry of ``x`` is 0 or 1 (a Bernoulli emission's data).

    A check of values: skipped where they must not be read (inside a CUDA-graph capture).
    """
    if not value_checks_enabled():
        return
    valid = x[mask]
    if not bool(((valid == 0) | (valid == 1)).all()):
        bad = valid[(valid != 0) & (valid != 1)][0].item()
        raise ValueError(f"{name} must be binary (0 or 1) for a Bernoulli emission, got the value {bad}")

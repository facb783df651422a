"""Deterministic GRU language model with SRNN's emission (the "RNN" row of the SRNN paper's tables).

``d_t = GRU(d_{t-1}, x_{t-1})`` and ``x_t ~ p(x_t | d_t)``, Bernoulli or diagonal Gaussian,
through the same kind of feed-forward net as SRNN's emission. With no latent variables its
log-likelihood is exact (:meth:`GRUBaseline.log_likelihood`), so it trains with the
``exact`` objective; its Pyro ``model`` scores all steps in one site ``x`` and its
``guide`` is empty, so Pyro's ELBOs return the same number.
"""

from __future__ import annotations

import pyro
import torch
from torch import nn

from inference.state_space import SEQUENCE_PLATE
from inference.validation import check_choice, check_positive_int, check_sequences

from .nets import EMISSIONS, SplitInputMLP, check_binary, emission_distribution, emission_params, shifted_inputs

__all__ = ["GRUBaseline"]


class GRUBaseline(nn.Module):
    """GRU over ``u_t = x_{t-1}`` with a feed-forward emission of ``d_t``.

    Args:
        obs_dim: ``D``.
        emission: ``"bernoulli"`` or ``"gaussian"``.
        rnn_dim: GRU state size.
        hidden_dim: units of the emission net's hidden layers.
        num_hidden_layers: hidden layers of the emission net.
    """

    def __init__(self, obs_dim: int, *, emission: str = "bernoulli", rnn_dim: int = 300, hidden_dim: int = 500,
                 num_hidden_layers: int = 1):  # fmt: skip
        super().__init__()
        for name, value in (("obs_dim", obs_dim), ("rnn_dim", rnn_dim), ("hidden_dim", hidden_dim)):
            check_positive_int(value, name=name)
        self.obs_dim = obs_dim
        self.emission_kind = check_choice(emission, EMISSIONS, name="emission")
        self.rnn = nn.GRU(obs_dim, rnn_dim, batch_first=True)
        self.emission_net = SplitInputMLP(0, rnn_dim, hidden_dim, emission_params(emission, obs_dim),
                                          num_hidden_layers)  # fmt: skip

    def emission(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """``p(x_t | x_{<t})`` for every step: batch shape ``[B, T]``, event ``[D]``."""
        x, mask = check_sequences(x, mask, feature_size=self.obs_dim)
        if self.emission_kind == "bernoulli":
            check_binary(x, mask)
        d, _ = self.rnn(shifted_inputs(x))
        return emission_distribution(self.emission_kind, self.emission_net(None, self.emission_net.project(d)))

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x_{1:T_b})`` per sequence, ``[B]``."""
        x, mask = check_sequences(x, mask, feature_size=self.obs_dim)
        return (self.emission(x, mask).log_prob(x) * mask).sum(1)

    @torch.no_grad()
    def predictive_mean(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """One-step-ahead ``E[x_t | x_{<t}]`` ``[B, T, D]`` (exact)."""
        return self.emission(x, mask).mean

    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro program: one observed site ``x`` with batch shape ``[B]`` (padding masked out)."""
        pyro.module("gru_baseline", self)
        x, mask = check_sequences(x, mask, feature_size=self.obs_dim)
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            pyro.sample("x", self.emission(x, mask).mask(mask).to_event(1), obs=x)

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Empty: the model has no latent variables."""
        pyro.module("gru_baseline", self)

"""Deterministic GRU language model with SRNN's emission (the "RNN" row of the SRNN paper's tables).

``d_t = GRU(d_{t-1}, x_{t-1})`` and ``x_t ~ p(x_t | d_t)``, Bernoulli, diagonal Gaussian or a count emission,
through the same kind of feed-forward net as SRNN's emission. With no latent variables its
log-likelihood is exact (:meth:`GRUBaseline.log_likelihood`), so it trains with the
``exact`` objective; like every :class:`~ppl_models.predictors.ExactPredictiveModel`, its Pyro
``model`` scores all steps in one site ``x`` and its ``guide`` is empty, so Pyro's ELBOs
return the same number.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ppl_models.inference.training.carried_state import CarriesState
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences

from .nets import (
    EMISSIONS,
    CountScale,
    EmissionChecks,
    SplitInputMLP,
    emission_distribution,
    emission_params,
    shifted_inputs,
)
from .predictors import Carry, ExactPredictiveModel, recurrent_carry

__all__ = ["GRUBaseline"]


class GRUBaseline(CarriesState, EmissionChecks, ExactPredictiveModel):
    """GRU over ``u_t = x_{t-1}`` with a feed-forward emission of ``d_t``.

    Args:
        obs_dim: ``D``.
        emission: ``"bernoulli"``, ``"gaussian"``, or for counts ``"poisson"`` or ``"negbin"``
            (:data:`~ppl_models.nets.EMISSIONS`).
        rnn_dim: GRU state size.
        hidden_dim: units of the emission net's hidden layers.
        num_hidden_layers: hidden layers of the emission net.
        count_scale: for a count emission, ``D`` scales ``s`` the GRU reads the counts by and the rates are
            multiplied by (:class:`~ppl_models.nets.CountScale`); ``None``: the counts as they are.
    """

    pyro_prefix = "gru_baseline"
    description = "deterministic GRU with SRNN's emission (the SRNN paper's RNN row), exact likelihood"

    def __init__(
        self,
        obs_dim: int,
        *,
        emission: str = "bernoulli",
        rnn_dim: int = 300,
        hidden_dim: int = 500,
        num_hidden_layers: int = 1,
        count_scale=None,
    ):
        super().__init__()
        for name, value in (("obs_dim", obs_dim), ("rnn_dim", rnn_dim), ("hidden_dim", hidden_dim)):
            check_positive_int(value, name=name)
        self.obs_dim = obs_dim
        self.emission_kind = check_choice(emission, EMISSIONS, name="emission")
        self.count_scale = CountScale(emission, obs_dim, count_scale)
        self.rnn = nn.GRU(obs_dim, rnn_dim, batch_first=True)
        self.emission_net = SplitInputMLP(0, rnn_dim, hidden_dim, emission_params(emission, obs_dim), num_hidden_layers)

    def predictive_distribution(self, x, mask=None):
        """``p(x_t | x_{<t})`` for every step: batch shape ``[B, T]``, event ``[D]``. Inside :meth:`carrying`, the
        carried state is ``(x_prev [B, D], h [1, B, rnn_dim])``: the previous batch's last step and the GRU state that
        read the steps before it; the pass leaves its own in the box."""
        x, mask = check_sequences(x, mask, model=self)
        carried = self.carried
        if carried is None or carried.start is None:
            inputs, hidden = shifted_inputs(x), None
        else:
            previous, hidden = carried.start
            inputs = torch.cat([previous.unsqueeze(1), x[:, :-1]], 1)
        d, hidden = self.rnn(self.count_scale.inputs(inputs), hidden)
        if carried is not None:
            carried.final = (x[:, -1], hidden)
        return self.step_distribution(d)

    def step_distribution(self, d):
        """``p(x_t | d_t)`` of GRU states ``d [..., rnn_dim]``: batch ``[...]``, event ``[D]``."""
        params = self.emission_net(None, self.emission_net.project(d))
        return emission_distribution(self.emission_kind, self.count_scale.outputs(params))

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The GRU state ``d`` that predicts the step after ``paths [N, P, D]`` (its inputs ``0, x_1, ..., x_P``)."""
        return recurrent_carry(self.rnn, F.pad(self.count_scale.inputs(paths), (0, 0, 1, 0)))

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        return recurrent_carry(self.rnn, self.count_scale.inputs(x_t).unsqueeze(1), carry)

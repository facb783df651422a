"""LSTM forecaster with Monte Carlo dropout (Gal & Ghahramani 2016), the SMC Transformer paper's baseline.

The network is an LSTM over the observations followed by a linear decoder; step ``t`` is
predicted from ``x_{<t}`` (the state before the first step is zero). Dropout sits

* ``where="output"``: after the LSTM output, before the decoder (a fresh mask per step
  and unit, as a dropout layer on the LSTM's output sequence), the paper's Table 2 left;
* ``where="full"``: also inside the LSTM (the paper's Table 2 right, and its COVID runs: "a
  dropout layer inside the LSTM layer, and before the output layer"): dropout on the input
  ``x_t`` with a fresh mask at every step (MC dropout as in Gal & Ghahramani 2015, section 4,
  which the paper cites), and variational dropout on the recurrent state ``h_{t-1}`` (Gal &
  Ghahramani 2016): one mask per sequence, kept for every step and shared by the four gates.
  The input mask is not kept per sequence: with the papers' one-feature series that would
  silence a whole sequence's input in a share ``p`` of the passes, and the forecast would
  ignore the data.

As a :class:`~ppl_models.predictors.OneStepPredictor` the model is a Gaussian with a learned
scale around the decoder's output and trains with the shared ``exact`` objective; dropout
is on in training mode and off in evaluation mode, so :meth:`predictive_distribution` in
eval mode is deterministic. :meth:`MCDropoutLSTM.mc_samples` gives the paper's predictive
distribution: ``S`` stochastic forward passes with dropout on, vectorised by folding the
passes into the batch. A forecast path carries its LSTM state forward, a fresh output mask at each step; with
``where="full"`` the path is one pass, which keeps its recurrent mask for all of its steps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ppl_models.inference.validation import check_choice, check_dropout, check_positive_int, check_sequences

from .predictors import Carry, OneStepPredictor, recurrent_carry

__all__ = ["MCDropoutLSTM", "DROPOUT_PLACES"]

DROPOUT_PLACES = ("output", "full")
#: rows (passes x sequences) of one vectorised chunk of :meth:`MCDropoutLSTM.mc_samples`, by device type
#: (small chunks stay in the CPU's caches; a GPU wants large ones)
MC_CHUNK_ROWS = {"cpu": 1 << 12, "default": 1 << 16}


class MCDropoutLSTM(OneStepPredictor):
    """LSTM + dropout + linear decoder; Gaussian one-step predictive with a learned scale.

    Args:
        obs_dim: ``D``.
        hidden_size: LSTM state size ``H`` (the paper's ``d``).
        dropout: drop probability in ``[0, 1)`` of every dropout mask.
        where: ``"output"`` (dropout after the LSTM output) or ``"full"`` (also dropout on the
            LSTM's input, per step, and on its recurrent state, per sequence).
    """

    pyro_prefix = "mc_dropout_lstm"
    description = (
        "LSTM + MC dropout (where= output / full: also input and recurrent), linear decoder, "
        "Gaussian predictive; predictive draws are MC-dropout passes (the SMC Transformer paper's baseline)"
    )
    predictive_source = "the model's Monte Carlo passes (mc_samples; nlpd from its exact predictive)"

    def __init__(self, obs_dim: int, hidden_size: int = 64, dropout: float = 0.2, where: str = "output"):
        check_positive_int(obs_dim, name="obs_dim")
        super().__init__(obs_dim, check_positive_int(hidden_size, name="hidden_size"))
        self.dropout = check_dropout(dropout)
        self.where = check_choice(where, DROPOUT_PLACES, name="where")
        self.lstm = nn.LSTM(obs_dim, hidden_size, batch_first=True)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, D] -> [B, T, H]``: the (dropped-out) LSTM output after ``x_{<t}``; dropout iff training."""
        return self._states(x, active=self.training)

    @torch.no_grad()
    def mc_samples(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, num_samples: int = 1000, *, noise: bool = False
    ) -> torch.Tensor:
        """``S`` stochastic forward passes with dropout on, whatever the module's mode.

        The passes are folded into the batch, a chunk of passes at a time (with output dropout
        only, the LSTM runs once and only the dropout and the decoder are repeated).

        Args:
            x: observations ``[B, T, D]``.
            mask: optional bool ``[B, T]`` (checked; padded steps get predictions too, to be masked out).
            num_samples: ``S``, the number of passes (each draws its own dropout masks).
            noise: also add the observation noise (:meth:`noise_distribution`) to each pass.

        Returns:
            ``[S, B, T, D]``: sample ``s`` at step ``t`` is pass ``s``'s one-step forecast of
            ``x_t`` from ``x_{<t}`` (the paper's MC-dropout predictive distribution).
        """
        x, mask = check_sequences(x, mask, model=self)
        check_positive_int(num_samples, name="num_samples")
        batch, steps, _ = x.shape
        outputs = None if self.where == "full" else self.lstm(x)[0]
        per_chunk = max(1, MC_CHUNK_ROWS.get(x.device.type, MC_CHUNK_ROWS["default"]) // batch)
        chunks = []
        for start in range(0, num_samples, per_chunk):
            count = min(per_chunk, num_samples - start)
            if outputs is None:
                repeated = self._variational_lstm(x.expand(count, *x.shape).reshape(count * batch, steps, -1))
            else:
                repeated = outputs.expand(count, *outputs.shape).reshape(count * batch, steps, -1)
            states = self._shifted(F.dropout(repeated, self.dropout, training=True))
            chunks.append(self.decoder(states).reshape(count, *x.shape))
        samples = torch.cat(chunks, 0)
        if noise:
            samples = self.noise_distribution(samples, self._states(x, active=False)).sample()  # scale: mean state
        return samples

    def predictive_samples(self, x, mask, num_samples: int, exact) -> torch.Tensor:
        """The paper's predictive: ``S`` MC-dropout passes (:meth:`mc_samples`), ``[S, B, T, D]``."""
        return self.mc_samples(x, mask, num_samples)

    @property
    def shares_history(self) -> bool:
        """Whether a sequence's paths share its history's carry: with ``where="full"`` each path runs it, one pass."""
        return self.where == "output"

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The LSTM's output after ``paths [N, P, D]`` (zeros for ``P = 0``) and its hidden state. With
        ``where="full"`` each path is one dropout pass: its recurrent mask, drawn here, stays with the path's
        later steps (the input masks are fresh at every step)."""
        if self.where == "output":
            return recurrent_carry(self.lstm, paths)
        zeros = paths.new_zeros(paths.shape[0], self.state_dim)
        return self.carry_through(Carry(zeros, (zeros, zeros, self._state_mask(zeros))), paths)

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        if self.where == "output":
            return recurrent_carry(self.lstm, x_t.unsqueeze(1), carry)
        h, c, state_mask = carry.memory
        h, c = self._lstm_step(self._input_gates(x_t), h, c, state_mask)
        return Carry(h, (h, c, state_mask))

    def carry_draw(self, carry: Carry) -> tuple[torch.Tensor, torch.Tensor]:
        """One MC-dropout pass's forecast ``[N, D]`` of the next step, a fresh output mask on the carried state: the
        draw and its mean (a pass's output is its Gaussian's mean)."""
        draw = self.decoder(F.dropout(carry.state, self.dropout, training=True))
        return draw, draw

    def _states(self, x: torch.Tensor, *, active: bool) -> torch.Tensor:
        """``[B, T, D] -> [B, T, H]``, with dropout iff ``active``."""
        if active and self.where == "full":
            outputs = self._variational_lstm(x)
        else:
            outputs, _ = self.lstm(x)
        return self._shifted(F.dropout(outputs, self.dropout, training=active))

    @staticmethod
    def _shifted(outputs: torch.Tensor) -> torch.Tensor:
        """``[B, T, H]``: ``outputs`` one step later, zeros first (step ``t`` sees the output after ``x_{t-1}``)."""
        return torch.cat([torch.zeros_like(outputs[:, :1]), outputs[:, :-1]], 1)

    def _variational_lstm(self, x: torch.Tensor) -> torch.Tensor:
        """``nn.LSTM``'s recursion on its own weights, dropout on ``x_t`` (per step) and ``h_{t-1}`` (per sequence).

        ``[B, T, D] -> [B, T, H]`` (the outputs ``h_t``); the state starts at zero.
        """
        h = c = x.new_zeros(x.shape[0], self.state_dim)
        state_mask = self._state_mask(h)
        inputs = self._input_gates(x)  # [B, T, 4H]
        outputs = []
        for step in inputs.unbind(1):  # views unbound once: a backward fill per step otherwise
            h, c = self._lstm_step(step, h, c, state_mask)
            outputs.append(h)
        return torch.stack(outputs, 1)

    def _state_mask(self, like: torch.Tensor) -> torch.Tensor:
        """A variational dropout mask ``[B, H]`` of the recurrent state, shaped like ``like``, scaled by 1 / keep."""
        keep = 1.0 - self.dropout
        return torch.bernoulli(torch.full_like(like, keep)) / keep

    def _input_gates(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., D] -> [..., 4H]``: the input's share of the gates, dropout on ``x`` (a fresh mask per step and
        feature), both biases added."""
        lstm = self.lstm
        return F.linear(F.dropout(x, self.dropout, training=True), lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0)

    def _lstm_step(self, inputs: torch.Tensor, h: torch.Tensor, c: torch.Tensor, state_mask: torch.Tensor):
        """One step of ``nn.LSTM``'s recursion: ``inputs [B, 4H]`` (:meth:`_input_gates`), ``h_{t-1}`` dropped by
        ``state_mask``; returns ``(h_t, c_t)``, ``[B, H]`` each."""
        gates = inputs + F.linear(h * state_mask, self.lstm.weight_hh_l0)
        i, f, g, o = gates.chunk(4, -1)  # nn.LSTM's gate order
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

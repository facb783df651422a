"""Deterministic causal Transformer point forecaster (the SMC Transformer paper's deterministic Transformer).

The input sequence is shifted by one step: a learned start vector, then the linear
embeddings of ``x_0, ..., x_{T-2}``; positions (learned or sinusoidal) are added and
``nn.TransformerEncoder`` layers attend with a causal mask, so the state ``s_t`` depends on
``x_{<t}`` only. With a ``context`` of ``L`` steps, ``s_t`` reads at most the ``L - 1`` steps before ``t``: past the
first ``L`` steps each is predicted from a window of its own (the start vector at position 0, then ``x_{t-L+1}, ...,
x_{t-1}``), as a training sequence of ``L`` steps is. As a :class:`~ppl_models.predictors.OneStepPredictor` it
decodes ``s_t`` linearly into the mean of a Gaussian with a learned scale and trains with the shared ``exact``
objective (the same minimiser for the mean as the paper's MSE).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ppl_models.inference.validation import check_choice, check_dropout, check_positive_int

from .predictors import Carry, OneStepPredictor

__all__ = ["TransformerForecaster", "POSITION_ENCODINGS", "sinusoidal_positions"]

POSITION_ENCODINGS = ("learned", "sinusoidal")
#: the most positions :meth:`TransformerForecaster.states` runs at once when it reads a long sequence window by window
WINDOW_POSITIONS = 1 << 16


def sinusoidal_positions(num_steps: int, d_model: int, *, start: int = 0, dtype=None, device=None) -> torch.Tensor:
    """Vaswani et al. (2017) encodings ``[T, d_model]`` of positions ``start .. start + T - 1``: ``sin`` / ``cos`` of
    ``t / 10000^(2i / d_model)``."""
    position = torch.arange(start, start + num_steps, dtype=torch.float64, device=device).unsqueeze(1)
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64, device=device) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(num_steps, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table.to(dtype or torch.get_default_dtype())


class TransformerForecaster(OneStepPredictor):
    """Start vector + linear embedding + positions + causal ``nn.TransformerEncoder``, linear decoder.

    An input so large that the attention overflows (products of two embeddings of it: near 1e30
    in float32) leaves the states after it NaN: ``log_likelihood`` and ``predictive`` then raise
    one ``ValueError`` naming the first step they cannot score (rescale the data or use float64).

    Args:
        obs_dim: ``D``.
        d_model: width of the embeddings and attention layers.
        num_heads: attention heads (must divide ``d_model``).
        num_layers: encoder layers.
        feedforward_dim: hidden units of each layer's feed-forward block.
        dropout: dropout rate inside the encoder layers, in ``[0, 1)`` (``0``: deterministic in
            training mode too).
        positions: ``"learned"`` (one trained vector per step, up to ``max_len`` steps) or
            ``"sinusoidal"`` (fixed, any length).
        max_len: the learned position table's length.
        context: the most steps a prediction reads, its own position included (the start vector and the
            ``context - 1`` steps before it); ``None``: ``max_len`` with learned positions, every step with sinusoidal
            ones. Longer sequences are read through a sliding window, never through a position no training sequence
            reached: set it to the longest training sequence (the training windows' length).
    """

    pyro_prefix = "transformer_forecaster"
    description = (
        "deterministic causal Transformer (learned or sinusoidal positions), Gaussian predictive "
        "(the SMC Transformer paper's deterministic Transformer)"
    )

    def __init__(
        self,
        obs_dim: int,
        d_model: int = 16,
        num_heads: int = 1,
        num_layers: int = 1,
        feedforward_dim: int = 64,
        dropout: float = 0.0,
        positions: str = "learned",
        max_len: int = 512,
        context: int | None = None,
    ):
        check_positive_int(obs_dim, name="obs_dim")
        super().__init__(obs_dim, check_positive_int(d_model, name="d_model"))
        for name, value in (
            ("num_heads", num_heads),
            ("num_layers", num_layers),
            ("feedforward_dim", feedforward_dim),
            ("max_len", max_len),
        ):
            check_positive_int(value, name=name)
        if d_model % num_heads:
            raise ValueError(f"num_heads must divide d_model = {d_model}, got {num_heads}")
        check_dropout(dropout)
        self.positions = check_choice(positions, POSITION_ENCODINGS, name="positions")
        if context is not None:
            check_positive_int(context, name="context")
            if positions == "learned" and context > max_len:
                raise ValueError(f"context must be <= max_len = {max_len} with learned positions, got {context}")
        self.max_len = max_len
        self.context = max_len if context is None and positions == "learned" else context
        self.embedding = nn.Linear(obs_dim, d_model)
        self.start = nn.Parameter(torch.zeros(d_model))
        self.position_table = nn.Embedding(max_len, d_model) if positions == "learned" else None
        layer = nn.TransformerEncoderLayer(
            d_model, num_heads, dim_feedforward=feedforward_dim, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, D] -> [B, T, d_model]``: position ``t`` attends to the start vector and ``x_{<t}`` only (the last
        ``context - 1`` of them past the first ``context`` steps, each step in a window of its own)."""
        steps = x.shape[1]
        if self.context is None or steps <= self.context:
            return self._window_states(x)
        # the window of step t >= L is x_{t-L+1 .. t}: its last position reads the start and x_{t-L+1 .. t-1}
        windows = x[:, 1:].unfold(1, self.context, 1).transpose(-1, -2)  # [B, T - L, L, D], a view
        count = max(1, WINDOW_POSITIONS // (x.shape[0] * self.context))  # windows per block: bounded memory
        tail = [
            self._window_states(block.flatten(0, 1))[:, -1].unflatten(0, block.shape[:2])
            for block in windows.split(count, 1)
        ]
        return torch.cat([self._window_states(x[:, : self.context]), *tail], 1)

    def _window_states(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`states` of sequences ``[B, T, D]`` read whole from position 0 (``T <= max_len`` when learned)."""
        batch, steps, _ = x.shape
        start = self.start.expand(batch, 1, -1)
        inputs = torch.cat([start, self.embedding(x[:, :-1])], 1)
        if self.position_table is None:
            inputs = inputs + sinusoidal_positions(steps, self.state_dim, dtype=x.dtype, device=x.device)
        else:
            inputs = inputs + self.position_table.weight[:steps]
        causal = torch.triu(torch.ones(steps, steps, dtype=torch.bool, device=x.device), diagonal=1)
        return self.encoder(inputs, mask=causal, is_causal=True)

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The state of the position after ``paths [N, P, D]`` (their last ``context - 1`` steps) and, as its memory,
        each layer's keys and values of the positions up to it, reached one position at a time (:meth:`carry_on`),
        with the steps they read (``None`` without a context)."""
        if self.context is not None:
            paths = paths[:, max(0, paths.shape[1] - self.context + 1) :]
        seen = None if self.context is None else paths[:, :0]
        return self.carry_through(self._position(self.start.expand(paths.shape[0], -1), [], seen), paths)

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        """The next position's carry; once the window is full, that of a window restarted on the last steps."""
        cache, seen = carry.memory
        if seen is not None:
            seen = torch.cat([seen, x_t.unsqueeze(1)], 1)
            if seen.shape[1] >= self.context:
                return self.carry_start(seen)
        return self._position(self.embedding(x_t), cache, seen)

    def _position(self, inputs: torch.Tensor, cache: list, seen: torch.Tensor | None) -> Carry:
        """The carry of the next position from its input ``[N, d_model]`` (before its position's encoding) and
        ``cache``, each layer's keys and values ``[N, heads, t, d_model / heads]`` of the ``t`` positions before it
        (``[]`` for the first): the position attends to them and to itself, as the causal mask of :meth:`states`."""
        step = cache[0][0].shape[2] if cache else 0
        if self.position_table is None:
            u = inputs + sinusoidal_positions(1, self.state_dim, start=step, dtype=inputs.dtype, device=inputs.device)
        else:
            u = inputs + self.position_table.weight[step]
        updated = []
        for layer, past in zip(self.encoder.layers, cache or [None] * len(self.encoder.layers)):
            u, keys, values = _layer_step(layer, u, past)
            updated.append((keys, values))
        return Carry(u if self.encoder.norm is None else self.encoder.norm(u), (updated, seen))


def _layer_step(layer: nn.TransformerEncoderLayer, u: torch.Tensor, past: tuple | None):
    """One new position ``u [N, d]`` through ``layer``, attending to the keys and values ``past`` of the positions
    before it (``[N, heads, t, r]`` each, or ``None``) and its own: ``(output [N, d], keys, values)``, the keys and
    values ``[N, heads, t + 1, r]``."""
    attention = layer.self_attn
    x = layer.norm1(u) if layer.norm_first else u
    q, k, v = (
        part.unflatten(-1, (attention.num_heads, -1)).unsqueeze(2)
        for part in F.linear(x, attention.in_proj_weight, attention.in_proj_bias).chunk(3, -1)
    )
    if past is not None:
        k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
    dropout = attention.dropout if layer.training else 0.0
    z = attention.out_proj(F.scaled_dot_product_attention(q, k, v, dropout_p=dropout).squeeze(2).flatten(-2))
    if layer.norm_first:
        u = u + layer.dropout1(z)
        return u + _feed_forward(layer, layer.norm2(u)), k, v
    u = layer.norm1(u + layer.dropout1(z))
    return layer.norm2(u + _feed_forward(layer, u)), k, v


def _feed_forward(layer: nn.TransformerEncoderLayer, x: torch.Tensor) -> torch.Tensor:
    """The feed-forward block of ``layer`` on ``x [..., d]``, with its dropouts."""
    return layer.dropout2(layer.linear2(layer.dropout(layer.activation(layer.linear1(x)))))

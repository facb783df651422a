"""What the PF-RNN layers take and give: their particle state (:class:`ParticleState`) and belief
(:class:`ParticleBelief`), and the checks and conversions of their inputs, initial states and noise
(:class:`LayerInputs`, a base of the layers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ppl_models.inference.validation import InputTypeError

__all__ = ["ParticleState", "ParticleBelief", "LayerInputs", "packed_like", "apply_to_final"]


class ParticleState(NamedTuple):
    """The particle state of a PF-RNN layer stack, one entry per layer ``L = num_layers``.

    ``h [L, K, B, H]`` (and ``c [L, K, B, H]`` for PF-LSTM, else ``None``), ``log_weights
    [L, K, B]``; ``steps``: how many time steps led to it (the next step's index, for
    :class:`StepBatchNorm`).
    """

    h: torch.Tensor
    c: torch.Tensor | None
    log_weights: torch.Tensor
    steps: int = 0


@dataclass
class ParticleBelief:
    """The belief of a PF-RNN layer (its top layer, when stacked) over a batch.

    Attributes:
        mean: ``[B, T, H]`` weighted mean particle per step (the layer's output).
        particles: ``[T, K, B, H]`` particles after each step's weight update (``None`` when a readout was
            applied to them instead).
        log_weights: ``[T, K, B]`` their normalised log-weights.
        state: final :class:`ParticleState` of all layers (before resampling).
        outputs: ``[T, K, B, O]`` a readout of each particle after each step's weight update (``None`` unless the
            filter was given one).
    """

    mean: torch.Tensor
    particles: torch.Tensor | None
    log_weights: torch.Tensor
    state: ParticleState
    outputs: torch.Tensor | None = None


class LayerInputs:
    """The checks and conversions of a PF-RNN layer stack's inputs: a base of the layers, which set ``batch_first``,
    ``input_size``, ``hidden_size``, ``num_layers``, ``num_particles``, ``layers`` (the cells) and ``_state_name``
    (``hx``'s form in errors)."""

    def _batch_first_input(self, input):
        """``input`` as ``(x [B, T, D], mask [B, T] or None, unbatched)``."""
        if isinstance(input, PackedSequence):
            x, lengths = pad_packed_sequence(input, batch_first=True)
            x = self._check_tensor_input(x, batch_first=True)
            return x, torch.arange(x.shape[1], device=x.device) < lengths.to(x.device).unsqueeze(-1), False
        return self._check_tensor_input(input, allow_unbatched=True), None, input.dim() == 2

    def _check_tensor_input(self, input, *, batch_first: bool | None = None, allow_unbatched: bool = False):
        """A ``[B, T, D]`` view of ``input``: ``[B, T, D]`` if ``batch_first`` (default: the layer's), else
        ``[T, B, D]``, or ``[T, D]`` (one sequence) if ``allow_unbatched``."""
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor or a PackedSequence, got {type(input).__name__}")
        batch_first = self.batch_first if batch_first is None else batch_first
        layout = "[B, T, D]" if batch_first else "[T, B, D]"
        ranks = (2, 3) if allow_unbatched else (3,)
        if input.dim() not in ranks or input.shape[-1] != self.input_size:
            expected = f"{layout} or unbatched [T, D]" if allow_unbatched else layout
            raise ValueError(
                f"input must have shape {expected} with D = input_size = {self.input_size}, got {tuple(input.shape)}"
            )
        dtype = self.layers[0].input_projection.weight.dtype
        if input.dtype != dtype:
            raise InputTypeError(
                f"input must have the dtype of the layer's parameters, {dtype}, got {input.dtype}: "
                f"convert one of them, input.to({dtype}) or layer.to({input.dtype})"
            )
        if input.dim() == 2:
            return input.unsqueeze(0)
        return input if batch_first else input.transpose(0, 1)

    def _initial_state(self, hx, x: torch.Tensor, unbatched: bool) -> ParticleState:
        """``hx`` as a :class:`ParticleState` of ``[L, K, B, H]`` particles (``log_weights`` ``[L, K, B]`` or Nones)."""
        keys = self.layers[0].state_keys
        layers, batch = self.num_layers, x.shape[0]
        shape = (layers, self.num_particles, batch, self.hidden_size)
        no_weights = (None,) * layers
        if hx is None:
            return ParticleState(x.new_zeros(shape), x.new_zeros(shape) if "c" in keys else None, no_weights)
        if isinstance(hx, ParticleState):
            return self._check_particle_state(hx, shape, keys)
        tensors = hx if "c" in keys and isinstance(hx, (tuple, list)) and len(hx) == 2 else (hx,)
        if not all(isinstance(t, torch.Tensor) for t in tensors) or len(tensors) != len(keys):
            raise TypeError(
                f"hx must be None, {self._state_name} (tensors [num_layers, B, H]) or a ParticleState, "
                f"got {type(hx).__name__}"
            )
        expected = (layers, self.hidden_size) if unbatched else (layers, batch, self.hidden_size)
        for key, tensor in zip(keys, tensors):
            if tuple(tensor.shape) != expected:
                raise ValueError(
                    f"hx's {key}_0 must have shape {list(expected)} (num_layers, "
                    f"{'' if unbatched else 'B, '}H), got {tuple(tensor.shape)}"
                )
        particles = [(t.unsqueeze(1) if unbatched else t).unsqueeze(1).expand(shape) for t in tensors]
        return ParticleState(particles[0], particles[1] if len(particles) > 1 else None, no_weights)

    def _check_particle_state(self, hx: ParticleState, shape, keys) -> ParticleState:
        if not isinstance(hx.steps, int) or isinstance(hx.steps, bool) or hx.steps < 0:
            raise ValueError(f"hx.steps must be an int >= 0 (steps already filtered), got {hx.steps!r}")
        for key in keys:
            value = getattr(hx, key)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"hx.{key} must have shape [num_layers, K, B, H] = {shape}, got {got}")
        if not isinstance(hx.log_weights, torch.Tensor) or tuple(hx.log_weights.shape) != shape[:3]:
            got = tuple(hx.log_weights.shape) if isinstance(hx.log_weights, torch.Tensor) else hx.log_weights
            raise ValueError(f"hx.log_weights must have shape [num_layers, K, B] = {shape[:3]}, got {got}")
        return hx

    def _check_noise(self, noise, x: torch.Tensor) -> torch.Tensor | None:
        if noise is None:
            return None
        shape = (self.num_layers, x.shape[1], self.num_particles, x.shape[0], self.hidden_size)
        if isinstance(noise, torch.Tensor) and self.num_layers == 1 and tuple(noise.shape) == shape[1:]:
            return noise.unsqueeze(0)
        if not isinstance(noise, torch.Tensor) or tuple(noise.shape) != shape:
            got = tuple(noise.shape) if isinstance(noise, torch.Tensor) else type(noise).__name__
            raise ValueError(
                f"noise must be a tensor [num_layers, T, K, B, H] = {shape} (or [T, K, B, H] for one layer), got {got}"
            )
        return noise


def packed_like(packed: PackedSequence, padded: torch.Tensor, mask: torch.Tensor) -> PackedSequence:
    """``padded [B, T, H]`` (the batch in its original order) packed as ``packed``: same order and batch sizes."""
    lengths = mask.sum(1)
    if packed.sorted_indices is not None:
        padded, lengths = padded.index_select(0, packed.sorted_indices), lengths[packed.sorted_indices]
    data = pack_padded_sequence(padded, lengths.cpu(), batch_first=True).data
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


def apply_to_final(final, function):
    """``function`` on ``h_n`` or on each of ``(h_n, c_n)``."""
    return tuple(function(v) for v in final) if isinstance(final, tuple) else function(final)

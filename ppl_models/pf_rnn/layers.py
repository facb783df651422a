"""PFLSTM and PFGRU: drop-in ``nn.LSTM`` / ``nn.GRU`` layers whose state is a weighted particle set per layer."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ppl_models.inference.particle_filter import ParticleFilter, _weighted_sum
from ppl_models.inference.protocol import CAPABILITIES, SequenceModel
from ppl_models.inference.validation import (
    InputTypeError,
    check_choice,
    check_dropout,
    check_positive_int,
    check_probability,
)

from .cells import ACTIVATIONS, _GRUParticleCell, _LSTMParticleCell, _ParticleCell, _ParticleRun

__all__ = ["EVAL_RANDOMNESS", "ParticleState", "ParticleBelief", "PFLSTM", "PFGRU", "PF_CELLS"]

EVAL_RANDOMNESS = ("fixed", "off", "sampled")


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
        particles: ``[T, K, B, H]`` particles after each step's weight update.
        log_weights: ``[T, K, B]`` their normalised log-weights.
        state: final :class:`ParticleState` of all layers (before resampling).
    """

    mean: torch.Tensor
    particles: torch.Tensor
    log_weights: torch.Tensor
    state: ParticleState


class _PFRNNBase(SequenceModel):
    """Shared by :class:`PFLSTM` and :class:`PFGRU`: options, input conversions, the filters of the layers.

    A subclass sets ``_cell`` (its :class:`_ParticleCell`) and ``_state_name`` (``hx``'s form in errors).
    """

    capabilities = frozenset()
    limitations = dict.fromkeys(
        CAPABILITIES,
        "a recurrent layer (drop-in for nn.LSTM / nn.GRU) maps inputs to features and models no distribution; "
        "PFRNNPredictor puts a predictive head on it and PFRNNProgram its Pyro programs",
    )

    _cell: type[_ParticleCell]
    _state_name: str

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        *,
        num_particles: int = 20,
        resampling: str = "soft",
        alpha: float = 0.5,
        stochastic: bool = True,
        activation: str = "relu_bn",
        norm_steps: int = 100,
        eval_randomness: str = "fixed",
        eval_seed: int = 0,
    ):
        super().__init__()
        name = type(self).__name__
        for flag, value in (
            ("bias", bias),
            ("batch_first", batch_first),
            ("bidirectional", bidirectional),
            ("stochastic", stochastic),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {type(value).__name__} {value!r}")
        if bidirectional:
            raise ValueError(
                f"{name} filters forward in time: bidirectional=True has no particle-filter meaning "
                "(run a second layer on the time-reversed input instead)"
            )
        self.input_size = check_positive_int(input_size, name="input_size")
        self.hidden_size = check_positive_int(hidden_size, name="hidden_size")
        self.num_layers = check_positive_int(num_layers, name="num_layers")
        self.dropout = check_dropout(dropout)
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout={dropout} acts between layers, and num_layers=1 has none (as in nn.LSTM)", stacklevel=3
            )
        self.num_particles = check_positive_int(num_particles, name="num_particles")
        self.resampling = check_choice(resampling, ("soft", "none"), name="resampling")
        self.alpha = check_probability(alpha, name="alpha", open_left=True)
        self.activation = check_choice(activation, ACTIVATIONS, name="activation")
        self.eval_randomness = check_choice(eval_randomness, EVAL_RANDOMNESS, name="eval_randomness")
        if isinstance(eval_seed, bool) or not isinstance(eval_seed, int) or eval_seed < 0:
            raise ValueError(f"eval_seed must be an int >= 0, got {eval_seed!r}")
        self.bias, self.batch_first, self.stochastic, self.eval_seed = bias, batch_first, stochastic, eval_seed
        self.bidirectional, self.proj_size = False, 0  # read by code written for nn.LSTM (num_directions)
        self.layers = nn.ModuleList(
            self._cell(
                input_size if index == 0 else hidden_size,
                hidden_size,
                bias=bias,
                stochastic=stochastic,
                activation=activation,
                norm_steps=norm_steps,
            )
            for index in range(num_layers)
        )
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)
        self.last_particle_state: ParticleState | None = None
        self.register_load_state_dict_pre_hook(_single_layer_checkpoint)

    # --- drop-in API ----------------------------------------------------------------------
    def forward(self, input, hx=None):
        """``nn.LSTM``'s call: ``(output, (h_n, c_n))`` for :class:`PFLSTM`, ``(output, h_n)`` for :class:`PFGRU`.

        Args:
            input: ``[T, B, D]`` (``[B, T, D]`` if ``batch_first``), unbatched ``[T, D]``, or a
                ``PackedSequence``.
            hx: ``None`` (zero particles, uniform weights); ``nn.LSTM``'s ``(h_0, c_0)`` /
                ``nn.GRU``'s ``h_0``, each ``[num_layers, B, H]`` (``[num_layers, H]`` unbatched),
                copied to all ``K`` particles of each layer with uniform weights; or a
                :class:`ParticleState` (such as :attr:`last_particle_state`) to continue the filters.

        Returns:
            ``output``: the top layer's weighted mean particle at each step, shaped as ``input``
            with ``H`` features (a ``PackedSequence`` for packed input); ``h_n`` (and ``c_n``)
            ``[num_layers, B, H]`` (``[num_layers, H]`` unbatched): each layer's weighted mean
            final particle, taken at each sequence's last valid step. The full particle state is
            left, detached, in :attr:`last_particle_state` (:meth:`filter` returns it with its
            gradient path).
        """
        x, mask, unbatched = self._batch_first_input(input)
        initial = self._initial_state(hx, x, unbatched)
        mean, state, _ = self._filter_layers(x, initial, mask, None, None, keep_particles=False)
        self.last_particle_state = ParticleState(*(v.detach() if isinstance(v, torch.Tensor) else v for v in state))
        h_n = _weighted_sum(state.h, state.log_weights.exp())  # [L, B, H]
        final = h_n if state.c is None else (h_n, _weighted_sum(state.c, state.log_weights.exp()))
        if isinstance(input, PackedSequence):
            return _packed_like(input, mean, mask), final
        if unbatched:
            return mean.squeeze(0), _apply(final, lambda v: v.squeeze(1))
        return (mean if self.batch_first else mean.transpose(0, 1)), final

    def flatten_parameters(self) -> None:
        """``nn.LSTM``'s cuDNN call, for code that makes it: the particle layers have nothing to flatten."""

    def filter(
        self,
        input: torch.Tensor,
        hx=None,
        *,
        mask: torch.Tensor | None = None,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> ParticleBelief:
        """Run the layers' particle filters over ``input`` (``[B, T, D]`` if batch_first, else ``[T, B, D]``).

        Args:
            hx: state to continue from, as :meth:`forward` takes it (default: zero particles, uniform weights).
            mask: ``[B, T]`` bool, valid steps first; the state is carried over padding.
            noise: ``[num_layers, T, K, B, H]`` (``[T, K, B, H]`` for one layer) standard normal
                draws of the stochastic updates (default: fresh, or none in evaluation with
                ``eval_randomness="off"``).
            generator: source of the noise and resampling draws (in evaluation with
                ``eval_randomness="fixed"``, default: one seeded with ``eval_seed``).

        Returns:
            the top layer's :class:`ParticleBelief`, with the final :class:`ParticleState` of all layers.
        """
        x = self._check_tensor_input(input)
        initial, noise = self._initial_state(hx, x, False), self._check_noise(noise, x)
        mean, state, result = self._filter_layers(x, initial, mask, noise, generator, keep_particles=True)
        return ParticleBelief(
            mean=mean, particles=result.history["h"], log_weights=result.history_log_weights, state=state
        )

    def _filter_layers(self, x, initial: ParticleState, mask, noise, generator, *, keep_particles: bool):
        """The layers' filters over ``x [B, T, D]``: top mean ``[B, T, H]``, final state, top :class:`FilterResult`."""
        generator, draws = self._evaluation_draws(generator, x)
        layer_input, results = x, []
        for index, cell in enumerate(self.layers):
            if index > 0:  # nn.LSTM's dropout: on each layer's output but the last, in training only
                layer_input = F.dropout(layer_input, self.dropout, self.training)
            start = {key: getattr(initial, key)[index] for key in cell.state_keys}
            run = _ParticleRun(
                cell, start, None if noise is None else noise[index], generator, initial.steps, draw_noise=draws
            )
            resampling = self.resampling if draws else "none"
            pf = ParticleFilter(
                self.num_particles,
                resampling=resampling,
                ess_threshold=1.0,
                gradient="soft" if resampling == "soft" else "reparam",
                soft_alpha=self.alpha,
                generator=generator,
            )
            last = index == self.num_layers - 1
            result = pf.run(
                run,
                layer_input,
                mask,
                keep_ancestry=("h",) if keep_particles and last else False,
                keep_means=("h",),
                initial_log_weights=initial.log_weights[index],
            )
            layer_input = result.means["h"]
            results.append(result)
        stacked = {key: torch.stack([r.state[key] for r in results]) for key in self.layers[0].state_keys}
        state = ParticleState(
            stacked["h"], stacked.get("c"), torch.stack([r.log_weights for r in results]), initial.steps + x.shape[1]
        )
        return layer_input, state, results[-1]

    def _evaluation_draws(self, generator, like):
        """``(generator, draws)`` for a call: in ``eval()``, ``eval_randomness`` fixes or turns off the draws."""
        if self.training or self.eval_randomness == "sampled":
            return generator, True
        if self.eval_randomness == "off":
            return generator, False
        if generator is None:
            generator = torch.Generator(device=like.device).manual_seed(self.eval_seed)
        return generator, True

    # --- checks and conversions -----------------------------------------------------------
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

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
            f"batch_first={self.batch_first}, dropout={self.dropout}, num_particles={self.num_particles}, "
            f"resampling={self.resampling!r}, alpha={self.alpha}, stochastic={self.stochastic}, "
            f"activation={self.activation!r}, eval_randomness={self.eval_randomness!r}"
        )


def _single_layer_checkpoint(module, state_dict, prefix, *args) -> None:
    """Load checkpoints written before the layers were stacked: ``{prefix}input_projection...`` -> ``layers.0``."""
    for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + "layers.")]:
        state_dict[f"{prefix}layers.0.{key[len(prefix) :]}"] = state_dict.pop(key)


def _packed_like(packed: PackedSequence, padded: torch.Tensor, mask: torch.Tensor) -> PackedSequence:
    """``padded [B, T, H]`` (the batch in its original order) packed as ``packed``: same order and batch sizes."""
    lengths = mask.sum(1)
    if packed.sorted_indices is not None:
        padded, lengths = padded.index_select(0, packed.sorted_indices), lengths[packed.sorted_indices]
    data = pack_padded_sequence(padded, lengths.cpu(), batch_first=True).data
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


def _apply(final, function):
    """``function`` on ``h_n`` or on each of ``(h_n, c_n)``."""
    return tuple(function(v) for v in final) if isinstance(final, tuple) else function(final)


class PFLSTM(_PFRNNBase):
    """PF-LSTM: ``K`` LSTM particles per layer, stochastic cell updates, learned weights, soft resampling.

    A drop-in for ``nn.LSTM``: its positional arguments and defaults; the particle options are
    keyword-only. See :meth:`forward` for the call.

    Args:
        input_size: ``D``; hidden_size: ``H``.
        num_layers: stacked PF layers, each a particle filter of its own over the weighted mean
            output of the layer below.
        bias: biases in the gate and noise-scale projections.
        batch_first: inputs and outputs ``[B, T, .]`` instead of ``[T, B, .]`` (default ``False``,
            as ``nn.LSTM``).
        dropout: dropout on each layer's output but the last's, in training.
        bidirectional, proj_size: only the defaults (``False``, ``0``); others raise ``ValueError``.
        device, dtype: of the parameters.
        num_particles: ``K`` (keyword-only; each layer updates ``B K`` cells per step).
        resampling: ``"soft"`` (eq. 3, at every step) or ``"none"``.
        alpha: soft-resampling mixture weight (0.5 in the paper; 1 = plain multinomial).
        stochastic: add the learned Gaussian noise to the candidate (eqs. 9-11).
        activation: ``"relu_bn"`` (eq. 12, the paper's) or ``"tanh"`` (eq. 6, ``nn.LSTM``'s).
        norm_steps: time steps with batch-norm statistics of their own (:class:`StepBatchNorm`).
        eval_randomness: what ``eval()`` does with the noise and resampling draws: ``"fixed"``
            (default: drawn from a generator seeded with ``eval_seed`` at every call, so a batch
            always gives the same output), ``"off"`` (no noise, no resampling: the weights are
            carried by importance weighting alone) or ``"sampled"`` (fresh draws, as in training).
        eval_seed: the seed of ``"fixed"``.

    Attributes:
        layers: one particle cell per layer (``input_projection``, ``hidden_projection``,
            ``obs_net`` = ``f_obs``, ``norm``).
        last_particle_state: the :class:`ParticleState` the last :meth:`forward` ended in, detached.
    """

    description = "PF-LSTM layer (Ma et al. 2020): K LSTM particles, stochastic cell updates, soft resampling"
    _cell = _LSTMParticleCell
    _state_name = "(h_0, c_0)"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
        **particle_options,
    ):
        if proj_size != 0:
            raise ValueError(
                f"PFLSTM has no projections: proj_size must be 0, got {proj_size!r} (put a linear "
                "layer on its output instead)"
            )
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
            **particle_options,
        )


class PFGRU(_PFRNNBase):
    """PF-GRU (the paper's appendix): ``K`` GRU particles per layer, stochastic updates, soft resampling.

    ``n = W_n [r * h, x] + b_n + eps``, ``h' = (1 - z) * act(n) + z * h``; the noise scale
    reads ``[h_{t-1}, x_t]``. The reset gate acts before the recurrent product (Cho et al.
    2014), not after it as in ``nn.GRU``. A drop-in for ``nn.GRU``: arguments and attributes as
    :class:`PFLSTM` (without ``proj_size``); the call returns ``(output, h_n)``.
    """

    description = "PF-GRU layer (Ma et al. 2020): K GRU particles, stochastic updates, soft resampling"
    _cell = _GRUParticleCell
    _state_name = "h_0"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        **particle_options,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
            **particle_options,
        )


PF_CELLS = {"pf-lstm": PFLSTM, "pf-gru": PFGRU}

"""PF-RNNs (Ma et al. 2020): PF-LSTM and PF-GRU, recurrent layers whose state is a weighted particle set.

Each particle ``h^i`` is updated by the gated cell with a *stochastic memory update*: the
cell candidate gets Gaussian noise whose scale is a learned function of ``[h_{t-1}^i, x_t]``
(eqs. 9-11, and the appendix for the GRU), reparameterized. The weights are updated by the
learned discriminative observation function ``log f_obs(x_t, h_t^i)``, a one-hidden-layer
net over ``[h_t^i, x_t]`` (eq. 2), and the set is soft-resampled (eq. 3) before the next step. The layer's output at
each step is the weighted mean particle ``sum_i w_t^i h_t^i``.

The filtering itself is the shared :class:`~inference.particle_filter.ParticleFilter`
(gradient mode ``soft``, resampling at every step), with the cell as its particle model;
the module adds no loop of its own. :class:`PFLSTM` and :class:`PFGRU` are drop-in for
``nn.LSTM`` / ``nn.GRU``: the same positional arguments and defaults (``batch_first=False``),
stacked layers, dropout between them, packed and unbatched input, and
``output, (h_n, c_n) = rnn(x)`` with each layer's weighted mean particle as ``h_n``; the
particle options (``num_particles`` ...) are keyword-only. The full :class:`ParticleState`
(particles and log-weights of every layer) is kept in ``last_particle_state`` and can be
passed back as ``hx`` to continue the filters (truncated BPTT). :meth:`filter` returns the
whole :class:`ParticleBelief` that the PF-RNN losses (:mod:`inference.discriminative`) need.
``eval()`` fixes the random draws (or turns them off: ``eval_randomness``).
:class:`PFRNNPredictor` stacks the paper's input layers, a recurrent layer and an output
head, and :class:`PFRNNProgram` writes the same filter as a Pyro program.

Activation (``"relu_bn"``, the paper's default, or ``"tanh"``, the plain cell's): the cell
candidate goes through ReLU after batch normalisation over all particles of the batch, or
through tanh. The normalisation (:class:`StepBatchNorm`) keeps running statistics per time
step, as recurrent batch normalisation does (Cooijmans et al. 2017): the candidate's
distribution changes with ``t`` (all particles start equal), and one set of statistics
averaged over the steps made evaluation-mode losses a third higher than training-mode ones
on the localization task. With ``K = 1``, no noise, no resampling and tanh, :class:`PFLSTM` is exactly
``nn.LSTMCell``; :class:`PFGRU` is then the GRU of the paper's appendix (reset gate applied
before the recurrent product, Cho et al. 2014), which differs from ``nn.GRU``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.poutine.runtime import get_plates
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from inference.particle_filter import ParticleFilter, Step, _weighted_sum
from inference.protocol import CAPABILITIES, OneStepPredictive, SequenceModel, check_num_samples
from inference.resampling import gather_particles, resample
from inference.state_space import SEQUENCE_PLATE
from inference.traces import PARTICLE_PLATE
from inference.validation import (
    InputTypeError,
    check_choice,
    check_dropout,
    check_positive_int,
    check_probability,
    check_sequences,
)

from .nets import SplitInputMLP

__all__ = ["ACTIVATIONS", "EVAL_RANDOMNESS", "TASKS", "ParticleState", "ParticleBelief", "StepBatchNorm", "PFLSTM",
           "PFGRU", "PF_CELLS", "PFRNNPredictor", "PFRNNProgram"]  # fmt: skip

ACTIVATIONS = ("relu_bn", "tanh")
EVAL_RANDOMNESS = ("fixed", "off", "sampled")
TASKS = ("regression", "classification")


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


class StepBatchNorm(nn.Module):
    """Batch normalisation of ``[N, H]`` inputs with running statistics per time step.

    In training, step ``t``'s input is normalised by its own batch statistics (as
    ``nn.BatchNorm1d``) and updates step ``t``'s running mean and variance; in evaluation those
    are used. The affine ``weight`` and ``bias`` are shared by all steps. Steps from
    ``max_steps - 1`` on share the last statistics, and a step no training batch has reached
    uses those of the last step trained. The running averages lag the weights while they move;
    :func:`inference.training.refresh_norm_statistics` (``TrainConfig.norm_refresh_batches``)
    re-estimates them at the current weights.

    Args:
        num_features: ``H``.
        max_steps: time steps with statistics of their own.
        momentum, eps: as ``nn.BatchNorm1d``.
    """

    def __init__(self, num_features: int, max_steps: int = 100, *, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.num_features = check_positive_int(num_features, name="num_features")
        self.max_steps = check_positive_int(max_steps, name="max_steps")
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(max_steps, num_features))
        self.register_buffer("running_var", torch.ones(max_steps, num_features))
        self.register_buffer("steps_trained", torch.zeros((), dtype=torch.long))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)
        self.reset_running_stats()

    def reset_running_stats(self) -> None:
        """Zero mean, unit variance and no step trained, for every step."""
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        self.steps_trained.zero_()

    def forward(self, x: torch.Tensor, t: int) -> torch.Tensor:
        """Normalise ``x [N, H]``, the batch of time step ``t``."""
        index = min(t, self.max_steps - 1)
        if self.training:
            self.steps_trained.clamp_(min=index + 1)
        else:  # a tensor index: no host-device sync per step
            index = (self.steps_trained - 1).clamp(min=0, max=index)
        return F.batch_norm(x, self.running_mean[index], self.running_var[index], self.weight, self.bias,
                            self.training, self.momentum, self.eps)  # fmt: skip

    def extra_repr(self) -> str:
        return f"{self.num_features}, max_steps={self.max_steps}, momentum={self.momentum}, eps={self.eps}"


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


class _ParticleCell(nn.Module):
    """One PF-RNN layer's parameters and step: the gated update of ``K`` particles and ``log f_obs``.

    A subclass sets ``state_keys``, ``input_gates`` (blocks of ``H`` columns of the input
    projection, the noise scale's included when stochastic) and defines :meth:`propagate`.
    ``bias=False`` drops the biases of the gate and noise-scale projections (``nn.LSTM``'s
    ``b_ih``, ``b_hh``); ``f_obs`` keeps its own.
    """

    state_keys: tuple[str, ...] = ("h",)
    input_gates: int

    def __init__(self, input_size: int, hidden_size: int, *, bias: bool, stochastic: bool, activation: str,
                 norm_steps: int):  # fmt: skip
        super().__init__()
        self.hidden_size, self.stochastic = hidden_size, stochastic
        gates = self.input_gates - (0 if stochastic else 1)
        self.input_projection = nn.Linear(input_size, gates * hidden_size, bias=bias)
        self.obs_net = SplitInputMLP(hidden_size, input_size, hidden_size, 1)  # log f_obs([h_t^i, x_t])
        self.norm = StepBatchNorm(hidden_size, norm_steps) if activation == "relu_bn" else None
        bound = 1.0 / math.sqrt(hidden_size)  # nn.LSTM's initialisation
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)
        if self.norm is not None:
            self.norm.reset_parameters()

    def _recurrent_projections(self, *out_features: int) -> list[nn.Linear]:
        """Bias-free ``H -> out`` maps, created first and then initialised as ``nn.LSTM``'s (the draw order)."""
        projections = [nn.Linear(self.hidden_size, size, bias=False) for size in out_features]
        bound = 1.0 / math.sqrt(self.hidden_size)
        for projection in projections:
            nn.init.uniform_(projection.weight, -bound, bound)
        return projections

    def noisy_candidate(self, candidate, raw_scale, noise, t: int):
        """Eqs. 9-11: ``candidate + softplus(raw_scale) * noise`` (no noise: ``noise=None``), then the activation."""
        if noise is not None:
            candidate = torch.addcmul(candidate, F.softplus(raw_scale), noise)
        if self.norm is None:
            return torch.tanh(candidate)
        return F.relu(self.norm(candidate.reshape(-1, self.hidden_size), t).reshape(candidate.shape))

    def log_obs(self, h: torch.Tensor, obs_input_t: torch.Tensor) -> torch.Tensor:
        """Eq. 2's learned ``log f_obs(x_t, h_t^i)``, ``[K, B]``, from ``obs_net.project(x_t) [B, F]``."""
        return self.obs_net(h, obs_input_t).squeeze(-1)


class _LSTMParticleCell(_ParticleCell):
    state_keys = ("h", "c")
    input_gates = 5  # input, forget, candidate, output, noise scale (nn.LSTMCell's order first)

    def __init__(self, input_size: int, hidden_size: int, **options):
        super().__init__(input_size, hidden_size, **options)
        (self.hidden_projection,) = self._recurrent_projections(self.input_projection.out_features)

    def propagate(self, state, input_gates_t, noise, t: int):
        """One step of ``K`` particles ``{"h", "c": [K, B, H]}`` from the step's input gates ``[B, G H]``."""
        h, c = state["h"], state["c"]
        gates = self.hidden_projection(h).add_(input_gates_t)  # [K, B, G H]
        i, f, candidate, o, *scale = gates.split(self.hidden_size, dim=-1)
        candidate = self.noisy_candidate(candidate, scale[0] if scale else None, noise, t)
        c = torch.addcmul(torch.sigmoid(f) * c, torch.sigmoid(i), candidate)
        return {"h": torch.sigmoid(o) * torch.tanh(c), "c": c}


class _GRUParticleCell(_ParticleCell):
    input_gates = 4  # update, reset, noise scale, candidate

    def __init__(self, input_size: int, hidden_size: int, **options):
        super().__init__(input_size, hidden_size, **options)
        gates = self.input_projection.out_features // hidden_size - 1
        self.hidden_projection, self.candidate_projection = self._recurrent_projections(gates * hidden_size,
                                                                                      hidden_size)

    def propagate(self, state, input_gates_t, noise, t: int):
        """One step of ``K`` particles ``{"h": [K, B, H]}`` from the step's input gates ``[B, G H]``."""
        h, size = state["h"], self.hidden_size
        gates = self.hidden_projection(h).add_(input_gates_t[..., :-size])
        z, r, *scale = gates.split(size, dim=-1)
        candidate = self.candidate_projection(torch.sigmoid(r) * h).add_(input_gates_t[..., -size:])
        candidate = self.noisy_candidate(candidate, scale[0] if scale else None, noise, t)
        z = torch.sigmoid(z)
        return {"h": (1 - z) * candidate + z * h}


class _PFRNNBase(SequenceModel):
    """Shared by :class:`PFLSTM` and :class:`PFGRU`: options, input conversions, the filters of the layers.

    A subclass sets ``_cell`` (its :class:`_ParticleCell`) and ``_state_name`` (``hx``'s form in errors).
    """

    capabilities = frozenset()
    limitations = dict.fromkeys(
        CAPABILITIES,
        "a recurrent layer (drop-in for nn.LSTM / nn.GRU) maps inputs to features and models no distribution; "
        "PFRNNPredictor puts a predictive head on it and PFRNNProgram its Pyro programs")

    _cell: type[_ParticleCell]
    _state_name: str

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None, *, num_particles: int = 20, resampling: str = "soft", alpha: float = 0.5,
                 stochastic: bool = True, activation: str = "relu_bn", norm_steps: int = 100,
                 eval_randomness: str = "fixed", eval_seed: int = 0):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        for flag, value in (("bias", bias), ("batch_first", batch_first), ("bidirectional", bidirectional),
                            ("stochastic", stochastic)):  # fmt: skip
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {type(value).__name__} {value!r}")
        if bidirectional:
            raise ValueError(f"{name} filters forward in time: bidirectional=True has no particle-filter meaning "
                             "(run a second layer on the time-reversed input instead)")
        self.input_size = check_positive_int(input_size, name="input_size")
        self.hidden_size = check_positive_int(hidden_size, name="hidden_size")
        self.num_layers = check_positive_int(num_layers, name="num_layers")
        self.dropout = check_dropout(dropout)
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout={dropout} acts between layers, and num_layers=1 has none (as in nn.LSTM)",
                          stacklevel=3)  # fmt: skip
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
            self._cell(input_size if index == 0 else hidden_size, hidden_size, bias=bias, stochastic=stochastic,
                       activation=activation, norm_steps=norm_steps)
            for index in range(num_layers))  # fmt: skip
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

    def filter(self, input: torch.Tensor, hx=None, *, mask: torch.Tensor | None = None,
               noise: torch.Tensor | None = None, generator: torch.Generator | None = None,
               ) -> ParticleBelief:  # fmt: skip
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
        return ParticleBelief(mean=mean, particles=result.history["h"], log_weights=result.history_log_weights,
                              state=state)

    def _filter_layers(self, x, initial: ParticleState, mask, noise, generator, *, keep_particles: bool):
        """The layers' filters over ``x [B, T, D]``: top mean ``[B, T, H]``, final state, top :class:`FilterResult`."""
        generator, draws = self._evaluation_draws(generator, x)
        layer_input, results = x, []
        for index, cell in enumerate(self.layers):
            if index > 0:  # nn.LSTM's dropout: on each layer's output but the last, in training only
                layer_input = F.dropout(layer_input, self.dropout, self.training)
            start = {key: getattr(initial, key)[index] for key in cell.state_keys}
            run = _ParticleRun(cell, start, None if noise is None else noise[index], generator, initial.steps,
                               draw_noise=draws)  # fmt: skip
            resampling = self.resampling if draws else "none"
            pf = ParticleFilter(self.num_particles, resampling=resampling, ess_threshold=1.0,
                                gradient="soft" if resampling == "soft" else "reparam", soft_alpha=self.alpha,
                                generator=generator)  # fmt: skip
            last = index == self.num_layers - 1
            result = pf.run(run, layer_input, mask, keep_ancestry=("h",) if keep_particles and last else False,
                            keep_means=("h",), initial_log_weights=initial.log_weights[index])  # fmt: skip
            layer_input = result.means["h"]
            results.append(result)
        stacked = {key: torch.stack([r.state[key] for r in results]) for key in self.layers[0].state_keys}
        state = ParticleState(stacked["h"], stacked.get("c"), torch.stack([r.log_weights for r in results]),
                              initial.steps + x.shape[1])  # fmt: skip
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
            raise ValueError(f"input must have shape {expected} with D = input_size = {self.input_size}, "
                             f"got {tuple(input.shape)}")
        dtype = self.layers[0].input_projection.weight.dtype
        if input.dtype != dtype:
            raise InputTypeError(f"input must have the dtype of the layer's parameters, {dtype}, got {input.dtype}: "
                                 f"convert one of them, input.to({dtype}) or layer.to({input.dtype})")
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
            raise TypeError(f"hx must be None, {self._state_name} (tensors [num_layers, B, H]) or a ParticleState, "
                            f"got {type(hx).__name__}")
        expected = (layers, self.hidden_size) if unbatched else (layers, batch, self.hidden_size)
        for key, tensor in zip(keys, tensors):
            if tuple(tensor.shape) != expected:
                raise ValueError(f"hx's {key}_0 must have shape {list(expected)} (num_layers, "
                                 f"{'' if unbatched else 'B, '}H), got {tuple(tensor.shape)}")
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
            raise ValueError(f"noise must be a tensor [num_layers, T, K, B, H] = {shape} "
                             f"(or [T, K, B, H] for one layer), got {got}")
        return noise

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
                f"batch_first={self.batch_first}, dropout={self.dropout}, num_particles={self.num_particles}, "
                f"resampling={self.resampling!r}, alpha={self.alpha}, stochastic={self.stochastic}, "
                f"activation={self.activation!r}, eval_randomness={self.eval_randomness!r}")


def _single_layer_checkpoint(module, state_dict, prefix, *args) -> None:
    """Load checkpoints written before the layers were stacked: ``{prefix}input_projection...`` -> ``layers.0``."""
    for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + "layers.")]:
        state_dict[f"{prefix}layers.0.{key[len(prefix):]}"] = state_dict.pop(key)


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

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None, **particle_options):  # fmt: skip
        if proj_size != 0:
            raise ValueError(f"PFLSTM has no projections: proj_size must be 0, got {proj_size!r} (put a linear "
                             "layer on its output instead)")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype, **particle_options)  # fmt: skip


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

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None, **particle_options):  # fmt: skip
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype, **particle_options)  # fmt: skip


PF_CELLS = {"pf-lstm": PFLSTM, "pf-gru": PFGRU}


class _ParticleRun:
    """One layer's filtering call: its cell as a :class:`~inference.particle_filter.ParticleModel`.

    ``noise [T, K, B, H]`` given, or drawn from ``generator`` when the cell is stochastic and
    ``draw_noise``; ``offset``: steps before this call (a continued state).
    """

    def __init__(self, cell: _ParticleCell, initial: dict, noise: torch.Tensor | None, generator, offset: int = 0,
                 *, draw_noise: bool = True):  # fmt: skip
        self.cell, self.initial, self.noise, self.generator = cell, initial, noise, generator
        self.offset, self.draw_noise = offset, draw_noise and cell.stochastic

    def start(self, x, mask, num_particles):
        # per-step blocks [B, F] of time-major projections: contiguous, and unbound once, so that the
        # backward pass stacks their gradients once rather than zero-filling [T, B, F] at every step
        steps_first = x.transpose(0, 1)
        context = {"gates": self.cell.input_projection(steps_first).unbind(0),
                   "obs": self.cell.obs_net.project(steps_first).unbind(0)}
        return dict(self.initial), context

    def step(self, state, t, x_t, context, *, reparameterize=True) -> Step:
        noise = None
        if self.cell.stochastic and self.noise is not None:
            noise = self.noise[t]
        elif self.draw_noise:
            noise = torch.randn(state["h"].shape, generator=self.generator, dtype=x_t.dtype, device=x_t.device)
        new_state = self.cell.propagate(state, context["gates"][t], noise, self.offset + t)
        return Step(new_state, self.cell.log_obs(new_state["h"], context["obs"][t]), None)


class PFRNNPredictor(SequenceModel):
    """The paper's network around a recurrent layer: two input layers, the layer, an output head.

    ``x [B, T, D] -> ReLU(Linear) -> ReLU(Linear) -> recurrent layer -> Linear -> y [B, T, O]``.
    The recurrent layer is ``"pf-lstm"``, ``"pf-gru"`` (particle beliefs) or ``"lstm"``,
    ``"gru"`` (``nn.LSTM`` / ``nn.GRU``, the baselines; one "particle"). The head ``f_out`` is
    applied to the mean particle for the prediction and to every particle for the PF-RNN losses.

    Args:
        input_size: ``D``; output_size: ``O`` (classes for classification).
        cell: one of ``pf-lstm, pf-gru, lstm, gru``.
        hidden_size: ``H``; encoder_size: width of the two input layers.
        task: ``"regression"`` (Gaussian with learned or unit scale) or ``"classification"``.
        learn_scale: regression only: learn the Gaussian's per-output scale (default) or keep
            it at 1 (the paper's unit-variance ELBO).
        activation: of the PF cell candidate. The ``"lstm"``/``"gru"`` baselines are the torch
            layers; the ablation's LSTM-BNReLU is ``cell="pf-lstm"`` with one deterministic
            particle (``num_particles=1, stochastic=False, resampling="none"``).
        **pf_options: keyword options of :class:`PFLSTM`: ``num_particles``, ``resampling``, ``alpha``,
            ``stochastic``, ``activation``, ``norm_steps``, ``num_layers``, ``dropout``, ``eval_randomness``
            (default here ``"sampled"``: evaluation draws afresh, as the paper's and our recorded runs did).

    A conditional model: its :meth:`predictive` draws targets ``y_t`` from the particle mixture
    ``sum_i w_t^i p(y_t | h_t^i)`` given the inputs ``x_{<=t}``.
    """

    conditional = True
    capabilities = frozenset({"predictive"})
    limitations = {
        "programs": "its Pyro programs take targets as well as inputs: PFRNNProgram(predictor).model(x, y, mask)",
        "exact": "a conditional model of targets given inputs; the PF-RNN losses score it "
                 "(inference.discriminative.DiscriminativeLoss)",
        "latent": "a conditional model of targets given inputs: no density of x to bound",
        "particles": "its particle filter runs inside the layer (PFLSTM.filter), over encoded inputs, not as a "
                     "model of x for ParticleFilter",
        "generate": "a conditional model of targets given inputs: it cannot simulate inputs",
        "forecast": "a conditional model: forecasting targets needs the future inputs",
    }  # fmt: skip
    description = ("PF-RNN network (Ma et al. 2020): input layers, a PF-LSTM / PF-GRU (or LSTM / GRU) layer and "
                   "an output head; regression or classification of targets from inputs")

    def __init__(self, input_size: int, output_size: int, *, cell: str = "pf-lstm", hidden_size: int = 64,
                 encoder_size: int = 64, task: str = "regression", learn_scale: bool = True, **pf_options):  # fmt: skip
        super().__init__()
        self.cell_name = check_choice(cell, (*PF_CELLS, "lstm", "gru"), name="cell")
        self.task = check_choice(task, TASKS, name="task")
        self.input_size = check_positive_int(input_size, name="input_size")
        self.output_size = check_positive_int(output_size, name="output_size")
        check_positive_int(encoder_size, name="encoder_size")
        self.encoder = nn.Sequential(nn.Linear(input_size, encoder_size), nn.ReLU(),
                                     nn.Linear(encoder_size, encoder_size), nn.ReLU())
        if cell in PF_CELLS:
            self.rnn = PF_CELLS[cell](encoder_size, hidden_size, batch_first=True,
                                      **{"eval_randomness": "sampled", **pf_options})
        else:
            if pf_options:
                raise ValueError(f"options {sorted(pf_options)} apply to PF cells only, not cell={cell!r}")
            self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(encoder_size, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, output_size)
        if learn_scale and task == "regression":
            self.log_scale = nn.Parameter(torch.zeros(output_size))
        else:  # a fixed unit scale (or none, for classes): a buffer, so Pyro's parameter store has nothing to skip
            self.register_buffer("log_scale", torch.zeros(output_size))

    @property
    def num_particles(self) -> int:
        return getattr(self.rnn, "num_particles", 1)

    def belief(self, x: torch.Tensor, mask: torch.Tensor | None = None, *,
               generator: torch.Generator | None = None) -> ParticleBelief:  # fmt: skip
        """The recurrent layer's belief over the encoded inputs (for baselines: one particle of weight 1)."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.input_size:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape [B, T, D] with D = {self.input_size}, got {got}")
        if x.dtype != self.head.weight.dtype:
            raise InputTypeError(f"x must have the dtype of the predictor's parameters, {self.head.weight.dtype}, "
                                 f"got {x.dtype}: convert one of them")
        features = self.encoder(x)
        if isinstance(self.rnn, _PFRNNBase):
            return self.rnn.filter(features, mask=mask, generator=generator)
        output, _ = self.rnn(features)
        particles = output.transpose(0, 1).unsqueeze(1)
        log_w = particles.new_zeros(particles.shape[:3])
        return ParticleBelief(mean=output, particles=particles, log_weights=log_w, state=None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Point prediction ``f_out(mean particle)``: ``[B, T, O]`` (class logits for classification)."""
        return self.head(self.belief(x, mask).mean)

    @torch.no_grad()
    def predictive(self, x: torch.Tensor, mask: torch.Tensor | None = None, num_samples: int = 100, *,
                   num_particles: int | None = None, generator: torch.Generator | None = None,
                   ) -> OneStepPredictive:  # fmt: skip
        """Draws ``[S, B, T, O]`` of the targets (class indices ``[S, B, T, 1]``) given the inputs ``x [B, T, D]``.

        ``mean``: the mixture's mean (regression) or class probabilities (classification),
        ``[B, T, O]``; ``log_density`` is ``None`` (it needs the targets). ``num_particles`` is
        the layer's own ``K``.
        """
        return self.belief_predictive(self.belief(x, mask, generator=generator), num_samples, generator)

    def belief_predictive(self, belief: ParticleBelief, num_samples: int,
                          generator: torch.Generator | None = None) -> OneStepPredictive:  # fmt: skip
        """:meth:`predictive` of an already computed :meth:`belief` (``particles [T, K, B, H]``)."""
        num_samples = check_num_samples(num_samples)
        out = self.head(belief.particles)  # [T, K, B, O]
        weights = belief.log_weights.exp()  # [T, K, B]
        if self.task == "classification":
            probs = (weights.unsqueeze(-1) * torch.softmax(out, -1)).sum(1).transpose(0, 1)  # [B, T, O]
            samples = None
            if num_samples:
                flat = torch.multinomial(probs.reshape(-1, probs.shape[-1]), num_samples, replacement=True,
                                         generator=generator)  # fmt: skip
                samples = flat.T.reshape(num_samples, *probs.shape[:2], 1).to(probs.dtype)
            return OneStepPredictive(samples, probs, None, f"the {self.num_particles}-particle belief")
        mean = (weights.unsqueeze(-1) * out).sum(1).transpose(0, 1)  # [B, T, O]
        samples = None
        if num_samples:
            steps, particles, batch, outputs = out.shape
            flat_weights = weights.permute(0, 2, 1).reshape(-1, particles)  # [T B, K]
            chosen = torch.multinomial(flat_weights, num_samples, replacement=True, generator=generator)  # [T B, S]
            centres = out.permute(0, 2, 1, 3).reshape(-1, particles, outputs)  # [T B, K, O]
            centres = centres.gather(1, chosen.unsqueeze(-1).expand(-1, -1, outputs))  # [T B, S, O]
            noise = torch.randn(centres.shape, generator=generator, device=centres.device, dtype=centres.dtype)
            draws = centres + self.log_scale.exp() * noise
            samples = draws.reshape(steps, batch, num_samples, outputs).permute(2, 1, 0, 3)
        return OneStepPredictive(samples, mean, None, f"the {self.num_particles}-particle belief")

    def particle_distribution(self, particles: torch.Tensor):
        """``p(y | h^i)`` per particle: Normal (event ``[O]``) or Categorical over ``O`` classes."""
        out = self.head(particles)
        if self.task == "classification":
            return dist.Categorical(logits=out)
        return dist.Normal(out, self.log_scale.exp()).to_event(1)


class PFRNNProgram(SequenceModel):
    """The PF-RNN filter of a :class:`PFRNNPredictor` as a Pyro program (``SMCFilter``-style plates).

    ``model(x, y, mask)`` runs the filter step by step inside ``pyro.plate("particles", K,
    dim=-2)`` and ``pyro.plate("sequences", B, dim=-1)``: at each step the standard normal
    draws of the stochastic memory update are a sample site ``noise_t`` (batch ``[K, B]``,
    event ``[H]``), the weights come from ``f_obs``, and the target is an observed site
    ``y_t`` under the weighted particle mixture ``sum_i w_t^i p(y_t | h_t^i)`` (batch
    ``[B]``). Soft resampling runs between steps, outside the trace, as in ``SMCFilter``.
    ``guide`` draws the same noise from its prior. With it, ``Trace_ELBO``'s loss is
    ``-sum_t log sum_i w_t^i p(y_t | h_t^i)``, the PF-RNN ELBO loss of
    :func:`inference.discriminative.particle_elbo_loss`, and its gradient is the paper's
    (reparameterized noise; resampling indices constant).

    Args:
        predictor: a :class:`PFRNNPredictor` with one ``pf-lstm`` or ``pf-gru`` layer (``num_layers=1``).
        generator: source of the resampling draws.
    """

    conditional = True
    uncondition = "free"
    pyro_prefix = "pf_rnn"
    capabilities = frozenset({"programs"})
    limitations = {
        "exact": "the stochastic memory updates make log p(y | x) intractable: Trace_ELBO of these programs, or "
                 "the PF-RNN losses of inference.discriminative, score it",
        "latent": "a conditional model of targets given inputs: score(x) and the shared ELBO / IWAE bound log p(x) "
                  "with model(x, mask), while its programs are model(x, y, mask) and bound log p(y | x); use "
                  "Trace_ELBO of these programs (the PF-RNN ELBO loss) or inference.discriminative",
        "particles": "the filter runs inside the programs (soft resampling between steps), not as a model of x",
        "predictive": "its predictor gives it: PFRNNProgram.predictor.predictive(x, mask, num_samples)",
        "generate": "a conditional model of targets given inputs: it cannot simulate inputs",
        "forecast": "a conditional model: forecasting targets needs the future inputs",
    }  # fmt: skip
    description = "the PF-RNN filter of a PFRNNPredictor as Pyro model(x, y, mask) / guide programs for SVI"

    def __init__(self, predictor: PFRNNPredictor, generator: torch.Generator | None = None):
        if not isinstance(predictor, PFRNNPredictor) or not isinstance(predictor.rnn, _PFRNNBase):
            raise TypeError("predictor must be a PFRNNPredictor with a pf-lstm or pf-gru layer")
        if predictor.rnn.num_layers != 1:
            raise ValueError(f"PFRNNProgram writes one PF layer as a program; the predictor's has "
                             f"num_layers={predictor.rnn.num_layers}")
        super().__init__()
        self.predictor, self.generator = predictor, generator

    def _noise_sites(self, sequences, steps, like):
        cell = self.predictor.rnn
        prior = dist.Normal(like.new_zeros(()), like.new_ones(())).expand([cell.hidden_size]).to_event(1)
        with pyro.plate(PARTICLE_PLATE, cell.num_particles, dim=-2), sequences:
            return [pyro.sample(f"noise_{t}", prior) if cell.stochastic else None for t in pyro.markov(range(steps))]

    def model(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro model over inputs ``x [B, T, D]``, targets ``y [B, T, O]`` (or class indices ``[B, T]``).

        Under vectorised plates outside its own (``Predictive(parallel=True)``'s, at dims -3,
        -4, ...), each of their ``N`` draws runs its own filter: they are folded into the batch.
        """
        predictor, cell = self.predictor, self.predictor.rnn
        step_cell = cell.layers[0]
        pyro.module(self.pyro_name, predictor)
        batch, steps, _ = x.shape
        x, mask = check_sequences(x, mask)  # the padding of x, and of y below, set to 0: it changes nothing
        y = torch.where(mask.reshape(mask.shape + (1,) * (y.dim() - 2)), y, torch.zeros_like(y))
        sequences = pyro.plate(SEQUENCE_PLATE, batch, dim=-1)
        noises = self._noise_sites(sequences, steps, x)
        outer = _outer_plate_sizes()
        draws = math.prod(outer)  # the outer draws, folded into the batch: [N * B]
        folded_x = x.expand(draws, *x.shape).reshape(draws * batch, steps, -1)
        folded_mask = mask.expand(draws, *mask.shape).reshape(draws * batch, steps)
        noises = [None if noise is None else _fold_outer(noise, draws) for noise in noises]
        zeros = x.new_zeros(cell.num_particles, draws * batch, cell.hidden_size)
        run = _ParticleRun(step_cell, dict.fromkeys(step_cell.state_keys, zeros), None, None)
        state, context = run.start(predictor.encoder(folded_x), folded_mask, cell.num_particles)
        log_w = x.new_full((cell.num_particles, draws * batch), -math.log(cell.num_particles))
        for t in range(steps):
            valid = folded_mask[:, t]
            if t > 0 and cell.resampling == "soft":
                ancestors, new_log_w = resample(log_w, "soft", alpha=cell.alpha, generator=self.generator)
                identity = torch.arange(cell.num_particles, device=x.device).unsqueeze(-1)
                ancestors = torch.where(valid, ancestors, identity)
                log_w = torch.where(valid, new_log_w, log_w)
                state = {k: gather_particles(v, ancestors) for k, v in state.items()}
            new = step_cell.propagate(state, context["gates"][t], noises[t], t)
            state = {k: torch.where(valid.unsqueeze(-1), v, state[k]) for k, v in new.items()}
            log_w = torch.where(valid, torch.log_softmax(log_w + step_cell.log_obs(state["h"], context["obs"][t]), 0),
                                log_w)
            shape = (*outer, 1, batch) if outer else (batch,)  # the outer plates at dims -3, -4, ...
            mixture = dist.MixtureSameFamily(dist.Categorical(logits=log_w.T.reshape(*shape, -1)),
                                             _batch_last(predictor.particle_distribution(state["h"]), shape))
            with sequences, poutine.mask(mask=mask[:, t]):
                pyro.sample(f"y_{t}", mixture, obs=y[:, t])

    def guide(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """The prior of the noise sites (a bootstrap proposal: the ELBO is the filter's likelihood term)."""
        self._noise_sites(pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1), x.shape[1], x)


def _batch_last(component, shape):
    """A per-particle distribution with batch ``[K, N * B]`` as batch ``shape`` (``[..., B]``) with ``K`` last."""
    if isinstance(component, dist.Categorical):
        return dist.Categorical(logits=component.logits.transpose(0, 1).reshape(*shape, *component.logits.shape[::2]))
    base = component.base_dist
    loc, scale = base.loc, base.scale.expand_as(base.loc)
    return dist.Normal(loc.transpose(0, 1).reshape(*shape, *loc.shape[::2]),
                       scale.transpose(0, 1).reshape(*shape, *loc.shape[::2])).to_event(1)  # fmt: skip


def _outer_plate_sizes() -> tuple[int, ...]:
    """Sizes of the vectorised plates outside the program's two (dims -3, -4, ...), outermost first; ``()`` if none."""
    sizes = {frame.dim: frame.size for frame in get_plates() if frame.dim is not None and frame.dim < -2}
    return tuple(sizes.get(dim, 1) for dim in range(min(sizes), -2)) if sizes else ()


def _fold_outer(noise: torch.Tensor, draws: int) -> torch.Tensor:
    """Noise ``[..., K, B, H]`` of ``draws`` outer draws as ``[K, draws * B, H]`` (draw-major, as the batch)."""
    particles, batch, hidden = noise.shape[-3:]
    noise = noise.expand(*noise.shape[:-3], particles, batch, hidden).reshape(-1, particles, batch, hidden)
    return noise.expand(draws, -1, -1, -1).transpose(0, 1).reshape(particles, draws * batch, hidden)



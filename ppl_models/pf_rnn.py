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
``nn.LSTM`` / ``nn.GRU`` (one layer, one direction): ``output, state = rnn(x)`` with
``output [B, T, H]``; ``state`` is a :class:`ParticleState` (particles and log-weights),
which can be passed back in to continue a sequence (truncated BPTT). :meth:`filter` returns
the whole :class:`ParticleBelief` that the PF-RNN losses (:mod:`inference.discriminative`)
need. :class:`PFRNNPredictor` stacks the paper's input layers, a recurrent layer and an
output head, and :class:`PFRNNProgram` writes the same filter as a Pyro program.

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
from dataclasses import dataclass
from typing import NamedTuple

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from torch import nn
from torch.nn import functional as F

from inference.particle_filter import ParticleFilter, Step
from inference.protocol import CAPABILITIES, OneStepPredictive, SequenceModel, check_num_samples
from inference.resampling import gather_particles, resample
from inference.state_space import SEQUENCE_PLATE
from inference.traces import PARTICLE_PLATE
from inference.validation import check_choice, check_positive_int, check_probability

from .nets import SplitInputMLP

__all__ = ["ACTIVATIONS", "TASKS", "ParticleState", "ParticleBelief", "StepBatchNorm", "PFLSTM", "PFGRU",
           "PF_CELLS", "PFRNNPredictor", "PFRNNProgram"]  # fmt: skip

ACTIVATIONS = ("relu_bn", "tanh")
TASKS = ("regression", "classification")


class ParticleState(NamedTuple):
    """A PF-RNN layer's state: particles ``h [K, B, H]`` (and ``c [K, B, H]`` for PF-LSTM), ``log_weights [K, B]``.

    ``steps``: how many time steps led to it (the next step's index, for :class:`StepBatchNorm`).
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
    uses those of the last step trained.

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
    """The belief of a PF-RNN layer over a batch.

    Attributes:
        mean: ``[B, T, H]`` weighted mean particle per step (the layer's output).
        particles: ``[T, K, B, H]`` particles after each step's weight update.
        log_weights: ``[T, K, B]`` their normalised log-weights.
        state: final :class:`ParticleState` (before resampling).
    """

    mean: torch.Tensor
    particles: torch.Tensor
    log_weights: torch.Tensor
    state: ParticleState


class _PFRNNBase(SequenceModel):
    """Shared by :class:`PFLSTM` and :class:`PFGRU`: options, input checks, the filter call.

    A subclass sets ``_input_gates`` (blocks of ``H`` columns of the input projection, noise
    scale included when stochastic) and defines ``_initial(batch)`` and ``_propagate``.
    """

    capabilities = frozenset()
    limitations = dict.fromkeys(
        CAPABILITIES,
        "a recurrent layer (drop-in for nn.LSTM / nn.GRU) maps inputs to features and models no distribution; "
        "PFRNNPredictor puts a predictive head on it and PFRNNProgram its Pyro programs")

    _state_keys: tuple[str, ...] = ("h",)
    _input_gates: int

    def __init__(self, input_size: int, hidden_size: int, num_particles: int = 20, *, batch_first: bool = True,
                 resampling: str = "soft", alpha: float = 0.5, stochastic: bool = True,
                 activation: str = "relu_bn", norm_steps: int = 100, num_layers: int = 1,
                 bidirectional: bool = False):  # fmt: skip
        super().__init__()
        if num_layers != 1 or bidirectional:
            raise ValueError(f"{type(self).__name__} has one layer and one direction; got num_layers={num_layers}, "
                             f"bidirectional={bidirectional} (stack layers explicitly)")
        self.input_size = check_positive_int(input_size, name="input_size")
        self.hidden_size = check_positive_int(hidden_size, name="hidden_size")
        self.num_particles = check_positive_int(num_particles, name="num_particles")
        self.resampling = check_choice(resampling, ("soft", "none"), name="resampling")
        self.alpha = check_probability(alpha, name="alpha", open_left=True)
        self.activation = check_choice(activation, ACTIVATIONS, name="activation")
        if not isinstance(batch_first, bool) or not isinstance(stochastic, bool):
            raise TypeError("batch_first and stochastic must be bools")
        self.batch_first, self.stochastic = batch_first, stochastic
        gates = self._input_gates - (0 if stochastic else 1)
        self.input_projection = nn.Linear(input_size, gates * hidden_size)
        self.obs_net = SplitInputMLP(hidden_size, input_size, hidden_size, 1)  # log f_obs([h_t^i, x_t])
        self.norm = StepBatchNorm(hidden_size, norm_steps) if activation == "relu_bn" else None
        bound = 1.0 / math.sqrt(hidden_size)  # nn.LSTM's initialisation
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)
        if self.norm is not None:
            self.norm.reset_parameters()

    # --- drop-in API ----------------------------------------------------------------------
    def forward(self, input: torch.Tensor, hx: ParticleState | None = None, *,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ParticleState]:  # fmt: skip
        """``(output, state)`` as ``nn.LSTM``: ``output [B, T, H]`` (``[T, B, H]`` unless batch_first)."""
        mean, result = self._run(input, hx, mask, None, None, keep_particles=False)
        output = mean if self.batch_first else mean.transpose(0, 1)
        return output, self._final_state(hx, result)

    def filter(self, input: torch.Tensor, hx: ParticleState | None = None, *, mask: torch.Tensor | None = None,
               noise: torch.Tensor | None = None, generator: torch.Generator | None = None,
               ) -> ParticleBelief:  # fmt: skip
        """Run the particle filter over ``input`` (``[B, T, D]`` if batch_first, else ``[T, B, D]``).

        Args:
            hx: state to continue from (default: zero particles, uniform weights).
            mask: ``[B, T]`` bool, valid steps first; the state is carried over padding.
            noise: ``[T, K, B, H]`` standard normal draws of the stochastic update (default: fresh).
            generator: source of the noise and resampling draws.
        """
        mean, result = self._run(input, hx, mask, noise, generator, keep_particles=True)
        return ParticleBelief(mean=mean, particles=result.history["h"], log_weights=result.history_log_weights,
                              state=self._final_state(hx, result))

    def _run(self, input, hx, mask, noise, generator, *, keep_particles: bool):
        """The filter over ``input``: the mean particle ``[B, T, H]`` and the :class:`FilterResult`."""
        x = self._check_input(input)
        initial = self._check_state(hx, x.shape[0], x)
        offset = 0 if hx is None else hx.steps
        run = _ParticleRun(self, initial, self._check_noise(noise, x), generator, offset)
        pf = ParticleFilter(self.num_particles, resampling=self.resampling, ess_threshold=1.0,
                            gradient="soft" if self.resampling == "soft" else "reparam",
                            soft_alpha=self.alpha, generator=generator)
        result = pf.run(run, x, mask, keep_ancestry=("h",) if keep_particles else False, keep_means=("h",),
                        initial_log_weights=None if hx is None else hx.log_weights)
        return result.means["h"], result

    @staticmethod
    def _final_state(hx, result) -> ParticleState:
        offset = 0 if hx is None else hx.steps
        return ParticleState(result.state["h"], result.state.get("c"), result.log_weights,
                             offset + result.num_steps_total)

    # --- one step (called by the shared filter) -------------------------------------------
    def _noisy_candidate(self, candidate, raw_scale, noise, t: int):
        """Eqs. 9-11: ``candidate + softplus(raw_scale) * noise``, then the activation (at step ``t``)."""
        if self.stochastic:
            candidate = torch.addcmul(candidate, F.softplus(raw_scale), noise)
        if self.norm is None:
            return torch.tanh(candidate)
        return F.relu(self.norm(candidate.reshape(-1, self.hidden_size), t).reshape(candidate.shape))

    def _log_obs(self, h: torch.Tensor, obs_input_t: torch.Tensor) -> torch.Tensor:
        """Eq. 2's learned ``log f_obs(x_t, h_t^i)``, ``[K, B]``, from ``obs_net.project(x_t) [B, F]``."""
        return self.obs_net(h, obs_input_t).squeeze(-1)

    # --- checks ---------------------------------------------------------------------------
    def _check_input(self, input) -> torch.Tensor:
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        layout = "[B, T, D]" if self.batch_first else "[T, B, D]"
        if input.dim() != 3 or input.shape[-1] != self.input_size:
            raise ValueError(f"input must have shape {layout} with D = input_size = {self.input_size}, "
                             f"got {tuple(input.shape)}")
        return input if self.batch_first else input.transpose(0, 1)

    def _check_state(self, hx, batch: int, x: torch.Tensor) -> dict[str, torch.Tensor]:
        shape = (self.num_particles, batch, self.hidden_size)
        if hx is None:
            return {key: x.new_zeros(shape) for key in self._state_keys}
        if not isinstance(hx, ParticleState):
            raise TypeError(f"hx must be a ParticleState (the state this layer returned), got {type(hx).__name__}")
        if not isinstance(hx.steps, int) or isinstance(hx.steps, bool) or hx.steps < 0:
            raise ValueError(f"hx.steps must be an int >= 0 (steps already filtered), got {hx.steps!r}")
        state = {key: getattr(hx, key) for key in self._state_keys}
        for key, value in state.items():
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"hx.{key} must have shape [K, B, H] = {shape}, got {got}")
        return state

    def _check_noise(self, noise, x: torch.Tensor) -> torch.Tensor | None:
        if noise is None:
            return None
        shape = (x.shape[1], self.num_particles, x.shape[0], self.hidden_size)
        if not isinstance(noise, torch.Tensor) or tuple(noise.shape) != shape:
            got = tuple(noise.shape) if isinstance(noise, torch.Tensor) else type(noise).__name__
            raise ValueError(f"noise must be a tensor [T, K, B, H] = {shape}, got {got}")
        return noise

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_particles={self.num_particles}, "
                f"resampling={self.resampling!r}, alpha={self.alpha}, stochastic={self.stochastic}, "
                f"activation={self.activation!r}, batch_first={self.batch_first}")


class PFLSTM(_PFRNNBase):
    """PF-LSTM: ``K`` LSTM particles with stochastic cell updates, learned weights and soft resampling.

    Args:
        input_size: ``D``; hidden_size: ``H``; num_particles: ``K``.
        batch_first: inputs and outputs ``[B, T, .]`` (default, unlike ``nn.LSTM``) or ``[T, B, .]``.
        resampling: ``"soft"`` (eq. 3, at every step) or ``"none"``.
        alpha: soft-resampling mixture weight (0.5 in the paper; 1 = plain multinomial).
        stochastic: add the learned Gaussian noise to the cell candidate (eqs. 9-11).
        activation: ``"relu_bn"`` (eq. 12) or ``"tanh"`` (eq. 6).
        norm_steps: time steps with batch-norm statistics of their own (:class:`StepBatchNorm`).
    """

    description = "PF-LSTM layer (Ma et al. 2020): K LSTM particles, stochastic cell updates, soft resampling"
    _state_keys = ("h", "c")
    _input_gates = 5  # input, forget, candidate, output, noise scale (nn.LSTMCell's order first)

    def __init__(self, input_size: int, hidden_size: int, num_particles: int = 20, **options):
        super().__init__(input_size, hidden_size, num_particles, **options)
        self.hidden_projection = nn.Linear(hidden_size, self.input_projection.out_features, bias=False)
        nn.init.uniform_(self.hidden_projection.weight, -1.0 / math.sqrt(hidden_size), 1.0 / math.sqrt(hidden_size))

    def _propagate(self, state, input_gates_t, noise, t: int):
        h, c = state["h"], state["c"]
        gates = self.hidden_projection(h).add_(input_gates_t)  # [K, B, G H]
        i, f, candidate, o, *scale = gates.split(self.hidden_size, dim=-1)
        candidate = self._noisy_candidate(candidate, scale[0] if scale else None, noise, t)
        c = torch.addcmul(torch.sigmoid(f) * c, torch.sigmoid(i), candidate)
        return {"h": torch.sigmoid(o) * torch.tanh(c), "c": c}


class PFGRU(_PFRNNBase):
    """PF-GRU (the paper's appendix): ``K`` GRU particles with stochastic updates and soft resampling.

    ``n = W_n [r * h, x] + b_n + eps``, ``h' = (1 - z) * act(n) + z * h``; the noise scale
    reads ``[h_{t-1}, x_t]``. Options as :class:`PFLSTM`.
    """

    description = "PF-GRU layer (Ma et al. 2020): K GRU particles, stochastic updates, soft resampling"
    _input_gates = 4  # update, reset, noise scale, candidate

    def __init__(self, input_size: int, hidden_size: int, num_particles: int = 20, **options):
        super().__init__(input_size, hidden_size, num_particles, **options)
        gates = self.input_projection.out_features // hidden_size - 1
        bound = 1.0 / math.sqrt(hidden_size)
        self.hidden_projection = nn.Linear(hidden_size, gates * hidden_size, bias=False)
        self.candidate_projection = nn.Linear(hidden_size, hidden_size, bias=False)
        for layer in (self.hidden_projection, self.candidate_projection):
            nn.init.uniform_(layer.weight, -bound, bound)

    def _propagate(self, state, input_gates_t, noise, t: int):
        h, size = state["h"], self.hidden_size
        gates = self.hidden_projection(h).add_(input_gates_t[..., :-size])
        z, r, *scale = gates.split(size, dim=-1)
        candidate = self.candidate_projection(torch.sigmoid(r) * h).add_(input_gates_t[..., -size:])
        candidate = self._noisy_candidate(candidate, scale[0] if scale else None, noise, t)
        z = torch.sigmoid(z)
        return {"h": (1 - z) * candidate + z * h}


PF_CELLS = {"pf-lstm": PFLSTM, "pf-gru": PFGRU}


class _ParticleRun:
    """One filtering call: the cell as a :class:`~inference.particle_filter.ParticleModel`."""

    def __init__(self, cell: _PFRNNBase, initial: dict, noise: torch.Tensor | None, generator, offset: int = 0):
        self.cell, self.initial, self.noise, self.generator = cell, initial, noise, generator
        self.offset = offset  # steps before this call (a continued state)

    def start(self, x, mask, num_particles):
        # per-step blocks [B, F] of time-major projections: contiguous, and unbound once, so that the
        # backward pass stacks their gradients once rather than zero-filling [T, B, F] at every step
        steps_first = x.transpose(0, 1)
        context = {"gates": self.cell.input_projection(steps_first).unbind(0),
                   "obs": self.cell.obs_net.project(steps_first).unbind(0)}
        return dict(self.initial), context

    def step(self, state, t, x_t, context, *, reparameterize=True) -> Step:
        noise = None
        if self.cell.stochastic:
            if self.noise is not None:
                noise = self.noise[t]
            else:
                shape = state["h"].shape
                noise = torch.randn(shape, generator=self.generator, dtype=x_t.dtype, device=x_t.device)
        new_state = self.cell._propagate(state, context["gates"][t], noise, self.offset + t)
        return Step(new_state, self.cell._log_obs(new_state["h"], context["obs"][t]), None)


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
        **pf_options: ``num_particles``, ``resampling``, ``alpha``, ``stochastic``, ``activation``, ``norm_steps``.

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
            self.rnn = PF_CELLS[cell](encoder_size, hidden_size, **pf_options)
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
        predictor: a :class:`PFRNNPredictor` with a ``pf-lstm`` or ``pf-gru`` layer.
        generator: source of the resampling draws.
    """

    conditional = True
    pyro_prefix = "pf_rnn"
    capabilities = frozenset({"programs", "latent"})
    limitations = {
        "exact": "the stochastic memory updates make log p(y | x) intractable: Trace_ELBO of these programs, or "
                 "the PF-RNN losses of inference.discriminative, score it",
        "particles": "the filter runs inside the programs (soft resampling between steps), not as a model of x",
        "predictive": "its predictor gives it: PFRNNProgram.predictor.predictive(x, mask, num_samples)",
        "generate": "a conditional model of targets given inputs: it cannot simulate inputs",
        "forecast": "a conditional model: forecasting targets needs the future inputs",
    }  # fmt: skip
    description = "the PF-RNN filter of a PFRNNPredictor as Pyro model(x, y, mask) / guide programs for SVI"

    def __init__(self, predictor: PFRNNPredictor, generator: torch.Generator | None = None):
        if not isinstance(predictor, PFRNNPredictor) or not isinstance(predictor.rnn, _PFRNNBase):
            raise TypeError("predictor must be a PFRNNPredictor with a pf-lstm or pf-gru layer")
        super().__init__()
        self.predictor, self.generator = predictor, generator

    def _noise_sites(self, sequences, steps, like):
        cell = self.predictor.rnn
        prior = dist.Normal(like.new_zeros(()), like.new_ones(())).expand([cell.hidden_size]).to_event(1)
        with pyro.plate(PARTICLE_PLATE, cell.num_particles, dim=-2), sequences:
            return [pyro.sample(f"noise_{t}", prior) if cell.stochastic else None for t in pyro.markov(range(steps))]

    def model(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro model over inputs ``x [B, T, D]``, targets ``y [B, T, O]`` (or class indices ``[B, T]``)."""
        predictor, cell = self.predictor, self.predictor.rnn
        pyro.module(self.pyro_name, predictor)
        batch, steps, _ = x.shape
        mask = torch.ones(batch, steps, dtype=torch.bool, device=x.device) if mask is None else mask
        run = _ParticleRun(cell, cell._check_state(None, batch, x), None, None)
        state, context = run.start(predictor.encoder(x), mask, cell.num_particles)
        log_w = x.new_full((cell.num_particles, batch), -math.log(cell.num_particles))
        sequences = pyro.plate(SEQUENCE_PLATE, batch, dim=-1)
        noises = self._noise_sites(sequences, steps, x)
        for t in range(steps):
            valid = mask[:, t]
            if t > 0 and cell.resampling == "soft":
                ancestors, new_log_w = resample(log_w, "soft", alpha=cell.alpha, generator=self.generator)
                identity = torch.arange(cell.num_particles, device=x.device).unsqueeze(-1)
                ancestors = torch.where(valid, ancestors, identity)
                log_w = torch.where(valid, new_log_w, log_w)
                state = {k: gather_particles(v, ancestors) for k, v in state.items()}
            new = cell._propagate(state, context["gates"][t], noises[t], t)
            state = {k: torch.where(valid.unsqueeze(-1), v, state[k]) for k, v in new.items()}
            log_w = torch.where(valid, torch.log_softmax(log_w + cell._log_obs(state["h"], context["obs"][t]), 0),
                                log_w)
            mixture = dist.MixtureSameFamily(dist.Categorical(logits=log_w.T),
                                             _batch_last(predictor.particle_distribution(state["h"])))
            with sequences, poutine.mask(mask=valid):
                pyro.sample(f"y_{t}", mixture, obs=y[:, t])

    def guide(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """The prior of the noise sites (a bootstrap proposal: the ELBO is the filter's likelihood term)."""
        self._noise_sites(pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1), x.shape[1], x)


def _batch_last(component):
    """A per-particle distribution with batch ``[K, B]`` as ``[B, K]`` (mixture components last)."""
    if isinstance(component, dist.Categorical):
        return dist.Categorical(logits=component.logits.transpose(0, 1))
    base = component.base_dist
    return dist.Normal(base.loc.transpose(0, 1), base.scale.expand_as(base.loc).transpose(0, 1)).to_event(1)

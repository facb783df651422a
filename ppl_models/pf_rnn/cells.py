"""The PF-RNN particle cells: the gated update of ``K`` particles with a stochastic memory update,
the learned observation function ``log f_obs``, the per-step batch norm, and one layer's filtering call
(the cell as a :class:`~ppl_models.inference.particle_filter.ParticleModel`).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn
from torch.nn import functional as F

from ppl_models.inference.particle_filter import Step
from ppl_models.inference.validation import check_positive_int

from ..nets import SplitInputMLP

__all__ = ["ACTIVATIONS", "StepBatchNorm"]

ACTIVATIONS = ("relu_bn", "tanh")


def _add_noise(candidate: torch.Tensor, raw_scale: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Eqs. 9-11's noisy candidate ``candidate + softplus(raw_scale) * noise``."""
    return torch.addcmul(candidate, F.softplus(raw_scale), noise)


def _lstm_update(i, f, o, candidate, c, rectify: bool):
    """``(h, c)`` of the gated memory update from the raw gates ``i, f, o``, the candidate (``rectify``: ReLU it
    first) and the previous memory ``c``, all ``[K, B, H]``."""
    if rectify:
        candidate = F.relu(candidate)
    c = torch.addcmul(torch.sigmoid(f) * c, torch.sigmoid(i), candidate)
    return torch.sigmoid(o) * torch.tanh(c), c


@functools.cache
def _compiled(function):
    """``function`` compiled by ``torch.compile`` (fused elementwise kernels; shapes static), made once."""
    return torch.compile(function, dynamic=False)


class StepBatchNorm(nn.Module):
    """Batch normalisation of ``[N, H]`` inputs with running statistics per time step.

    In training, step ``t``'s input is normalised by its own batch statistics (as
    ``nn.BatchNorm1d``) and updates step ``t``'s running mean and variance; in evaluation those
    are used. The affine ``weight`` and ``bias`` are shared by all steps. Steps from
    ``max_steps - 1`` on share the last statistics, and a step no training batch has reached
    uses those of the last step trained. The running averages lag the weights while they move;
    :func:`ppl_models.inference.training.refresh_norm_statistics` (``TrainConfig.norm_refresh_batches``)
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
        return F.batch_norm(
            x,
            self.running_mean[index],
            self.running_var[index],
            self.weight,
            self.bias,
            self.training,
            self.momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return f"{self.num_features}, max_steps={self.max_steps}, momentum={self.momentum}, eps={self.eps}"


class _ParticleCell(nn.Module):
    """One PF-RNN layer's parameters and step: the gated update of ``K`` particles and ``log f_obs``.

    A subclass sets ``state_keys``, ``input_gates`` (blocks of ``H`` columns of the input
    projection, the noise scale's included when stochastic) and defines :meth:`propagate`.
    ``bias=False`` drops the biases of the gate and noise-scale projections (``nn.LSTM``'s
    ``b_ih``, ``b_hh``); ``f_obs`` keeps its own. ``compiled=True`` runs the elementwise update through
    ``torch.compile`` (the same equations in fused kernels; the first call compiles).
    """

    state_keys: tuple[str, ...] = ("h",)
    input_gates: int

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        bias: bool,
        stochastic: bool,
        activation: str,
        norm_steps: int,
        compiled: bool = False,
    ):
        super().__init__()
        self.hidden_size, self.stochastic, self.compiled = hidden_size, stochastic, compiled
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

    def kernel(self, function):
        """``function``, compiled if the cell is."""
        return _compiled(function) if self.compiled else function

    def noisy_candidate(self, candidate, raw_scale, noise, t: int, *, rectify: bool = True):
        """Eqs. 9-11: ``candidate + softplus(raw_scale) * noise`` (no noise: ``noise=None``), then the activation
        (with batch norm, its ReLU only if ``rectify``)."""
        if noise is not None:
            candidate = self.kernel(_add_noise)(candidate, raw_scale, noise)
        if self.norm is None:
            return torch.tanh(candidate)
        normalized = self.norm(candidate.reshape(-1, self.hidden_size), t).reshape(candidate.shape)
        return F.relu(normalized) if rectify else normalized

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
        rectify = self.norm is not None  # the ReLU after batch norm, fused into the update
        candidate = self.noisy_candidate(candidate, scale[0] if scale else None, noise, t, rectify=False)
        h, c = self.kernel(_lstm_update)(i, f, o, candidate, c, rectify)
        return {"h": h, "c": c}


class _GRUParticleCell(_ParticleCell):
    input_gates = 4  # update, reset, noise scale, candidate

    def __init__(self, input_size: int, hidden_size: int, **options):
        super().__init__(input_size, hidden_size, **options)
        gates = self.input_projection.out_features // hidden_size - 1
        self.hidden_projection, self.candidate_projection = self._recurrent_projections(
            gates * hidden_size, hidden_size
        )

    def propagate(self, state, input_gates_t, noise, t: int):
        """One step of ``K`` particles ``{"h": [K, B, H]}`` from the step's input gates ``[B, G H]``."""
        h, size = state["h"], self.hidden_size
        gates = self.hidden_projection(h).add_(input_gates_t[..., :-size])
        z, r, *scale = gates.split(size, dim=-1)
        candidate = self.candidate_projection(torch.sigmoid(r) * h).add_(input_gates_t[..., -size:])
        candidate = self.noisy_candidate(candidate, scale[0] if scale else None, noise, t)
        z = torch.sigmoid(z)
        return {"h": (1 - z) * candidate + z * h}


class _ParticleRun:
    """One layer's filtering call: its cell as a :class:`~ppl_models.inference.particle_filter.ParticleModel`.

    ``noise [T, K, B, H]`` given, or drawn from ``generator`` when the cell is stochastic and
    ``draw_noise``; ``offset``: steps before this call (a continued state). ``readout`` (a map of particles
    ``[K, B, H] -> [K, B, O]``, such as a predictor's head): applied at every step, its value is the state ``out``.
    """

    def __init__(
        self,
        cell: _ParticleCell,
        initial: dict,
        noise: torch.Tensor | None,
        generator,
        offset: int = 0,
        *,
        draw_noise: bool = True,
        readout=None,
    ):
        self.cell, self.initial, self.noise, self.generator = cell, initial, noise, generator
        self.offset, self.draw_noise, self.readout = offset, draw_noise and cell.stochastic, readout

    def start(self, x, mask, num_particles):
        # per-step blocks [B, F] of time-major projections: contiguous, and unbound once, so that the
        # backward pass stacks their gradients once rather than zero-filling [T, B, F] at every step
        steps_first = x.transpose(0, 1)
        context = {
            "gates": self.cell.input_projection(steps_first).unbind(0),
            "obs": self.cell.obs_net.project(steps_first).unbind(0),
        }
        return dict(self.initial), context

    def step(self, state, t, x_t, context, *, reparameterize=True) -> Step:
        noise = None
        if self.cell.stochastic and self.noise is not None:
            noise = self.noise[t]
        elif self.draw_noise:
            noise = torch.randn(state["h"].shape, generator=self.generator, dtype=x_t.dtype, device=x_t.device)
        new_state = self.cell.propagate(state, context["gates"][t], noise, self.offset + t)
        if self.readout is not None:
            new_state["out"] = self.readout(new_state["h"])
        return Step(new_state, self.cell.log_obs(new_state["h"], context["obs"][t]), None)

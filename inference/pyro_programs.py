"""Drive the particle filter with Pyro ``init``/``step`` programs (the ``pyro.infer.SMCFilter`` style).

A model (and optionally a guide) is an object with two Pyro programs:

* ``init(state, x)``: fills the dict ``state`` with tensors ``[K, B, ...]`` before the
  first step; ``x`` is the whole batch ``[B, T, D]`` (for its size and device);
* ``step(state, x_t)``: samples the next latent state from ``state`` and scores the
  observation ``x_t [B, D]``, writing the new state into ``state``.

Both run inside ``pyro.plate("particles", K, dim=-(max_plate_nesting + 1))``, and
every sample site must sit inside ``pyro.plate("sequences", B, dim=-1)``, so site
log-densities have batch shape ``[K, B]``. As in ``SMCFilter``, the guide's step
runs first, then the model's step replays the guide's samples; the model's writes
to ``state`` win. Without a guide the model's own draws are the proposal
(bootstrap filter). Unlike ``SMCFilter``, weights are kept per sequence, the
log-evidence is returned, and gradients flow (see :class:`ParticleFilter`'s modes).
"""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any

import pyro
import torch
from pyro import poutine

from .particle_filter import Step
from .traces import PARTICLE_PLATE, DetachLatents, latent_sites, observed_sites, sample_sites, trace_log_prob
from .validation import check_positive_int

__all__ = ["PyroProgramModel", "ParticlePrograms"]


class PyroProgramModel:
    """Adapts Pyro ``init``/``step`` programs to the particle-model interface.

    Args:
        model: object with ``init(state, x)`` and ``step(state, x_t)`` Pyro programs.
        guide: the same for the proposal, or ``None`` for the bootstrap proposal.
        max_plate_nesting: number of plates inside the programs (1: the sequence plate).
    """

    particle_options = frozenset({"simulate", "predict_mean"})

    def __init__(self, model: Any, guide: Any = None, *, max_plate_nesting: int = 1):
        for role, obj in (("model", model), ("guide", guide)):
            if obj is not None and not (callable(getattr(obj, "init", None)) and callable(getattr(obj, "step", None))):
                raise TypeError(f"{role} must have init(state, x) and step(state, x_t) methods")
        self.model, self.guide = model, guide
        self.max_plate_nesting = check_positive_int(max_plate_nesting, name="max_plate_nesting")

    def _plate(self, num_particles):
        return pyro.plate(PARTICLE_PLATE, num_particles, dim=-(self.max_plate_nesting + 1))

    def _run(self, method: str, state: dict, arg, shape, reparameterize=True):
        """Trace guide then replayed model; returns ``(log_weight, log_joint)`` ``[K, B]``.

        ``reparameterize=False`` (Fisher's identity) runs both under :class:`DetachLatents`:
        every latent value, and everything the program computes from it, is a constant.
        """
        shape = tuple(shape)
        with self._plate(shape[0]), nullcontext() if reparameterize else DetachLatents():
            guide_trace = None
            if self.guide is not None:
                guide_trace = poutine.trace(getattr(self.guide, method)).get_trace(state, arg)
            program = getattr(self.model, method)
            if guide_trace is not None:
                program = poutine.replay(program, trace=guide_trace)
            model_trace = poutine.trace(program).get_trace(state, arg)
        log_joint = trace_log_prob(model_trace, sample_sites(model_trace), shape, PARTICLE_PLATE)
        if guide_trace is None:
            log_weight = trace_log_prob(model_trace, observed_sites(model_trace), shape, PARTICLE_PLATE)
        else:
            log_weight = log_joint - trace_log_prob(guide_trace, latent_sites(guide_trace), shape, PARTICLE_PLATE)
        return _as_tensor(log_weight, shape, arg), _as_tensor(log_joint, shape, arg)

    def start(self, x: torch.Tensor, mask: torch.Tensor, num_particles: int):
        """Run the ``init`` programs; their log-weight is added to the first step's."""
        state: dict = {}
        shape = (num_particles, x.shape[0])
        init_weight, init_joint = self._run("init", state, x, shape)
        for key, value in state.items():
            if not isinstance(value, torch.Tensor) or tuple(value.shape[:2]) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"state[{key!r}] written by init must be a tensor [K, B, ...] = {shape}+, got {got}")
        return state, {"init_weight": init_weight, "init_joint": init_joint, "blank": torch.zeros_like(x[:, 0])}

    def step(self, state, t, x_t, context, *, reparameterize: bool = True) -> Step:
        new_state = dict(state)
        shape = next(iter(state.values())).shape[:2] if state else None
        if shape is None:
            raise ValueError("init must write at least one tensor [K, B, ...] into state")
        log_weight, log_joint = self._run("step", new_state, x_t, shape, reparameterize)
        if t == 0:
            log_weight = log_weight + context["init_weight"]
            log_joint = log_joint + context["init_joint"]
        return Step(new_state, log_weight, log_joint)

    def simulate(self, state, t, context):
        """One draw from the model's ``step`` program, its observed site sampled: ``(state, x_t [S, B, D])``."""
        new_state, site = self.unconditioned_step(state, context)
        return new_state, site["value"]

    def predict_mean(self, state, t, context) -> torch.Tensor:
        """``[K, B, D]``: the mean of the observed site's distribution after one draw of the step's latents.

        An unbiased one-sample estimate of ``E[x_t | particle]``; exact when the observed
        site's mean does not depend on the step's latent draws.
        """
        _, site = self.unconditioned_step(state, context)
        return site["fn"].mean

    def unconditioned_step(self, state, context) -> tuple[dict, dict]:
        """Run the model's ``step`` with its observed site sampled; return the new state and that site."""
        new_state = dict(state)
        with self._plate(next(iter(state.values())).shape[0]):
            trace = poutine.trace(poutine.uncondition(self.model.step)).get_trace(new_state, context["blank"])
        drawn = [s for s in trace.nodes.values() if s["type"] == "sample" and s["infer"].get("was_observed")]
        if len(drawn) != 1:
            raise ValueError(f"simulate needs exactly one observed site in model.step, found {len(drawn)}")
        return new_state, drawn[0]


class ParticlePrograms:
    """Mixin: a module's Pyro ``init``/``step`` programs as its programs, guide programs and particle-model interface.

    The class defines ``init_program(state, x)`` and ``step_program(state, x_t)`` (the model),
    ``proposal_program(state, x_t)`` (the guide's step: it samples the step's latent sites and
    leaves ``state`` alone) and ``check_particle_input(x, mask) -> (x, mask)``. With
    ``guide_proposes = True`` the filter proposes from the guide; with ``False`` it runs the
    bootstrap filter, and the guide programs serve ``pyro.infer.SMCFilter`` only.
    """

    guide_proposes: bool = True
    particle_options = frozenset({"simulate", "predict_mean"})

    @property
    def programs(self) -> SimpleNamespace:
        """``init(state, x)`` and ``step(state, x_t)``: the model as ``pyro.infer.SMCFilter`` programs."""
        return SimpleNamespace(init=self.init_program, step=self.step_program)

    @property
    def guide_programs(self) -> SimpleNamespace:
        """The proposal as ``SMCFilter`` guide programs: ``init`` proposes nothing, ``step`` is ``proposal_program``."""
        return SimpleNamespace(init=_no_op, step=self.proposal_program)

    @property
    def program_model(self) -> PyroProgramModel:
        """The programs adapted to the particle-model interface of :class:`~ppl_models.inference.ParticleFilter`."""
        return PyroProgramModel(self.programs, self.guide_programs if self.guide_proposes else None)

    def start(self, x: torch.Tensor, mask: torch.Tensor | None, num_particles: int):
        """Particle state ``[K, B, ...]`` and context for a batch ``x [B, T, D]`` (checked first)."""
        x, mask = self.check_particle_input(x, mask)
        return self.program_model.start(x, mask, num_particles)

    def step(self, state, t, x_t, context, *, reparameterize: bool = True) -> Step:
        return self.program_model.step(state, t, x_t, context, reparameterize=reparameterize)

    def simulate(self, state, t, context):
        return self.program_model.simulate(state, t, context)

    def predict_mean(self, state, t, context) -> torch.Tensor:
        """``[K, B, D]``: the observed site's mean after one draw of the step's latents per particle."""
        return self.program_model.predict_mean(state, t, context)


def _no_op(state: dict, x: torch.Tensor) -> None:
    """A guide ``init`` with nothing to propose."""


def _as_tensor(value, shape, like):
    """``value`` if it is a tensor, else zeros ``shape`` (a program with no site of that kind)."""
    return value if isinstance(value, torch.Tensor) else like.new_zeros(shape)

"""Training and evaluation objectives, each an ``nn.Module`` over a batch of sequences.

Every objective maps ``(x [B, T, D], mask [B, T])`` to an :class:`ObjectiveOutput`:
a scalar ``loss`` to minimise (minus the bound summed over sequences, divided by the
number of valid time steps, so learning rates do not depend on sequence length) and
the per-sequence ``bound`` in nats, which callers divide by ``num_steps`` to report
per-time-step figures; a bound below the dtype's range (an extreme outlier) is held at
its lowest value, with a warning (:mod:`ppl_models.inference.saturation`). Objectives are modules so
that ``DistributedDataParallel`` can wrap them; ``kl_factor`` is the annealing temperature
that the training loop sets.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import pyro
import torch
from pyro import poutine
from pyro.distributions.util import scale_and_mask
from torch import nn
from torch.distributions import kl_divergence

from .declarations import DeclaredModel
from .defaults import IWAE_OBJECTIVE_PARTICLES
from .particle_filter import ParticleFilter
from .saturation import saturate
from .traces import (
    PARTICLE_PLATE,
    check_reparameterized,
    latent_sites,
    observed_sites,
    sample_sites,
    site_per_sequence,
    trace_log_prob,
)
from .validation import InputTypeError, check_positive_int, check_sequences

__all__ = ["ObjectiveOutput", "Objective", "ExactLikelihood", "ELBO", "IWAE", "SMCBound"]


@dataclass
class ObjectiveOutput:
    """``loss``: scalar to minimise; ``bound``: ``[B]`` nats per sequence; ``num_steps``: ``[B]``."""

    loss: torch.Tensor
    bound: torch.Tensor
    num_steps: torch.Tensor

    @property
    def per_step(self) -> torch.Tensor:
        """The bound per valid time step, pooled over the batch (a 0-d tensor)."""
        return self.bound.sum() / self.num_steps.sum()


class Objective(nn.Module):
    """Base class: holds the model (a submodule, so its parameters are the objective's).

    Subclasses define :meth:`estimate`, returning the per-sequence bound and the
    per-sequence surrogate whose gradient trains the model (the bound itself, an
    annealed bound, or a Fisher-identity score).
    """

    #: which estimate ``bound`` is, for reports: ``exact``, ``elbo``, ``iwae-K``, ``smc-K``.
    kind: str = "objective"

    def __init__(self, model: nn.Module):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise InputTypeError(f"model must be an nn.Module (a SequenceModel), got {type(model).__name__}")
        self.model = model
        self.kl_factor = 1.0

    def estimate(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(bound [B], surrogate [B])`` for a validated batch; subclasses define it."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> ObjectiveOutput:
        x, mask = check_sequences(x, mask, model=self.model)
        # checked here at the boundary; inside, as in the filter, no per-site distribution checks
        # (their constraint checks cost SRNN's training step 3% at the paper's sizes)
        with _sharing_context(self.model), pyro.validation_enabled(False):
            bound, surrogate = self.estimate(x, mask)
        # a bound below the dtype's range is held at its lowest value, with a warning; a NaN is the trainer's to report
        bound = saturate(bound, name="x", what=f"the {self.kind} bound", failures=False)
        num_steps = (mask.sum(1) - getattr(self.model, "input_steps", 0)).clamp(min=0)  # the modelled steps
        loss = -surrogate.sum() / num_steps.sum().clamp(min=1)
        return ObjectiveOutput(loss=loss, bound=bound, num_steps=num_steps)


def _sharing_context(model):
    """The :meth:`~ppl_models.inference.declarations.DeclaredModel.sharing_context` of a collection model (others:
    none)."""
    return model.sharing_context() if isinstance(model, DeclaredModel) else nullcontext()


def _require_density(model) -> None:
    """ELBO and IWAE run ``model(x, mask)``: a conditional model (programs ``model(x, y, mask)``) must declare them.

    Raises :class:`~ppl_models.inference.protocol.Unsupported` with the model's reason otherwise.
    """
    if isinstance(model, DeclaredModel) and model.conditional:
        model.require("latent")


class ExactLikelihood(Objective):
    """Exact ``log p(x)`` of a model with a ``log_likelihood(x, mask) -> [B]`` method (e.g. the LGSSM)."""

    kind = "exact"

    def estimate(self, x, mask):
        bound = self.model.log_likelihood(x, mask)
        return bound, bound


class ELBO(Objective):
    """Evidence lower bound per sequence, from one (or ``num_samples`` averaged) trace pair.

    ``E_q[log p(x | z)] + kl_factor * E_q[log p(z) - log q(z | x)]``; the bound reported
    is always at ``kl_factor = 1``. ``mean_field=True`` replaces the latent term by
    ``-KL(q || p)`` computed analytically site by site where PyTorch knows it, as
    Pyro's ``TraceMeanField_ELBO`` does; summed over sequences, both equal Pyro's
    ``Trace_ELBO`` / ``TraceMeanField_ELBO`` losses on :func:`ppl_models.inference.traces.annealed`
    programs with the same random draws (see the tests). A model with an ``elbo_terms(x, mask, mean_field=...)``
    method (every :class:`~ppl_models.inference.state_space.MarkovStateSpace`) gives the two terms directly, without
    Pyro's traces; others are traced.

    Args:
        model: an ``nn.Module`` with Pyro programs ``model(x, mask)`` and ``guide(x, mask)``.
    """

    kind = "elbo"

    def __init__(self, model: nn.Module, *, mean_field: bool = False, num_samples: int = 1):
        super().__init__(model)
        _require_density(model)
        self.mean_field = mean_field
        self.num_samples = check_positive_int(num_samples, name="num_samples")

    def estimate(self, x, mask):
        shape = (x.shape[0],)
        log_lik = latent = x.new_zeros(shape)  # stays zero for sequences with no modelled step
        direct = getattr(self.model, "elbo_terms", None)
        for _ in range(self.num_samples):
            if direct is not None:
                sample_log_lik, sample_latent = direct(x, mask, mean_field=self.mean_field)
            else:
                sample_log_lik, sample_latent = self._traced_terms(x, mask, shape)
            log_lik, latent = log_lik + sample_log_lik, latent + sample_latent
        log_lik, latent = log_lik / self.num_samples, latent / self.num_samples
        return log_lik + latent, log_lik + self.kl_factor * latent

    def _traced_terms(self, x, mask, shape):
        """``(log p(x | z), latent)`` ``[B]`` from the traces of the guide and the replayed model."""
        guide_trace = poutine.trace(self.model.guide).get_trace(x, mask)
        check_reparameterized(guide_trace)
        model_trace = poutine.trace(poutine.replay(self.model.model, trace=guide_trace)).get_trace(x, mask)
        log_lik = trace_log_prob(model_trace, observed_sites(model_trace), shape)
        return log_lik, self._latent_term(model_trace, guide_trace, shape)

    def _latent_term(self, model_trace, guide_trace, shape):
        names = latent_sites(model_trace)
        if not self.mean_field:
            return trace_log_prob(model_trace, names, shape) - trace_log_prob(guide_trace, names, shape)
        total = 0.0
        for name in names:
            p_site, q_site = model_trace.nodes[name], guide_trace.nodes[name]
            try:
                kl = kl_divergence(q_site["fn"], p_site["fn"])
            except NotImplementedError:
                kl = q_site["fn"].log_prob(q_site["value"]) - p_site["fn"].log_prob(p_site["value"])
            kl = scale_and_mask(kl, q_site["scale"], q_site["mask"])
            total = total - site_per_sequence(kl, q_site, shape)
        return total


class IWAE(Objective):
    """Importance-weighted bound ``log (1/K) sum_k p(x, z_k) / q(z_k | x)`` per sequence.

    The ``K`` guide samples are drawn in vectorised passes (a ``pyro.plate`` named
    ``particles`` outside the model's plates) of ``particle_chunk`` samples each, and
    the bound is differentiable (unlike ``pyro.infer.RenyiELBO``, whose loss runs
    without gradients). ``IWAE-1`` is the ELBO; the bound rises towards ``log p(x)``
    with ``K``.

    Args:
        model: an ``nn.Module`` with Pyro programs ``model(x, mask)`` and ``guide(x, mask)``.
        num_particles: ``K``.
        max_plate_nesting: plates inside the programs (1: the sequence plate).
        particle_chunk: samples per pass (``None``: all ``K`` in one). The traces of a pass
            hold ``particle_chunk * B * T`` copies of every latent, so smaller chunks bound
            the memory of an evaluation without gradients; the estimate has the same law either way.
    """

    def __init__(
        self,
        model: nn.Module,
        num_particles: int = IWAE_OBJECTIVE_PARTICLES,
        *,
        max_plate_nesting: int = 1,
        particle_chunk: int | None = None,
    ):
        super().__init__(model)
        _require_density(model)
        self.num_particles = check_positive_int(num_particles, name="num_particles")
        self.max_plate_nesting = check_positive_int(max_plate_nesting, name="max_plate_nesting")
        self.particle_chunk = (
            self.num_particles
            if particle_chunk is None
            else min(check_positive_int(particle_chunk, name="particle_chunk"), self.num_particles)
        )
        self.kind = f"iwae-{num_particles}"

    def log_weights(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[K, B]`` importance log-weights ``log p(x, z_k) - log q(z_k | x)``."""
        chunks = [
            min(self.particle_chunk, self.num_particles - start)
            for start in range(0, self.num_particles, self.particle_chunk)
        ]
        return torch.cat([self._chunk_log_weights(x, mask, size) for size in chunks])

    def _chunk_log_weights(self, x, mask, size):
        shape = (size, x.shape[0])
        plate = pyro.plate(PARTICLE_PLATE, size, dim=-(self.max_plate_nesting + 1))
        guide_trace = poutine.trace(plate(self.model.guide)).get_trace(x, mask)
        check_reparameterized(guide_trace)
        model_trace = poutine.trace(poutine.replay(plate(self.model.model), trace=guide_trace)).get_trace(x, mask)
        log_p = trace_log_prob(model_trace, sample_sites(model_trace), shape, PARTICLE_PLATE)
        log_q = trace_log_prob(guide_trace, latent_sites(guide_trace), shape, PARTICLE_PLATE)
        return x.new_zeros(shape) + log_p - log_q  # zero for sequences with no modelled step

    def estimate(self, x, mask):
        bound = torch.logsumexp(self.log_weights(x, mask), dim=0) - math.log(self.num_particles)
        return bound, bound


class SMCBound(Objective):
    """Log of the particle filter's evidence estimate (FIVO / AESMC), per sequence.

    With the filter's ``gradient="stop_weights"`` the surrogate is the
    Fisher-identity score (SMC Transformer), otherwise the bound itself
    (reparameterised, resampling indices constant). In training mode, a model with an
    ``em_update(result)`` method (covariances fitted by EM, as in the SMC Transformer)
    gets each batch's :class:`~ppl_models.inference.particle_filter.FilterResult` after the run.

    Args:
        model: a particle model (see :mod:`ppl_models.inference.particle_filter`).
        particle_filter: the :class:`~ppl_models.inference.particle_filter.ParticleFilter` to run.
    """

    def __init__(self, model: nn.Module, particle_filter: ParticleFilter):
        super().__init__(model)
        if not isinstance(particle_filter, ParticleFilter):
            raise TypeError(f"particle_filter must be a ParticleFilter, got {type(particle_filter).__name__}")
        self.particle_filter = particle_filter
        self.kind = f"smc-{particle_filter.num_particles}"

    def estimate(self, x, mask):
        result = self.particle_filter.run(self.model, x, mask)
        # an optional hook: models with EM-fitted covariances (the SMC Transformer) update them per batch
        if self.training and callable(getattr(self.model, "em_update", None)):
            self.model.em_update(result)
        if result.fisher_objective is not None:
            return result.log_evidence, result.fisher_objective
        return result.log_evidence, result.log_evidence

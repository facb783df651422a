"""Markov state-space models written once, as modules that return distributions.

A subclass of :class:`MarkovStateSpace` defines its mathematics in four methods:

* ``prior(z_prev, t, context)``: ``p(z_t | z_{t-1})`` (``z_prev`` is ``None`` at
  ``t = 0``, where it is the initial distribution);
* ``emission(z, t, context)``: ``p(x_t | z_t)``, event shape ``[D]``;
* ``proposal(z_prev, t, x_t, context)``: ``q(z_t | z_{t-1}, x_t, ...)`` or ``None``
  (the default) for the bootstrap proposal ``q = p``;
* ``context(x, mask)``: per-sequence features the others read (default ``None``).

Latent states are vectors ``[..., latent_dim]``; distributions have batch shape
``[B]`` or ``[K, B]`` and event shape ``[latent_dim]`` / ``[D]``.

From these the class derives, with no second copy of the mathematics:

* the Pyro programs :meth:`model` and :meth:`guide` (``pyro.plate`` named
  :data:`SEQUENCE_PLATE` over the batch at ``dim=-1``, ``pyro.markov`` over time,
  sites ``z_t`` and ``x_t``), for ``SVI``, ``Predictive`` and the objectives of
  :mod:`ppl_models.inference.objectives`;
* the particle-model methods :meth:`start`, :meth:`step` and :meth:`simulate`
  driven by :class:`ppl_models.inference.particle_filter.ParticleFilter`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import pyro
import torch
from pyro import poutine
from torch.distributions import kl_divergence

from .defaults import METHOD_PARTICLES
from .forecast import pick_particles
from .particle_filter import ParticleFilter, Step
from .protocol import Generation, SequenceModel
from .resampling import gather_particles
from .traces import SEQUENCE_PLATE
from .validation import check_positive_int, check_sequences

__all__ = ["MarkovStateSpace", "SEQUENCE_PLATE"]


class MarkovStateSpace(SequenceModel):
    """Base class; subclasses set ``latent_dim`` and ``obs_dim`` and define the methods above.

    As a :class:`~ppl_models.inference.protocol.SequenceModel` it declares the Pyro programs, latent
    sites and the particle interface; its one-step ``predictive`` and ``forecast`` come from
    the shared filter. Subclasses add what else they can do.
    """

    uncondition = "free"
    capabilities = frozenset({"programs", "latent", "particles", "predictive", "forecast"})
    particle_options = frozenset({"simulate", "predict_mean"})
    limitations = {
        "exact": "the latent states make log p(x) intractable in general: it is scored by ELBO, IWAE-K or SMC-K",
        "generate": "not declared: MarkovStateSpace.generate is right only when context(x, mask) does "
        "not read x's values, which a subclass says by adding 'generate'",
    }

    latent_dim: int
    obs_dim: int

    # --- the mathematics (subclasses) -------------------------------------------------
    def prior(self, z_prev: torch.Tensor | None, t: int, context: Any):
        raise NotImplementedError

    def emission(self, z: torch.Tensor, t: int, context: Any):
        raise NotImplementedError

    def proposal(self, z_prev: torch.Tensor | None, t: int, x_t: torch.Tensor, context: Any):
        return None

    def context(self, x: torch.Tensor, mask: torch.Tensor) -> Any:
        return None

    # --- one context per (x, mask) inside an objective ------------------------------------
    @contextmanager
    def sharing_context(self):
        """Inside this block, :meth:`context` runs once per ``(x, mask)`` pair of tensors.

        The guide and the replayed model of one bound evaluation then share the
        deterministic features (an RNN over the whole sequence, say) instead of
        computing them twice. The objectives of :mod:`ppl_models.inference.objectives` use it.
        """
        outer = self.__dict__.get("_shared_contexts")
        self.__dict__["_shared_contexts"] = []
        try:
            yield self
        finally:
            self.__dict__["_shared_contexts"] = outer

    def _context(self, x: torch.Tensor, mask: torch.Tensor) -> Any:
        shared = self.__dict__.get("_shared_contexts")
        if shared is None:
            return self.context(x, mask)
        for seen_x, seen_mask, context in shared:
            if seen_x is x and seen_mask is mask:
                return context
        context = self.context(x, mask)
        shared.append((x, mask, context))
        return context

    # --- Pyro programs (parameters registered as ``pyro_name``, one per instance) --------------
    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Generative program: ``z_t ~ prior``, ``x_t ~ emission`` (observed), masked by ``mask``.

        Args:
            x: ``[B, T, D]`` observations; ``mask``: ``[B, T]`` bool, valid steps first.
        Wrap in ``pyro.poutine.uncondition`` to sample ``x`` instead of observing it.
        """
        pyro.module(self.pyro_name, self)
        x, mask = check_sequences(x, mask, model=self)
        context = self._context(x, mask)
        z = None
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            for t in pyro.markov(range(self.input_steps, x.shape[1])):
                with poutine.mask(mask=mask[:, t]):
                    z = pyro.sample(f"z_{t}", self.prior(z, t, context))
                    pyro.sample(f"x_{t}", self.emission(z, t, context), obs=x[:, t])

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Inference program: ``z_t ~ proposal(z_{t-1}, x_t)``, forward in time.

        A model without a proposal (``proposal`` returns ``None``: the bootstrap filter's) has the
        prior as its guide, so that ELBO and IWAE are still bounds, as the filter's weights are.
        """
        pyro.module(self.pyro_name, self)
        x, mask = check_sequences(x, mask, model=self)
        context = self._context(x, mask)
        z = None
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            for t in pyro.markov(range(self.input_steps, x.shape[1])):
                q = self.proposal(z, t, x[:, t], context)
                if q is None:
                    q = self.prior(z, t, context)
                with poutine.mask(mask=mask[:, t]):
                    z = pyro.sample(f"z_{t}", q)

    # --- the ELBO's terms, computed directly -------------------------------------------------
    def elbo_terms(self, x: torch.Tensor, mask: torch.Tensor, *, mean_field: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(x | z), latent)``, each ``[B]``, of one draw ``z ~ q``: the terms that
        :class:`~ppl_models.inference.objectives.ELBO` reads from the traces of :meth:`guide` and the replayed
        :meth:`model`, computed without them (the same draws, in the same order; masked steps count zero).
        ``latent`` is ``-KL(q || p)`` summed over steps (``mean_field``, analytic) or ``log p(z) - log q(z)``.
        """
        context = self._context(x, mask)
        latent, draws, z = x.new_zeros(x.shape[0]), [], None
        for t in range(self.input_steps, x.shape[1]):
            q = self.proposal(z, t, x[:, t], context)
            p = self.prior(z, t, context)
            z = (p if q is None else q).rsample()
            if q is not None:
                term = -kl_divergence(q, p) if mean_field else p.log_prob(z) - q.log_prob(z)
                latent = latent + torch.where(mask[:, t], term, 0.0)
            draws.append(z)
        if not draws:  # input steps only: nothing modelled
            return latent, latent
        return self.emission_log_prob(torch.stack(draws), x, mask, context), latent

    def emission_log_prob(self, z: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, context: Any) -> torch.Tensor:
        """``log p(x | z)`` ``[B]`` over the modelled steps, from their draws ``z [T', B, latent_dim]`` (``T'``: the
        steps after :attr:`input_steps`); subclasses may score all steps at once."""
        total = x.new_zeros(x.shape[0])
        for t, z_t in enumerate(z.unbind(0), start=self.input_steps):
            total = total + torch.where(mask[:, t], self.emission(z_t, t, context).log_prob(x[:, t]), 0.0)
        return total

    # --- particle model ---------------------------------------------------------------
    def start(self, x: torch.Tensor, mask: torch.Tensor, num_particles: int):
        """Initial particle state ``{"z": [K, B, latent_dim]}`` (unused before ``t = 0``) and context."""
        z = x.new_zeros(num_particles, x.shape[0], self.latent_dim)
        return {"z": z}, self._context(x, mask)

    def step(self, state, t, x_t, context, *, reparameterize: bool = True) -> Step:
        """One proposal-and-weighting step for particles ``state["z"] [K, B, latent_dim]``.

        With ``reparameterize=False`` (Fisher's identity) the proposed states carry no
        gradient path and the complete-data log-density is returned; otherwise it is
        computed only when the proposal is not the prior (it is part of the weight).
        """
        if t < self.input_steps:  # read as an input only: no draw, no weight
            zero = state["z"].new_zeros(state["z"].shape[:2])
            return Step(state, zero, zero)
        z_prev = self._previous(state, t)
        prior = self._expanded(self.prior(z_prev, t, context), state["z"].shape[:2])
        q = self.proposal(z_prev, t, x_t, context)
        if q is not None:
            q = self._expanded(q, state["z"].shape[:2])
        sampler = prior if q is None else q
        z = sampler.rsample() if reparameterize else sampler.sample()
        log_lik = self.emission(z, t, context).log_prob(x_t)
        if q is None and reparameterize:
            return Step({"z": z}, log_lik, None)
        log_joint = prior.log_prob(z) + log_lik
        log_weight = log_lik if q is None else log_joint - q.log_prob(z)
        return Step({"z": z}, log_weight, log_joint)

    def simulate(self, state, t, context):
        """Draw ``(state_t, x_t)`` from the model given particles at ``t - 1``; ``x_t`` is ``[S, B, D]``."""
        z_prev = self._previous(state, t)
        z = self._expanded(self.prior(z_prev, t, context), state["z"].shape[:2]).sample()
        return {"z": z}, self.emission(z, t, context).sample()

    def predict_mean(self, state, t, context) -> torch.Tensor:
        """``E[x_t | z_t]`` ``[K, B, D]`` at one draw ``z_t ~ p(z_t | z_{t-1})`` per particle."""
        z_prev = self._previous(state, t)
        z = self._expanded(self.prior(z_prev, t, context), state["z"].shape[:2]).sample()
        return self.emission(z, t, context).mean

    @torch.no_grad()
    def generate(
        self,
        num_steps: int,
        *,
        num_sequences: int = 1,
        prefix: torch.Tensor | None = None,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """``num_steps`` steps from ``prior`` and ``emission``, from scratch or after ``prefix [B, P, D]``.

        A prefix is continued from one particle per sequence drawn from the filter's final
        weighted set (``num_particles``; ``generator`` serves that draw, Pyro's RNG the rest).
        Valid only when :meth:`context` does not read ``x``'s values (the default context is
        ``None``): subclasses opt in by adding ``"generate"`` to their capabilities.
        """
        self.require("generate")
        check_positive_int(num_steps, name="num_steps")
        if prefix is None:
            batch = check_positive_int(num_sequences, name="num_sequences")
            blank = next(self.parameters()).new_zeros(batch, num_steps, self.obs_dim)
            state, context = self.start(blank, None, 1)
            first, xs, means = 0, [], []
        else:
            prefix, _ = check_sequences(prefix, None, name="prefix", model=self)
            result = ParticleFilter(num_particles, generator=generator).run(self, prefix)
            picks = pick_particles(result, 1, generator, replacement=False)  # [1, B]
            state = {k: gather_particles(v, picks) for k, v in result.state.items()}
            context, first = result.context, prefix.shape[1]
            xs, means = list(prefix.unbind(1)), list(prefix.unbind(1))
        z = state["z"]
        for t in range(first, first + num_steps):
            z = self._expanded(self.prior(z if t > 0 else None, t, context), z.shape[:2]).sample()
            emission = self.emission(z, t, context)
            xs.append(emission.sample()[0])
            means.append(emission.mean[0])
        return Generation(torch.stack(xs, 1), torch.stack(means, 1))

    def _previous(self, state, t: int) -> torch.Tensor | None:
        """``z_{t-1}`` of the particles, ``None`` at the first modelled step (after the input steps)."""
        return state["z"] if t > self.input_steps else None

    @staticmethod
    def _expanded(distribution, batch_shape):
        if distribution.batch_shape == batch_shape:
            return distribution
        return distribution.expand(batch_shape)

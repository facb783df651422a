"""VRNN: a recurrent latent variable model (Chung et al., 2015), the SRNN paper's stochastic baseline.

Generative model, for ``t = 1..T`` with ``h_0 = 0`` and feature extractors ``phi_x``, ``phi_z``::

    z_t ~ N(mu_0(h_{t-1}), diag sigma_0^2(h_{t-1}))                      prior
    x_t ~ Bernoulli(logits(phi_z(z_t), h_{t-1}))  or  N(m, diag s)(phi_z(z_t), h_{t-1})  (or a count emission)
    h_t = GRU(h_{t-1}, [phi_x(x_t), phi_z(z_t)])                          recurrence

Inference network (filtering, the paper's): ``q(z_t | x_t, h_{t-1}) = N(mu_z, diag sigma_z^2)(phi_x(x_t), h_{t-1})``.

Unlike SRNN, the deterministic state ``h_t`` reads the sampled ``z_t``, so it is no
per-sequence feature but part of each sample's (each particle's) state ``(z_t, h_t)``.
The mathematics is written once, as methods returning distributions (:meth:`VRNN.prior`,
:meth:`VRNN.proposal`, :meth:`VRNN.emission`) and the deterministic :meth:`VRNN.recurrence`,
all broadcasting over leading dims (``[B]`` or ``[K, B]``). Two kinds of Pyro programs use them:

* ``model(x, mask)`` / ``guide(x, mask)``: whole sequences, sites ``z_t`` and ``x_t`` in the
  plate ``sequences`` with ``pyro.markov`` over time, for ``SVI`` with any Pyro ELBO,
  ``Predictive``, and the shared :class:`~ppl_models.inference.objectives.ELBO` and
  :class:`~ppl_models.inference.objectives.IWAE`;
* :attr:`VRNN.programs` / :attr:`VRNN.guide_programs`: ``init(state, x)`` / ``step(state, x_t)``
  programs in the style of ``pyro.infer.SMCFilter`` (sites ``z``, ``x``; state ``h`` and ``z``
  ``[K, B, ...]``), which the shared :class:`~ppl_models.inference.particle_filter.ParticleFilter` runs
  with the guide as proposal (the module's ``start`` comes from
  :class:`~ppl_models.inference.pyro_programs.ParticlePrograms`).

Both kinds share one step of each program (``_model_step``, ``_propose``). Inside an objective
(:meth:`VRNN.sharing_context`) the replayed model reuses the ``h_t`` its guide computed from the
same draws instead of running the GRU a second time. The ELBO's terms (:meth:`VRNN.elbo_terms`) and the
particle filter's step, draws and predictive mean (:meth:`VRNN.step`, :meth:`VRNN.simulate`,
:meth:`VRNN.predict_mean`) are computed without Pyro's traces: the same draws and operations in the same order
as the traced programs, so the same numbers and gradients to the last bit, at a fraction of the cost on long series.

In the filter's ``stop_weights`` mode (Fisher's identity) the sampled ``z_t`` are constants and
``h_t`` keeps its gradient path, so the surrogate's gradient is ``∇ log p(x, z)`` at the filter's
latent paths; it trains the generative nets only (the guide is then just the proposal).

Generation and forecasts come from :class:`~ppl_models.inference.rollout.LatentRollout`, the one-step
predictive from the shared filter (:class:`~ppl_models.inference.protocol.SequenceModel`).
"""

from __future__ import annotations

from contextlib import contextmanager

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.distributions.util import scale_and_mask
from torch import nn
from torch.distributions import kl_divergence

from ppl_models.inference.particle_filter import Step
from ppl_models.inference.protocol import SequenceModel
from ppl_models.inference.pyro_programs import ParticlePrograms
from ppl_models.inference.resampling import gather_particles
from ppl_models.inference.rollout import LatentRollout
from ppl_models.inference.state_space import SEQUENCE_PLATE
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences

from .nets import (
    EMISSIONS,
    CountScale,
    EmissionChecks,
    SplitInputMLP,
    clipped_leaky_relu,
    diagonal_normal,
    draw_emission,
    emission_distribution,
    emission_params,
)

__all__ = ["VRNN"]


class VRNN(EmissionChecks, LatentRollout, ParticlePrograms, SequenceModel):
    """Variational RNN with a filtering inference network.

    Args:
        obs_dim: ``D``, the size of ``x_t`` (88 for piano rolls).
        emission: ``"bernoulli"`` (binary data), ``"gaussian"`` (diagonal, real-valued), or for counts
            ``"poisson"`` or ``"negbin"`` (:data:`~ppl_models.nets.EMISSIONS`).
        latent_dim: size of ``z_t``.
        rnn_dim: size of the GRU state ``h_t``.
        hidden_dim: units of the feed-forward nets' hidden layers.
        feature_dim: size of the features ``phi_x(x_t)`` and ``phi_z(z_t)`` (default ``hidden_dim``).
        num_hidden_layers: hidden layers per net (1).
        count_scale: for a count emission, ``D`` scales ``s`` that ``phi_x`` reads the counts by and the rates are
            multiplied by (:class:`~ppl_models.nets.CountScale`); ``None``: the counts as they are.
    """

    uncondition = "free"
    description = (
        "VRNN (Chung et al. 2015): GRU state that reads the sampled z, filtering guide (the SRNN "
        "paper's stochastic baseline)"
    )

    def __init__(
        self,
        obs_dim: int,
        *,
        emission: str = "bernoulli",
        latent_dim: int = 100,
        rnn_dim: int = 300,
        hidden_dim: int = 500,
        feature_dim: int | None = None,
        num_hidden_layers: int = 1,
        count_scale=None,
    ):
        super().__init__()
        feature_dim = hidden_dim if feature_dim is None else feature_dim
        for name, value in (
            ("obs_dim", obs_dim),
            ("latent_dim", latent_dim),
            ("rnn_dim", rnn_dim),
            ("hidden_dim", hidden_dim),
            ("feature_dim", feature_dim),
            ("num_hidden_layers", num_hidden_layers),
        ):
            check_positive_int(value, name=name)
        self.obs_dim, self.latent_dim, self.rnn_dim = obs_dim, latent_dim, rnn_dim
        self.emission_kind = check_choice(emission, EMISSIONS, name="emission")
        self.count_scale = CountScale(emission, obs_dim, count_scale)
        layers = num_hidden_layers
        self.phi_x = SplitInputMLP(0, obs_dim, hidden_dim, feature_dim, layers)
        self.phi_z = SplitInputMLP(0, latent_dim, hidden_dim, feature_dim, layers)
        self.prior_net = SplitInputMLP(0, rnn_dim, hidden_dim, 2 * latent_dim, layers)
        self.encoder = SplitInputMLP(rnn_dim, feature_dim, hidden_dim, 2 * latent_dim, layers)
        self.decoder = SplitInputMLP(feature_dim, rnn_dim, hidden_dim, emission_params(emission, obs_dim), layers)
        self.rnn = nn.GRUCell(2 * feature_dim, rnn_dim)

    # --- the mathematics (every method broadcasts over leading dims) ---------------------------
    def x_features(self, x: torch.Tensor) -> torch.Tensor:
        """``phi_x``: ``[..., D] -> [..., feature_dim]``."""
        return clipped_leaky_relu(self.phi_x(None, self.phi_x.project(self.count_scale.inputs(x))))

    def z_features(self, z: torch.Tensor) -> torch.Tensor:
        """``phi_z``: ``[..., latent_dim] -> [..., feature_dim]``."""
        return clipped_leaky_relu(self.phi_z(None, self.phi_z.project(z)))

    def proposal_input(self, x_features: torch.Tensor) -> torch.Tensor:
        """The guide's first-layer product with ``phi_x(x_t)``: ``[..., feature_dim] -> [..., hidden_dim]``."""
        return self.encoder.project(x_features)

    def prior(self, h: torch.Tensor):
        """``p(z_t | h_{t-1})`` from ``h [..., rnn_dim]``: batch shape ``[...]``, event ``[latent_dim]``."""
        return diagonal_normal(*self.prior_net(None, self.prior_net.project(h)).chunk(2, dim=-1))

    def proposal(self, h: torch.Tensor, proposal_input: torch.Tensor):
        """``q(z_t | x_t, h_{t-1})`` from ``h [..., rnn_dim]`` and :meth:`proposal_input` of ``phi_x(x_t)``."""
        return diagonal_normal(*self.encoder(h, proposal_input).chunk(2, dim=-1))

    def emission_params(self, z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The decoder's output ``[..., emission_params]`` from ``z [..., latent_dim]`` and ``h [..., rnn_dim]``."""
        return self.count_scale.outputs(self.decoder(self.z_features(z), self.decoder.project(h)))

    def emission(self, z: torch.Tensor, h: torch.Tensor):
        """``p(x_t | z_t, h_{t-1})`` from ``z [..., latent_dim]``, ``h [..., rnn_dim]``: event ``[D]``."""
        return emission_distribution(self.emission_kind, self.emission_params(z, h), self.scored_columns)

    def recurrence(self, h: torch.Tensor, x_features: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``h_t = GRU(h_{t-1}, [phi_x(x_t), phi_z(z_t)])`` ``[..., rnn_dim]`` (leading dims broadcast)."""
        z_features = self.z_features(z)
        shape = torch.broadcast_shapes(h.shape[:-1], x_features.shape[:-1], z_features.shape[:-1])
        inputs = torch.cat(
            [x_features.expand(shape + x_features.shape[-1:]), z_features.expand(shape + z_features.shape[-1:])], dim=-1
        )
        h = self.rnn(inputs.reshape(-1, inputs.shape[-1]), h.expand(shape + h.shape[-1:]).reshape(-1, self.rnn_dim))
        return h.reshape(shape + (self.rnn_dim,))

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        """``h_0 = 0`` ``[B, rnn_dim]`` for a batch ``x [B, T, D]`` (its dtype and device)."""
        return x.new_zeros(x.shape[0], self.rnn_dim)

    # --- one step of each program (sites inside the plate ``sequences``) -----------------------
    def _model_step(self, h, x_t, suffix: str = "", recorded=None):
        """Sample ``z_t``, score (or, unconditioned, draw) ``x_t``; return ``(z_t, x_t, h_t)``.

        ``recorded``: the guide's ``(h_{t-1}, z_t, h_t)`` of this step, reused when this step
        replays the same ``h_{t-1}`` and ``z_t`` and observes ``x_t`` (see :meth:`sharing_context`).
        """
        z = pyro.sample(f"z{suffix}", self.prior(h))
        x = pyro.sample(f"x{suffix}", self.emission(z, h), obs=x_t)
        if recorded is not None and recorded[0] is h and recorded[1] is z and x is x_t:
            return z, x, recorded[2]
        return z, x, self.recurrence(h, self.x_features(x), z)

    def _propose(self, h, proposal_input_t, suffix: str = ""):
        return pyro.sample(f"z{suffix}", self.proposal(h, proposal_input_t))

    # --- whole-sequence Pyro programs ------------------------------------------------------------
    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Generative program: sites ``z_t``, ``x_t`` (observed) masked by ``mask``; returns ``x [B, T, D]``.

        Args:
            x: ``[B, T, D]`` observations; ``mask``: ``[B, T]`` bool, valid steps first.
        Wrap in ``pyro.poutine.uncondition`` to draw ``x`` instead (``h_t`` then reads the
        drawn ``x_t``). Under an outer plate (IWAE's particles) values get its leading dims.
        """
        pyro.module(self.pyro_name, self)
        x, mask = self._check(x, mask)
        recorded = self._recorded(x, mask)
        h = recorded[0][0] if recorded else self.initial_state(x)
        draws = []
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            for t in pyro.markov(range(x.shape[1])):
                x_t = x[:, t]
                with poutine.mask(mask=mask[:, t]):
                    _, x_t, h = self._model_step(h, x_t, f"_{t}", recorded[t] if recorded else None)
                draws.append(x_t)
        return torch.stack(torch.broadcast_tensors(*draws), dim=-2)

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Filtering inference program: ``z_t ~ q(z_t | x_t, h_{t-1})``, ``h_t`` from the sampled ``z_t``."""
        pyro.module(self.pyro_name, self)
        x, mask = self._check(x, mask)
        features = self.x_features(x)  # [B, T, F], once for all steps
        inputs = self.proposal_input(features).unbind(1)  # views unbound once: a backward fill per step otherwise
        h = self.initial_state(x)
        record = self._recording(x, mask)
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            for t, step_features in zip(pyro.markov(range(x.shape[1])), features.unbind(1)):
                with poutine.mask(mask=mask[:, t]):
                    z = self._propose(h, inputs[t], f"_{t}")
                h_prev, h = h, self.recurrence(h, step_features, z)
                record.append((h_prev, z, h))

    # --- the ELBO's terms, computed directly -------------------------------------------------------
    def elbo_terms(self, x: torch.Tensor, mask: torch.Tensor, *, mean_field: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(x | z), latent)``, each ``[B]``, of one draw ``z ~ q``: the terms that
        :class:`~ppl_models.inference.objectives.ELBO` reads from the traces of :meth:`guide` and the replayed
        :meth:`model`, computed without them. The same draws and operations in the same order as the traced
        programs, so the same numbers and gradients to the last bit; masked steps count zero. ``latent`` is
        ``-KL(q || p)`` summed over steps (``mean_field``, analytic) or ``log p(z) - log q(z)``.
        """
        x, mask = self._check(x, mask)
        features = self.x_features(x)  # the guide, as guide() runs it
        inputs = self.proposal_input(features).unbind(1)
        h, steps = self.initial_state(x), []
        for t, step_features in enumerate(features.unbind(1)):
            q = self.proposal(h, inputs[t])
            z = q.rsample()
            steps.append((h, q, z))
            h = self.recurrence(h, step_features, z)
        model_sites = [(self.prior(h), self.emission(z, h)) for h, _, z in steps]  # the replayed model
        log_lik = 0.0
        for t, (_, emission) in enumerate(model_sites):
            log_lik = log_lik + scale_and_mask(emission.log_prob(x[:, t]), 1.0, mask[:, t])
        latent = 0.0
        if mean_field:
            for t, ((_, q, _), (prior, _)) in enumerate(zip(steps, model_sites)):
                latent = latent - scale_and_mask(kl_divergence(q, prior), 1.0, mask[:, t])
        else:
            for t, ((_, _, z), (prior, _)) in enumerate(zip(steps, model_sites)):
                latent = latent + scale_and_mask(prior.log_prob(z), 1.0, mask[:, t])
            proposed = 0.0
            for t, (_, q, z) in enumerate(steps):
                proposed = proposed + scale_and_mask(q.log_prob(z), 1.0, mask[:, t])
            latent = latent - proposed
        return _per_sequence(log_lik, x), _per_sequence(latent, x)

    # --- the guide's h_t, reused by the replayed model inside an objective -----------------------
    @contextmanager
    def sharing_context(self):
        """Inside this block, the model replaying a guide run on the same ``(x, mask)`` reuses its ``h_t``.

        The guide computes every ``h_t`` from its draws; the replayed model would compute the
        same values again. The objectives of :mod:`ppl_models.inference.objectives` enter this block;
        outside it (``SVI``, ``Predictive``) each program computes its own.
        """
        outer = self.__dict__.get("_guide_records")
        self.__dict__["_guide_records"] = []
        try:
            yield self
        finally:
            self.__dict__["_guide_records"] = outer

    def _recording(self, x, mask) -> list:
        """The list the guide appends ``(h_{t-1}, z_t, h_t)`` to: kept for ``(x, mask)`` inside a sharing block."""
        records = self.__dict__.get("_guide_records")
        if records is None:
            return []
        records[:] = [r for r in records if not (r[0] is x and r[1] is mask)]
        records.append((x, mask, []))
        return records[-1][2]

    def _recorded(self, x, mask) -> list | None:
        """The last guide run's ``[(h_{t-1}, z_t, h_t)]`` on this ``(x, mask)``, or ``None``."""
        for seen_x, seen_mask, steps in self.__dict__.get("_guide_records") or ():
            if seen_x is x and seen_mask is mask and len(steps) == x.shape[1]:
                return steps
        return None

    # --- SMCFilter-style programs (the particle-model interface comes from ParticlePrograms) -----
    def init_program(self, state: dict, x: torch.Tensor) -> None:
        """Write ``state["h"] = h_0 [K, B, rnn_dim]`` and ``state["z"] = 0 [K, B, latent_dim]``.

        ``h_0`` is a ``Delta`` site (``h_init``, log-density 0), so that it takes the particle
        plate's size.
        """
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            h = pyro.sample("h_init", dist.Delta(self.initial_state(x), event_dim=1))
        h = h if h.dim() == 3 else h.unsqueeze(0)
        state["h"] = h
        state["z"] = h.new_zeros(h.shape[:2] + (self.latent_dim,))

    def step_program(self, state: dict, x_t: torch.Tensor) -> None:
        """Sample ``z``, score ``x_t [B, D]`` (site ``x``), update ``state["h"], state["z"]`` ``[K, B, ...]``."""
        with pyro.plate(SEQUENCE_PLATE, x_t.shape[-2], dim=-1):
            z, _, h = self._model_step(state["h"], x_t)
        state["z"], state["h"] = z, h

    def proposal_program(self, state: dict, x_t: torch.Tensor) -> None:
        """The guide's step: sample ``z ~ q(z | x_t, h)`` from ``state["h"]``."""
        with pyro.plate(SEQUENCE_PLATE, x_t.shape[-2], dim=-1):
            self._propose(state["h"], self.proposal_input(self.x_features(x_t)))

    # --- the particle-model interface without Pyro's traces ----------------------------------------
    def step(self, state, t, x_t, context, *, reparameterize: bool = True) -> Step:
        """The particle filter's step: :meth:`proposal_program` then the replayed :meth:`step_program`, computed
        without Pyro's traces (the same draws, operations and log-densities, in the same order, so the same numbers
        and gradients to the last bit). Fisher's identity (``reparameterize=False``) runs the traced programs."""
        if not reparameterize:
            return super().step(state, t, x_t, context, reparameterize=False)
        h = state["h"]
        proposal = self.proposal(h, self.proposal_input(self.x_features(x_t)))
        z = proposal.rsample()
        prior, emission = self.prior(h), self.emission(z, h)
        new_state = {**state, "z": z, "h": self.recurrence(h, self.x_features(x_t), z)}
        log_joint = 0.0 + prior.log_prob(z) + emission.log_prob(x_t)  # summed from 0.0, as trace_log_prob sums
        log_weight = log_joint - (0.0 + proposal.log_prob(z))
        if t == 0:
            log_weight, log_joint = log_weight + context["init_weight"], log_joint + context["init_joint"]
        return Step(new_state, log_weight, log_joint)

    def simulate(self, state, t, context):
        """One draw ``(state, x_t [S, B, D])`` from the model given particles ``state [S, B, ...]`` (the unconditioned
        :meth:`step_program`'s draws, without its trace)."""
        h = state["h"]
        z = self.prior(h)()  # a Pyro distribution's call: rsample where it has one, as pyro.sample draws
        x = self.emission(z, h)()
        return {**state, "z": z, "h": self.recurrence(h, self.x_features(x), z)}, x

    def predict_mean(self, state, t, context) -> torch.Tensor:
        """``[K, B, D]``: the emission's mean after one draw of ``z_t`` per particle (the observation is drawn too,
        and dropped, so that the random stream is the traced program's)."""
        h = state["h"]
        z = self.prior(h)()
        emission = self.emission(z, h)
        emission()
        return emission.mean

    # --- generation and forecasts (ppl_models.inference.rollout.LatentRollout) ------------------------------
    def rollout_start(self, num_sequences: int) -> dict:
        """``h_0 = 0`` ``[N, rnn_dim]``."""
        return {"h": next(self.parameters()).new_zeros(num_sequences, self.rnn_dim)}

    def rollout_continue(self, x, mask, result, picks) -> dict:
        """``h`` of the picked particles ``[S * B, rnn_dim]`` (the filter keeps it at the last valid step)."""
        return {"h": gather_particles(result.state["h"], picks).reshape(-1, self.rnn_dim)}

    def rollout_step(self, state: dict, generator: torch.Generator | None, given: torch.Tensor | None = None):
        """``z_t ~ prior(h)``, ``x_t ~ emission(z_t, h)`` (its known covariates ``given``,
        :meth:`~ppl_models.inference.rollout.LatentRollout.with_given`), ``h_t = GRU(h, [phi_x(x_t), phi_z(z_t)])``."""
        h = state["h"]
        z = _draw(self.prior(h), generator)
        x, mean = draw_emission(self.emission_kind, self.emission_params(z, h), generator)
        x = self.with_given(x, given)
        return {"h": self.recurrence(h, self.x_features(x), z)}, x, mean

    def check_particle_input(self, x, mask):
        return self._check(x, mask)

    def _check(self, x, mask, *, name: str = "x"):
        return check_sequences(x, mask, name=name, model=self)


def _per_sequence(total, x: torch.Tensor) -> torch.Tensor:
    """A sum over steps as ``[B]`` (``0.0`` where ``x`` has no step)."""
    return total if isinstance(total, torch.Tensor) else x.new_zeros(x.shape[0])


def _draw(distribution, generator: torch.Generator | None) -> torch.Tensor:
    """One draw from a diagonal normal (event dim 1) with ``generator``."""
    base = distribution.base_dist
    noise = torch.randn(base.loc.shape, generator=generator, device=base.loc.device, dtype=base.loc.dtype)
    return base.loc + base.scale * noise

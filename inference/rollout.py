"""Generation and forecasts of recurrent latent models, written once (SRNN, VRNN).

A model whose simulation needs more than the particle filter's ``simulate`` (SRNN's
deterministic GRU states are precomputed per sequence, so they end with the data) defines
three hooks and gets :meth:`LatentRollout.generate` and :meth:`LatentRollout.forecast`:

* ``rollout_start(num_sequences) -> state``: the state before the first step, tensors ``[N, ...]``;
* ``rollout_continue(x, mask, result, picks) -> state``: the state after each sequence's last
  valid step, for the filtered particles ``picks [S, B]`` of ``result`` (the shared filter's
  run on ``x``), rows ordered sample-major (``[S * B, ...]``);
* ``rollout_step(state, generator, given=None) -> (state, x_t [N, D], mean_t [N, D])``: one step of the
  model, ``x_t`` drawn from the emission whose mean is ``mean_t``, its known covariates' columns set to ``given``
  (:meth:`LatentRollout.with_given`) before the state reads it.

Such a model also reads covariates as inputs once :meth:`LatentRollout.read_covariates` gives it the data's layout:
its emission then scores the targets only (``scored_columns``), so its filter, guide and bounds condition on the
covariates without modelling them, and :meth:`LatentRollout.forecast_given` draws the targets ahead given the known
covariates of those steps (``forecast`` and ``generate``, which would need the covariates' own law, are refused).
"""

from __future__ import annotations

import torch

from .data.covariates import CovariateLayout
from .defaults import METHOD_PARTICLES
from .forecast import pick_particles
from .particle_filter import ParticleFilter
from .protocol import Generation, check_num_samples
from .validation import check_positive_int, check_sequences

__all__ = ["LatentRollout"]


class LatentRollout:
    """Mixin of :class:`~ppl_models.inference.protocol.SequenceModel` subclasses with the three rollout hooks.

    It declares what such a model answers: Pyro programs with a latent guide, the particle form
    (whose filter gives the one-step predictive), generation and forecasts.
    """

    obs_dim: int
    capabilities = frozenset({"programs", "latent", "particles", "predictive", "generate", "forecast"})
    limitations = {"exact": "the latent states make log p(x) intractable: it is scored by ELBO, IWAE-K or SMC-K"}
    #: the data's covariate layout once :meth:`read_covariates` gave it (``None``: every column is modelled)
    layout: CovariateLayout | None = None
    #: the leading columns modelled and scored (``None``: all)
    modelled_features: int | None = None

    def read_covariates(self, layout: CovariateLayout) -> None:
        """Read the columns after ``layout``'s targets as inputs: the emission scores the targets only, and a
        forecast needs the known covariates ahead (:meth:`forecast_given`)."""
        if len(layout.features) != self.obs_dim:
            raise ValueError(
                f"layout: expected {self.obs_dim} columns (targets and covariates), got {len(layout.features)}"
            )
        self.layout = layout
        self.modelled_features = self.scored_columns = layout.modelled
        self.capabilities = self.capabilities - {"generate", "forecast"}
        self.limitations = {
            **self.limitations,
            "forecast": "it reads covariates: a forecast of the targets needs their values ahead (forecast_given)",
            "generate": "it models the targets given the covariates, not the covariates' own law",
        }

    def with_given(self, x_t: torch.Tensor, given: torch.Tensor | None) -> torch.Tensor:
        """``x_t [N, D]`` with its known covariates' columns set to ``given [N, C]`` (``None``: as it is)."""
        if given is None:
            return x_t
        x_t = x_t.clone()
        x_t[:, self.layout.known_slice] = given
        return x_t

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
        """Sample ``num_steps`` new steps, from scratch or continuing ``prefix``.

        Args:
            num_steps: steps to generate after the prefix.
            num_sequences: ``B`` when there is no prefix.
            prefix: optional ``[B, P, D]`` observed start (all steps valid); the latent state after
                it is one draw per sequence from the particle filter's posterior (``num_particles``).
            generator: source of every random draw.

        Returns:
            :class:`~ppl_models.inference.protocol.Generation` with ``x [B, P + num_steps, D]`` (the prefix
            first) and the emission means of the generated steps (the prefix's values in its place).
        """
        self.require("generate")
        check_positive_int(num_steps, name="num_steps")
        if prefix is None:
            state = self.rollout_start(check_positive_int(num_sequences, name="num_sequences"))
            xs, means = [], []
        else:
            prefix, mask = check_sequences(prefix, None, name="prefix", model=self)
            result = ParticleFilter(num_particles, generator=generator).run(self, prefix)
            picks = pick_particles(result, 1, generator, replacement=False)  # [1, B]
            state = self.rollout_continue(prefix, mask, result, picks)
            xs, means = list(prefix.unbind(1)), list(prefix.unbind(1))
        for _ in range(num_steps):
            state, x_t, mean_t = self.rollout_step(state, generator)
            xs.append(x_t)
            means.append(mean_t)
        return Generation(torch.stack(xs, 1), torch.stack(means, 1))

    @torch.no_grad()
    def forecast(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        horizon: int = 1,
        num_samples: int = 100,
        *,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, D]`` joint draws of the ``horizon`` steps after each sequence's last valid step.

        ``x [B, T, D]`` is filtered with ``num_particles``; each of the ``S`` paths starts from a
        particle drawn from the final weighted set (the filtering posterior) and runs the model on.
        """
        self.require("forecast")
        x, mask = check_sequences(x, mask, model=self)
        check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        result = ParticleFilter(num_particles, generator=generator).run(self, x, mask)
        picks = pick_particles(result, num_samples, generator)  # [S, B]
        state = self.rollout_continue(x, mask, result, picks)
        draws = []
        for _ in range(horizon):
            state, x_t, _ = self.rollout_step(state, generator)
            draws.append(x_t)
        return torch.stack(draws, 1).reshape(num_samples, x.shape[0], horizon, -1)

    @torch.no_grad()
    def forecast_given(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        future: torch.Tensor,
        horizon: int,
        num_samples: int = 100,
        *,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, O]``: joint draws of the targets of the ``horizon`` steps after each row's last valid step,
        given the known covariates of those steps ``future [B, >= H, C]`` (in ``x``'s units; ``future[:, h]`` is
        the value in the row before step ``h``, the last valid row's for ``h = 0``), as :meth:`forecast` draws them.
        """
        if self.layout is None:
            raise ValueError("forecast_given: the model reads no covariates (read_covariates); use forecast")
        x, mask = check_sequences(x, mask, model=self)
        check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        future = self.layout.checked_future(x, future, horizon)
        known = bool(self.layout.known)
        if known:  # the last valid row holds the first step's covariates
            x = x.clone()
            rows, last = torch.arange(x.shape[0], device=x.device), mask.sum(1) - 1
            x[rows, last, self.layout.known_slice] = future[:, 0]
        result = ParticleFilter(num_particles, generator=generator).run(self, x, mask)
        picks = pick_particles(result, num_samples, generator)  # [S, B]
        state = self.rollout_continue(x, mask, result, picks)
        draws = []
        for h in range(horizon):
            given = future[:, h + 1].repeat(num_samples, 1) if known and h + 1 < horizon else None
            state, x_t, _ = self.rollout_step(state, generator, given)
            draws.append(x_t[:, : self.modelled_features])
        return torch.stack(draws, 1).reshape(num_samples, x.shape[0], horizon, -1)

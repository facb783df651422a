"""Models without latent variables, everything following from their exact one-step predictive:
:class:`ExactPredictiveModel` (the exact log-likelihood, the one-step predictive, generation and forecasts drawn a
step at a time along each path's :class:`~ppl_models.path_carry.Carry`, and the Pyro programs)."""

from __future__ import annotations

import pyro
import torch

from ppl_models.inference.defaults import METHOD_PARTICLES
from ppl_models.inference.protocol import (
    Generation,
    OneStepPredictive,
    SequenceModel,
    check_num_samples,
    exact_predictive,
)
from ppl_models.inference.saturation import saturated_sum
from ppl_models.inference.state_space import SEQUENCE_PLATE
from ppl_models.inference.validation import check_positive_int, check_sequences

from .path_carry import Carry

__all__ = ["ExactPredictiveModel"]


class ExactPredictiveModel(SequenceModel):
    """Base of models without latent variables: everything follows from :meth:`predictive_distribution`.

    A subclass sets ``obs_dim`` and defines ``predictive_distribution(x, mask)``, the exact
    ``p(x_t | x_{<t})`` with batch shape ``[B, T]`` and event ``[D]``; this class gives the
    exact log-likelihood, the one-step predictive, generation and forecasts (by drawing one
    step at a time and feeding the draw back) and the Pyro programs (one observed site ``x``
    and an empty guide, so Pyro's ELBOs equal the log-likelihood). Its draws use torch's
    global random numbers (seed them with ``pyro.set_rng_seed``).

    A draw reads the :class:`Carry` of its path (:meth:`carry_start`, :meth:`carry_on`, :meth:`carry_draw`). By
    default that is the path itself, whose predictive is recomputed at every step (a cost quadratic in the steps
    drawn); a model with a recurrent state carries the state instead, each step then costing the same.
    """

    #: whether the paths of a sequence may share the carry of its history (computed once and copied): ``False``
    #: where a carry holds draws of its own, so that each path runs the history itself
    shares_history: bool = True

    uncondition = "teacher-forced"
    capabilities = frozenset({"programs", "exact", "predictive", "generate", "forecast"})
    limitations = {
        "latent": "no latent variables: its guide is empty and ELBO / IWAE equal the exact likelihood",
        "particles": "no latent state to filter: its likelihood is exact",
    }

    def predictive_distribution(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        raise NotImplementedError

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x_{1:T_b})`` per sequence, ``[B]``.

        A step whose log-density falls below the dtype's range is held at its lowest value, with a
        warning; a NaN raises (:func:`ppl_models.inference.saturation.saturated_sum`).
        """
        x, mask = check_sequences(x, mask, model=self)
        with pyro.validation_enabled(False):  # x is checked; a parameter a network overflowed to NaN raises below
            log_p = self.predictive_distribution(x, mask).log_prob(x)
        return saturated_sum(log_p, mask, what=f"{type(self).__name__}'s log-density")

    @torch.no_grad()
    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """The exact one-step predictive: ``S`` draws ``[S, B, T, D]``, its mean and log density ``[B, T]``.

        ``num_particles`` and ``generator`` are unused (the predictive is exact; draws use torch's RNG).
        """
        num_samples = check_num_samples(num_samples)
        x, mask = check_sequences(x, mask, model=self)
        with pyro.validation_enabled(False):  # as in log_likelihood: exact_predictive reports a NaN
            exact = self.predictive_distribution(x, mask)
            samples = self.predictive_samples(x, mask, num_samples, exact) if num_samples else None
            return exact_predictive(exact, x, mask, samples, self.predictive_source)

    #: where :meth:`predictive`'s draws come from, for reports
    predictive_source = "the exact predictive"

    def predictive_samples(self, x, mask, num_samples: int, exact) -> torch.Tensor:
        """``[S, B, T, D]`` draws of the one-step predictive ``exact`` (a subclass may draw otherwise)."""
        return exact.sample((num_samples,))

    @torch.no_grad()
    def generate(
        self,
        num_steps: int,
        *,
        num_sequences: int = 1,
        prefix: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """``num_steps`` steps drawn one at a time, from scratch (``num_sequences``) or after ``prefix [B, P, D]``.

        Returns the prefix and the draws, ``x [B, P + num_steps, D]``, with the predictive means of
        the drawn steps (the prefix's values in its place).
        """
        check_positive_int(num_steps, name="num_steps")
        if prefix is None:
            start = next(self.parameters()).new_zeros(
                check_positive_int(num_sequences, name="num_sequences"), 0, self.obs_dim
            )
        else:
            start, _ = check_sequences(prefix, None, name="prefix", model=self)
        shape = (len(start), num_steps, self.obs_dim)
        draws, means = start.new_empty(shape), start.new_empty(shape)
        self._draw_on(self.carry_start(start), draws, means)
        return Generation(torch.cat([start, draws], 1), torch.cat([start, means], 1))

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
        """``[S, B, H, D]``: ``S`` paths per sequence, each step drawn given the path so far (its :class:`Carry`).

        Sequences of different lengths continue from their own last valid step. The history's carry is computed
        once per sequence and copied to its paths where :attr:`shares_history`, else once per path.
        """
        x, mask = check_sequences(x, mask, model=self)
        check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        batch, _, dim = x.shape
        lengths = mask.sum(1)
        out = x.new_empty(num_samples, batch, horizon, dim)
        for length in lengths.unique().tolist():
            rows = (lengths == length).nonzero().squeeze(1)
            prefix = x[rows, :length]
            if self.shares_history:
                carry = self.carry_start(prefix).repeated(num_samples)
            else:
                carry = self.carry_start(prefix.repeat(num_samples, 1, 1))
            drawn = x.new_empty(num_samples * len(rows), horizon, dim)  # path s of row b is row s * len(rows) + b
            self._draw_on(carry, drawn)
            out[:, rows] = drawn.reshape(num_samples, len(rows), horizon, dim)
        return out

    def _draw_on(self, carry: Carry, draws: torch.Tensor, means: torch.Tensor | None = None) -> None:
        """Fill ``draws [N, H, D]`` with ``H`` steps drawn after ``carry`` (of ``N`` paths), each carried on, and
        ``means`` (where given, ``[N, H, D]``) with their predictive means. The draws are written in place: small
        tensors kept between steps would scatter the process's memory."""
        for step in range(draws.shape[1]):
            if step:
                carry = self.carry_on(carry, draws[:, step - 1])
            draw, mean = self.carry_draw(carry)
            draws[:, step] = draw
            if means is not None:
                means[:, step] = mean

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The :class:`Carry` of ``paths [N, P, D]`` (``P >= 0``), from which their next step is drawn. By default
        the paths themselves, so that each step reruns :meth:`predictive_distribution` on the whole path; a model
        with a recurrent state overrides this and :meth:`carry_on` to carry the state instead."""
        return Carry(None, paths)

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        """``carry`` after one more step ``x_t [N, D]`` (by default: :meth:`carry_start` of the longer paths)."""
        return self.carry_start(torch.cat([carry.memory, x_t.unsqueeze(1)], 1))

    def carry_through(self, carry: Carry, paths: torch.Tensor) -> Carry:
        """``carry`` after each step of ``paths [N, P, D]`` in turn (:meth:`carry_on`)."""
        for t in range(paths.shape[1]):
            carry = self.carry_on(carry, paths[:, t])
        return carry

    def carry_draw(self, carry: Carry) -> tuple[torch.Tensor, torch.Tensor]:
        """One draw ``[N, D]`` of the next step and its mean ``[N, D]``: from :meth:`step_distribution` of the
        carried state; without one, from :meth:`predictive_distribution` over the paths and a placeholder step."""
        if carry.state is not None:
            exact = self.step_distribution(carry.state)
            return exact.sample(), exact.mean
        paths = carry.memory
        exact = self.predictive_distribution(torch.cat([paths, paths.new_zeros(paths.shape[0], 1, paths.shape[2])], 1))
        return exact.sample()[:, -1], exact.mean[:, -1]

    def step_distribution(self, states: torch.Tensor):
        """The next step's predictive given carried ``states [N, S]``: batch ``[N]``, event ``[D]`` (a model whose
        :meth:`carry_start` carries a state defines it)."""
        raise NotImplementedError(f"{type(self).__name__} carries a state but defines no step_distribution")

    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro program: one observed site ``x`` with batch shape ``[B]`` (padding masked out)."""
        pyro.module(self.pyro_name, self)
        x, mask = check_sequences(x, mask, model=self)
        with pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1):
            pyro.sample("x", self.predictive_distribution(x, mask).mask(mask).to_event(1), obs=x)

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Empty: the model has no latent variables."""
        pyro.module(self.pyro_name, self)

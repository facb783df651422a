"""SRNN: a GRU stacked with a nonlinear state-space layer (Fraccaro et al., 2016).

Generative model, for ``t = 1..T`` with ``u_t = x_{t-1}`` (``x_0 = 0``), ``d_0 = 0``, ``z_0 = 0``::

    d_t = GRU(d_{t-1}, u_t)                                   deterministic
    z_t ~ N(mu_p(z_{t-1}, d_t), diag v_p(z_{t-1}, d_t))       eq. 3
    x_t ~ Bernoulli(logits(z_t, d_t))  or  N(m(z_t, d_t), diag s(z_t, d_t))

Inference network ``q(z_t | z_{t-1}, a_t) = N(mu_q, diag v_q)`` (eq. 10), with

* ``inference="smooth"``: ``a_t = GRU_back(a_{t+1}, [d_t, x_t])``, run backwards from ``a_{T+1} = 0``;
* ``inference="filter"``: ``a_t = NN(d_t, x_t)``;
* ``residual=True`` (Res_q, eq. 12): ``mu_q = mu_p(z_{t-1}, d_t) + NN(z_{t-1}, a_t)``.

``feature_dim`` (the paper's appendix A, for speech and, by "the same architecture", music)
puts one feature net ``phi`` on ``x`` that both the generative and the inference networks
read: ``u_t = phi(x_{t-1})`` (``phi(0)`` at ``t = 1``) feeds the GRU, ``phi(x_t)`` the guide.
Without it (the default) both read raw ``x``.

``first_step_is_input=True`` reads each sequence's first step as the input ``u_1`` only (data files that give
the step before each sequence, as the SRNN authors' do) and models the steps after it: ``d_1 = GRU(0, u_1)``; the
model's :attr:`input_steps` is then 1, and the data marks that step unscored.

``dropout > 0`` (not in the paper) drops units of ``d_t`` wherever the nets read it, and
``input_dropout > 0`` units of ``u_t``, in training mode only: regularisers for small data
sets such as JSB chorales.

The class is a :class:`~ppl_models.inference.state_space.MarkovStateSpace`, so it has the Pyro
programs ``model(x, mask)`` / ``guide(x, mask)`` (sites ``z_t``, ``x_t`` in the plate
``sequences``, ``pyro.markov`` over time) for ``SVI`` with any Pyro ELBO and for
``Predictive``, and the particle-model methods the shared filter drives, with the
guide as the proposal. The deterministic states and every first-layer product with
them run once per sequence (:class:`SRNNContext`), not inside the time loop. Generation
and forecasts come from :class:`~ppl_models.inference.rollout.LatentRollout` (the GRU runs on past
the data); the one-step predictive from the shared filter.
"""

from __future__ import annotations

import torch
from torch import nn

from ppl_models.inference.protocol import Generation
from ppl_models.inference.resampling import gather_particles
from ppl_models.inference.rollout import LatentRollout
from ppl_models.inference.state_space import MarkovStateSpace
from ppl_models.inference.training.carried_state import CarriesState
from ppl_models.inference.validation import check_choice, check_dropout, check_positive_int

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
    reverse_padded,
    shifted_inputs,
)

__all__ = ["SRNN", "SRNNContext", "Generation", "INFERENCE_KINDS"]  # Generation: from ppl_models.inference.protocol

INFERENCE_KINDS = ("smooth", "filter")


class SRNNContext:
    """Per-sequence features of one pass, time-major.

    Attributes:
        d: ``[T, B, rnn_dim]`` deterministic states.
        d_last: ``[B, rnn_dim]``, the last step's ``d_t`` before dropout; z_start: ``[B, latent_dim]``, the ``z`` before
            the first modelled step of a carried pass (``None``: zeros).
        prior_input, emission_input: ``[T, B, hidden_dim]`` first-layer products with ``d_t``.
        posterior_input: ``[T, B, hidden_dim]`` first-layer product with ``a_t`` (computed on
            first use: the generative model alone never needs it).
        prior_steps, emission_steps, posterior_steps: the same, one ``[B, hidden_dim]`` view per step (unbound
            once: indexing the ``[T, ...]`` tensor at each step would make its backward fill a ``[T, ...]`` gradient
            per step).
    """

    def __init__(self, srnn: SRNN, x: torch.Tensor, mask: torch.Tensor):
        self._srnn, self._x, self._mask = srnn, x, mask
        start = None if srnn.carried is None else srnn.carried.start
        self.z_start = None if start is None else start[1]
        d = srnn.deterministic_states(x, start)
        self.d_last = d[:, -1]  # the GRU state a carried pass hands on (before dropout)
        self.d = srnn.dropped(d.transpose(0, 1))
        self.prior_input = srnn.prior_net.project(self.d)
        self.emission_input = srnn.emission_net.project(self.d)
        self.prior_steps, self.emission_steps = self.prior_input.unbind(0), self.emission_input.unbind(0)
        self._posterior_input = self._posterior_steps = None
        self._prior_moments: dict[int, tuple] = {}

    @property
    def posterior_input(self) -> torch.Tensor:
        if self._posterior_input is None:
            a = self._srnn.inference_features(self.d.transpose(0, 1), self._x, self._mask)
            self._posterior_input = self._srnn.posterior_net.project(a.transpose(0, 1))
        return self._posterior_input

    @property
    def posterior_steps(self) -> tuple[torch.Tensor, ...]:
        if self._posterior_steps is None:
            self._posterior_steps = self.posterior_input.unbind(0)
        return self._posterior_steps

    def prior_moments(self, z_prev: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-variance of ``p(z_t | z_{t-1}, d_t)``, ``[..., latent_dim]`` each.

        Remembered for the last ``z_prev`` of each step, so that the Res_q guide and the
        replayed model (or a filter's prior and proposal) share one evaluation.
        """
        seen = self._prior_moments.get(t)
        if seen is not None and seen[0] is z_prev:
            return seen[1]
        # tensor_split, not chunk: with Res_q the mean is read twice, and TorchScript's autodiff
        # (JitTrace_ELBO) fails on chunk's backward there
        moments = self._srnn.prior_net(z_prev, self.prior_steps[t]).tensor_split(2, dim=-1)
        self._prior_moments[t] = (z_prev, moments)
        return moments


class SRNN(CarriesState, EmissionChecks, LatentRollout, MarkovStateSpace):
    """Stochastic recurrent neural network with a structured inference network.

    Args:
        obs_dim: ``D``, the size of ``x_t`` (88 for piano rolls).
        emission: ``"bernoulli"`` (binary data), ``"gaussian"`` (diagonal, real-valued), or for counts
            ``"poisson"`` or ``"negbin"`` (:data:`~ppl_models.nets.EMISSIONS`).
        latent_dim: size of ``z_t`` (100 in the paper's music runs).
        rnn_dim: size of the GRU states ``d_t`` and ``a_t`` (300).
        hidden_dim: units of the feed-forward nets' hidden layers (500).
        num_hidden_layers: hidden layers per net (1).
        inference: ``"smooth"`` (backward GRU) or ``"filter"`` (feed-forward ``a_t``).
        residual: Res_q, the guide mean as the prior mean plus a learned residual.
        dropout: probability in ``[0, 1)`` of dropping each unit of ``d_t`` in training mode
            (independently for every sequence, step and unit; the model and guide of one
            objective share the dropped ``d_t``).
        feature_dim: size of the shared feature net's output ``phi(x_t)`` (a net of
            ``num_hidden_layers`` hidden layers of ``hidden_dim`` units); ``None``: no feature
            net, the GRUs read raw ``x``.
        input_dropout: probability in ``[0, 1)`` of dropping each unit of the GRU input ``u_t``
            in training mode (as ``dropout``; the guide's ``phi(x_t)`` is not dropped).
        first_step_is_input: read each sequence's first step as ``u_1`` only, not modelled (``False``: every valid
            step is modelled, with ``u_1 = 0``).
        count_scale: for a count emission, ``D`` scales ``s`` that the GRUs read the counts by and the rates are
            multiplied by (:class:`~ppl_models.nets.CountScale`); ``None``: the counts as they are.

    Under :class:`~ppl_models.inference.training.CarriesState`'s ``carrying`` (``TrainConfig.streams``: truncated BPTT
    over chunks of continuous streams) the ELBO's pass starts from the carried ``(d, z, x)`` of the previous chunk
    (its last ``d_t``, its last draw of ``z_t``, its last ``x_t``, read as the next ``u_1`` when the first step is not
    an input) and hands on its own.
    """

    uncondition = "teacher-forced"
    description = "SRNN (Fraccaro et al. 2016): GRU + nonlinear SSM, smoothing/filtering guide, Res_q"

    def __init__(
        self,
        obs_dim: int,
        *,
        emission: str = "bernoulli",
        latent_dim: int = 100,
        rnn_dim: int = 300,
        hidden_dim: int = 500,
        num_hidden_layers: int = 1,
        inference: str = "smooth",
        residual: bool = True,
        dropout: float = 0.0,
        feature_dim: int | None = None,
        input_dropout: float = 0.0,
        first_step_is_input: bool = False,
        count_scale=None,
    ):
        super().__init__()
        for name, value in (
            ("obs_dim", obs_dim),
            ("latent_dim", latent_dim),
            ("rnn_dim", rnn_dim),
            ("hidden_dim", hidden_dim),
        ):
            check_positive_int(value, name=name)
        for name, flag in (("residual", residual), ("first_step_is_input", first_step_is_input)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        self.input_steps = int(first_step_is_input)
        self.obs_dim, self.latent_dim = obs_dim, latent_dim
        self.emission_kind = check_choice(emission, EMISSIONS, name="emission")
        self.count_scale = CountScale(emission, obs_dim, count_scale)
        self.guide_kind = check_choice(inference, INFERENCE_KINDS, name="inference")
        self.residual = residual
        self.dropout = check_dropout(dropout)
        self.input_dropout = check_dropout(input_dropout, name="input_dropout")
        layers = num_hidden_layers
        if feature_dim is None:
            self.feature_net, input_dim = None, obs_dim
        else:
            check_positive_int(feature_dim, name="feature_dim")
            self.feature_net, input_dim = SplitInputMLP(0, obs_dim, hidden_dim, feature_dim, layers), feature_dim
        self.rnn = nn.GRU(input_dim, rnn_dim, batch_first=True)
        self.prior_net = SplitInputMLP(latent_dim, rnn_dim, hidden_dim, 2 * latent_dim, layers)
        self.emission_net = SplitInputMLP(latent_dim, rnn_dim, hidden_dim, emission_params(emission, obs_dim), layers)
        if inference == "smooth":
            self.inference_rnn = nn.GRU(rnn_dim + input_dim, rnn_dim, batch_first=True)
        else:
            self.inference_net = SplitInputMLP(input_dim, rnn_dim, hidden_dim, rnn_dim, layers)
        self.posterior_net = SplitInputMLP(latent_dim, rnn_dim, hidden_dim, 2 * latent_dim, layers)

    # --- deterministic features -------------------------------------------------------
    def context(self, x: torch.Tensor, mask: torch.Tensor) -> SRNNContext:
        return SRNNContext(self, x, mask)

    def dropped(self, d: torch.Tensor) -> torch.Tensor:
        """``d_t`` as the nets read it: with dropout in training mode, unchanged otherwise."""
        return nn.functional.dropout(d, self.dropout, training=self.training)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``phi(x)``: ``[..., D] -> [..., feature_dim]`` by the shared feature net (``x`` itself without one), of
        counts scaled by ``count_scale``."""
        x = self.count_scale.inputs(x)
        if self.feature_net is None:
            return x
        return clipped_leaky_relu(self.feature_net(None, self.feature_net.project(x)))

    def gru_input(self, u: torch.Tensor) -> torch.Tensor:
        """The generative GRU's input from raw ``u [..., D]``: ``phi(u)``, with input dropout in training mode."""
        return nn.functional.dropout(self.features(u), self.input_dropout, training=self.training)

    def generative_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """GRU inputs ``[B, T, F]`` for ``u_t = x_{t-1}`` (``x_0 = 0``), from ``x [B, T, D]``."""
        return self.gru_input(shifted_inputs(x))

    def deterministic_states(self, x: torch.Tensor, start: tuple | None = None) -> torch.Tensor:
        """``d [B, T, rnn_dim]`` from ``x [B, T, D]``: ``d_t = GRU(d_{t-1}, u_t)`` from ``d_0 = 0`` at the first
        modelled step (zeros at an input step). ``start``: a carried ``(d, z, x)`` of the previous chunk, ``[B, .]``
        each (its ``d`` starts the GRU; its ``x`` is ``u_1`` where the first step is not an input)."""
        initial = None if start is None else start[0].unsqueeze(0)
        if not self.input_steps:
            u = shifted_inputs(x) if start is None else torch.cat([start[2].unsqueeze(1), x[:, :-1]], 1)
            return self.rnn(self.gru_input(u), initial)[0]
        d, _ = self.rnn(self.gru_input(x), initial)  # the state after reading x_t is the next step's d
        return nn.functional.pad(d[:, :-1], (0, 0, 1, 0))

    def inference_features(self, d: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``a [B, T, rnn_dim]`` from ``d [B, T, rnn_dim]`` and ``x [B, T, D]`` (read as ``phi(x)``).

        Smoothing runs the GRU from each sequence's last valid step back to its first.
        """
        x = self.features(x)
        if self.guide_kind == "filter":
            return self.inference_net(x, self.inference_net.project(d))
        inputs = reverse_padded(torch.cat([d, x], dim=-1), mask)
        a, _ = self.inference_rnn(inputs)
        return reverse_padded(a, mask)

    def _z_prev(self, z_prev, context: SRNNContext) -> torch.Tensor:
        if z_prev is not None:
            return z_prev
        if context.z_start is not None:
            return context.z_start
        return context.d.new_zeros(context.d.shape[1], self.latent_dim)

    # --- the mathematics ----------------------------------------------------------------
    def prior(self, z_prev, t, context: SRNNContext):
        return diagonal_normal(*context.prior_moments(self._z_prev(z_prev, context), t))

    def emission(self, z, t, context: SRNNContext):
        params = self.emission_net(z, context.emission_steps[t])
        return emission_distribution(self.emission_kind, self.count_scale.outputs(params), self.scored_columns)

    def emission_log_prob(self, z, x, mask, context: SRNNContext) -> torch.Tensor:
        """``log p(x | z)`` ``[B]`` of the modelled steps, all at once from their draws ``z [T', B, latent_dim]``."""
        first = self.input_steps
        if self.carried is not None:  # a carried pass (the ELBO's) hands on its last d, z and x
            self.carried.final = (context.d_last, z[-1], x[:, -1])
        params = self.count_scale.outputs(self.emission_net(z, context.emission_input[first:]))
        emission = emission_distribution(self.emission_kind, params, self.scored_columns)
        log_p = emission.log_prob(x.transpose(0, 1)[first:])
        return torch.where(mask.T[first:], log_p, 0.0).sum(0)

    def proposal(self, z_prev, t, x_t, context: SRNNContext):
        z_prev = self._z_prev(z_prev, context)
        mean, log_var = self.posterior_net(z_prev, context.posterior_steps[t]).chunk(2, dim=-1)
        if self.residual:
            mean = mean + context.prior_moments(z_prev, t)[0]
        return diagonal_normal(mean, log_var)

    # --- generation and forecasts (ppl_models.inference.rollout.LatentRollout) ------------------------------
    def rollout_start(self, num_sequences: int) -> dict:
        """GRU state ``d [N, rnn_dim]``, ``z_0 = 0`` and ``u_1 = 0`` before the first step."""
        parameter = next(self.parameters())
        return {
            "d": parameter.new_zeros(num_sequences, self.rnn.hidden_size),
            "z": parameter.new_zeros(num_sequences, self.latent_dim),
            "u": parameter.new_zeros(num_sequences, self.obs_dim),
        }

    def rollout_continue(self, x, mask, result, picks) -> dict:
        """``d`` and ``u`` at each sequence's last valid step, ``z`` of the picked particles ``[S * B, ...]``."""
        rows, last = torch.arange(x.shape[0], device=x.device), mask.sum(1) - 1
        d = self.deterministic_states(x)
        samples = picks.shape[0]

        def repeated(value):  # [B, F] -> [S * B, F]
            return value.expand(samples, *value.shape).reshape(-1, value.shape[-1])

        z = gather_particles(result.state["z"], picks)
        return {"d": repeated(d[rows, last]), "z": z.reshape(-1, z.shape[-1]), "u": repeated(x[rows, last])}

    def rollout_step(self, state: dict, generator: torch.Generator | None, given: torch.Tensor | None = None):
        """One generative step: ``d_t = GRU(d_{t-1}, u_t)``, ``z_t ~ prior``, ``x_t ~ emission`` (its known
        covariates ``given``, :meth:`~ppl_models.inference.rollout.LatentRollout.with_given`), ``u_{t+1} = x_t``."""
        out, d = self.rnn(self.gru_input(state["u"]).unsqueeze(1), state["d"].unsqueeze(0))
        step_input = self.dropped(out.squeeze(1))
        mean, log_var = self.prior_net(state["z"], self.prior_net.project(step_input)).chunk(2, dim=-1)
        z = mean + (0.5 * log_var).exp() * torch.randn(
            mean.shape, generator=generator, device=mean.device, dtype=mean.dtype
        )
        params = self.count_scale.outputs(self.emission_net(z, self.emission_net.project(step_input)))
        x, mean_x = draw_emission(self.emission_kind, params, generator)
        x = self.with_given(x, given)
        return {"d": d.squeeze(0), "z": z, "u": x}, x, mean_x

"""SMC Transformer (Martin et al. 2020): self-attention with latent Gaussian queries, keys, values and outputs.

One recurrent layer (section 3.1, appendix A). The input of step ``t`` is the previous
observation ``u_t = X_{t-1}`` (zero, or a start class, at the first step), so ``q_t`` below is
the paper's ``q(t-1)`` and the window holds the keys and values of ``X_{t-1}, ..., X_{t-Δ}``:

    e_t = E u_t                                                         (embedding, d)
    q_t ~ N(W_q e_t, Σ_q),  k_t ~ N(W_k e_t, Σ_k),  v_t ~ N(W_v e_t, Σ_v)
    π_t^h = softmax_s( q_t^h · k_{t-s}^h / sqrt(r) ),  s = 0..Δ-1        (per head h, r = d / heads)
    z_t^h ~ N( sum_s π_{t,s}^h v_{t-s}^h, Σ_z )
    a_t = LayerNorm(e_t + W_o z_t),  r_t = LayerNorm(a_t + FFN(a_t))
    X_t ~ N(G r_t, Σ_obs)     or     X_t ~ Categorical(softmax(G r_t))

The latent state of a particle is ``(q_t, k_t, v_t, z_t)`` with the window of its last Δ
keys and values; resampling moves the window with its particle, so each window is its
genealogy's. Covariances are scalar or diagonal buffers, fitted by EM (:meth:`em_update`),
not by gradient.

The model is written once, as Pyro programs in the style of ``pyro.infer.SMCFilter``:
:meth:`init_program` and :meth:`step_program` (noises as sample sites ``q, k, v, z`` in the
``particles`` x ``sequences`` plates, the observation as the observed site ``x``). The
shared :class:`~ppl_models.inference.particle_filter.ParticleFilter` runs them with the bootstrap
proposal (the module's ``start`` comes from
:class:`~ppl_models.inference.pyro_programs.ParticlePrograms`; its ``step``, ``simulate`` and ``predict_mean`` run the
step program's body without Pyro's traces, with the same draws and log-densities); training uses its
``stop_weights`` mode (Fisher's identity) inside :class:`~ppl_models.inference.objectives.SMCBound`,
which calls :meth:`em_update` after each training batch. :attr:`programs` and
:attr:`guide_programs` run under ``pyro.infer.SMCFilter`` itself, and :meth:`model` is the
whole-sequence program for ``pyro.infer.Predictive``. The EM fit of the covariances is in
:mod:`ppl_models.smc_covariance_em`.
"""

from __future__ import annotations

import math
from copy import deepcopy

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.contrib.autoname import scope
from pyro.poutine.runtime import get_plates
from torch import nn

from ppl_models.inference.defaults import EM_PARTICLES, METHOD_PARTICLES
from ppl_models.inference.particle_filter import ParticleFilter, Step
from ppl_models.inference.protocol import Generation, SequenceModel, particle_forecast
from ppl_models.inference.pyro_programs import ParticlePrograms
from ppl_models.inference.state_space import SEQUENCE_PLATE
from ppl_models.inference.traces import PARTICLE_PLATE
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences

from .nets import refuse_counts
from .smc_covariance_em import LATENT_SITES, CovarianceEM

__all__ = ["SMCTransformer", "LATENT_SITES"]

EMISSIONS = ("gaussian", "categorical")
COVARIANCES = ("scalar", "diagonal")


class SMCTransformer(CovarianceEM, ParticlePrograms, SequenceModel):
    """The SMC Transformer of section 3.1, as a particle model and Pyro programs.

    The particle filter proposes from the model (``guide_proposes = False``: bootstrap).

    An observation so large that the attention overflows (products of two embeddings of it:
    near 1e30 in float32) leaves the particles' states NaN after it: the filter then raises one
    ``ValueError`` naming the first step it cannot score (rescale the data or use float64).

    Args:
        obs_dim: ``D`` (``1`` for ``emission="categorical"``: the class index as a float).
        d_model: ``d``, the size of embeddings, queries, keys, values and ``z``.
        num_heads: attention heads; ``d_model`` must be a multiple of it.
        window: ``Δ``, how many past keys and values a query attends to.
        ff_dim: hidden size of the feed-forward block (default ``4 d``).
        emission: ``"gaussian"`` (regression) or ``"categorical"``.
        num_classes: number of classes for the categorical emission.
        covariance: ``"scalar"`` or ``"diagonal"`` covariances ``Σ_q, Σ_k, Σ_v, Σ_z, Σ_obs``.
        init_variance: starting value of the latent covariances (``0`` makes the model
            deterministic: the attention forecaster the SMC Transformer is built on).
        init_obs_variance: starting value of ``Σ_obs`` and of ``Σ_obs,1``, the variance of the
            first observation, which is predicted from no past (its marginal law) and so gets a
            covariance of its own; EM fits ``Σ_obs`` to the residuals of the later steps only.
        em_exponent: EM step size ``η_p = p^-em_exponent`` at the ``p``-th update (0.6 in the paper).
    """

    uncondition = "free"
    guide_proposes = False
    pyro_prefix = "smc_transformer"
    capabilities = frozenset({"programs", "particles", "predictive", "generate", "forecast"})
    limitations = {
        "exact": "the latent attention states make log p(x) intractable: it is scored by SMC-K",
        "latent": "its guide is the bootstrap proposal (the prior of the latent sites), so an ELBO or "
        "IWAE bound would only score the prior's draws: it is trained and scored by SMC-K",
    }
    description = (
        "SMC Transformer (Martin et al. 2020): latent Gaussian queries, keys, values and attention "
        "outputs; trained by SMC with Fisher's identity and EM covariances"
    )

    def __init__(
        self,
        obs_dim: int,
        d_model: int = 16,
        num_heads: int = 1,
        window: int = 24,
        ff_dim: int | None = None,
        emission: str = "gaussian",
        num_classes: int | None = None,
        covariance: str = "scalar",
        init_variance: float = 0.1,
        init_obs_variance: float = 1.0,
        em_exponent: float = 0.6,
    ):
        super().__init__()
        self.obs_dim = check_positive_int(obs_dim, name="obs_dim")
        self.d_model = check_positive_int(d_model, name="d_model")
        self.num_heads = check_positive_int(num_heads, name="num_heads")
        if d_model % num_heads:
            raise ValueError(f"d_model must be a multiple of num_heads, got d_model={d_model}, num_heads={num_heads}")
        self.window = check_positive_int(window, name="window")
        ff_dim = 4 * d_model if ff_dim is None else check_positive_int(ff_dim, name="ff_dim")
        why = "its observation noise is Gaussian by construction (the EM fit of the noise covariances assumes it)"
        refuse_counts(emission, "SMCTransformer", why)
        self.emission = check_choice(emission, EMISSIONS, name="emission")
        self.covariance = check_choice(covariance, COVARIANCES, name="covariance")
        for name, value in (
            ("init_variance", init_variance),
            ("init_obs_variance", init_obs_variance),
            ("em_exponent", em_exponent),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if init_obs_variance == 0:
            raise ValueError("init_obs_variance must be > 0: the observation density needs a positive variance")
        self.em_exponent = float(em_exponent)
        if self.emission == "categorical":
            if obs_dim != 1:
                raise ValueError(
                    f"a categorical emission observes one class index per step: obs_dim must be 1, got {obs_dim}"
                )
            self.num_classes = check_positive_int(num_classes, name="num_classes")
            self.embed = nn.Embedding(self.num_classes + 1, d_model)  # the last index is the start token
            out_dim = self.num_classes
        else:
            if num_classes is not None:
                raise ValueError("num_classes is only for emission='categorical'")
            self.num_classes = None
            self.embed = nn.Linear(obs_dim, d_model)
            out_dim = obs_dim
        self.query, self.key, self.value = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.attention_out = nn.Linear(d_model, d_model)
        self.norm_attention, self.norm_output = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, ff_dim), nn.ReLU(), nn.Linear(ff_dim, d_model))
        self.readout = nn.Linear(d_model, out_dim)
        sizes = {"q": d_model, "k": d_model, "v": d_model, "z": d_model}
        if self.emission == "gaussian":
            sizes["x"] = obs_dim
        self.noise_sizes = sizes
        for name, size in sizes.items():
            value = init_obs_variance if name == "x" else init_variance
            self.register_buffer(f"var_{name}", torch.full((1 if covariance == "scalar" else size,), float(value)))
        if self.emission == "gaussian":
            self.register_buffer("var_x_first", torch.full_like(self.var_x, float(init_obs_variance)))
        self.register_buffer("em_updates", torch.zeros((), dtype=torch.long))

    # --- the Pyro programs -----------------------------------------------------------------
    def init_program(self, state: dict, x: torch.Tensor) -> None:
        """Fill ``state`` for a batch ``x [B, T, D]``: an empty window and the start input, ``[K, B, ...]``.

        ``K`` is the enclosing particle plate's size (1 outside one); vectorised plates further out
        (``Predictive(parallel=True)``'s) lead every tensor. No sample site: nothing for autoguides.
        """
        shape = (*_outer_plate_shape(), x.shape[0])  # [..., K, B]
        state["input"] = self._start_input(x, x.shape[0]).expand(*shape, self.obs_dim)
        state["keys"] = x.new_zeros(*shape, self.window, self.d_model)
        state["values"] = x.new_zeros(*shape, self.window, self.d_model)
        state["filled"] = x.new_zeros(*shape, self.window)
        for name in LATENT_SITES:
            state[name] = x.new_zeros(*shape, self.d_model)
        for name, size in self.noise_sizes.items():
            state[f"sq_{name}"] = x.new_zeros(*shape, size)
        if self.emission == "gaussian":
            state["sq_x_first"] = x.new_zeros(*shape, self.obs_dim)

    def step_program(self, state: dict, x_t: torch.Tensor) -> None:
        """One step: sample ``q, k, v, z`` given the window, score (or draw) ``x``; update ``state``.

        ``state`` tensors are ``[..., K, B, ...]``; ``x_t`` is ``[B, D]``.
        """
        with pyro.plate(SEQUENCE_PLATE, state["input"].shape[-2], dim=-1):
            self._advance(state, x_t, pyro.sample)

    def step(self, state, t, x_t, context, *, reparameterize: bool = True) -> Step:
        """The particle filter's step, computed without Pyro's traces: :meth:`step_program`'s draws (the same random
        numbers, in the same order), new state and log-densities (``log_weight``: the observation's; ``log_joint``:
        every site's, added in the trace's order). ``reparameterize=False`` (Fisher's identity) draws the latents as
        constants."""
        sites = _DirectSites(reparameterize)
        new_state = dict(state)
        self._advance(new_state, x_t, sites)
        log_weight, log_joint = 0.0 + sites.observed, sites.latent + sites.observed
        if t == 0:
            log_weight, log_joint = log_weight + context["init_weight"], log_joint + context["init_joint"]
        return Step(new_state, log_weight, log_joint)

    def _advance(self, state: dict, x_t: torch.Tensor, site) -> None:
        """:meth:`step_program`'s body; ``site(name, distribution, obs=None)`` draws (or observes) each site."""
        u = state["input"]
        shape = u.shape[:-1]  # [..., K, B]
        e = self._embedding(u)
        first = state["filled"][..., -1:] == 0  # [..., K, B, 1]: no past yet
        means = {"q": self.query(e), "k": self.key(e), "v": self.value(e)}
        latent = {name: site(name, self._latent_law(name, means[name])) for name in ("q", "k", "v")}
        keys = torch.cat([state["keys"][..., 1:, :], latent["k"].unsqueeze(-2)], -2)
        values = torch.cat([state["values"][..., 1:, :], latent["v"].unsqueeze(-2)], -2)
        filled = torch.cat([state["filled"][..., 1:], state["filled"].new_ones(*shape, 1)], -1)
        means["z"] = self._attend(latent["q"], keys, values, filled)
        latent["z"] = site("z", self._latent_law("z", means["z"]))
        observation = self._emission(self._output(e, latent["z"]), first)
        x = site("x", observation, obs=self._observed(x_t))
        state.update(latent, keys=keys, values=values, filled=filled, input=self._as_input(x, shape))
        squares = {name: (latent[name] - means[name]).detach().square() for name in LATENT_SITES}
        if self.emission == "gaussian":
            square = (state["input"] - observation.base_dist.loc).detach().square()
            squares["x"], squares["x_first"] = square.masked_fill(first, 0.0), square.masked_fill(~first, 0.0)
        for name, square in squares.items():
            state[f"sq_{name}"] = state[f"sq_{name}"] + square

    def proposal_program(self, state: dict, x_t: torch.Tensor) -> None:
        """The bootstrap proposal as a guide step: the step's latent sites, ``state`` untouched."""
        poutine.block(self.step_program, hide_types=["observe"])(dict(state), x_t)

    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Whole-sequence program (one particle): sites ``t{t}/q, .../z, .../x``; returns ``x [B, T, D]``.

        Under ``pyro.infer.Predictive`` (or ``poutine.uncondition``) it simulates sequences
        of ``x``'s shape; conditioned, its log-density is the complete-data likelihood.
        """
        pyro.module(self.pyro_name, self)
        x, mask = check_sequences(x, mask, model=self)
        state: dict = {}
        draws = []
        with pyro.plate(PARTICLE_PLATE, 1, dim=-2):
            self.init_program(state, x)
            for t in range(x.shape[1]):
                with scope(prefix=f"t{t}"), poutine.mask(mask=mask[:, t]):
                    self.step_program(state, x[:, t])
                draws.append(state["input"][..., 0, :, :])  # the one particle: [..., B, D]
        return torch.stack(draws, -2)

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """The bootstrap proposal as a whole-sequence program: :meth:`model`'s latent sites from their prior."""
        poutine.block(self.model, hide_types=["observe"])(x, mask)

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
        """``num_steps`` steps simulated by :meth:`model` (unconditioned), or after ``prefix [B, P, D]``.

        A prefix is continued by :func:`~ppl_models.inference.protocol.particle_forecast` (one path per
        sequence from the filter's posterior, ``num_particles``). ``mean`` is ``None``: the
        simulator gives draws only. Draws use Pyro's random numbers (``generator`` serves the filter).
        """
        check_positive_int(num_steps, name="num_steps")
        if prefix is None:
            blank = next(self.parameters()).new_zeros(
                check_positive_int(num_sequences, name="num_sequences"), num_steps, self.obs_dim
            )
            return Generation(poutine.uncondition(self.model)(blank), None)
        prefix, _ = self.check_particle_input(prefix, None)
        ahead = particle_forecast(self, prefix, None, num_steps, 1, num_particles=num_particles, generator=generator)
        return Generation(torch.cat([prefix, ahead[0]], 1), None)

    # --- particle-model interface (for ParticleFilter), from ParticlePrograms ---------------
    def check_particle_input(self, x, mask):
        x, mask = check_sequences(x, mask, model=self)
        if self.emission == "categorical":
            _check_classes(x, self.num_classes)
        return x, mask

    def predict_mean(self, state, t, context) -> torch.Tensor:
        """``[K, B, D]``: ``E[x_t | particle]`` estimated with one draw of the step's latent noise.

        For the categorical emission ``x_t`` is the class index (a float), so this is the mean index
        ``sum_c c p_c``; the class probabilities themselves come from the predictive draws.
        """
        observation = self._unconditioned_step(state, context)[1].observation
        if self.emission == "gaussian":
            return observation.mean
        probs = observation.probs
        return (probs * torch.arange(self.num_classes, dtype=probs.dtype, device=probs.device)).sum(-1, keepdim=True)

    def simulate(self, state, t, context):
        """One draw ``(state, x_t [S, B, D])`` from the model; ``x_t`` as the next input (a float class index)."""
        new_state, _ = self._unconditioned_step(state, context)
        return new_state, new_state["input"]

    def _unconditioned_step(self, state, context) -> tuple[dict, _DrawnSites]:
        """:meth:`step_program` with its observation drawn, as ``poutine.uncondition`` runs it, without the trace:
        the new state and the step's sites (the same draws, in the same order)."""
        new_state, sites = dict(state), _DrawnSites()
        self._advance(new_state, context["blank"], sites)
        return new_state, sites

    # --- per-sequence covariances (section 4.2) -------------------------------------------
    @torch.no_grad()
    def fine_tuned(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        iterations: int = 30,
        num_particles: int = EM_PARTICLES,
        sites=None,
        generator: torch.Generator | None = None,
    ) -> SMCTransformer:
        """A copy with covariances of its own for each sequence of ``x [B, T, D]`` (buffers ``[B, size]``).

        The paper's section 4.2 fits a global variance in training, then the noise of each test
        series by ``iterations`` EM steps on its observed days: the copy starts from this model's
        covariances, restarts the step count (``η_1 = 1``) and runs a particle filter of
        ``num_particles`` on ``x`` before each :meth:`em_update` (of ``sites``, default all).
        Use the copy on these ``B`` sequences, in this order, only; the weights are shared.
        """
        check_positive_int(iterations, name="iterations")
        check_positive_int(num_particles, name="num_particles")
        x, mask = check_sequences(x, mask, model=self)
        names = self._check_sites(sites)
        copy = deepcopy(self)
        for name in names:
            setattr(copy, f"var_{name}", getattr(self, f"var_{name}").expand(x.shape[0], -1).clone())
        copy.em_updates.zero_()
        particle_filter = ParticleFilter(num_particles, generator=generator)
        for _ in range(iterations):
            copy.em_update(particle_filter.run(copy, x, mask), sites=names)
        return copy

    # --- the network -------------------------------------------------------------------------
    def _start_input(self, x: torch.Tensor, batch: int) -> torch.Tensor:
        if self.emission == "categorical":
            return x.new_full((batch, 1), float(self.num_classes))
        return x.new_zeros(batch, self.obs_dim)

    def _embedding(self, u: torch.Tensor) -> torch.Tensor:
        """``[K, B, D] -> [K, B, d]``."""
        if self.emission == "categorical":
            return self.embed(u[..., 0].long())
        return self.embed(u)

    def _latent_law(self, name: str, mean: torch.Tensor):
        """``N(mean, Σ_name)`` with event shape ``[d]``."""
        return dist.Normal(mean, getattr(self, f"var_{name}").sqrt().expand_as(mean)).to_event(1)

    def _attend(self, q, keys, values, filled) -> torch.Tensor:
        """Mean of ``z``: ``q [K, B, d]`` over ``keys, values [K, B, Δ, d]`` where ``filled [K, B, Δ]``."""
        heads, size = self.num_heads, self.d_model // self.num_heads
        q = q.reshape(q.shape[:-1] + (heads, 1, size))
        keys = keys.reshape(keys.shape[:-1] + (heads, size)).transpose(-2, -3)  # [K, B, H, Δ, r]
        values = values.reshape(values.shape[:-1] + (heads, size)).transpose(-2, -3)
        scores = (q * keys).sum(-1) / math.sqrt(size)  # [K, B, H, Δ]
        scores = scores.masked_fill(filled.unsqueeze(-2) == 0, float("-inf"))
        attention = torch.softmax(scores, -1).unsqueeze(-1)
        return (attention * values).sum(-2).flatten(-2)

    def _output(self, e: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``r_t``: residual and layer normalisation around attention, then the feed-forward block."""
        a = self.norm_attention(e + self.attention_out(z))
        return self.norm_output(a + self.feed_forward(a))

    def _emission(self, r: torch.Tensor, first: torch.Tensor):
        """``p(X_t | r_t)``; ``first [K, B, 1]`` marks sequences at their first step (variance ``Σ_obs,1``)."""
        if self.emission == "categorical":
            return dist.Categorical(logits=self.readout(r))
        mean = self.readout(r)
        variance = torch.where(first, self.var_x_first, self.var_x)
        return dist.Normal(mean, variance.sqrt().expand_as(mean)).to_event(1)

    def _observed(self, x_t: torch.Tensor) -> torch.Tensor:
        return x_t[..., 0].long() if self.emission == "categorical" else x_t

    def _as_input(self, x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        """The observed or drawn ``x`` (``[B, D]``, ``[..., K, B, D]`` or class indices) as the next input.

        ``shape``: ``[..., K, B]``; returns ``[..., K, B, D]``.
        """
        if self.emission == "categorical":
            x = x.to(torch.get_default_dtype()).unsqueeze(-1)
        return x.expand(*shape, self.obs_dim)


class _DirectSites:
    """The sites of one step outside Pyro: latent draws (``rsample``, detached for Fisher's identity, as
    :class:`~ppl_models.inference.traces.DetachLatents` does) and the sums of the latent and observed log-densities."""

    def __init__(self, reparameterize: bool):
        self.reparameterize = reparameterize
        self.latent: torch.Tensor | float = 0.0
        self.observed: torch.Tensor | float = 0.0

    def __call__(self, name: str, distribution, obs: torch.Tensor | None = None) -> torch.Tensor:
        if obs is not None:
            self.observed = self.observed + distribution.log_prob(obs)
            return obs
        value = distribution.rsample()
        value = value if self.reparameterize else value.detach()
        self.latent = self.latent + distribution.log_prob(value)
        return value


class _DrawnSites:
    """The sites of one step with the observation drawn too (``poutine.uncondition``), outside Pyro: each value from
    the distribution's call (``rsample`` where it has one, as ``pyro.sample`` draws); the observation's law is kept."""

    observation = None

    def __call__(self, name: str, distribution, obs: torch.Tensor | None = None) -> torch.Tensor:
        if obs is not None:
            self.observation = distribution
        return distribution()


def _outer_plate_shape() -> tuple[int, ...]:
    """Sizes of the enclosing plates outside the sequence plate (dims -2, -3, ...), outermost first.

    The particle plate sits at dim -2; ``(1,)`` outside any plate.
    """
    sizes = {frame.dim: frame.size for frame in get_plates() if frame.dim is not None and frame.dim < -1}
    if not sizes:
        return (1,)
    return tuple(sizes.get(dim, 1) for dim in range(min(sizes), -1))


def _check_classes(x: torch.Tensor, num_classes: int) -> None:
    valid = (x == x.round()) & (x >= 0) & (x < num_classes)
    if not bool(valid.all()):
        raise ValueError(f"x must hold class indices 0..{num_classes - 1} for a categorical emission")

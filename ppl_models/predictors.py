"""Deterministic-state one-step forecasters with a Gaussian (or categorical) predictive distribution.

A subclass defines :meth:`OneStepPredictor.states`: the state ``s_t [B, T, S]`` that
summarises ``x_{<t}``. The base class decodes it linearly and adds a learned per-feature
noise scale:

    x_t ~ N(decoder(s_t), diag(sigma^2)),

whose start (:meth:`OneStepPredictor.initialize`) is the root-mean-square residual of the
initial one-step predictions on the training data. With ``emission="categorical"`` the data are
one-hot symbols ``x_t [K]`` (characters, say) and the decoder gives the logits of a categorical,

    x_t ~ Categorical(softmax(decoder(s_t))),

with no noise to fit; :func:`softmax_regression` fits such a decoder to given states. After training,
:meth:`OneStepPredictor.calibrate` refits the noise by maximum likelihood to the residuals
of the trained means on held-out data (:mod:`ppl_models.predictive_noise`): by default a
scale log-linear in the state and a shape chosen by held-out likelihood,

    x_t ~ decoder(s_t) + exp(b + W^T s_t) * eps,   eps ~ StudentT(nu) or the residuals' smoothed law,

for errors that are heavy-tailed, skewed or multimodal and larger in some states than
others; the runner does so on the validation split before every evaluation.

With no latent variables the log-likelihood is exact (:class:`ExactPredictiveModel`, also
the base of :class:`~ppl_models.rnn_baseline.GRUBaseline`), so these models train with the
``exact`` objective; their Pyro ``model`` scores all steps in one observed site ``x`` and
their ``guide`` is empty. :class:`RecurrentPredictor` is the section-6 baseline of the
PSRNN paper (linear encoder, Elman RNN / GRU / LSTM, linear decoder, Xavier init);
:class:`~ppl_models.psrnn.PSRNN` is the other subclass.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pyro
import pyro.distributions as dist
import torch
from torch import nn

from ppl_models.inference.protocol import (
    DEFAULT_PARTICLES,
    Generation,
    OneStepPredictive,
    SequenceModel,
    check_num_samples,
    exact_predictive,
)
from ppl_models.inference.saturation import saturated_sum
from ppl_models.inference.state_space import SEQUENCE_PLATE
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences, value_checks_enabled

from .predictive_noise import bounded_log_scale, check_refit, fit_noise, noise_distribution, parse_refit

__all__ = [
    "ExactPredictiveModel",
    "OneStepPredictor",
    "RecurrentPredictor",
    "RECURRENT_CELLS",
    "PREDICTOR_EMISSIONS",
    "Carry",
    "check_one_hot",
    "recurrent_carry",
    "softmax_regression",
]

RECURRENT_CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
#: the one-step predictors' emissions: real values, or one-hot symbols
PREDICTOR_EMISSIONS = ("gaussian", "categorical")


class Carry(NamedTuple):
    """What a forecast carries from one drawn step to the next, for each path: ``state [N, S]``, from which the next
    step is drawn (``None``: the predictive over the paths in ``memory`` decides), and ``memory``, what carries the
    state on (a recurrent module's hidden state; by default the paths so far ``[N, P, D]``, rerun at every step).
    Its tensors hold the ``N`` rows first."""

    state: torch.Tensor | None
    memory: object

    def repeated(self, copies: int) -> Carry:
        """The carry of ``copies`` paths per row, sample-major (path ``s`` of row ``b`` is row ``s N + b``): every
        tensor in it holds its rows first."""
        return _map_tensors(lambda tensor: tensor.repeat(copies, *[1] * (tensor.dim() - 1)), self)

    @property
    def nbytes(self) -> int:
        """The bytes of the carry's tensors."""
        return sum(tensor.nbytes for tensor in _tensors(self))


def recurrent_carry(rnn: nn.RNNBase, inputs: torch.Tensor, carry: Carry | None = None) -> Carry:
    """The carry of torch recurrent module ``rnn`` (batch first) after ``inputs [N, P, I]``, on from ``carry``
    (``None``: the zero state): its last output ``[N, S]`` (zeros for ``P = 0``) and its hidden state, rows first
    (``[N, layers, S]``, a pair of them for an LSTM)."""
    if not inputs.shape[1]:
        return Carry(inputs.new_zeros(inputs.shape[0], rnn.hidden_size), None)
    hidden = None if carry is None else _map_tensors(lambda tensor: tensor.transpose(0, 1).contiguous(), carry.memory)
    outputs, hidden = rnn(inputs, hidden)
    return Carry(outputs[:, -1], _map_tensors(lambda tensor: tensor.transpose(0, 1), hidden))


def _tensors(tree):
    """The tensors in ``tree`` (a :class:`Carry`, tuples and lists)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _tensors(item)


def _map_tensors(function, tree):
    """``tree`` (tensors in a :class:`Carry`, tuples and lists) with ``function`` applied to each of its tensors."""
    if isinstance(tree, torch.Tensor):
        return function(tree)
    if isinstance(tree, Carry):
        return Carry(*(_map_tensors(function, item) for item in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map_tensors(function, item) for item in tree)
    return tree


def check_one_hot(x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
    """Raise ``ValueError`` unless every valid step of ``x [B, T, K]`` is one-hot (a categorical emission's data).

    A check of values: skipped where they must not be read (inside a CUDA-graph capture).
    """
    if not value_checks_enabled():
        return
    valid = x[mask]
    bad = ~(((valid == 0) | (valid == 1)).all(-1) & (valid.sum(-1) == 1))
    if bool(bad.any()):
        row, step = (int(i) for i in (mask.nonzero()[bad.nonzero()[0, 0]]))
        raise ValueError(
            f"{name} must be one-hot (one 1, the rest 0, at every valid step) for a categorical "
            f"emission, got {valid[bad][0].tolist()[:8]}... at sequence {row}, step {step}"
        )


def softmax_regression(
    inputs: torch.Tensor, labels: torch.Tensor, num_classes: int, ridge: float = 1e-2, iterations: int = 500
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression: ``(W [K, p], b [K])`` minimising
    ``mean_n -log softmax(W u_n + b)[y_n] + ridge * |W|_F^2`` for ``inputs u [n, p]``, ``labels y [n]`` in ``0..K-1``.

    L-BFGS from ``W = 0`` and ``b`` the log of the add-one class frequencies (the classes' shares alone).
    """
    counts = torch.bincount(labels, minlength=num_classes).to(inputs.dtype)
    bias = (counts + 1).log().sub((counts + 1).sum().log()).requires_grad_()
    weight = inputs.new_zeros(num_classes, inputs.shape[1], requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=iterations, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(inputs @ weight.T + bias, labels) + ridge * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return weight.detach(), bias.detach()


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

    #: the longest sequence the model reads (a learned position table's length); ``None``: any
    max_steps: int | None = None
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
        num_particles: int = DEFAULT_PARTICLES,
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
        self.check_room(start.shape[1], num_steps, name="num_steps")
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
        num_particles: int = DEFAULT_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, D]``: ``S`` paths per sequence, each step drawn given the path so far (its :class:`Carry`).

        Sequences of different lengths continue from their own last valid step. The history's carry is computed
        once per sequence and copied to its paths where :attr:`shares_history`, else once per path. A horizon past
        :attr:`max_steps` is refused before any step is drawn.
        """
        x, mask = check_sequences(x, mask, model=self)
        check_positive_int(horizon, name="horizon")
        num_samples = check_num_samples(num_samples, allow_zero=False)
        batch, _, dim = x.shape
        lengths = mask.sum(1)
        self.check_room(int(lengths.max()), horizon, name="horizon")
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

    def check_room(self, start: int, steps: int, *, name: str) -> None:
        """Refuse ``steps`` more steps after ``start`` where the sequence would outgrow :attr:`max_steps`."""
        if self.max_steps is not None and start + steps > self.max_steps:
            raise ValueError(
                f"{name}: {type(self).__name__} reads sequences of at most {self.max_steps} steps: "
                f"after {start} steps at most {max(self.max_steps - start, 0)} more fit, got "
                f"{steps}"
            )

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


class OneStepPredictor(ExactPredictiveModel):
    """Base class: ``states`` -> linear decoder -> diagonal Gaussian with learned scale, or a categorical.

    Args:
        obs_dim: ``D`` (``K`` symbols for a categorical emission).
        state_dim: ``S``, the size of what :meth:`states` returns.
        emission: ``"gaussian"`` (real values) or ``"categorical"`` (one-hot ``x_t [K]``: the decoder's outputs
            are the logits; there is no noise, so the noise parameters are empty and the refits do nothing).
    """

    def __init__(self, obs_dim: int, state_dim: int, emission: str = "gaussian"):
        super().__init__()
        self.obs_dim = check_positive_int(obs_dim, name="obs_dim")
        self.state_dim = check_positive_int(state_dim, name="state_dim")
        self.emission_kind = check_choice(emission, PREDICTOR_EMISSIONS, name="emission")
        self.decoder = nn.Linear(state_dim, obs_dim)
        self.log_noise_scale = nn.Parameter(torch.zeros(0 if self.categorical else obs_dim))
        # set by calibrate (ppl_models.predictive_noise.NoiseFit): the log-scale's weights on the state [S, D],
        # Student-t degrees of freedom [D] (inf otherwise), an empirical shape's points [D, Q] and bandwidth [D]
        # (Q = 0 otherwise); not in the state dict (checkpoints keep their keys): the runner refits after loading
        self.register_buffer("noise_weight", torch.zeros(state_dim, obs_dim), persistent=False)
        self.register_buffer("noise_df", torch.full((obs_dim,), math.inf), persistent=False)
        self.register_buffer("noise_shape_points", torch.zeros(obs_dim, 0), persistent=False)
        self.register_buffer("noise_bandwidth", torch.zeros(obs_dim), persistent=False)
        # the ranges [2, D] and [2, S] the state-dependent log-scale and the state are clamped to (their ranges
        # on the refit's data; unbounded otherwise)
        unbounded = torch.tensor([-math.inf, math.inf])[:, None]
        self.register_buffer("noise_log_scale_range", unbounded.repeat(1, obs_dim), persistent=False)
        self.register_buffer("noise_state_range", unbounded.repeat(1, state_dim), persistent=False)
        #: the last checked refit's verdict (:meth:`calibrate` with ``check=True``), else ``None``
        self.refit_check = None

    @property
    def categorical(self) -> bool:
        """Whether the emission is categorical (one-hot data, logits from the decoder)."""
        return self.emission_kind == "categorical"

    def check_values(self, x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
        if self.categorical:
            check_one_hot(x, mask, name=name)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, D] -> [B, T, S]``: ``s_t`` from ``x_{<t}`` only; subclasses define it."""
        raise NotImplementedError

    def initialize(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> OneStepPredictor:
        """Start the noise scale at the residuals of the initial one-step predictions (:meth:`fit_noise_scale`).

        A subclass sets its other parameters first and then calls this.
        """
        return self.fit_noise_scale(x, mask)

    @torch.no_grad()
    def fit_noise_scale(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> OneStepPredictor:
        """Set the noise scale to the residuals of the current one-step predictions on ``x [B, T, D]``.

        ``sigma_d = sqrt(mean_t (x_td - mean_td)^2)`` over the valid steps: the maximum-likelihood
        scale for the current means, floored at ``1e-3``; the noise becomes a Gaussian of constant scale.
        A categorical emission has no noise: the model is left as it is.
        """
        return self if self.categorical else self.calibrate(x, mask, "normal")

    @torch.no_grad()
    def calibrate(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, refit: str = "auto+state", *, check: bool = False
    ) -> OneStepPredictor:
        """Refit the noise by maximum likelihood to the residuals of the current means on ``x [B, T, D]``.

        ``refit`` (:data:`~ppl_models.inference.protocol.NOISE_REFITS`): ``"normal"`` (a constant
        scale per feature, the closed form), ``"student-t"`` (also degrees of freedom per feature,
        for heavy tails), ``"empirical"`` (the shape of the standardised residuals, smoothed:
        skewed or multimodal errors), ``"auto"`` (Student-t or empirical, whichever has the higher
        held-out likelihood in a two-fold split of ``x``), each also ``"+state"``: the log-scale linear in the state
        ``s_t``, for errors larger in some states (not extrapolated: the state and the log-scale are
        clamped to their ranges on ``x``). Use held-out data: on the training data the residuals
        understate the errors. The means are left as they are.

        ``check=True`` (the runner's choice) keeps the refit only if it beats the noise in place on
        data it was not fit to (:func:`~ppl_models.predictive_noise.check_refit`: fit on one half of
        the valid steps of ``x``, in sequence order, scored on the other, both ways; at least 4
        steps) and then refits on all of ``x``; otherwise the noise is left as it was. The verdict
        is in :attr:`refit_check` (``{"refit", "nlpd_refit", "nlpd_unrefit", "kept"}``, nats per step).
        """
        if self.categorical:
            raise ValueError("calibrate: a categorical emission has no noise to refit")
        shape, on_state = parse_refit(refit)
        if not isinstance(check, bool):
            raise TypeError(f"check must be a bool, got {check!r}")
        x, mask = check_sequences(x, mask, model=self)
        states = self.states(x)
        residuals, features = (x - self.decoder(states))[mask], states[mask] if on_state else None
        self.refit_check = None
        if check:
            unrefit = self.noise_distribution(torch.zeros_like(residuals), states[mask]).log_prob(residuals).sum(-1)
            verdict = check_refit(residuals, features, unrefit, shape=shape)
            self.refit_check = {"refit": refit, **vars(verdict)}
            if not verdict.kept:
                return self
        fit = fit_noise(residuals, features, shape=shape)
        self.log_noise_scale.copy_(fit.log_scale)
        self.noise_weight.copy_(fit.weight if on_state else torch.zeros_like(self.noise_weight))
        self.noise_log_scale_range.copy_(fit.log_scale_range)
        self.noise_state_range.copy_(
            fit.feature_range
            if on_state
            else self.noise_state_range.new_tensor([[-math.inf], [math.inf]]).expand_as(self.noise_state_range)
        )
        self.noise_df.copy_(fit.df)
        self.noise_shape_points = fit.shape_points.to(self.noise_weight)
        self.noise_bandwidth.copy_(fit.bandwidth)
        return self

    @torch.no_grad()
    def refit_noise(self, x: torch.Tensor, mask: torch.Tensor | None, how: str) -> dict:
        """:meth:`calibrate` on the validation split ``x [B, T, D]``, checked (``check=True``): the protocol's hook.

        Returns the verdict (``refit``, ``kept``, ``nlpd_refit``, ``nlpd_unrefit`` in nats per step) and the noise
        in use after it. Fewer than 4 valid steps cannot judge a refit: the trained noise is kept and the reason
        recorded. A categorical emission has no noise: ``None``, and the model is left as it is.
        """
        parse_refit(how)
        if self.categorical:
            return None
        device = next(self.parameters()).device
        x, mask = check_sequences(x, mask, name="valid", model=self)
        self.eval()
        if int(mask.sum()) < 4:
            return {
                "refit": how,
                "kept": False,
                "reason": f"{int(mask.sum())} validation steps: at least 4 are "
                "needed to check a refit on held-out steps; the trained noise is kept",
            }
        self.calibrate(x.to(device), mask.to(device), how, check=True)
        return {
            **self.refit_check,
            "split": "valid",
            "check": "two-fold on the validation split",
            "log_scale": self.log_noise_scale.tolist(),
            "state_weight": self.noise_weight.tolist(),
            "log_scale_range": self.noise_log_scale_range.tolist(),
            "df": self.noise_df.tolist(),
        }

    def noise_distribution(self, loc: torch.Tensor, states: torch.Tensor):
        """``loc + noise`` elementwise, its scale ``exp(log_noise_scale + states @ noise_weight)``.

        ``loc [..., D]``, ``states [..., S]`` (broadcastable); Normal, or the shape
        :meth:`calibrate` fit (:func:`ppl_models.predictive_noise.noise_distribution`); a
        state-dependent log-scale is evaluated at the state clamped to ``noise_state_range`` and
        clamped to ``noise_log_scale_range`` (the ranges on the data it was refit to).
        """
        scale = bounded_log_scale(
            self.log_noise_scale, self.noise_weight, states, self.noise_log_scale_range, self.noise_state_range
        ).exp()
        return noise_distribution(
            loc, scale.expand_as(loc), self.noise_df, self.noise_shape_points, self.noise_bandwidth
        )

    def predict(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """One-step-ahead predictions ``[B, T, D]`` (step ``t`` from ``x_{<t}``): the means, for a categorical
        emission the symbols' probabilities."""
        x, mask = check_sequences(x, mask, model=self)
        out = self.decoder(self.states(x))
        return out.softmax(-1) if self.categorical else out

    def predictive_distribution(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """``p(x_t | x_{<t})``, :meth:`noise_distribution` around the means (a one-hot categorical of the decoder's
        logits for a categorical emission): batch ``[B, T]``, event ``[D]``."""
        x, mask = check_sequences(x, mask, model=self)
        return self.step_distribution(self.states(x))

    def step_distribution(self, states: torch.Tensor):
        """The emission given the states ``[..., S]``: batch ``[...]``, event ``[D]``."""
        if self.categorical:
            return dist.OneHotCategorical(logits=self.decoder(states))
        return self.noise_distribution(self.decoder(states), states).to_event(1)

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The state that predicts the step after ``paths [N, P, D]`` (:meth:`states` over the paths and a
        placeholder step, which the state does not read) and the paths, rerun at every step unless a subclass
        carries its recurrent state."""
        placeholder = paths.new_zeros(paths.shape[0], 1, paths.shape[2])
        return Carry(self.states(torch.cat([paths, placeholder], 1))[:, -1], paths)


class RecurrentPredictor(OneStepPredictor):
    """Linear encoder, ``torch.nn`` RNN / GRU / LSTM, linear decoder (PSRNN paper, section 6).

    Weights are Xavier-uniform and biases zero; the state before the first step is zero.

    Args:
        obs_dim: ``D``.
        cell: ``"rnn"`` (Elman, tanh), ``"gru"`` or ``"lstm"``.
        state_dim: the recurrent state size ``S``.
        encoder_dim: output size of the linear encoder.
        emission: ``"gaussian"`` or ``"categorical"`` (one-hot symbols; the encoder is then an embedding).
    """

    description = (
        "linear encoder + Elman RNN / GRU / LSTM + linear decoder, Xavier init; Gaussian or categorical "
        "predictive (the PSRNN paper's baselines)"
    )

    def __init__(
        self, obs_dim: int, *, cell: str = "gru", state_dim: int = 20, encoder_dim: int = 20, emission: str = "gaussian"
    ):
        super().__init__(obs_dim, state_dim, emission)
        self.cell = check_choice(cell, RECURRENT_CELLS, name="cell")
        check_positive_int(encoder_dim, name="encoder_dim")
        self.encoder = nn.Linear(obs_dim, encoder_dim)
        self.rnn = RECURRENT_CELLS[cell](encoder_dim, state_dim, batch_first=True)
        for name, parameter in self.named_parameters():
            if name == "log_noise_scale":
                continue
            if name.endswith("bias") or "bias_" in name:
                nn.init.zeros_(parameter)
            else:
                nn.init.xavier_uniform_(parameter)

    def states(self, x):
        outputs, _ = self.rnn(self.encoder(x))
        first = outputs.new_zeros(x.shape[0], 1, self.state_dim)
        return torch.cat([first, outputs[:, :-1]], 1)

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The RNN's output after ``paths [N, P, D]`` (zeros for ``P = 0``) and its hidden state."""
        return recurrent_carry(self.rnn, self.encoder(paths))

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        return recurrent_carry(self.rnn, self.encoder(x_t).unsqueeze(1), carry)

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
:class:`~ppl_models.psrnn.PSRNN` is the other subclass. :class:`ExactPredictiveModel` is in
:mod:`ppl_models.exact_predictive_model`, what a forecast carries from step to step (:class:`Carry`) in
:mod:`ppl_models.path_carry`; both are importable from here too.
"""

from __future__ import annotations

import math

import pyro.distributions as dist
import torch
from torch import nn

from ppl_models.inference.training.carried_state import CarriesState
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences, value_checks_enabled

from .exact_predictive_model import ExactPredictiveModel
from .nets import refuse_counts
from .path_carry import Carry, recurrent_carry
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
        why = "its predictive is a Gaussian noise around a decoded mean, refit on held-out residuals, or a categorical"
        refuse_counts(emission, type(self).__name__, why)
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


class RecurrentPredictor(CarriesState, OneStepPredictor):
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
        """The states ``[B, T, S]`` that predict each step: zero, then the RNN's outputs. Inside :meth:`carrying`,
        the carried state is ``(the output after the previous batch's last step [B, S], the RNN's hidden state)``;
        the pass leaves its own in the box."""
        carried = self.carried
        start = None if carried is None else carried.start
        outputs, hidden = self.rnn(self.encoder(x), None if start is None else start[1])
        first = outputs.new_zeros(x.shape[0], self.state_dim) if start is None else start[0]
        if carried is not None:
            carried.final = (outputs[:, -1], hidden)
        return torch.cat([first.unsqueeze(1), outputs[:, :-1]], 1)

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The RNN's output after ``paths [N, P, D]`` (zeros for ``P = 0``) and its hidden state."""
        return recurrent_carry(self.rnn, self.encoder(paths))

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        return recurrent_carry(self.rnn, self.encoder(x_t).unsqueeze(1), carry)

"""Predictive State RNNs (Downey et al. 2017): bilinear state updates initialised by two-stage regression.

One layer reads inputs ``u_t`` (the observations, or the states of the layer below),
encodes them as ``o_t = P^T z(u_t)`` (random Fourier features ``z`` and a learned linear
projection ``P``) and updates its predictive state by eq. 5,

    q_{t+1} = (W x_2 o_t x_3 q_t + b) / |W x_2 o_t x_3 q_t + b|_2,

or, factorized (section 4.3, eq. 8), ``q_{t+1} ~ A^T (B o_t * C q_t) + b`` (with ``observation_bias``, as in the
authors' code, ``+ B_o o_t`` too). Layers are
stacked on the observation: layer ``l + 1`` reads the states ``q^l_{t+1}`` of layer ``l``.
A linear decoder of the top state predicts ``x_t`` (section 6), and a learned noise scale
makes the prediction a Gaussian predictive distribution (:class:`~ppl_models.predictors.OneStepPredictor`);
with ``emission="categorical"`` the data are one-hot symbols (the paper's characters) and the
decoder gives the logits of a categorical predictive.

:meth:`PSRNN.initialize` learns the start by two-stage regression (section 4.2), layer by
layer on the states filtered by the layers below, CP-decomposes ``W`` when ``rank`` is set
(bias a small multiple of the mean state), and fits the decoder by ridge regression (multinomial
logistic regression for a categorical emission); BPTT
then refines every parameter with the shared training loop.
"""

from __future__ import annotations

import torch
from torch import nn

from ppl_models.inference.training.carried_state import CarriesState
from ppl_models.inference.validation import check_choice, check_positive_int, check_sequences

from .predictors import Carry, OneStepPredictor, softmax_regression
from .psrnn_cells import FactorizedPSRNNCell, PSRNNCell, normalize
from .spectral import (
    RandomFourierFeatures,
    RidgeSolver,
    check_window_count,
    cp_decompose,
    leading_eigenvectors,
    median_distance,
    ridge_regression,
    time_windows,
    top_directions,
    two_stage_regression,
)
from .spectral_projections import whitened_directions

__all__ = ["PSRNN", "PSRNNCell", "FactorizedPSRNNCell", "PSRNNLayer", "normalize"]

INITS = ("2sr", "random")
#: the most steps a layer encodes at once (longer sequences are encoded in blocks of this many)
ENCODE_BLOCK = 1 << 15
#: the projections of two-stage regression: ours (section 6 as stated) or the authors' code's whitened ones
PROJECTIONS = ("paper", "whitened")


class PSRNNLayer(nn.Module):
    """Encoder ``o_t = P^T z(u_t)`` (optionally ``[P^T z(u_t), u_t]``), a (factorized) PSRNN cell and ``q_1``.

    Args:
        in_dim: size of the inputs ``u_t``.
        state_dim: ``S``; obs_dim: ``P``, the projected size; num_features: ``F`` random Fourier features.
        rank: CP rank of a factorized cell (``None``: the full tensor).
        append_input: append the raw input ``u_t`` to the encoding (the cell then reads ``P + in_dim``).
        encoder_bias: a bias in the encoder, ``o_t = P^T z(u_t) + c`` (starts at 0).
        train_features: train the random Fourier features' frequencies and phases with the rest
            (:meth:`RandomFourierFeatures.make_trainable`); fixed otherwise.
        observation_bias: a bias of the update linear in the observation, ``+ B o_t`` (the cells' ``observation_bias``),
            started by two-stage regression at its stage-2 intercept.
    """

    def __init__(
        self,
        in_dim: int,
        state_dim: int,
        obs_dim: int,
        num_features: int,
        rank: int | None = None,
        append_input: bool = False,
        *,
        encoder_bias: bool = False,
        train_features: bool = False,
        observation_bias: bool = False,
    ):
        super().__init__()
        self.append_input, self.train_features = bool(append_input), bool(train_features)
        encoded = obs_dim + in_dim * self.append_input
        self.set_features(RandomFourierFeatures(in_dim, num_features))
        self.projection = nn.Linear(num_features, obs_dim, bias=encoder_bias)
        self.cell = (
            PSRNNCell(state_dim, encoded, observation_bias=observation_bias)
            if rank is None
            else FactorizedPSRNNCell(state_dim, encoded, rank, observation_bias)
        )
        self.initial_state = nn.Parameter(normalize(torch.randn(state_dim)))

    def set_features(self, features: RandomFourierFeatures) -> None:
        """Use ``features`` as the observation's random Fourier features (trainable with ``train_features``)."""
        self.features = features.make_trainable() if self.train_features else features

    def encode(self, u: torch.Tensor) -> torch.Tensor:
        """``[..., in_dim] -> [..., P]`` (``[..., P + in_dim]`` with ``append_input``)."""
        encoded = self.projection(self.features(u))
        return torch.cat([encoded, u], -1) if self.append_input else encoded

    def forward(self, u: torch.Tensor, *, preactivations: bool = False, start: torch.Tensor | None = None):
        """States after each input, ``q_{2:T+1} [B, T, S]`` (with ``preactivations=True`` also their
        un-normalized values ``[B, T, S]``), from ``start [B, S]`` (``None``: ``q_1``)."""
        # a long stream (a held-out text as one row) is encoded a block at a time: its random features at once would
        # hold T x F numbers
        prepared = torch.cat([self.cell.prepare(self.encode(block)) for block in u.split(ENCODE_BLOCK, 1)], 1)
        q = normalize(self.initial_state).expand(u.shape[0], -1) if start is None else start
        states, raw = [], []
        for step in prepared.unbind(1):  # views unbound once: a backward fill per step otherwise
            pre = self.cell.preactivation(step, q)
            q = normalize(pre)
            states.append(q)
            raw.append(pre)
        states = torch.stack(states, 1)
        return (states, torch.stack(raw, 1)) if preactivations else states

    @torch.no_grad()
    def two_stage_regression(
        self,
        u: torch.Tensor,
        mask: torch.Tensor,
        horizon: int,
        ridge: float,
        generator: torch.Generator | None = None,
        bandwidth_scale: float = 1.0,
        *,
        bandwidths: tuple[float, float, float] | None = None,
        projections: str = "paper",
    ) -> None:
        """Set the encoder, a full cell with ``W`` (bias 0) and ``q_1`` by two-stage regression on ``u [B, T, in_dim]``.

        Features: ``omega_t = P^T z_o(u_t)`` with ``P`` the leading directions of ``z_o``;
        ``phi_t = U^T z_f(u_{t:t+k-1})`` with ``U`` the leading directions of the stage-1
        estimates ``E[z_f | eta_t]`` (the projection to a small state); history
        ``eta_t = z_h(u_{t-k:t-1})``; every kernel width is ``bandwidth_scale`` times the median
        distance of its inputs, or the fixed widths ``bandwidths`` (observation, history, future).
        With ``append_input`` the observation features are ``[omega_t, u_t]``.

        ``projections="whitened"`` (the authors' code): ``P``, the history projection and ``U`` are the
        :func:`~ppl_models.spectral_projections.whitened_directions` of ``z_o`` against ``z_h`` (uncentred), of
        ``z_h`` against ``z_f`` and of ``z_f`` against ``z_h`` (centred), and stage 1 regresses on the projected
        history ``eta_t`` (``S`` entries) and a constant (the authors' intercept) instead of all of ``z_h``.
        A cell with an observation bias starts it at the stage-2 intercept.
        """
        w = time_windows(u, mask, horizon)
        num_features = self.features.phases.numel()
        obs_dim, state_dim = self.projection.out_features, self.initial_state.numel()
        widths = (None,) * 3 if bandwidths is None else (bandwidths[0], bandwidths[2], bandwidths[1])
        self.features, future_rff, history_rff = (
            RandomFourierFeatures.fit(points, num_features, generator, bandwidth_scale).to(u.device)
            if width is None
            else RandomFourierFeatures(points.shape[-1], num_features, width, generator).to(u.device)
            for points, width in zip((w.observation, w.future, w.history), widths)
        )
        omega = self.features(w.observation)
        history, future, next_future = history_rff(w.history), future_rff(w.future), future_rff(w.next_future)
        if projections == "whitened":
            projection = whitened_directions(omega, history, obs_dim, centre=False).to(omega.dtype)
            basis = whitened_directions(future, history, state_dim, centre=True).to(future.dtype)
            history = history @ whitened_directions(history, future, state_dim, centre=True).to(history.dtype)
            history = torch.cat([history, torch.ones_like(history[:, :1])], 1)
            stage1 = RidgeSolver(history, ridge)
        else:
            projection = top_directions(omega, obs_dim)
            stage1 = RidgeSolver(history, ridge)  # one factorisation for the basis and for stage 1
            fitted = stage1(future).T  # [F, F]: E[z_f | eta] = history @ fitted; its leading directions, from the Gram
            basis = leading_eigenvectors(fitted.T @ stage1.gram @ fitted, state_dim)
        encoded = torch.cat([omega @ projection, w.observation], 1) if self.append_input else omega @ projection
        intercept = self.cell.observation_bias is not None
        result = two_stage_regression(
            future @ basis, next_future @ basis, encoded, history, ridge, stage1=stage1, intercept=intercept
        )
        self.set_features(self.features)
        self.projection.weight.copy_(projection.T)
        if self.projection.bias is not None:
            self.projection.bias.zero_()
        observation_bias = False if result.observation_bias is None else result.observation_bias
        self.cell = PSRNNCell(state_dim, encoded.shape[1], result.transition, observation_bias)
        self.initial_state.copy_(normalize(result.initial_state))

    @torch.no_grad()
    def factorize(
        self,
        rank: int,
        u: torch.Tensor,
        mask: torch.Tensor,
        bias_scale: float,
        generator: torch.Generator | None = None,
    ) -> None:
        """Replace the full cell by the rank-``rank`` CP decomposition of its ``W``.

        The bias becomes ``bias_scale`` times the mean filtered state on ``u`` (states of the
        full cell), measured in units of the mean pre-activation norm (section 4.3).
        """
        states, pre = self(u, preactivations=True)
        scale = pre[mask].norm(dim=-1).mean()
        bias = bias_scale * scale * states[mask].mean(0)
        factors = cp_decompose(self.cell.transition, rank, generator=generator).factors
        self.cell = FactorizedPSRNNCell.from_factors(factors, bias, self.cell.observation_bias).to(u.device)


def check_bandwidths(bandwidths) -> tuple[float, float, float] | None:
    """``None`` or three kernel widths > 0 (observation, history, future) as a tuple of floats; ``ValueError``
    otherwise."""
    if bandwidths is None:
        return None
    if (
        not isinstance(bandwidths, (tuple, list))
        or len(bandwidths) != 3
        or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0 for b in bandwidths)
    ):
        raise ValueError(
            f"bandwidths must be None or three kernel widths > 0 (observation, history, future), got {bandwidths!r}"
        )
    return tuple(float(b) for b in bandwidths)


class PSRNN(CarriesState, OneStepPredictor):
    """A PSRNN one-step forecaster ``x_t ~ N(decoder(q^L_t), diag(sigma^2))`` (or a categorical of its logits).

    Args:
        obs_dim: ``D``.
        state_dim: ``S`` of every layer (20 in the paper).
        obs_features: ``P``, size of each layer's encoded input.
        num_features: random Fourier features per feature map (2000 in the paper).
        horizon: ``k`` of the future and history windows of two-stage regression (10 in the paper).
        num_layers: stacked PSRNN layers.
        rank: CP rank of factorized cells (``None``: full tensors).
        ridge: per-example ridge penalty of two-stage regression and of the decoder fit
            (``1e-2``: the paper's ``1e-2 n``).
        bias_scale: factorized cells' bias as a multiple of the mean state (section 4.3).
        init: ``"2sr"`` (two-stage regression) or ``"random"`` (random ``W`` and encoder,
            Xavier decoder), applied by :meth:`initialize`.
        bandwidth_scale: every random-Fourier-feature kernel width as a multiple of the median
            distance of its inputs (1: the median heuristic).
        bandwidths: fixed kernel widths ``(observation, history, future)`` in place of the median ones (``None``);
            the width ``bw`` of ``exp(-|x - y|^2 / (2 bw^2))``, so the authors' ``gamma`` of
            ``exp(-gamma |x - y|^2)`` is ``bw = 1 / sqrt(2 gamma)``.
        projections: ``"paper"`` (ours: the observation features' leading directions, the state basis from the
            stage-1 estimates, stage 1 on all history features) or ``"whitened"`` (the authors' code:
            :func:`~ppl_models.spectral_projections.whitened_directions`, stage 1 on the projected history); see
            :meth:`PSRNNLayer.two_stage_regression`.
        append_input: append each layer's raw input ``u_t`` to its encoding ``P^T z(u_t)``.
        emission: ``"gaussian"`` or ``"categorical"`` (one-hot ``x_t [D]``; two-stage regression then reads the
            random Fourier features of the one-hot windows and the decoder starts at the multinomial logistic
            regression of the symbols on the filtered states).
        decoder_ridge: per-example penalty of the decoder's start (``None``: ``ridge``). The filtered states vary
            little about their mean direction, so a small one gives a sharper but larger decoder (the authors'
            logistic regression, ``|W|^2 / 2`` on the summed log-loss, is ``0.5 / n``).
        encoder_bias, train_features, observation_bias: what the authors' code has beyond the paper, each a switch of
            every layer (:class:`PSRNNLayer`): a bias in the encoder, random-feature frequencies and phases trained by
            BPTT, and a bias of the update linear in the observation started at the stage-2 intercept.
    """

    description = (
        "PSRNN (Downey et al. 2017): bilinear predictive-state updates, two-stage-regression start, "
        "optionally factorized (rank) and multilayer; Gaussian or categorical (emission=) predictive"
    )

    def __init__(
        self,
        obs_dim: int,
        *,
        state_dim: int = 20,
        obs_features: int = 20,
        num_features: int = 2000,
        horizon: int = 10,
        num_layers: int = 1,
        rank: int | None = None,
        ridge: float = 1e-2,
        bias_scale: float = 0.1,
        init: str = "2sr",
        bandwidth_scale: float = 1.0,
        append_input: bool = False,
        emission: str = "gaussian",
        decoder_ridge: float | None = None,
        bandwidths: tuple[float, float, float] | None = None,
        projections: str = "paper",
        encoder_bias: bool = False,
        train_features: bool = False,
        observation_bias: bool = False,
    ):
        super().__init__(obs_dim, state_dim, emission)
        self.bandwidths = check_bandwidths(bandwidths)
        self.projections = check_choice(projections, PROJECTIONS, name="projections")
        for name, value in (
            ("obs_features", obs_features),
            ("num_features", num_features),
            ("horizon", horizon),
            ("num_layers", num_layers),
        ):
            check_positive_int(value, name=name)
        if rank is not None:
            check_positive_int(rank, name="rank")
        if max(state_dim, obs_features) > num_features:
            raise ValueError(f"num_features ({num_features}) must be >= state_dim and obs_features")
        if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or ridge < 0:
            raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
        if decoder_ridge is not None and (
            isinstance(decoder_ridge, bool) or not isinstance(decoder_ridge, (int, float)) or decoder_ridge < 0
        ):
            raise ValueError(f"decoder_ridge must be None or a number >= 0, got {decoder_ridge!r}")
        if isinstance(bias_scale, bool) or not isinstance(bias_scale, (int, float)) or bias_scale < 0:
            raise ValueError(f"bias_scale must be a number >= 0, got {bias_scale!r}")
        if (
            isinstance(bandwidth_scale, bool)
            or not isinstance(bandwidth_scale, (int, float))
            or not bandwidth_scale > 0
        ):
            raise ValueError(f"bandwidth_scale must be a number > 0, got {bandwidth_scale!r}")
        switches = {
            "append_input": append_input,
            "encoder_bias": encoder_bias,
            "train_features": train_features,
            "observation_bias": observation_bias,
        }
        for name, value in switches.items():
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        self.init = check_choice(init, INITS, name="init")
        self.bandwidth_scale = float(bandwidth_scale)
        self.horizon, self.rank, self.ridge, self.bias_scale = horizon, rank, float(ridge), float(bias_scale)
        self.decoder_ridge = self.ridge if decoder_ridge is None else float(decoder_ridge)
        in_dims = [obs_dim] + [state_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(
            PSRNNLayer(
                d,
                state_dim,
                obs_features,
                num_features,
                rank,
                append_input,
                encoder_bias=encoder_bias,
                train_features=train_features,
                observation_bias=observation_bias,
            )
            for d in in_dims
        )

    def states(self, x):
        """``[B, T, D] -> [B, T, S]``; inside :meth:`carrying`, from the carried state (every layer's ``[B, S]``, a
        list) and leaving the states after the last step in it."""
        carried = self.carried
        start = None if carried is None else carried.start
        u, finals = x, []
        for number, layer in enumerate(self.layers):
            u = layer(u, start=None if start is None else start[number])
            finals.append(u[:, -1])
        if carried is not None:
            carried.final = finals
        if start is not None:
            return torch.cat([start[-1].unsqueeze(1), u[:, :-1]], 1)
        first = normalize(self.layers[-1].initial_state).expand(x.shape[0], 1, -1)
        return torch.cat([first, u[:, :-1]], 1)

    def carry_start(self, paths: torch.Tensor) -> Carry:
        """The top layer's state after ``paths [N, P, D]`` and every layer's (``q_1`` for ``P = 0``)."""
        first = [normalize(layer.initial_state).expand(paths.shape[0], -1) for layer in self.layers]
        return self.carry_through(Carry(first[-1], first), paths)

    def carry_on(self, carry: Carry, x_t: torch.Tensor) -> Carry:
        """Each layer's state updated by its input (``x_t [N, D]``, then the state of the layer below)."""
        states, u = [], x_t
        for layer, q in zip(self.layers, carry.memory):
            u = layer.cell(layer.encode(u), q)
            states.append(u)
        return Carry(u, states)

    @torch.no_grad()
    def initialize(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, generator: torch.Generator | None = None
    ) -> PSRNN:
        """Set every parameter from training data ``x [B, T, D]`` before BPTT (see ``init``).

        ``"2sr"``: two-stage regression layer by layer, each on the states filtered by the
        layers below; CP factorization when ``rank`` is set; then the decoder by ridge
        regression of ``x_t`` on the top states (by multinomial logistic regression of the symbols
        for a categorical emission). ``"random"``: feature maps
        with the median-distance bandwidth, random cells and encoders, a Xavier decoder.
        Either way the noise scale starts at the residuals of the started model's one-step
        predictions (:meth:`OneStepPredictor.initialize`).
        """
        x, mask = check_sequences(x, mask, model=self)
        if self.init == "2sr":
            check_window_count(
                mask, self.horizon, obs_features=self.layers[0].projection.out_features, state_dim=self.state_dim
            )
        u = x
        for layer in self.layers:
            if self.init == "2sr":
                layer.two_stage_regression(
                    u,
                    mask,
                    self.horizon,
                    self.ridge,
                    generator,
                    self.bandwidth_scale,
                    bandwidths=self.bandwidths,
                    projections=self.projections,
                )
                if self.rank is not None:
                    layer.factorize(self.rank, u, mask, self.bias_scale, generator)
            else:
                self._random_layer(layer, u, mask, generator)
            u = layer(u)
        if self.init == "2sr":
            self._fit_decoder(x, mask)
        else:
            nn.init.xavier_uniform_(self.decoder.weight, generator=generator)
            self.decoder.bias.zero_()
        return super().initialize(x, mask)

    def _random_layer(self, layer: PSRNNLayer, u, mask, generator) -> None:
        bandwidth = (
            self.bandwidth_scale * median_distance(u[mask], generator=generator)
            if self.bandwidths is None
            else self.bandwidths[0]
        )
        features = RandomFourierFeatures(u.shape[-1], layer.features.phases.numel(), bandwidth, generator)
        layer.set_features(features.to(u.device))
        nn.init.xavier_uniform_(layer.projection.weight, generator=generator)
        if layer.projection.bias is not None:
            layer.projection.bias.zero_()
        for parameter in layer.cell.parameters():
            if parameter.dim() > 1 and parameter is not layer.cell.observation_bias:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) / parameter[0].numel() ** 0.5)
        layer.cell.bias.zero_()
        if layer.cell.observation_bias is not None:
            layer.cell.observation_bias.zero_()
        layer.initial_state.copy_(normalize(torch.randn(self.state_dim, generator=generator)))

    def _fit_decoder(self, x, mask) -> None:
        states = self.states(x)[mask]
        targets = x[mask]
        if self.categorical:
            weight, bias = softmax_regression(states, targets.argmax(-1), self.obs_dim, self.decoder_ridge)
            self.decoder.weight.copy_(weight)
            self.decoder.bias.copy_(bias)
            return
        state_mean, target_mean = states.mean(0), targets.mean(0)
        weight = ridge_regression(states - state_mean, targets - target_mean, self.decoder_ridge)
        self.decoder.weight.copy_(weight)
        self.decoder.bias.copy_(target_mean - weight @ state_mean)

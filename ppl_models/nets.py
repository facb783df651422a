"""Building blocks shared by the neural sequence models: feed-forward nets, emissions, recurrences.

The emissions (:data:`EMISSIONS`) map a net's output to ``p(x_t | ...)`` with event shape ``[D]``:
``bernoulli`` (logits), ``gaussian`` (mean and log-variance), and for counts (non-negative integers)
``poisson`` (log-rate) and ``negbin``, a negative binomial of mean ``mu = exp(a)`` and dispersion
``r = exp(b)`` (variance ``mu + mu^2 / r``), both ``a`` and ``b`` outputs of the net at every step, as the
Gaussian's mean and variance are: the overdispersion may follow the model's state, and no model needs a
parameter of its own for it. :func:`draw_emission` draws from any of them with a ``torch.Generator``.
:class:`CountScale` lets a count emission's nets serve counts of any level (DeepAR's scale).

:class:`SplitInputMLP` is a feed-forward net over a concatenation ``[a, b]`` whose
first layer is split in two, so the part that reads ``b`` (a deterministic RNN state
known for every time step) runs once over the whole sequence and only the part that
reads ``a`` (a sampled latent state, one per particle) runs inside the time loop.
"""

from __future__ import annotations

import pyro.distributions as dist
import torch
from torch import nn
from torch.nn import functional as F

from ppl_models.inference.protocol_terms import Unsupported
from ppl_models.inference.validation import check_choice, check_positive_int, value_checks_enabled

__all__ = [
    "EMISSIONS",
    "COUNT_EMISSIONS",
    "LOG_MEAN_RANGE",
    "LOG_DISPERSION_RANGE",
    "SplitInputMLP",
    "CountScale",
    "clipped_leaky_relu",
    "diagonal_normal",
    "emission_distribution",
    "TargetColumns",
    "emission_params",
    "draw_emission",
    "refuse_counts",
    "NoCountEmission",
    "reverse_padded",
    "shifted_inputs",
    "check_binary",
    "check_counts",
    "EmissionChecks",
]

#: the emissions of the models that take ``emission=`` (:func:`emission_distribution`)
EMISSIONS = ("bernoulli", "gaussian", "poisson", "negbin")
#: the emissions of non-negative integer data
COUNT_EMISSIONS = ("poisson", "negbin")
#: the range a count emission's log-mean is held to (a rate of 2e-9 to 5e8: no overflow to inf, no rate of 0)
LOG_MEAN_RANGE = (-20.0, 20.0)
#: the range of a negative binomial's log-dispersion ``log r`` (``r = e^10``: a Poisson in all but name)
LOG_DISPERSION_RANGE = (-10.0, 10.0)


def clipped_leaky_relu(x: torch.Tensor) -> torch.Tensor:
    """Leaky ReLU with slope 1/3, clipped to ``[-3, 3]`` (the SRNN paper's nonlinearity).

    The clip is ``hardtanh``, whose backward is one kernel (``clamp``'s is four: two comparisons,
    an ``and``, a ``where``); the values are the same, the gradient differs only at exactly ``±3``.
    """
    return F.hardtanh(F.leaky_relu(x, 1.0 / 3.0), -3.0, 3.0)


class SplitInputMLP(nn.Module):
    """``out = W_o h_L``, ``h_{l+1} = act(W_l h_l + c_l)``, ``h_1 = act(W_a a + W_b b + c)``.

    Args:
        a_dim: size of the per-particle input ``a`` (0: the net reads ``b`` only).
        b_dim: size of the per-step input ``b``, projected once by :meth:`project`.
        hidden_dim: units of each hidden layer.
        out_dim: output size.
        num_hidden_layers: hidden layers (1: the "two-layer" nets of the papers).
    """

    def __init__(self, a_dim: int, b_dim: int, hidden_dim: int, out_dim: int, num_hidden_layers: int = 1):
        super().__init__()
        check_positive_int(num_hidden_layers, name="num_hidden_layers")
        self.input_a = nn.Linear(a_dim, hidden_dim, bias=False) if a_dim > 0 else None
        self.input_b = nn.Linear(b_dim, hidden_dim)
        self.hidden = nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(num_hidden_layers - 1))
        self.output = nn.Linear(hidden_dim, out_dim)

    def project(self, b: torch.Tensor) -> torch.Tensor:
        """``W_b b + c``: ``[..., b_dim] -> [..., hidden_dim]`` (run once for all steps)."""
        return self.input_b(b)

    def forward(self, a: torch.Tensor | None, b_projected: torch.Tensor) -> torch.Tensor:
        """``a [..., a_dim]`` (or ``None``) and ``project(b)`` (broadcastable) to ``[..., out_dim]``."""
        h = b_projected if self.input_a is None else self.input_a(a) + b_projected
        h = clipped_leaky_relu(h)
        for layer in self.hidden:
            h = clipped_leaky_relu(layer(h))
        return self.output(h)


def emission_params(kind: str, obs_dim: int) -> int:
    """Net outputs an emission of ``kind`` needs: logits or log-rates ``D`` (bernoulli, poisson), or two numbers per
    dimension ``2D`` (gaussian: mean and log-variance; negbin: log-mean and log-dispersion)."""
    check_choice(kind, EMISSIONS, name="emission")
    return obs_dim if kind in ("bernoulli", "poisson") else 2 * obs_dim


def diagonal_normal(mean: torch.Tensor, log_var: torch.Tensor):
    """``N(mean, diag exp(log_var))`` with event shape ``[D]``."""
    return dist.Normal(mean, (0.5 * log_var).exp()).to_event(1)


def emission_distribution(kind: str, params: torch.Tensor, scored_columns: int | None = None):
    """``p(x_t | ...)`` with event shape ``[D]`` from the net output ``params [..., emission_params]``; with
    ``scored_columns``, of those leading columns only (:class:`TargetColumns`: the others are inputs)."""
    if kind == "bernoulli":
        base = dist.Bernoulli(logits=params)
    elif kind == "poisson":
        base = dist.Poisson(params.clamp(*LOG_MEAN_RANGE).exp())
    elif kind == "negbin":
        log_mean, log_dispersion = _count_moments(params)
        base = dist.NegativeBinomial(log_dispersion.exp(), logits=log_mean - log_dispersion)
    else:
        mean, log_var = params.chunk(2, dim=-1)
        base = dist.Normal(mean, (0.5 * log_var).exp())
    if scored_columns is not None and scored_columns < base.batch_shape[-1]:
        base = TargetColumns.leading(base, scored_columns)
    return base.to_event(1)


class TargetColumns(dist.MaskedDistribution):
    """A diagonal emission (batch ``[..., D]``) scored on the columns of its ``mask [D]`` only: the other columns of a
    value are read as 0 (in the support of every emission) before the base log-density, so a covariate (an input,
    maybe outside the emission's support: a real value under a count emission) is never scored, checked or
    differentiated through."""

    @classmethod
    def leading(cls, base, columns: int) -> TargetColumns:
        """``base`` scored on its ``columns`` leading columns."""
        mask = torch.zeros(base.batch_shape[-1], dtype=torch.bool, device=base.mean.device)
        mask[:columns] = True
        return cls(base, mask)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(torch.where(self._mask, value, torch.zeros((), dtype=value.dtype, device=value.device)))


def draw_emission(kind: str, params: torch.Tensor, generator: torch.Generator | None = None):
    """``(draw, mean)``, each ``[..., D]``: one draw of :func:`emission_distribution` from the net output ``params``
    with ``generator``, and the emission's mean (a Bernoulli's probabilities, a count's rate or mean)."""
    if kind == "bernoulli":
        probs = torch.sigmoid(params)
        return torch.bernoulli(probs, generator=generator), probs
    if kind == "poisson":
        rate = params.clamp(*LOG_MEAN_RANGE).exp()
        return torch.poisson(rate, generator=generator), rate
    if kind == "negbin":  # a Poisson of a Gamma rate of mean mu and shape r
        log_mean, log_dispersion = _count_moments(params)
        dispersion, mean = log_dispersion.exp(), log_mean.exp()
        return torch.poisson(_standard_gamma(dispersion, generator) * mean / dispersion, generator=generator), mean
    mean, log_var = params.chunk(2, dim=-1)
    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
    return mean + (0.5 * log_var).exp() * noise, mean


def _count_moments(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A negative binomial's ``(log mu, log r)`` ``[..., D]`` from ``params [..., 2D]``, held to their ranges."""
    log_mean, log_dispersion = params.chunk(2, dim=-1)
    return log_mean.clamp(*LOG_MEAN_RANGE), log_dispersion.clamp(*LOG_DISPERSION_RANGE)


def _standard_gamma(shape: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Draws of ``Gamma(shape, 1)`` with ``generator`` (Marsaglia and Tsang's squeeze, every entry accepted once;
    a shape below 1 is boosted: ``G(a) = G(a + 1) U^(1 / a)``)."""

    def uniform() -> torch.Tensor:
        return torch.rand(shape.shape, generator=generator, device=shape.device, dtype=shape.dtype)

    boosted = shape + (shape < 1).to(shape.dtype)
    d = boosted - 1.0 / 3.0
    c = 1.0 / (9.0 * d).sqrt()
    out, waiting = torch.zeros_like(shape), torch.ones_like(shape, dtype=torch.bool)
    while bool(waiting.any()):
        z = torch.randn(shape.shape, generator=generator, device=shape.device, dtype=shape.dtype)
        u = uniform()
        v = (1.0 + c * z) ** 3
        accept = waiting & (v > 0) & (u.log() < 0.5 * z**2 + d - d * v + d * v.clamp(min=1e-30).log())
        out, waiting = torch.where(accept, d * v, out), waiting & ~accept
    boost = uniform().pow(1.0 / shape)
    return torch.where(shape < 1, out * boost, out)


class CountScale(nn.Module):
    """A count emission's scale ``s [D]`` (DeepAR's, Salinas et al. 2020): the nets read the counts as ``x / s`` and
    the emission's log-mean is the net's output plus ``log s``, so that nets whose inputs and outputs are near 1 serve
    counts of any level (an own-data run sets ``s`` to one plus each feature's training mean). Without a scale
    (``scale=None``) both maps are the identity and the module holds nothing.

    Args:
        emission: the model's emission (:data:`EMISSIONS`); a scale needs a count one (:data:`COUNT_EMISSIONS`).
        obs_dim: ``D``.
        scale: ``D`` positive finite numbers, or ``None``.
    """

    def __init__(self, emission: str, obs_dim: int, scale=None):
        super().__init__()
        if scale is not None:
            if emission not in COUNT_EMISSIONS:
                raise ValueError(
                    f"count_scale: only a count emission {COUNT_EMISSIONS} takes a scale, got emission {emission!r}"
                )
            if isinstance(scale, (str, bytes)) or not hasattr(scale, "__len__"):
                raise TypeError(f"count_scale must be a list of {obs_dim} numbers, got {type(scale).__name__}")
            try:
                scale = torch.as_tensor([float(value) for value in scale], dtype=torch.get_default_dtype())
            except (TypeError, ValueError):
                raise TypeError(f"count_scale must be a list of {obs_dim} numbers, got {scale!r}") from None
            if scale.shape != (obs_dim,) or not bool((torch.isfinite(scale) & (scale > 0)).all()):
                raise ValueError(f"count_scale: expected {obs_dim} positive finite numbers, got {scale.tolist()}")
        self.register_buffer("scale", scale)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """``x / s`` ``[..., D]``: the counts as the nets read them."""
        return x if self.scale is None else x / self.scale

    def outputs(self, params: torch.Tensor) -> torch.Tensor:
        """The emission's net output ``[..., emission_params]`` with ``log s`` added to its log-means (a Poisson's
        log-rates, a negative binomial's first ``D`` numbers; its log-dispersions are left as they are)."""
        if self.scale is None:
            return params
        offset = self.scale.log()
        return params + F.pad(offset, (0, params.shape[-1] - offset.shape[-1]))


class NoCountEmission(Unsupported, ValueError):
    """A model asked for a count emission it does not have: :class:`~ppl_models.inference.protocol.Unsupported` with
    the model's reason, and a ``ValueError`` as any other bad ``emission``."""


def refuse_counts(kind: str, model: str, why: str) -> None:
    """Raise :class:`NoCountEmission` with ``why`` where ``kind`` is a count emission (:data:`COUNT_EMISSIONS`) that
    ``model`` (its name) cannot take."""
    if kind in COUNT_EMISSIONS:
        raise NoCountEmission(f"{model} has no {kind} emission (counts): {why}")


def shifted_inputs(x: torch.Tensor) -> torch.Tensor:
    """``u_t = x_{t-1}`` with ``u_1 = 0``: ``[B, T, D] -> [B, T, D]``."""
    return F.pad(x, (0, 0, 1, 0))[:, :-1]


def reverse_padded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence of ``x [B, T, ...]`` within its valid prefix (padding stays after it).

    The map is its own inverse, so applying it twice gives back ``x``.
    """
    steps = x.shape[1]
    lengths = mask.sum(1, keepdim=True)
    index = (lengths - 1 - torch.arange(steps, device=x.device)) % steps  # [B, T]
    index = index.reshape(index.shape + (1,) * (x.dim() - 2)).expand_as(x)
    return torch.gather(x, 1, index)


class EmissionChecks:
    """Mixin for models with an ``emission_kind`` of :data:`EMISSIONS`.

    Its ``check_values`` (the :class:`~ppl_models.inference.protocol.SequenceModel` hook that every entry
    point calls) refuses data the emission cannot score: non-binary entries for ``"bernoulli"``, entries that are
    not non-negative integers for a count emission.
    """

    emission_kind: str
    #: how many leading columns the emission's values are checked on (``None``: every column); set where the other
    #: columns are inputs only (:class:`~ppl_models.covariate_model.CovariateInputs`,
    #: :meth:`~ppl_models.inference.rollout.LatentRollout.read_covariates`)
    scored_columns: int | None = None

    def check_values(self, x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
        x = x if self.scored_columns is None else x[..., : self.scored_columns]
        if self.emission_kind == "bernoulli":
            check_binary(x, mask, name=name)
        elif self.emission_kind in COUNT_EMISSIONS:
            check_counts(x, mask, name=name, emission=self.emission_kind)


def check_binary(x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
    """Raise ``ValueError`` unless every valid entry of ``x`` is 0 or 1 (a Bernoulli emission's data).

    A check of values: skipped where they must not be read (inside a CUDA-graph capture).
    """
    if not value_checks_enabled():
        return
    valid = x[mask]
    if not bool(((valid == 0) | (valid == 1)).all()):
        bad = valid[(valid != 0) & (valid != 1)][0].item()
        raise ValueError(f"{name} must be binary (0 or 1) for a Bernoulli emission, got the value {bad}")


def check_counts(x: torch.Tensor, mask: torch.Tensor, *, name: str = "x", emission: str = "poisson") -> None:
    """Raise ``ValueError`` unless every valid entry of ``x`` is a non-negative integer (a count emission's data).

    A check of values: skipped where they must not be read (inside a CUDA-graph capture).
    """
    if not value_checks_enabled():
        return
    valid = x[mask]
    bad = (valid < 0) | (valid != valid.round())
    if bool(bad.any()):
        raise ValueError(
            f"{name} must hold non-negative integers (counts) for a {emission} emission, got the value "
            f"{valid[bad][0].item()}"
        )

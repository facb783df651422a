"""The synthetic autoregressive data of the SMC Transformer paper (section 4.1), its true law and its metrics.

Both models start at ``X_0 ~ N(0, 1)`` and run 24 steps, ``X_0 .. X_24`` (25 values):

* Model I: ``X_{t+1} = alpha X_t + sigma eps_{t+1}`` (``alpha = 0.8``, ``sigma^2 = 0.5``);
* Model II: ``X_{t+1} = alpha U_{t+1} X_t + beta (1 - U_{t+1}) X_t + sigma eps_{t+1}``,
  ``U ~ Bernoulli(p)`` (``alpha = 0.9``, ``beta = 0.6 alpha``, ``p = 0.7``, ``sigma^2 = 0.3``);
* Model III (ours, not in the paper; a law the models were not designed on): coefficient
  ``0.95``, ``0.3`` or ``-0.6`` with probabilities ``0.5``, ``0.3``, ``0.2``, ``sigma^2 = 0.2``.
  Its predictive is trimodal for large ``|X_t|`` and its variance ``sigma^2 + Var(c) X_t^2``
  grows with ``X_t^2`` (conditionally heteroscedastic); ``E[c^2] = 0.55 < 1`` keeps it stationary.

So the law of ``X_{t+1}`` given ``X_t`` is a Gaussian mixture ``sum_k w_k N(c_k X_t, sigma^2)``
(one component for Model I, two for Model II, three for Model III): :class:`ARModel` holds it. The data sets
(:func:`ar_data`) hold 1000 sequences split 800 / 100 / 100 in five folds. The metrics of
the paper's Table 2 and Figure 2 are :func:`predictive_mse` and :func:`interval_share`; they
take one-step-ahead predictive samples ``[S, B, T, 1]`` in the convention of the rest of the
project: sample ``[s, b, t]`` is a draw of ``x_t`` given ``x_{<t}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ppl_models.inference.validation import check_positive_int, check_probability, check_sequences

from ..data import ExperimentData

__all__ = [
    "ARModel",
    "model_one",
    "model_two",
    "model_three",
    "ar_data",
    "ar_model_one_data",
    "ar_model_two_data",
    "ar_model_three_data",
    "predictive_mse",
    "interval_share",
    "NUM_FOLDS",
]

NUM_FOLDS = 5
_BISECTION_STEPS = 60  # halves a bracket of 20 standard deviations below 1e-16 of its width


class ARModel:
    """True law of an AR model of section 4.1: ``X_0 ~ N(0, 1)``, ``X_{t+1} | X_t ~ sum_k w_k N(c_k X_t, sigma^2)``.

    Parameters are Python numbers, so one instance works with tensors of any dtype and
    device. Build the paper's models with :func:`model_one` and :func:`model_two`.

    Args:
        coefficients: ``c_k``, the autoregressive coefficient of each component.
        weights: ``w_k``, positive, summing to 1 (one per coefficient).
        noise_var: ``sigma^2 > 0``.
        name: shown in descriptions.
    """

    def __init__(self, coefficients: Sequence[float], weights: Sequence[float], noise_var: float, name: str = "AR"):
        self.coefficients = tuple(float(c) for c in coefficients)
        self.weights = tuple(float(w) for w in weights)
        if not self.coefficients or len(self.weights) != len(self.coefficients):
            raise ValueError(
                f"weights must give one weight per coefficient ({len(self.coefficients)}), got {len(self.weights)}"
            )
        if any(w <= 0 for w in self.weights) or abs(sum(self.weights) - 1) > 1e-9:
            raise ValueError(f"weights must be positive and sum to 1, got {self.weights}")
        if not (isinstance(noise_var, (int, float)) and noise_var > 0):
            raise ValueError(f"noise_var must be a number > 0, got {noise_var!r}")
        self.noise_var = float(noise_var)
        self.noise_scale = math.sqrt(self.noise_var)
        self.name = name

    def __repr__(self) -> str:
        return (
            f"ARModel(coefficients={self.coefficients}, weights={self.weights}, noise_var={self.noise_var}, "
            f"name={self.name!r})"
        )

    def to(self, device) -> ARModel:
        """``self``: the parameters are Python numbers (lets the runner call ``truth.to(device)``)."""
        return self

    def _components(self, x_prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Component means ``c_k x_prev`` ``[..., K]`` and weights ``[K]`` in ``x_prev``'s dtype and device."""
        coefficients = torch.tensor(self.coefficients, dtype=x_prev.dtype, device=x_prev.device)
        weights = torch.tensor(self.weights, dtype=x_prev.dtype, device=x_prev.device)
        return x_prev.unsqueeze(-1) * coefficients, weights

    def mean(self, x_prev: torch.Tensor) -> torch.Tensor:
        """``E[X_{t+1} | X_t = x_prev] = (sum_k w_k c_k) x_prev``, same shape as ``x_prev``."""
        return x_prev * sum(w * c for w, c in zip(self.weights, self.coefficients))

    def log_prob(self, value: torch.Tensor, x_prev: torch.Tensor) -> torch.Tensor:
        """``log p(X_{t+1} = value | X_t = x_prev)``, broadcast shape of the two."""
        means, weights = self._components(x_prev)
        normal = torch.distributions.Normal(means, self.noise_scale)
        return torch.logsumexp(normal.log_prob(value.unsqueeze(-1)) + weights.log(), -1)

    def cdf(self, value: torch.Tensor, x_prev: torch.Tensor) -> torch.Tensor:
        """``P(X_{t+1} <= value | X_t = x_prev) = sum_k w_k Phi((value - c_k x_prev) / sigma)``."""
        means, weights = self._components(x_prev)
        return (torch.special.ndtr((value.unsqueeze(-1) - means) / self.noise_scale) * weights).sum(-1)

    def quantile(self, x_prev: torch.Tensor, q: float) -> torch.Tensor:
        """The ``q``-quantile of ``X_{t+1}`` given ``X_t = x_prev``, by bisection on :meth:`cdf` (vectorised).

        Computed in float64 and returned in ``x_prev``'s dtype, same shape as ``x_prev``.
        """
        if not (isinstance(q, (int, float)) and 0 < q < 1):
            raise ValueError(f"q must be a number in (0, 1), got {q!r}")
        prev = x_prev.double()
        means, _ = self._components(prev)
        low = means.min(-1).values - 10 * self.noise_scale
        high = means.max(-1).values + 10 * self.noise_scale
        for _ in range(_BISECTION_STEPS):
            middle = (low + high) / 2
            below = self.cdf(middle, prev) < q
            low, high = torch.where(below, middle, low), torch.where(below, high, middle)
        return ((low + high) / 2).to(x_prev.dtype)

    def interval(self, x_prev: torch.Tensor, level: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Central ``level`` interval of ``X_{t+1}`` given ``X_t = x_prev``: the ``(1 -+ level) / 2`` quantiles."""
        if not (isinstance(level, (int, float)) and 0 < level < 1):
            raise ValueError(f"level must be a number in (0, 1), got {level!r}")
        return self.quantile(x_prev, (1 - level) / 2), self.quantile(x_prev, (1 + level) / 2)

    def sample(self, x_prev: torch.Tensor, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` independent draws of ``X_{t+1}`` given ``X_t = x_prev``: ``[n, *x_prev.shape]``."""
        check_positive_int(n, name="n")
        shape = (n, *x_prev.shape)
        means, _ = self._components(x_prev)
        cumulative = torch.tensor(self.weights, dtype=torch.float64).cumsum(0)[:-1].to(x_prev.device)
        uniform = torch.rand(shape, generator=generator, dtype=torch.float64, device=x_prev.device)
        component = (uniform.unsqueeze(-1) >= cumulative).sum(-1)  # [n, ...], the k with P(k) = w_k
        chosen = means.expand(*shape, -1).gather(-1, component.unsqueeze(-1)).squeeze(-1)
        noise = torch.randn(shape, generator=generator, dtype=x_prev.dtype, device=x_prev.device)
        return chosen + self.noise_scale * noise

    def simulate(
        self, num_sequences: int, num_steps: int = 24, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Sequences ``X_0 .. X_{num_steps}``: float64 ``[num_sequences, num_steps + 1, 1]``."""
        check_positive_int(num_sequences, name="num_sequences")
        check_positive_int(num_steps, name="num_steps")
        values = [torch.randn(num_sequences, generator=generator, dtype=torch.float64)]
        for _ in range(num_steps):
            values.append(self.sample(values[-1], 1, generator=generator)[0])
        return torch.stack(values, 1).unsqueeze(-1)

    def expected_predictive_mse(self, x_prev: torch.Tensor) -> torch.Tensor:
        """What :func:`predictive_mse` tends to for draws from this law given ``X_t = x_prev`` (same shape).

        ``sigma^2 + x_prev^2 sum_jk w_j w_k (c_j - c_k)^2``: ``sigma^2`` for Model I,
        ``sigma^2 + 2 p (1 - p) (alpha - beta)^2 x_prev^2`` for Model II.
        """
        spread = sum(
            wj * wk * (cj - ck) ** 2
            for wj, cj in zip(self.weights, self.coefficients)
            for wk, ck in zip(self.weights, self.coefficients)
        )
        return self.noise_var + spread * x_prev**2

    def predictive_metrics(self, samples: torch.Tensor, x: torch.Tensor) -> dict[str, float]:
        """The paper's Table 2 and Figure 2 figures of one-step predictive samples, pooled over sequences and steps.

        Args:
            samples: ``[S, B, T, 1]`` draws of ``x_t`` given ``x_{<t}`` (see :func:`predictive_mse`).
            x: the observed sequences ``[B, T, 1]``.

        Returns:
            ``predictive_mse`` and ``predictive_mse_std`` (mean and standard deviation over test
            sequences and steps, Table 2), ``true_predictive_mse`` (its value for the true law,
            averaged over the same steps), ``share_in_80`` and ``share_in_95`` (mean share of the
            samples inside the true 80 % and 95 % intervals, Figure 2).
        """
        mse = predictive_mse(self, samples, x)
        shares = interval_share(self, samples, x, levels=(0.8, 0.95))
        return {
            "predictive_mse": float(mse.mean()),
            "predictive_mse_std": float(mse.std()),
            "true_predictive_mse": float(self.expected_predictive_mse(x[:, :-1, 0].double()).mean()),
            "share_in_80": float(shares[0.8].mean()),
            "share_in_95": float(shares[0.95].mean()),
        }

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x_0, .., x_{T_b - 1})`` per sequence ``[B]`` of ``x [B, T, 1]`` (``mask`` ``[B, T]``)."""
        x, mask = check_sequences(x, mask, feature_size=1)
        values = x[..., 0]
        first = torch.distributions.Normal(0.0, 1.0).log_prob(values[:, 0])
        steps = self.log_prob(values[:, 1:], values[:, :-1]) * mask[:, 1:]
        return first * mask[:, 0] + steps.sum(1)


def model_one(alpha: float = 0.8, noise_var: float = 0.5) -> ARModel:
    """Model I: ``X_{t+1} = alpha X_t + sigma eps`` (the paper's ``alpha = 0.8``, ``sigma^2 = 0.5``)."""
    return ARModel((alpha,), (1.0,), noise_var, name="Model I")


def model_two(alpha: float = 0.9, beta: float | None = None, p: float = 0.7, noise_var: float = 0.3) -> ARModel:
    """Model II: coefficient ``alpha`` with probability ``p``, else ``beta`` (default ``0.6 alpha``), plus noise."""
    p = check_probability(p, name="p")
    if p in (0.0, 1.0):
        raise ValueError(f"p must be in (0, 1) for a two-component mixture, got {p}")
    return ARModel((alpha, 0.6 * alpha if beta is None else beta), (p, 1 - p), noise_var, name="Model II")


def model_three() -> ARModel:
    """Model III (not in the paper): coefficient ``0.95 / 0.3 / -0.6`` w.p. ``0.5 / 0.3 / 0.2``, ``sigma^2 = 0.2``."""
    return ARModel((0.95, 0.3, -0.6), (0.5, 0.3, 0.2), 0.2, name="Model III")


def ar_data(
    truth: ARModel, *, fold: int = 0, seed: int = 0, num_samples: int = 1000, num_steps: int = 24
) -> ExperimentData:
    """``num_samples`` sequences ``X_0 .. X_{num_steps}`` of ``truth``, split 80 / 10 / 10 by fold.

    The sequences depend only on ``seed`` (the same for every fold). They are cut into ten
    consecutive blocks of ``num_samples / 10``; fold ``k`` (0 to 4) tests on block ``2k`` and
    validates on block ``2k + 1`` and trains on the other eight, so the five test blocks are
    disjoint and the test and validation blocks of the five folds together cover every
    sequence once. (The sequences are i.i.d., so consecutive blocks are random blocks.)

    Returns:
        A :class:`~ppl_models.experiments.data.ExperimentData` with ``x [N, num_steps + 1, 1]`` (float32)
        and ``truth`` set (the runner then reports the true model's log-likelihood).
    """
    if not isinstance(truth, ARModel):
        raise TypeError(f"truth must be an ARModel, got {type(truth).__name__}")
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < NUM_FOLDS:
        raise ValueError(f"fold must be an int in 0..{NUM_FOLDS - 1}, got {fold!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    check_positive_int(num_samples, name="num_samples")
    if num_samples % 10:
        raise ValueError(f"num_samples must be a multiple of 10 (ten equal blocks), got {num_samples}")
    x = truth.simulate(num_samples, num_steps, generator=torch.Generator().manual_seed(seed)).float()
    blocks = list(x.split(num_samples // 10))
    test, valid = blocks[2 * fold], blocks[2 * fold + 1]
    train = torch.cat([b for i, b in enumerate(blocks) if i not in (2 * fold, 2 * fold + 1)])
    splits = [(part, torch.ones(part.shape[:2], dtype=torch.bool)) for part in (train, valid, test)]
    return ExperimentData(
        *splits,
        truth=truth,
        truth_metrics=truth.predictive_metrics,
        description=f"SMC Transformer synthetic {truth.name}: {truth!r}, "
        f"{num_samples} sequences of {num_steps + 1} values, fold {fold}, seed {seed}",
    )


def ar_model_one_data(fold: int = 0, seed: int = 0, num_samples: int = 1000) -> ExperimentData:
    """Model I data (``alpha = 0.8``, ``sigma^2 = 0.5``), see :func:`ar_data`."""
    return ar_data(model_one(), fold=fold, seed=seed, num_samples=num_samples)


def ar_model_two_data(fold: int = 0, seed: int = 0, num_samples: int = 1000) -> ExperimentData:
    """Model II data (``alpha = 0.9``, ``beta = 0.6 alpha``, ``p = 0.7``, ``sigma^2 = 0.3``), see :func:`ar_data`."""
    return ar_data(model_two(), fold=fold, seed=seed, num_samples=num_samples)


def ar_model_three_data(fold: int = 0, seed: int = 0, num_samples: int = 1000) -> ExperimentData:
    """Model III data (:func:`model_three`, a law not in the paper), see :func:`ar_data`."""
    return ar_data(model_three(), fold=fold, seed=seed, num_samples=num_samples)


def _check_samples(samples: torch.Tensor, x: torch.Tensor) -> None:
    x, _ = check_sequences(x, feature_size=1)
    if not isinstance(samples, torch.Tensor) or samples.dim() != 4 or samples.shape[1:] != x.shape:
        got = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(samples).__name__
        raise ValueError(f"samples must have shape [S, B, T, 1] with [B, T, 1] = {tuple(x.shape)} of x, got {got}")
    if x.shape[1] < 2:
        raise ValueError(f"x needs at least 2 steps (one transition), got {x.shape[1]}")


def predictive_mse(truth: ARModel, samples: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The "mean squared error of the predictive distribution" of the paper's Table 2, per test step.

    SMC Transformer paper, section 4.1 and Table 2: from the draws ``X^_{t+1}`` of a model's
    predictive law of ``X_{t+1}`` given ``X_{0:t}``, the empirical estimate of

    * Model I: ``E[(X^_{t+1} - alpha X_t)^2 | X_t]`` (its true value is ``sigma^2``);
    * Model II: ``p E[(X^_{t+1} - alpha X_t)^2 | X_t] + (1 - p) E[(X^_{t+1} - beta X_t)^2 | X_t]``,

    in general ``sum_k w_k mean_s (X^_s - c_k X_t)^2`` over ``truth``'s components. A model
    with the true predictive law scores ``sigma^2`` (Model I), or ``sigma^2 + 2 p (1 - p)
    (alpha - beta)^2 X_t^2`` (Model II); the table reports the mean and standard deviation
    over test sequences and steps.

    Args:
        truth: the generating :class:`ARModel`.
        samples: ``[S, B, T, 1]``; ``samples[:, b, t]`` are draws of ``x_t`` given ``x[b, :t]``
            (those at ``t = 0``, predicted without a past, are not scored).
        x: the observed sequences ``[B, T, 1]``.

    Returns:
        ``[B, T - 1]``: entry ``[b, t]`` scores the predictive of ``x[b, t + 1]`` given ``x[b, :t + 1]``.
    """
    _check_samples(samples, x)
    means, weights = truth._components(x[:, :-1, 0].to(samples.dtype))  # [B, T-1, K]
    squared = (samples[:, :, 1:, 0].unsqueeze(-1) - means) ** 2  # [S, B, T-1, K]
    return (squared.mean(0) * weights).sum(-1)


def interval_share(
    truth: ARModel, samples: torch.Tensor, x: torch.Tensor, levels: Sequence[float] = (0.8, 0.95)
) -> dict[float, torch.Tensor]:
    """Share of predictive samples inside the true central intervals: the paper's Figure 2, per test step.

    SMC Transformer paper, section 4.1 and Figure 2: for each test sequence and step, the
    frequency of a model's draws of ``X_{t+1}`` given ``X_{0:t}`` that fall in the true 80 %
    and 95 % intervals of ``X_{t+1}`` given ``X_t`` (:meth:`ARModel.interval`); a model with
    the true predictive law scores ``level`` on average (the paper's histograms pool these
    over the 100 test sequences and all steps).

    Args:
        truth: the generating :class:`ARModel`.
        samples: ``[S, B, T, 1]`` as in :func:`predictive_mse` (step 0 is not scored).
        x: the observed sequences ``[B, T, 1]``.
        levels: interval levels in ``(0, 1)``.

    Returns:
        ``{level: [B, T - 1]}``: the share of the ``S`` draws of ``x[b, t + 1]`` inside the interval.
    """
    _check_samples(samples, x)
    prev = x[:, :-1, 0]
    draws = samples[:, :, 1:, 0]
    shares = {}
    for level in levels:
        low, high = truth.interval(prev, level)
        inside = (draws >= low.to(draws.dtype)) & (draws <= high.to(draws.dtype))
        shares[level] = inside.to(draws.dtype).mean(0)
    return shares

"""The names and values of the sequence-model protocol (:mod:`ppl_models.inference.protocol`): the capabilities a
model declares, what its programs draw unconditioned, the estimators and the noise refits, and the values its methods
return (:class:`Score`, :class:`OneStepPredictive`, :class:`Generation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from .validation import check_positive_int

__all__ = [
    "CAPABILITIES",
    "UNCONDITION",
    "ESTIMATORS",
    "NOISE_REFITS",
    "Score",
    "Unsupported",
    "OneStepPredictive",
    "Generation",
    "check_num_samples",
]

#: capability name -> what it provides (see the module docstring)
CAPABILITIES = {
    "programs": "Pyro model(x, mask) / guide(x, mask)",
    "exact": "exact log_likelihood(x, mask) -> [B]",
    "latent": "a guide over latent sites: ELBO and IWAE-K are bounds",
    "particles": "particle-model interface: ParticleFilter and SMC-K",
    "predictive": "one-step-ahead predictive(x, mask, num_samples)",
    "generate": "generate(num_steps, num_sequences=1, prefix=None)",
    "forecast": "forecast(x, mask, horizon, num_samples)",
}
#: what a model's ``model`` program draws when its observed sites are unconditioned
UNCONDITION = {
    "teacher-forced": "one-step draws of each x_t given the observed x_{<t}: a deterministic state computed from "
    "the data in one pass (SRNN's GRU, the exact predictors) does not read the drawn values",
    "free": "a free simulation: each drawn x_t (y_t) feeds the next step, the observed values are not read",
}
#: log-likelihood estimator -> the capability it needs
ESTIMATORS = {"exact": "exact", "elbo": "latent", "iwae": "latent", "smc": "particles"}
#: how :meth:`SequenceModel.refit_noise` may refit a predictive's noise: the shape of the errors (``auto`` chooses
#: by held-out likelihood), with ``+state`` for a scale that depends on the model's state
NOISE_REFITS = (
    "auto+state",
    "student-t+state",
    "empirical+state",
    "normal+state",
    "auto",
    "student-t",
    "empirical",
    "normal",
)


class Score(NamedTuple):
    """A log-likelihood estimate: its name (``exact``, ``elbo``, ``iwae-K``, ``smc-K``) and ``[B]`` nats."""

    estimator: str
    log_likelihood: torch.Tensor


class Unsupported(NotImplementedError):
    """A protocol method the model has declared it cannot serve; the message gives its reason."""


@dataclass
class OneStepPredictive:
    """The one-step-ahead predictive ``p(x_t | x_{<t})`` of a batch ``x [B, T, D]``.

    Attributes:
        samples: ``[S, B, T, D]`` draws (``None`` when ``num_samples = 0``).
        mean: ``[B, T, D]`` ``E[x_t | x_{<t}]`` (note probabilities for binary data).
        log_density: ``[B, T]`` ``log p(x_t | x_{<t})`` in nats, exact or (particle models)
            the filter's estimate, whose sum over ``t`` is the SMC log-evidence; 0 at padding;
            ``None`` where the model has no density.
        source: where the draws come from, in words, for reports.
    """

    samples: torch.Tensor | None
    mean: torch.Tensor
    log_density: torch.Tensor | None
    source: str


@dataclass
class Generation:
    """Sequences drawn from a model: ``x [B, T, D]`` and the emission means ``[B, T, D]`` they were drawn from.

    A prefix, when one was given, comes first, with its own values in place of means.
    ``mean`` is ``None`` for a model whose simulator gives draws only.
    """

    x: torch.Tensor
    mean: torch.Tensor | None


def check_num_samples(num_samples, *, allow_zero: bool = True) -> int:
    """``num_samples`` as an int ``>= 0`` (``>= 1`` unless ``allow_zero``), else a ``ValueError`` naming it."""
    if allow_zero and not isinstance(num_samples, bool) and isinstance(num_samples, int) and num_samples == 0:
        return 0
    return check_positive_int(num_samples, name="num_samples")

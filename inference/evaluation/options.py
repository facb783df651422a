"""How :func:`~ppl_models.inference.evaluation.evaluate` judges a model: :class:`EvaluationOptions`, each setting
checked once, by name, when the options are made; :meth:`EvaluationOptions.plan` says what they ask of a model."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..defaults import EVALUATION_IWAE_PARTICLES, EVALUATION_PARTICLES
from ..protocol import ESTIMATORS, NOISE_REFITS
from ..validation import check_choice, check_draw_count, check_positive_int, check_seed

__all__ = ["EvaluationOptions", "Plan", "EVALUATION_PARTICLES"]

#: estimators that bound ``log p`` of whole sequences only (skipped where scored steps follow a context)
CONTEXT_FREE_ONLY = ("elbo", "iwae")


@dataclass(frozen=True)
class EvaluationOptions:
    """The settings of an evaluation; ``dataclasses.replace`` makes a changed copy (checked again).

    Attributes:
        estimators: which of ``exact``, ``elbo``, ``iwae``, ``smc`` to compute
            (:data:`~ppl_models.inference.protocol.ESTIMATORS`); those a model cannot give are listed under
            ``skipped_estimators`` with its reasons.
        num_particles: ``K`` of the SMC estimate (and of its predictive draws; default
            :data:`~ppl_models.inference.defaults.EVALUATION_PARTICLES`).
        iwae_particles: ``K`` of the IWAE bound (default
            :data:`~ppl_models.inference.defaults.EVALUATION_IWAE_PARTICLES`).
        predictive_samples: one-step-ahead draws per step for calibration (real-valued data; 0: none, else at
            least 2: coverage and interval widths need a spread).
        posterior_draws: draws of the guide for PSIS-LOO / WAIC (0: none, else at least 2); memory grows with
            ``posterior_draws *`` the data's size.
        batch_size: sequences per batch (taken in order of length, each batch cut to its longest).
        particle_chunk: IWAE particles per vectorised pass (``None``: all at once); memory grows with
            ``particle_chunk * batch_size *`` sequence length.
        noise_refit: ``"none"`` keeps a model's trained noise; one of
            :data:`~ppl_models.inference.protocol.NOISE_REFITS` first refits it on the validation split
            (:meth:`~ppl_models.inference.protocol.SequenceModel.refit_noise`: a one-step predictor's, kept only
            where it improves held-out NLPD; this changes the model).
        seed: Pyro's seed, set before anything is drawn, for repeatable draws (``None``: the current state).
    """

    estimators: tuple[str, ...] = tuple(ESTIMATORS)
    num_particles: int = EVALUATION_PARTICLES
    iwae_particles: int = EVALUATION_IWAE_PARTICLES
    predictive_samples: int = 200
    posterior_draws: int = 0
    batch_size: int = 64
    particle_chunk: int | None = 25
    noise_refit: str = "none"
    seed: int | None = None

    def __post_init__(self):
        checked = {"estimators": _check_estimators(self.estimators)}
        for name in ("num_particles", "iwae_particles", "batch_size"):
            checked[name] = check_positive_int(getattr(self, name), name=name)
        for name in ("predictive_samples", "posterior_draws"):
            checked[name] = check_draw_count(getattr(self, name), name=name)
        if self.particle_chunk is not None:
            checked["particle_chunk"] = check_positive_int(self.particle_chunk, name="particle_chunk")
        check_choice(self.noise_refit, ("none", *NOISE_REFITS), name="noise_refit")
        checked["seed"] = check_seed(self.seed)
        for name, value in checked.items():  # numpy integers become ints, a list of estimators a tuple
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict:
        """The settings as JSON values (``estimators`` a list)."""
        return {**dataclasses.asdict(self), "estimators": list(self.estimators)}

    def plan(self, model, *, binary: bool) -> Plan:
        """What these options ask of ``model`` on binary (or real-valued) data."""
        wanted = [name for name in self.estimators if model.supports(ESTIMATORS[name])]
        skipped = {
            name: model.limitations.get(ESTIMATORS[name], f"no {ESTIMATORS[name]}")
            for name in self.estimators
            if name not in wanted
        }
        posterior = bool(self.posterior_draws) and model.supports("programs") and not model.conditional
        return Plan(wanted, skipped, "smc" in wanted, binary, 0 if binary else self.predictive_samples, posterior)


@dataclass(frozen=True)
class Plan:
    """What an evaluation computes for one model.

    ``wanted``: the estimators it gives; ``skipped``: the others, with its reasons; ``by_filter``: the one-step
    predictive comes from the SMC filter (else from the model's ``predictive``); ``binary``: the data is judged
    as binary; ``samples``: one-step draws per step (0 for binary data); ``posterior``: the guide is drawn for
    PSIS-LOO / WAIC.
    """

    wanted: list[str]
    skipped: dict[str, str]
    by_filter: bool
    binary: bool
    samples: int
    posterior: bool

    def given_context(self) -> Plan:
        """This plan for scored steps that follow a context: the bounds of whole sequences (``elbo``, ``iwae``) and
        PSIS-LOO give no figure of the scored steps alone, and are skipped with that reason."""
        whole = [name for name in self.wanted if name in CONTEXT_FREE_ONLY]
        reason = (
            "a bound on log p of whole sequences: it gives no figure of scored steps given their context "
            "(exact and smc do)"
        )
        skipped = {**self.skipped, **dict.fromkeys(whole, reason)}
        if self.posterior:
            skipped["loo"] = "PSIS-LOO / WAIC score whole sequences, not scored steps given their context"
        wanted = [name for name in self.wanted if name not in whole]
        if not wanted:
            raise ValueError(
                f"estimators {list(self.wanted)}: none scores steps given their context; ask for exact "
                "or smc (a model with an exact likelihood or a particle form)"
            )
        return dataclasses.replace(self, wanted=wanted, skipped=skipped, posterior=False)


def _check_estimators(estimators) -> tuple[str, ...]:
    """``estimators`` (a list or tuple of names of ``ESTIMATORS``, not empty) as a tuple."""
    if (
        not isinstance(estimators, (list, tuple))
        or not estimators
        or any(name not in ESTIMATORS for name in estimators)
    ):
        raise ValueError(f"estimators must be a non-empty list from {list(ESTIMATORS)}, got {estimators!r}")
    return tuple(estimators)

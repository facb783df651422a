"""The sequence-model protocol: the questions every model of the collection answers.

A model is a :class:`SequenceModel` (an ``nn.Module``) that *declares* what it can do in
``capabilities``, a frozenset of the names below, and says in ``limitations`` why it cannot
do the rest. The runner, forecasts, plots and calibration read the declaration and call the
methods; nothing guesses with ``hasattr``. A method the model cannot serve raises
:class:`Unsupported` (a ``NotImplementedError``) with the model's own reason.

==============  =====================================================================================
capability      what the model then provides
==============  =====================================================================================
``programs``    Pyro ``model(x, mask)`` / ``guide(x, mask)``, for ``SVI``, ``Predictive`` and the
                shared ``ELBO`` / ``IWAE`` (a model without latent variables has one observed site
                and an empty guide)
``exact``       ``log_likelihood(x, mask) -> [B]``, exact ``log p(x_{1:T_b})``: objective ``exact``
``latent``      the guide samples latent sites, so ``ELBO`` and ``IWAE-K`` are bounds below ``log p(x)``
``particles``   ``start`` / ``step`` / ``simulate`` / ``predict_mean`` for
                :class:`~ppl_models.inference.particle_filter.ParticleFilter`: the ``SMC-K`` bound
``predictive``  ``predictive(x, mask, num_samples) -> OneStepPredictive``: draws of ``x_t`` given
                ``x_{<t}`` ``[S, B, T, D]``, their mean and, where it exists, the per-step log density
``generate``    ``generate(num_steps, num_sequences=1, prefix=None) -> Generation``
``forecast``    ``forecast(x, mask, horizon, num_samples) -> [S, B, H, D]``: joint draws of the
                ``horizon`` steps after each sequence's last valid step
==============  =====================================================================================

A *conditional* model (``conditional = True``: the PF-RNN predictor) reads inputs ``x`` and
describes targets ``y``: its ``predictive`` draws ``y_t`` given ``x_{<=t}``.

A model with programs also declares what its ``model`` draws under ``pyro.poutine.uncondition``
(or ``Predictive`` without the data), ``uncondition``, one of :data:`UNCONDITION`. To simulate,
call ``generate`` or ``forecast``, which mean the same on every model.

The names and the value types live in :mod:`ppl_models.inference.protocol_terms` (and are imported from here too); the
default ``K`` of the particle methods is :data:`ppl_models.inference.defaults.METHOD_PARTICLES`.

The base class gives particle models (``particles``) their ``predictive`` and ``forecast``
from the shared filter (:func:`particle_predictive`, :func:`particle_forecast`); everything
else a model writes itself. :data:`ESTIMATORS` says which log-likelihood estimate needs which
capability, and :meth:`SequenceModel.score` scores data by any of them. A model whose predictive
has a noise of its own (a one-step predictor) refits it on validation data in
:meth:`SequenceModel.refit_noise` (:data:`NOISE_REFITS`), which the evaluation calls; the others
keep the default, which does nothing. Each instance registers
its parameters in Pyro's parameter store under a name of its own (``pyro_name``);
:meth:`SequenceModel.save_params` / :meth:`SequenceModel.load_params` save and reload them
whatever that name is.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import ClassVar

import torch
from pyro.params import param_with_module_name

from .declarations import DeclaredModel
from .defaults import METHOD_PARTICLES
from .forecast import forecast as _forecast_particles
from .objectives import ELBO, IWAE
from .params import load_params as _load_params
from .params import save_params as _save_params
from .particle_filter import ParticleFilter
from .protocol_terms import (
    CAPABILITIES,
    ESTIMATORS,
    NOISE_REFITS,
    UNCONDITION,
    Generation,
    OneStepPredictive,
    Score,
    Unsupported,
    check_num_samples,
)
from .saturation import saturate
from .validation import check_positive_int, check_sequences

__all__ = [
    "CAPABILITIES",
    "ESTIMATORS",
    "UNCONDITION",
    "NOISE_REFITS",
    "SequenceModel",
    "OneStepPredictive",
    "Generation",
    "Score",
    "Unsupported",
    "particle_predictive",
    "particle_forecast",
    "exact_predictive",
    "check_num_samples",
    "model_device",
]

#: instances made so far per Pyro name prefix (each instance gets a name of its own)
_INSTANCES: defaultdict[str, itertools.count] = defaultdict(itertools.count)


class SequenceModel(DeclaredModel):
    """Base class of the collection's models: declared capabilities and the protocol's methods.

    A subclass sets ``capabilities`` (names of :data:`CAPABILITIES`), ``limitations``
    (capability -> why not, for every one it lacks), a one-line ``description``, and
    overrides the methods of its capabilities. Methods of capabilities it lacks raise
    :class:`Unsupported` with the stated reason.

    Each instance registers its parameters in Pyro's parameter store under a name of its own,
    ``pyro_name``: the class's ``pyro_prefix`` (default: the class name, lower case) for the
    first instance, then ``<prefix>_1``, ``<prefix>_2``, ... in order of creation, so that two
    models train side by side in one store. Assign ``pyro_name`` to choose another. The default
    depends on how many instances the process has made: save and reload parameters with
    :meth:`save_params` / :meth:`load_params` (or a ``state_dict``), whose names are relative
    to the model, not with the store's names.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset()
    limitations: ClassVar[dict[str, str]] = {}
    description: ClassVar[str] = ""
    #: start of the instances' names in Pyro's parameter store (``None``: the class name, lower case)
    pyro_prefix: ClassVar[str | None] = None
    #: what ``model`` draws under ``poutine.uncondition`` (a key of :data:`UNCONDITION`; ``None``: no programs)
    uncondition: ClassVar[str | None] = None
    #: its ``predictive(x, mask, num_samples, scored=...)`` estimates its parameters on each row's context (the valid
    #: steps before the scored ones), as a classical forecaster does: its exact figure is then its one-step densities'
    fits_context: ClassVar[bool] = False
    #: leading steps of every sequence that are only read as inputs, not modelled (0: every valid step is
    #: modelled); a model reading the first step as its first input ``u_1`` (data files that give it) sets 1, and
    #: its data marks those steps unscored; objectives count only the modelled steps
    input_steps: int = 0

    def __init__(self):
        super().__init__()
        prefix = self.pyro_prefix or type(self).__name__.lower()
        number = next(_INSTANCES[prefix])
        self.pyro_name = prefix if number == 0 else f"{prefix}_{number}"

    @property
    def pyro_name(self) -> str:
        """The name of the instance's parameters in Pyro's parameter store (``<pyro_name>$$$<parameter>``)."""
        return self._pyro_name

    @pyro_name.setter
    def pyro_name(self, name: str) -> None:
        if not isinstance(name, str) or not name or param_with_module_name("", "") in name:
            raise ValueError(f"pyro_name must be a non-empty string without '$$$', got {name!r}")
        self._pyro_name = name

    def save_params(self, path) -> Path:
        """Write the parameters and buffers, by names relative to the model, to ``path`` (atomically)."""
        return _save_params(self, path)

    def load_params(self, path, *, name: str | None = None) -> SequenceModel:
        """Load parameters from :meth:`save_params`, a ``state_dict``, a ``Trainer`` checkpoint or a Pyro store file.

        Whatever ``pyro_name`` the model had when saved: a Pyro parameter-store file is matched by
        the relative names (``name``: the Pyro name to read, when the file holds several models
        with these parameters). A file lacking any of the model's parameters raises ``ValueError``.
        Returns the model (see :func:`ppl_models.inference.params.load_params`).
        """
        return _load_params(self, path, name=name)

    def supports(self, capability: str) -> bool:
        """Whether the model declares ``capability`` (one of :data:`CAPABILITIES`)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"capability must be one of {sorted(CAPABILITIES)}, got {capability!r}")
        return capability in self.capabilities

    def require(self, capability: str) -> None:
        """Raise :class:`Unsupported` with the model's reason unless it declares ``capability``."""
        if not self.supports(capability):
            reason = self.limitations.get(capability, "not declared in its capabilities")
            raise Unsupported(f"{type(self).__name__} has no {capability} ({CAPABILITIES[capability]}): {reason}")

    # --- the protocol (subclasses override what they declare) ----------------------------------
    def check_values(self, x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
        """Raise ``ValueError`` for valid entries of ``x [B, T, D]`` that the likelihood cannot score.

        Called by :func:`ppl_models.inference.validation.check_sequences` (after the shape, dtype and
        finiteness checks) at every entry point, so a bad value is refused before any Pyro
        program runs. The default accepts every finite value.
        """

    def model(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro generative program over ``x [B, T, D]`` (``mask [B, T]``)."""
        self.require("programs")
        raise NotImplementedError(f"{type(self).__name__} declares programs but defines no model")

    def guide(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro inference program matching :meth:`model`."""
        self.require("programs")
        raise NotImplementedError(f"{type(self).__name__} declares programs but defines no guide")

    def log_likelihood(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Exact ``log p(x_{1:T_b})`` per sequence, ``[B]``."""
        self.require("exact")
        raise NotImplementedError(f"{type(self).__name__} declares exact but defines no log_likelihood")

    def score(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        estimator: str | None = None,
        *,
        num_particles: int = METHOD_PARTICLES,
    ) -> Score:
        """``log p(x_{1:T_b})`` of each sequence of ``x [B, T, D]``, exact or estimated, in nats.

        ``estimator``: ``"exact"``, ``"elbo"``, ``"iwae"`` or ``"smc"`` (:data:`ESTIMATORS` says
        which capability each needs); by default the best the model declares: exact, else SMC,
        else IWAE. ``num_particles``: ``K`` of IWAE-K and SMC-K. A log-density below the dtype's
        range (a float32 outlier of 1e30) is held at the dtype's lowest value, with one
        ``RuntimeWarning``; a model whose network overflows on such a value (NaN) raises one
        ``ValueError`` naming the step (:mod:`ppl_models.inference.saturation`).
        """
        if estimator is None:
            estimator = next((name for name in ("exact", "smc", "iwae") if self.supports(ESTIMATORS[name])), None)
            if estimator is None:
                raise Unsupported(
                    f"{type(self).__name__} declares no way to score x: "
                    f"{self.limitations.get('exact', 'no exact likelihood, guide or particle form')}"
                )
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {sorted(ESTIMATORS)}, got {estimator!r}")
        self.require(ESTIMATORS[estimator])
        if estimator == "exact":
            return Score("exact", self.log_likelihood(x, mask))
        if estimator == "elbo":
            return Score("elbo", ELBO(self, mean_field=True)(x, mask).bound)
        if estimator == "iwae":
            return Score(f"iwae-{num_particles}", IWAE(self, num_particles)(x, mask).bound)
        return Score(f"smc-{num_particles}", ParticleFilter(num_particles).run(self, x, mask).log_evidence)

    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        num_particles: int = METHOD_PARTICLES,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """The one-step-ahead predictive of ``x [B, T, D]``: draws ``[S, B, T, D]``, mean, log density.

        Particle models get it from the shared filter with ``num_particles`` (its log density
        is the filter's estimate); ``num_samples = 0`` skips the draws.
        """
        self.require("predictive")
        if not self.supports("particles"):
            raise NotImplementedError(f"{type(self).__name__} declares predictive but defines none")
        return particle_predictive(self, x, mask, num_samples, num_particles=num_particles, generator=generator)

    def generate(
        self,
        num_steps: int,
        *,
        num_sequences: int = 1,
        prefix: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Generation:
        """``num_steps`` new steps of ``num_sequences`` sequences, or after each row of ``prefix [B, P, D]``."""
        self.require("generate")
        raise NotImplementedError(f"{type(self).__name__} declares generate but defines none")

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
        """``[S, B, H, D]`` joint draws of the ``horizon`` steps after each sequence of ``x [B, T, D]``.

        Particle models filter ``x`` with ``num_particles`` and simulate on from the final
        weighted particles (:func:`particle_forecast`).
        """
        self.require("forecast")
        if not self.supports("particles"):
            raise NotImplementedError(f"{type(self).__name__} declares forecast but defines none")
        return particle_forecast(self, x, mask, horizon, num_samples, num_particles=num_particles, generator=generator)

    def parameter_count(self) -> int:
        """How many numbers the model has learned (its parameters' entries; a classical forecaster counts its own)."""
        return sum(p.numel() for p in self.parameters())

    def initialize(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> SequenceModel:
        """A data-driven start from training data (two-stage regression, say); by default none."""
        return self

    def refit_noise(self, x: torch.Tensor, mask: torch.Tensor | None, how: str) -> dict | None:
        """Refit the predictive's noise on validation data ``x [B, T, D]`` (held out from training), ``how`` one of
        :data:`NOISE_REFITS`; this changes the model.

        Returns the record of what was done (the evaluation's ``noise_refit``), or ``None`` where the model has no
        noise of its own to refit (the default; a one-step predictor overrides it).
        """
        return None


def model_device(model) -> torch.device:
    """The device of ``model``'s first parameter or buffer (the CPU for a model with neither)."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def exact_predictive(
    distribution,
    x: torch.Tensor,
    mask: torch.Tensor,
    samples: torch.Tensor | None,
    source: str = "the exact predictive",
) -> OneStepPredictive:
    """The one-step predictive of an exact ``p(x_t | x_{<t})`` (batch ``[B, T]``, event ``[D]``) and its ``samples``.

    A log density below the dtype's range is held at its lowest value, with a warning, as the
    filter's increments are (:func:`ppl_models.inference.saturation.saturate`).
    """
    log_density = saturate(distribution.log_prob(x), mask, what="the one-step log-density")
    return OneStepPredictive(samples, distribution.mean, log_density, source)


@torch.no_grad()
def particle_predictive(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    num_samples: int = 100,
    *,
    num_particles: int = METHOD_PARTICLES,
    generator: torch.Generator | None = None,
) -> OneStepPredictive:
    """The one-step predictive of a particle model from one run of the shared filter.

    ``samples`` are the filter's predictive draws, ``mean`` its weighted ``predict_mean``, and
    ``log_density`` its increments ``log p̂(x_t | x_{<t})`` (their sum is the SMC-K log-evidence).
    """
    num_samples = check_num_samples(num_samples)
    result = ParticleFilter(num_particles, generator=generator).run(
        model, x, mask, predictive_samples=num_samples, predictive_mean=True
    )
    return OneStepPredictive(
        result.predictive, result.predictive_mean, result.log_evidence_steps, f"the smc-{num_particles} filter"
    )


@torch.no_grad()
def particle_forecast(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    horizon: int = 1,
    num_samples: int = 100,
    *,
    num_particles: int = METHOD_PARTICLES,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``[S, B, H, D]``: filter ``x`` with ``num_particles``, then simulate from the final weighted particles."""
    x, mask = check_sequences(x, mask)
    check_positive_int(horizon, name="horizon")
    check_num_samples(num_samples, allow_zero=False)
    result = ParticleFilter(num_particles, generator=generator).run(model, x, mask)
    return _forecast_particles(model, result, horizon, num_samples, generator=generator)

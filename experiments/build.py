"""From a checked configuration to what a run trains: the device, the data, the model and its objective.

:func:`build_experiment` builds them from the ``[data]``, ``[model]`` and ``[objective]`` tables
(:mod:`ppl_models.experiments.registry`), or takes them from :func:`build_once`, which a command that has already
built them to check a configuration (``ppl-models train MODEL --data FILE``) calls, so that they are built once;
:func:`check_trainable` then refuses, before any run folder is
written, data the model cannot take (non-finite values, another feature size, values its emission cannot
represent) and evaluation settings the machine's memory cannot hold.
"""

from __future__ import annotations

import json

import pyro
import torch
from pyro.util import get_rng_state, set_rng_state

from ppl_models.covariate_model import CovariateInputs
from ppl_models.exact_predictive_model import ExactPredictiveModel
from ppl_models.inference.rollout import LatentRollout
from ppl_models.inference.validation import SettingError, check_sequences

from . import recipes
from .config import evaluation_options
from .memory_guard import check_memory, evaluation_memory
from .registry import DATASETS, MODELS, build, build_objective

__all__ = [
    "resolve_device",
    "build_experiment",
    "build_once",
    "check_trainable",
    "check_finite",
    "check_model_takes",
    "with_covariates",
    "COVARIATE_REFUSAL",
    "CovariatesRefused",
]

SPLITS = ("train", "valid", "test")
#: what :func:`build_once` built, for the next :func:`build_experiment` (at most one entry, taken once):
#: ``{key of the configuration: (data, model, objective, the random state building left)}``
_KEPT: dict[str, tuple] = {}


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available here")
    device = torch.device(name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r} requested but there are {torch.cuda.device_count()} CUDA devices")
    return device


def build_experiment(config: dict):
    """``(data, model, objective)`` of a checked configuration: its
    :class:`~ppl_models.experiments.data.ExperimentData`, the model for the data's feature size, and the objective
    around the model. Bad settings and unreadable data files are one ``ValueError`` naming them.

    What :func:`build_once` kept for the same configuration is taken instead (once), with the random state its
    building left, as if built here right after ``pyro.set_rng_seed(config["seed"])``: the figures are the same.
    """
    kept = _KEPT.pop(_key(config), None)
    _KEPT.clear()  # kept for another configuration: never taken
    if kept is not None:
        *built, state = kept
        set_rng_state(state)
        return tuple(built)
    data = build(config["data"], DATASETS, "data")  # reads no global random state
    return (data, *_model_and_objective(config, data))


def build_once(config: dict, data) -> tuple:
    """``(model, objective)`` of a checked ``config`` around ``data`` (built from ``config["data"]``), built as
    :func:`build_experiment` builds them after ``pyro.set_rng_seed(config["seed"])`` and kept for its next call with
    the same ``[data]``, ``[model]``, ``[objective]`` and ``seed``. The caller's random state is left as it was."""
    state = get_rng_state()
    pyro.set_rng_seed(config["seed"])
    try:
        model, objective = _model_and_objective(config, data)
        _KEPT.clear()
        _KEPT[_key(config)] = (data, model, objective, get_rng_state())
    finally:
        set_rng_state(state)
    return model, objective


#: why a model that is neither an exact one-step predictor nor a recurrent latent model takes no covariates
COVARIATE_REFUSAL = (
    "its filter weighs every column of a step as one observation (a linear-Gaussian state, or the SMC "
    "Transformer's particle attention), so it would model the covariates rather than read them; the models that "
    "read them: the exact one-step predictors (GRU, recurrent, PSRNN, MC-dropout, Transformer forecaster) and "
    "the recurrent latent models (SRNN, VRNN)"
)


class CovariatesRefused(SettingError):
    """A model that cannot read the data's covariates (:func:`with_covariates`); a board leaves it out and says why."""


def _model_and_objective(config: dict, data) -> tuple:
    model = build(config["model"], MODELS, "model", obs_dim=data.obs_dim)
    model = with_covariates(model, getattr(data, "covariates", None), config["model"].get("name"))
    return model, build_objective(config["objective"], model)


def with_covariates(model, layout, name: str | None):
    """``model`` (built for every column of data read with the covariate ``layout``) as a model of the targets that
    reads the covariates as inputs: an exact one-step predictor in
    :class:`~ppl_models.covariate_model.CovariateInputs`, a recurrent latent model
    (:class:`~ppl_models.inference.rollout.LatentRollout`) by its own
    :meth:`~ppl_models.inference.rollout.LatentRollout.read_covariates`; ``model`` itself where ``layout`` is
    ``None``. Any other model is refused, a :class:`~ppl_models.inference.validation.SettingError` of ``covariates``
    naming it and the reason."""
    if layout is None:
        return model
    if isinstance(model, LatentRollout) and model.layout is None:
        model.read_covariates(layout)
        return model
    if not isinstance(model, ExactPredictiveModel) or isinstance(model, CovariateInputs):
        key = "covariates" if layout.known else "past_covariates"
        raise CovariatesRefused(
            key, f"{{{key}}}: model {name or type(model).__name__!r} cannot read covariates: {COVARIATE_REFUSAL}"
        )
    return CovariateInputs(model, layout)


def _key(config: dict) -> str:
    """What building reads of ``config``, as one string."""
    read = {name: config.get(name) for name in ("seed", "data", "model", "objective")}
    return json.dumps(read, sort_keys=True, default=str)


def check_trainable(config: dict, data, model) -> None:
    """Refuse, before anything is written, what would fail later: :func:`check_finite`, :func:`check_model_takes`,
    and the memory ``config``'s ``[evaluate]`` settings need (:func:`.memory_guard.check_memory`)."""
    check_finite(data)
    check_model_takes(model, data, config)
    check_memory(evaluation_memory(model, data, evaluation_options(config["evaluate"])))


def check_model_takes(model, data, config: dict) -> None:
    """One ``ValueError`` before any run folder is written if ``model`` cannot read ``data`` (its input-only
    steps, its feature size, or values its emission cannot take: non-binary data for a Bernoulli model, binary data
    for a Gaussian one)."""
    name = config["model"].get("name")
    wanted, reads = getattr(data, "input_steps", 0), getattr(model, "input_steps", 0)
    if wanted != reads:
        raise ValueError(
            f"model {name!r} cannot take data {data.description!r}: its sequences start with {wanted} input-only "
            f"step(s), and the model reads {reads} (set first_step_is_input = {str(bool(wanted)).lower()} in [model])"
        )
    if data.binary and name in recipes.EMISSIONS and getattr(model, "emission_kind", "gaussian") == "gaussian":
        raise recipes.DataNotRepresentable(recipes.binary_refusal(name, getattr(model, "emission_kind", "gaussian")))
    for split in SPLITS:
        try:
            check_sequences(*getattr(data, split), model=model, name=f"the {split} split")
        except (ValueError, TypeError) as error:
            raise ValueError(f"model {name!r} cannot take data {data.description!r}: {error}") from None


def check_finite(data) -> None:
    """Raise ``ValueError`` if a valid step of a split of ``data`` holds NaN or inf (padding may hold anything)."""
    for split in SPLITS:
        x, mask = getattr(data, split)
        bad = ~torch.isfinite(x) & (mask.unsqueeze(-1) if mask is not None else True)
        if bool(bad.any()):
            sequence, step, feature = (int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"data {data.description!r}: the {split} split holds {int(bad.sum())} NaN or inf values "
                f"at valid steps, the first at sequence {sequence}, step {step}, feature {feature}"
            )

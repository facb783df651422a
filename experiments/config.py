"""Experiment configuration: TOML files with command-line overrides; unknown keys are errors.

A configuration has top-level ``name``, ``seed`` and ``device`` and five sections:

* ``[data]``: ``name`` (see ``ppl-models list``) and that data set's parameters;
* ``[model]``: ``name`` and the model's parameters;
* ``[objective]``: ``name`` (``exact``, ``mse``, ``elbo``, ``iwae``, ``smc``) and its parameters;
* ``[train]``: the fields of :class:`ppl_models.inference.training.TrainConfig`;
* ``[evaluate]``: the fields of :class:`EvaluateConfig`.

Overrides are ``section.key=value`` strings whose value is parsed as a TOML literal
(``train.lr=0.01``, ``objective.gradient="stop_weights"``, ``evaluate.estimators=["smc"]``);
a value that is not valid TOML is taken as a string (``objective.name=iwae``).
"""

from __future__ import annotations

import copy
import inspect
import math
import re
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import tomllib

from ppl_models import predictive_noise

__all__ = ["EvaluateConfig", "load_config", "read_toml", "apply_overrides", "check_config", "check_common",
           "check_arguments", "SECTIONS", "ESTIMATORS"]

SECTIONS = ("data", "model", "objective", "train", "evaluate")
TOP_LEVEL = {"name": "experiment", "seed": 0, "device": "auto"}
ESTIMATORS = ("exact", "elbo", "iwae", "smc")
NOISE_REFITS = (*predictive_noise.NOISE_REFITS, "none")


@dataclass
class EvaluateConfig:
    """How a trained model is evaluated on the test split.

    Attributes:
        estimators: which of ``exact``, ``elbo``, ``iwae``, ``smc`` to report (those the
            model declares it supports, :data:`ppl_models.inference.protocol.ESTIMATORS`; the others are
            listed in the metrics under ``skipped_estimators`` with the model's reasons).
        num_particles: ``K`` of the SMC estimate and of its predictive samples.
        iwae_particles: ``K`` of the IWAE bound.
        predictive_samples: one-step-ahead predictive draws per step, for calibration (0: none).
        posterior_draws: draws of a model's guide for ``posterior.nc`` and the PSIS-LOO / WAIC
            metrics (:func:`ppl_models.inference.calibration.posterior_inference_data`; 0: none). Memory
            grows with ``posterior_draws *`` the test set's size.
        batch_size: sequences per evaluation batch (taken in order of length, so each batch
            holds sequences of similar lengths and is cut to its longest).
        particle_chunk: IWAE particles drawn per vectorised pass (``None``: all at once); memory
            grows with ``particle_chunk * batch_size *`` sequence length.
        noise_refit: before a one-step predictor (PSRNN, RNN / GRU / LSTM, MC dropout, ...) is
            evaluated, its noise is refit by maximum likelihood to the residuals of its trained
            means on the validation split (:meth:`ppl_models.OneStepPredictor.calibrate`): a
            shape ``"auto"`` (Student-t or empirical, by held-out likelihood), ``"student-t"``,
            ``"empirical"`` or ``"normal"``, with ``"+state"`` for a log-scale linear in the
            state (``"auto+state"``, the default, ...), or ``"none"`` (the trained scale). The refit
            is kept only if it beats the trained scale on held-out validation steps (two-fold).
    """

    estimators: list[str] = field(default_factory=lambda: list(ESTIMATORS))
    num_particles: int = 1000
    iwae_particles: int = 100
    predictive_samples: int = 200
    posterior_draws: int = 0
    batch_size: int = 64
    particle_chunk: int | None = 25
    noise_refit: str = "auto+state"

    def __post_init__(self):
        if self.noise_refit not in NOISE_REFITS:
            raise ValueError(f"evaluate.noise_refit must be one of {list(NOISE_REFITS)}, got {self.noise_refit!r}")
        if not isinstance(self.estimators, list) or not self.estimators or any(
                e not in ESTIMATORS for e in self.estimators):
            raise ValueError(f"evaluate.estimators must be a non-empty list from {list(ESTIMATORS)}, "
                             f"got {self.estimators!r}")
        minimums = {"num_particles": 1, "iwae_particles": 1, "batch_size": 1, "predictive_samples": 0,
                    "posterior_draws": 0, "particle_chunk": 1}
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if name == "particle_chunk" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"evaluate.{name} must be an int >= {minimum}, got {value!r}")
        for name in ("predictive_samples", "posterior_draws"):  # a spread needs two draws
            if getattr(self, name) == 1:
                raise ValueError(f"evaluate.{name} must be 0 (none) or an int >= 2, got 1")

    @classmethod
    def from_dict(cls, values: dict) -> EvaluateConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown keys in [evaluate]: {unknown}; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


def load_config(path: str | Path, overrides: list[str] = ()) -> dict:
    """Read a TOML experiment file, apply ``overrides`` and check the result (see :func:`check_config`)."""
    return check_config(apply_overrides(read_toml(path), overrides))


def read_toml(path: str | Path) -> dict:
    """The TOML file at ``path`` as a dict; one ``ValueError`` naming the file if it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config: no such file {path}")
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"config: {path} is not valid TOML: {error}") from None


def apply_overrides(config: dict, overrides: list[str]) -> dict:
    """Return a copy of ``config`` with each ``section.key=value`` (or ``key=value``) applied."""
    config = copy.deepcopy(config)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        key, text = item.split("=", 1)
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        *sections, leaf = key.strip().split(".")
        target = config
        for section in sections:
            target = target.setdefault(section, {})
            if not isinstance(target, dict):
                raise ValueError(f"override {item!r}: {section!r} is not a section")
        target[leaf] = value
    return config


def check_config(config: dict) -> dict:
    """Reject unknown top-level keys and sections, fill defaults, and check the typed sections.

    Model, data and objective parameters are checked against their builders' signatures
    when they are built (:mod:`ppl_models.experiments.registry`).
    """
    from ppl_models.inference.training import TrainConfig

    unknown = sorted(set(config) - set(TOP_LEVEL) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown top-level keys {unknown}; known: {sorted(set(TOP_LEVEL) | set(SECTIONS))}")
    config = {**TOP_LEVEL, **config}
    check_common(config)
    for section in ("data", "model", "objective"):
        if not isinstance(config.get(section), dict) or "name" not in config[section]:
            raise ValueError(f"config needs a [{section}] section with a name")
    config["train"] = TrainConfig.from_dict(config.get("train", {})).to_dict()
    config["evaluate"] = EvaluateConfig.from_dict(config.get("evaluate", {})).to_dict()
    return config


def check_common(config: dict) -> None:
    """What every experiment kind shares: tables are tables, ``device`` and ``seed`` (if given) are valid."""
    for key, value in config.items():
        if key not in ("name", "seed", "device", "kind") and not isinstance(value, dict):
            raise ValueError(f"config: [{key}] must be a table of settings, got {value!r}")
    device = config.get("device", "auto")
    if not isinstance(device, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:  # numpy's seed range
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r}")


def check_arguments(builder, params: dict, where: str) -> None:
    """Raise ``ValueError`` for a value of ``params`` that does not fit ``builder``'s annotation.

    Settings come from TOML or ``--set`` (``model.latent_dim=abc``, ``objective.num_particles=1.5``),
    so they are checked as :class:`~ppl_models.inference.training.TrainConfig` checks its own: ``int`` takes
    integers (not ``true``), ``float`` finite numbers, ``str`` strings, ``bool`` ``true``/``false``;
    ``X | None`` also ``None``; other annotations are left to the builder.
    """
    target = builder.__init__ if isinstance(builder, type) else builder
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # an annotation we cannot evaluate: the builder checks its own
        return
    for key, value in params.items():
        expected = hints.get(key, inspect.Parameter.empty)
        if not _fits(value, expected):
            name = getattr(expected, "__name__", None) or str(expected).replace("typing.", "")
            raise ValueError(f"{where}.{key} must be {name}, got {type(value).__name__} {value!r}")


def _fits(value, expected) -> bool:
    """Whether ``value`` fits a simple annotation (anything fits one that is not simple)."""
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        options = typing.get_args(expected)
        return any(_fits(value, option) or (option is type(None) and value is None) for option in options)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if expected is bool:
        return isinstance(value, bool)
    if expected is str:
        return isinstance(value, str)
    if expected is type(None):
        return value is None
    return typing.get_origin(expected) is not None or expected not in (int, float, bool, str)

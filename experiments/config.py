"""Experiment configuration: TOML files with command-line overrides; unknown keys are errors.

A configuration has top-level ``name``, ``seed`` and ``device`` and five sections:

* ``[data]``: ``name`` (see ``ppl-models list``) and that data set's parameters;
* ``[model]``: ``name`` and the model's parameters;
* ``[objective]``: ``name`` (``exact``, ``mse``, ``elbo``, ``iwae``, ``smc``) and its parameters;
* ``[train]``: the fields of :class:`ppl_models.inference.training.TrainConfig`;
* ``[evaluate]``: the settings of :class:`~ppl_models.inference.evaluation.EvaluationOptions` but its ``seed``
  (:func:`evaluation_options`), the noise refit on by default (:data:`RUN_EVALUATION`).

Overrides are ``section.key=value`` strings whose value is parsed as a TOML literal
(``train.lr=0.01``, ``objective.gradient="stop_weights"``, ``evaluate.estimators=["smc"]``);
a value that is not valid TOML is taken as a string (``objective.name=iwae``), and so is each item of a list that
is not (``evaluate.estimators=[elbo,iwae]``: what the shell passes on for an unquoted ``["elbo","iwae"]``).
"""

from __future__ import annotations

import copy
import inspect
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import tomllib

from ppl_models.inference.evaluation import EvaluationOptions
from ppl_models.inference.validation import InputTypeError

__all__ = [
    "evaluation_options",
    "evaluate_section",
    "EVALUATE_KEYS",
    "RUN_EVALUATION",
    "load_config",
    "read_toml",
    "apply_overrides",
    "check_config",
    "check_common",
    "check_arguments",
    "SECTIONS",
]

SECTIONS = ("data", "model", "objective", "train", "evaluate")
TOP_LEVEL = {"name": "experiment", "seed": 0, "device": "auto"}
#: the keys of ``[evaluate]``: the fields of :class:`~ppl_models.inference.evaluation.EvaluationOptions` but its
#: ``seed`` (a run's evaluation draws from the run's own ``seed``)
EVALUATE_KEYS = tuple(f.name for f in fields(EvaluationOptions) if f.name != "seed")
#: where ``[evaluate]`` departs from the defaults of ``EvaluationOptions``: before a one-step predictor (PSRNN,
#: RNN / GRU / LSTM, MC dropout, ...) is evaluated, its noise is refit on the validation split, kept only if it
#: beats the trained noise on held-out validation steps (two-fold); ``noise_refit="none"`` keeps the trained noise
RUN_EVALUATION = {"noise_refit": "auto+state"}


def evaluation_options(section: Mapping, *, seed: int | None = None) -> EvaluationOptions:
    """The ``[evaluate]`` table ``section`` (keys of :data:`EVALUATE_KEYS`, the others at :data:`RUN_EVALUATION` or
    ``EvaluationOptions``' defaults) as the options of a run's evaluation with ``seed``.

    An unknown key or a bad value is one ``ValueError`` naming it (``evaluate.num_particles must be ...``).
    """
    unknown = sorted(set(section) - set(EVALUATE_KEYS))
    if unknown:
        raise ValueError(f"unknown keys in [evaluate]: {unknown}; known: {sorted(EVALUATE_KEYS)}")
    try:
        return EvaluationOptions(**{**RUN_EVALUATION, **section}, seed=seed)
    except (ValueError, InputTypeError) as error:  # the options name the setting
        raise ValueError(f"evaluate.{error}") from None


def evaluate_section(options: EvaluationOptions) -> dict:
    """The ``[evaluate]`` table of ``options`` (every key of :data:`EVALUATE_KEYS`, as JSON values)."""
    return {key: value for key, value in options.to_dict().items() if key in EVALUATE_KEYS}


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
        value = _literal(text)
        *sections, leaf = key.strip().split(".")
        target = config
        for section in sections:
            target = target.setdefault(section, {})
            if not isinstance(target, dict):
                raise ValueError(f"override {item!r}: {section!r} is not a section")
        target[leaf] = value
    return config


def _literal(text: str):
    """The TOML literal ``text``; a list ``[a, b]`` of items that are not all TOML, item by item; else the string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    inner = text.strip()
    if len(inner) >= 2 and inner[0] == "[" and inner[-1] == "]" and not any(c in inner[1:-1] for c in "[]{}\"'"):
        return [_literal(part.strip()) for part in inner[1:-1].split(",") if part.strip()]
    return text


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
    config["evaluate"] = evaluate_section(evaluation_options(config.get("evaluate", {})))
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

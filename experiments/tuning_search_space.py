"""The settings a tuning search draws (:mod:`ppl_models.experiments.tuning`): :data:`SEARCH_SPACES` per registry
model, :func:`search_space` of a configuration, and a trial's draw of them (:func:`suggest`, :func:`with_params`)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Collection

import optuna

from ppl_models.inference.training import TrainConfig

from .registry import MODELS

__all__ = ["SEARCH_SPACES", "search_space", "config_value", "suggest", "with_params"]

_LR = ("log", 3e-4, 3e-2)
_WIDTH = ("int", 16, 128, 16)

#: registry model -> ``{"section.key": spec}`` of the settings its trials draw. A spec is ``("int", low, high)``,
#: ``("int", low, high, step)``, ``("int", low, high, "log")``, ``("float", low, high)``, ``("log", low, high)`` (a
#: float on a log scale) or ``("categorical", choices)``; a ``high`` of ``None`` is the configuration's own value
#: (the sizes two-stage regression fits to the data: ``psrnn`` and ``kf`` need as many windows, the SMC Transformer's
#: window the sequences' length), so that a trial never asks the data for more than the recipe found in it.
SEARCH_SPACES = {
    "lgssm": {"model.latent_dim": ("int", 1, 16), "train.lr": ("log", 1e-3, 1e-1)},
    "gru": {"model.rnn_dim": _WIDTH, "model.hidden_dim": _WIDTH, "train.lr": _LR},
    "recurrent": {
        "model.cell": ("categorical", ("gru", "lstm", "rnn")),
        "model.state_dim": ("int", 8, 64, 8),
        "model.encoder_dim": ("int", 8, 64, 8),
        "train.lr": _LR,
    },
    "vrnn": {
        "model.latent_dim": ("int", 4, 32, "log"),
        "model.rnn_dim": _WIDTH,
        "model.hidden_dim": _WIDTH,
        "train.lr": ("log", 1e-3, 3e-2),
    },
    "srnn": {
        "model.latent_dim": ("int", 4, 32, "log"),
        "model.rnn_dim": _WIDTH,
        "model.hidden_dim": _WIDTH,
        "model.dropout": ("float", 0.0, 0.5),
        "train.lr": ("log", 1e-3, 3e-2),
    },
    "smc-transformer": {
        "model.d_model": ("int", 8, 64, 8),
        "model.window": ("int", 4, None),
        "train.lr": ("log", 3e-4, 3e-2),
    },
    "psrnn": {
        "model.state_dim": ("int", 4, None),
        "model.ridge": ("log", 1e-4, 1e-1),
        "model.bandwidth_scale": ("log", 0.25, 4.0),
        "train.lr": ("log", 1e-4, 1e-2),
    },
    "kf": {"model.state_dim": ("int", 1, None), "model.ridge": ("log", 1e-6, 1e-2), "train.lr": ("log", 1e-4, 1e-2)},
    "mc-dropout-lstm": {"model.hidden_size": _WIDTH, "model.dropout": ("float", 0.0, 0.5), "train.lr": _LR},
    "transformer-forecaster": {
        "model.d_model": ("int", 8, 64, 8),
        "model.num_layers": ("int", 1, 3),
        "model.feedforward_dim": ("int", 16, 256, "log"),
        "model.dropout": ("float", 0.0, 0.3),
        "train.lr": _LR,
    },
}


def search_space(config: dict, fixed: Collection[str] = ()) -> dict[str, tuple]:
    """``{"section.key": spec}`` that trials of ``config``'s model draw: :data:`SEARCH_SPACES` without the ``fixed``
    keys, each bound of ``None`` resolved to the configuration's value. A key whose configuration value lies outside
    its range (or off its step), or whose range holds one value, stays at the configuration's value like a fixed one."""
    model = config["model"].get("name")
    if model not in SEARCH_SPACES:
        raise ValueError(f"config: model.name must be one of {list(SEARCH_SPACES)}, got {model!r}")
    space = {}
    for key, spec in SEARCH_SPACES[model].items():
        given = config_value(config, key)
        spec = tuple(given if bound is None else bound for bound in spec)
        narrow = spec[0] != "categorical" and spec[1] >= spec[2]  # a fitted size at or below the range's low end
        if key not in fixed and not narrow and _holds(spec, given):
            space[key] = spec
    return space


def config_value(config: dict, key: str):
    """The value of ``"section.key"`` in ``config``, else its default (the model's builder, :class:`TrainConfig`)."""
    section, name = key.split(".")
    if name in config.get(section, {}):
        return config[section][name]
    if section == "train":
        return getattr(TrainConfig(), name)
    return inspect.signature(MODELS[config["model"]["name"]].build).parameters[name].default


def _holds(spec: tuple, value) -> bool:
    """Whether ``value`` is one ``spec`` can draw."""
    kind, *bounds = spec
    if kind == "categorical":
        return value in bounds[0]
    if isinstance(value, bool) or not isinstance(value, int if kind == "int" else (int, float)):
        return False
    step = bounds[2] if kind == "int" and len(bounds) == 3 and bounds[2] != "log" else 1
    return bounds[0] <= value <= bounds[1] and (kind != "int" or (value - bounds[0]) % step == 0)


def suggest(trial: optuna.Trial, key: str, spec: tuple):
    """Draw ``key`` from ``spec`` in ``trial`` (a value drawn before, or enqueued, comes back as it is)."""
    kind, *bounds = spec
    if kind == "categorical":
        return trial.suggest_categorical(key, list(bounds[0]))
    if kind == "int":
        option = bounds[2] if len(bounds) == 3 else 1
        log = option == "log"
        return trial.suggest_int(key, bounds[0], bounds[1], step=1 if log else option, log=log)
    return trial.suggest_float(key, bounds[0], bounds[1], log=kind == "log")


def with_params(config: dict, params: dict) -> dict:
    """A copy of ``config`` with each ``"section.key": value`` of ``params`` set."""
    config = copy.deepcopy(config)
    for key, value in params.items():
        section, name = key.split(".")
        config[section][name] = value
    return config

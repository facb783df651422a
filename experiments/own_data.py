"""``--data PATH``: the configurations that point a model, an experiment or a suite at a user's file.

``ppl-models train MODEL --data FILE`` trains registry model ``MODEL`` at its default recipe
(:mod:`experiments.recipes`) on the file; ``ppl-models train EXPERIMENT --data FILE`` keeps the
experiment's model and training and replaces its data. Either way the ``[data]`` section is
``{name = "file", path = FILE}``, and ``--set data.series=...`` (``time``, ``features``,
``targets``, ``split``, ``split_by``, ``fractions``, ``window``, ``stride``, ``missing``, ...)
name the columns and the split (:func:`experiments.tasks.own_file.file_data`).
"""

from __future__ import annotations

from pathlib import Path

from . import supervised
from .config import apply_overrides, check_config
from .recipes import RECIPES, SUPERVISED_MODELS, recipe, supervised_recipe
from .registry import DATASETS, MODELS, build, build_objective

__all__ = ["MODEL_NAMES", "data_override", "is_model_name", "model_config"]

#: what ``ppl-models train NAME --data FILE`` takes as NAME besides experiments: every generative model of the
#: registry and the PF-RNN predictor's cells (which read ``data.targets`` columns as y)
MODEL_NAMES = (*RECIPES, *SUPERVISED_MODELS)


def data_override(path: str | Path) -> str:
    """The ``--set`` override that replaces a configuration's ``[data]`` with the file at ``path``."""
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'data={{name = "file", path = "{text}"}}'


def is_model_name(name: str) -> bool:
    return name in MODEL_NAMES


def model_config(model: str, path: str | Path, overrides: list[str] = (), *, seed: int = 0) -> dict:
    """The checked configuration that trains registry model ``model`` at its recipe on the file at ``path``.

    The file is read once here to choose the emission (Bernoulli for binary data, else Gaussian);
    ``overrides`` (``section.key=value``) apply after the recipe.
    """
    if model not in MODEL_NAMES:
        raise ValueError(f"model: expected one of {list(MODEL_NAMES)}, got {model!r}")
    overrides = [data_override(path), *overrides]
    if model in SUPERVISED_MODELS:
        config = apply_overrides(supervised_recipe(model, seed=seed), overrides)
        return supervised.check_supervised_config(config)
    data_table = apply_overrides({}, overrides).get("data", {})
    data = build(data_table, DATASETS, "data")  # the file's errors come first, before any model setting
    config = check_config(apply_overrides(recipe(model, binary=data.binary, seed=seed), overrides))
    build_objective(config["objective"], build(config["model"], MODELS, "model", obs_dim=data.obs_dim))  # checked
    return config

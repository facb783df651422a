"""``--data PATH``: the configurations that point a model, an experiment or a suite at a user's file.

``ppl-models train MODEL --data FILE`` trains registry model ``MODEL`` at its default recipe
(:mod:`ppl_models.experiments.recipes`) on the file; ``ppl-models train EXPERIMENT --data FILE`` keeps the
experiment's model and training and replaces its data. Either way the ``[data]`` section is
``{name = "file", path = FILE}``, and ``--set data.series=...`` (``time``, ``features``,
``targets``, ``split``, ``split_by``, ``fractions``, ``window``, ``stride``, ``missing``, ...)
name the columns and the split (:func:`ppl_models.experiments.tasks.own_file.file_data`).

A model that cannot take the file is refused before anything is written, in one line with the reason
(:class:`~ppl_models.experiments.recipes.DataNotRepresentable`): a model without a Bernoulli emission on binary (0/1)
data
(a PF-RNN on binary targets), or data too short for the model's settings
(:func:`ppl_models.experiments.recipes.recipe`).
"""

from __future__ import annotations

from pathlib import Path

from . import supervised
from .config import apply_overrides, check_config
from .recipes import (
    RECIPES,
    SUPERVISED_MODELS,
    DataNotRepresentable,
    binary_refusal,
    check_data,
    recipe,
    supervised_recipe,
)
from .registry import DATASETS, MODELS, build, build_objective
from .tasks.file_regression import TABLES, FileRegressionData

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

    The file is read here to choose the emission (Bernoulli for binary data, else Gaussian) and fit the recipe
    to its sequences' lengths; ``overrides`` (``section.key=value``) apply after the recipe. A model the data
    does not suit is refused: :class:`~ppl_models.experiments.recipes.DataNotRepresentable`, one line with the reason.
    """
    if model not in MODEL_NAMES:
        raise ValueError(f"model: expected one of {list(MODEL_NAMES)}, got {model!r}")
    overrides = [data_override(path), *overrides]
    if model in SUPERVISED_MODELS:
        config = supervised.check_supervised_config(apply_overrides(supervised_recipe(model, seed=seed), overrides))
        if _predicts_binary(config):
            raise DataNotRepresentable(binary_refusal(model))
        return config
    data_table = apply_overrides({}, overrides).get("data", {})
    data = build(data_table, DATASETS, "data")  # the file's errors come first, before any model setting
    config = check_config(apply_overrides(recipe(model, binary=data.binary, seed=seed, data=data), overrides))
    build_objective(config["objective"], build(config["model"], MODELS, "model", obs_dim=data.obs_dim))  # checked
    check_data(config, data)
    return config


def _predicts_binary(config: dict) -> bool:
    """Whether what a PF-RNN of supervised ``config`` would predict is binary (0/1): every value of a file without
    columns to name as targets (``.npz``, a MIDI folder), else the ``targets`` of the table. The loader's own
    errors come first. It holds the targets standardised (``splits[s] = (x, mask, y [N, T, O])``): undone, they
    match 0 or 1 up to float32 rounding."""
    table = config["data"]
    if table.get("name") == "file" and Path(table["path"]).suffix.lower() not in TABLES:
        return build(table, DATASETS, "data").binary
    data, splits, _, _ = supervised._setup(config)
    return isinstance(data, FileRegressionData) and all(
        _zeros_and_ones(data.target_standardizer.inverse(y.double()), mask) for _, mask, y in splits.values())


def _zeros_and_ones(values, mask) -> bool:
    """Whether the valid entries of ``values [N, T, O]`` (``mask [N, T]`` or ``None``: all) are 0 or 1."""
    values = values if mask is None else values[mask]
    nearest = values.round()
    return bool((((nearest == 0) | (nearest == 1)) & ((values - nearest).abs() < 1e-4)).all())

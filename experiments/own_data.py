"""``--data PATH``: the configurations that point a model, an experiment or a suite at a user's file.

``ppl-models train MODEL --data FILE`` trains registry model ``MODEL`` at its default recipe
(:mod:`ppl_models.experiments.recipes`) on the file; ``ppl-models train EXPERIMENT --data FILE`` keeps the
experiment's model and training and replaces its data. Either way the ``[data]`` section is
:func:`file_table` (``{"name": "file", "path": FILE}``), into which ``--set data.series=...`` (``time``,
``features``, ``targets``, ``split``, ``split_by``, ``fractions``, ``window``, ``stride``, ``missing``, ...)
merge to name the columns and the split (:func:`ppl_models.experiments.tasks.own_file.file_data`); the command
line's data flags (``--series COL``, ...: :data:`ppl_models.experiments.data_flags.DATA_FLAGS`) arrive as values of
those same keys (``data_keys``), merged into the table before the ``--set`` items.

:func:`model_config` builds the data, the model and its objective to check them; it keeps them
(:func:`ppl_models.experiments.build.build_once`) for the training that follows, which builds nothing again.

A model that cannot take the file is refused before anything is written, in one line with the reason
(:class:`~ppl_models.experiments.recipes.DataNotRepresentable`): a model without a Bernoulli emission on binary
(0/1) data (a PF-RNN on binary targets), a model without a count emission asked for a count likelihood
(:data:`COUNT_REFUSALS`), or data too short for the model's settings (:func:`ppl_models.experiments.recipes.recipe`).

The likelihood follows the data (``data.likelihood``, ``--likelihood``: :mod:`ppl_models.inference.data.likelihoods`):
on counts a model with a count emission takes the one chosen (``model.emission``) with the counts' scale
(``model.count_scale``: its nets read the counts over one plus their training mean), and under ``"auto"`` a model
without one reads the file as real values (``data.likelihood = "real"`` in its configuration). Which likelihood,
and why, is printed in one line and recorded in the run's ``data_split.json``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

from . import registry, supervised
from .build import build_once
from .config import apply_overrides, check_config, read_toml
from .recipes import (
    EMISSIONS,
    RECIPES,
    SUPERVISED_MODELS,
    DataNotRepresentable,
    binary_refusal,
    check_data,
    recipe,
    supervised_recipe,
)
from .tasks.file_regression import TABLES, FileRegressionData

__all__ = ["MODEL_NAMES", "COUNT_REFUSALS", "file_table", "is_model_name", "model_config", "load_experiment"]

#: what ``ppl-models train NAME --data FILE`` takes as NAME besides experiments: every generative model of the
#: registry and the PF-RNN predictor's cells (which read ``data.targets`` columns as y)
MODEL_NAMES = (*RECIPES, *SUPERVISED_MODELS)
#: the likelihoods of counts (:data:`ppl_models.inference.data.likelihoods.COUNT_LIKELIHOODS`)
COUNTS = ("poisson", "negbin")
_ONE_STEP = "its predictive is a Gaussian noise around a decoded mean, refit on held-out residuals"
#: why each recipe model without a count emission (:data:`~ppl_models.experiments.recipes.EMISSIONS`) has none
COUNT_REFUSALS = {
    "lgssm": "linear-Gaussian: its exact Kalman likelihood needs a Gaussian emission",
    "kf": "linear-Gaussian: its Kalman filter needs a Gaussian emission",
    "recurrent": _ONE_STEP,
    "mc-dropout-lstm": _ONE_STEP,
    "transformer-forecaster": _ONE_STEP,
    "psrnn": "its two-stage regression and its predictive are Gaussian (or categorical) by construction",
    "smc-transformer": "its observation noise is Gaussian by construction (the EM fit of its covariances assumes it)",
}


def file_table(path: str | Path, data_keys: Mapping | None = None) -> dict:
    """The ``[data]`` section that reads the user's file at ``path``, with ``data_keys`` (``{"series": "site",
    "window": 8}``: the data flags' values) and before any ``--set data.*`` setting."""
    if data_keys is not None and not isinstance(data_keys, Mapping):
        raise TypeError(f"data_keys must be a mapping of [data] keys to values, got {type(data_keys).__name__}")
    return {"name": "file", "path": str(path), **copy.deepcopy(dict(data_keys or {}))}


def is_model_name(name: str) -> bool:
    return name in MODEL_NAMES


def model_config(
    model: str, path: str | Path, overrides: list[str] = (), *, seed: int = 0, data_keys: Mapping | None = None
) -> dict:
    """The checked configuration that trains registry model ``model`` at its recipe on the file at ``path``.

    The ``[data]`` section is :func:`file_table` with ``data_keys`` and the ``data.*`` of ``overrides`` merged in.
    The data, the model and its objective built to check them are kept for the training that follows
    (:func:`~ppl_models.experiments.build.build_once`). The file is read
    here (once in a command: :func:`~ppl_models.experiments.tasks.own_file.read_dataset`) to choose the emission
    (Bernoulli for binary data, else Gaussian) and fit the recipe to its sequences' lengths; ``overrides``
    (``section.key=value``) apply after the recipe. A model the data does not suit is refused:
    :class:`~ppl_models.experiments.recipes.DataNotRepresentable`, one line with the reason.
    """
    if model not in MODEL_NAMES:
        raise ValueError(f"model: expected one of {list(MODEL_NAMES)}, got {model!r}")
    if model in SUPERVISED_MODELS:
        config = {**supervised_recipe(model, seed=seed), "data": file_table(path, data_keys)}
        config = supervised.check_supervised_config(apply_overrides(config, overrides))
        if _predicts_binary(config):
            raise DataNotRepresentable(binary_refusal(model))
        return config
    table = apply_overrides({"data": file_table(path, data_keys)}, overrides)["data"]  # the user's data.* merged in
    _refuse_targets(model, table)
    data = registry.build(table, registry.DATASETS, "data")  # the file's errors come first, before any model setting
    likelihood, real = _fitted_likelihood(model, table, data)
    if real:  # counts, read as real values for a model without a count emission
        data = registry.build({**table, "likelihood": "real"}, registry.DATASETS, "data")
        likelihood = {**likelihood, "name": data.split_record["likelihood"]["name"]}  # log-normal if logs are taken
        data.split_record["likelihood"] = likelihood
    config = {**recipe(model, binary=data.binary, seed=seed, data=data), "data": file_table(path, data_keys)}
    if likelihood["name"] in COUNTS:
        config["model"]["emission"] = likelihood["name"]
        config["model"]["count_scale"] = likelihood["count_scale"]
    if real or "large_counts" in likelihood:  # pinned: a new file read for this run is real values too
        config["data"]["likelihood"] = "real"
    config = check_config(apply_overrides(config, overrides))  # its [data] is table again
    _check_emission(config["model"], likelihood["name"])
    build_once(config, data)  # the model's and the objective's settings checked
    check_data(config, data)
    print(f"{model}: likelihood {likelihood['name']}: {likelihood['why']}")
    return config


def _fitted_likelihood(model: str, table: dict, data) -> tuple[dict, bool]:
    """``(the likelihood record of model on data, whether counts are read as real values for it)``: a model
    without a count emission is refused a count likelihood that ``table`` names, and under ``"auto"`` reads counts
    as real values (standardised, the transform chosen on validation: a Gaussian, or a log-normal if it takes
    logs)."""
    likelihood = data.split_record["likelihood"]
    if likelihood["name"] not in COUNTS or likelihood["name"] in EMISSIONS[model]:
        return likelihood, False
    reason = COUNT_REFUSALS[model]
    if table.get("likelihood", "auto") != "auto":
        raise DataNotRepresentable(
            f"{model}: the likelihood {likelihood['name']!r} needs a count emission, and {model} has none ({reason}); "
            f"the models with one: {', '.join(m for m, kinds in EMISSIONS.items() if likelihood['name'] in kinds)}"
        )
    why = f"the data are counts, but {model} has no count emission ({reason}): real values, standardised"
    return {"name": "gaussian", "why": why, "counts": likelihood}, True


def _check_emission(section: dict, likelihood: str) -> None:
    """Refuse a count ``model.emission`` on data not read as counts (real values: standardised, not integers)."""
    emission = section.get("emission")
    if emission in COUNTS and likelihood not in COUNTS:
        raise ValueError(
            f"model.emission={emission!r} needs the data read as counts, and they are read as {likelihood} "
            f"(every value a non-negative integer, then --likelihood {emission})"
        )


def load_experiment(
    experiment: str | Path,
    overrides: list[str] = (),
    *,
    data: str | Path | None = None,
    own: list[str] = (),
    data_keys: Mapping | None = None,
) -> dict:
    """The checked configuration of ``experiment`` (a registered name or a ``.toml`` file), supervised or not.

    ``own`` (a suite member's settings) apply first; then ``data`` (a user's file, ``--data``) replaces the
    ``[data]`` section whole by :func:`file_table` with ``data_keys``; then ``overrides`` (``--set``, whose ``data.*``
    name the file's columns and split). A missing or malformed experiment file is named before anything else is read.
    """
    if data_keys and data is None:
        raise ValueError(f"data_keys {sorted(data_keys)} describe a user's file: give its path as data")
    table = read_toml(registry.experiment_config(experiment))
    checked = supervised.check_supervised_config if table.get("kind") == "supervised" else check_config
    table = apply_overrides(table, list(own))
    if data is not None:
        table["data"] = file_table(data, data_keys)
    table = apply_overrides(table, list(overrides))
    if table.get("kind") != "supervised" and table.get("data", {}).get("name") == "file":
        _refuse_targets(str(experiment), table["data"])
    return checked(table)


def _refuse_targets(name: str, table: dict) -> None:
    """A density model reads no target column: ``data.targets`` (``--targets``) given to it is refused, since the
    columns named would be left out of what it models."""
    if table.get("targets"):
        raise ValueError(
            f"--targets (data.targets) {table['targets']}: {name} models the features of the file and "
            f"reads no target column; choose its columns with --features (only "
            f"{', '.join(SUPERVISED_MODELS)} predict target columns)"
        )


def _predicts_binary(config: dict) -> bool:
    """Whether what a PF-RNN of supervised ``config`` would predict is binary (0/1): every value of a file without
    columns to name as targets (``.npz``, a MIDI folder), else the ``targets`` of the table. The loader's own
    errors come first. It holds the targets standardised (``splits[s] = (x, mask, y [N, T, O])``): undone, they
    match 0 or 1 up to float32 rounding."""
    table = config["data"]
    if table.get("name") == "file" and Path(table["path"]).suffix.lower() not in TABLES:
        return registry.build(table, registry.DATASETS, "data").binary
    data, splits, _, _ = supervised.build_supervised(config)
    return isinstance(data, FileRegressionData) and all(
        _zeros_and_ones(data.target_standardizer.inverse(y.double()), mask) for _, mask, y in splits.values()
    )


def _zeros_and_ones(values, mask) -> bool:
    """Whether the valid entries of ``values [N, T, O]`` (``mask [N, T]`` or ``None``: all) are 0 or 1."""
    values = values if mask is None else values[mask]
    nearest = values.round()
    return bool((((nearest == 0) | (nearest == 1)) & ((values - nearest).abs() < 1e-4)).all())

"""The command line's flags that describe a ``--data`` file (``--series``, ``--time``, ``--features`` ...): each sets a
key of the configuration's ``[data]`` section, as ``--set data.KEY=VALUE`` would.

:func:`data_keys` gives them as values (``{"features": ["a", "b"], "window": 5}``), merged into the ``[data]`` table
as they are (:func:`ppl_models.experiments.own_data.file_table`); :func:`as_set_items` spells them as ``--set`` items
for the commands that record their settings as the command line spells them (``leaderboard``, ``suite``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping

from ppl_models.inference.data.datasets import MISSING, TIME_ORDERS
from ppl_models.inference.data.likelihoods import LIKELIHOODS

from .arguments import columns, count

__all__ = ["DATA_FLAGS", "add_data_flags", "data_keys", "as_set_items"]


#: the flags of train, leaderboard and suite that describe the --data file: (flag, the key of [data] it sets, as
#: --set data.KEY=VALUE would, its argparse options)
DATA_FLAGS = (
    (
        "--series",
        "series",
        {"metavar": "COL", "help": "the column of series ids (default: none, the file is one series)"},
    ),
    ("--time", "time", {"metavar": "COL", "help": "the column that orders the steps (default: the file's order)"}),
    (
        "--features",
        "features",
        {"metavar": "A,B", "type": columns, "help": "the value columns (default: every other numeric column)"},
    ),
    (
        "--targets",
        "targets",
        {"metavar": "C[,D]", "type": columns, "help": "target columns, the y of pf-lstm, pf-gru (default: none)"},
    ),
    (
        "--covariates",
        "covariates",
        {
            "metavar": "A,B",
            "type": columns,
            "help": "columns known in the future (a calendar, a planned price), read as inputs of the forecast, not "
            "forecast themselves (default: none)",
        },
    ),
    (
        "--past-covariates",
        "past_covariates",
        {
            "metavar": "C,D",
            "type": columns,
            "help": "columns known only up to now, read as inputs of the next step's forecast (default: none)",
        },
    ),
    (
        "--split",
        "split_by",
        {
            "choices": ("series", "time"),
            "help": "held-out data: whole series, or each series' last steps (default series)",
        },
    ),
    (
        "--split-column",
        "split",
        {"metavar": "COL", "help": "a column of train / valid / test labels that splits (default: none, --split)"},
    ),
    (
        "--window",
        "window",
        {"metavar": "N", "type": count(2), "help": "cut training windows of N steps (default: none, whole series)"},
    ),
    (
        "--missing",
        "missing",
        {
            "choices": MISSING,
            "help": "a NaN inside a series: refuse the file (error, default) or drop the series (drop-series)",
        },
    ),
    (
        "--time-order",
        "time_order",
        {
            "choices": TIME_ORDERS,
            "help": "order each series by the time column's values (default) or keep the file's order",
        },
    ),
    (
        "--likelihood",
        "likelihood",
        {
            "choices": LIKELIHOODS,
            "help": "the values' likelihood: auto (default: Bernoulli for 0/1, Poisson or negative binomial for "
            "non-negative integers with one below 20, else Gaussian, log-normal where the transform chosen takes "
            "logs), one of them, or real (real values, counts too)",
        },
    ),
)


def add_data_flags(parser: argparse.ArgumentParser) -> None:
    """The :data:`DATA_FLAGS` of a command with ``--data``; each goes to ``args.data_<KEY>``."""
    group = parser.add_argument_group("the --data file's columns and split (each as --set data.KEY=VALUE)")
    for flag, key, options in DATA_FLAGS:
        group.add_argument(flag, dest=f"data_{key}", **options)


def data_keys(args) -> dict:
    """The ``[data]`` keys of the :data:`DATA_FLAGS` given, as values (``{"features": ["a", "b"], "window": 5}``); a
    flag without ``--data``, ``--split`` with ``--split-column``, or a flag with a ``--set`` of its key is refused."""
    given = [
        (flag, key, getattr(args, f"data_{key}"))
        for flag, key, _ in DATA_FLAGS
        if getattr(args, f"data_{key}") is not None
    ]
    if given and args.data is None:
        raise ValueError(f"{given[0][0]} describes your file: give the file with --data PATH")
    if args.data_split_by is not None and args.data_split is not None:
        raise ValueError(
            f"--split {args.data_split_by} and --split-column {args.data_split} both say how to split: "
            "give one of them (a split column decides where each row goes)"
        )
    settings = {item.split("=", 1)[0].rpartition(":")[2].strip(): item for item in args.set}  # MODEL:key=value too
    for flag, key, _ in given:
        if f"data.{key}" in settings:
            raise ValueError(f"{flag} and --set {settings[f'data.{key}']} both set data.{key}: give one of them")
    return {key: value for _, key, value in given}


def as_set_items(keys: Mapping) -> list[str]:
    """``keys`` (:func:`data_keys`) as the ``data.KEY=VALUE`` items ``--set`` would give (TOML literals)."""
    return [f"data.{key}={json.dumps(value, ensure_ascii=False)}" for key, value in keys.items()]

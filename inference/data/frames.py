"""A long-format data frame as sequences (:func:`frame_sequences`): one row per series and time step, its columns
named by a :class:`~ppl_models.inference.data.spec.FileSpec`."""

from __future__ import annotations

import numpy as np

from ..validation import SettingError
from .columns import numeric_columns, series_ids, unique_columns, value_columns
from .covariates import CovariateLayout, check_covariate_columns, cut_future, lead_known
from .spec import FileSpec
from .time_order import row_order

__all__ = ["frame_sequences", "SPLIT_NAMES"]

#: the labels a split column may hold, and the split each names
SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "valid": "valid",
    "validation": "valid",
    "val": "valid",
    "test": "test",
    "testing": "test",
}


def frame_sequences(frame, spec: FileSpec, source: str, row_offset: int) -> dict:
    """The sequences of ``frame`` (a ``pandas.DataFrame``) as the keyword arguments of a
    :class:`~ppl_models.inference.data.datasets.SequenceDataset` (``sequences``, ``ids``, ``features``, ``targets``,
    ``target_names``, ``split_labels``; ``covariates``: the
    :class:`~ppl_models.inference.data.covariates.CovariateLayout` where the spec names covariates, else ``None``;
    ``future``: per series, its known covariates after its last target) and ``rows``: each series' rows, counted
    from ``row_offset``."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame: expected a pandas.DataFrame, got {type(frame).__name__}")
    if len(frame) == 0:
        raise ValueError(f"{source}: no data rows")
    frame = frame.reset_index(drop=True)
    columns = unique_columns(frame.columns, source)
    frame.columns = columns
    named = {"series": spec.series, "time": spec.time, "split": spec.split}
    features, targets = list(spec.features or ()), list(spec.targets or ())
    _check_distinct(named, features, targets, source)
    for option, column in [*named.items(), *(("features", c) for c in features), *(("targets", c) for c in targets)]:
        if column is not None and column not in columns:
            raise SettingError(
                option, f"{source}: column {column!r} (given as {{{option}}}) not found; columns: {columns}"
            )
    known, past = tuple(spec.covariates), tuple(spec.past_covariates)
    check_covariate_columns(columns, known, past, named, source)
    reserved = {c for c in named.values() if c is not None} | set(targets) | set(known) | set(past)
    if spec.features is not None and (known or past):
        features = [c for c in features if c not in reserved]  # covariates are inputs, not forecast
    if spec.features is None:
        features = value_columns(frame, reserved, source)
        if not features:
            raise SettingError(
                "features",
                f"{source}: no numeric value columns besides {sorted(reserved)}; name them with {{features=}}",
            )
    both = [c for c in features if c in targets]
    if both:
        raise ValueError(f"{source}: column {both[0]!r} is named both as a feature and as a target")
    layout = CovariateLayout(tuple(features), known, past) if known or past else None
    if layout is not None:
        features = layout.features
    values = numeric_columns(frame, features + targets, source, row_offset)
    ids = series_ids(frame, spec.series, source, row_offset)
    order = row_order(frame, ids, spec.time, source, row_offset, spec.time_order)
    labels = _split_labels(frame, spec.split, source, row_offset) if spec.split is not None else None
    ordered = ids[order]  # grouped by series, in order of first appearance: one cut where the id changes
    groups = np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)
    names = [str(ids[g[0]]) for g in groups]
    future: dict[str, np.ndarray] = {}
    if layout is not None:
        groups, future = cut_future(values, groups, layout, names, source, row_offset)
    sequences = [values[index, : len(features)] for index in groups]
    return {
        "sequences": lead_known(sequences, layout, future, names) if layout is not None else sequences,
        "ids": names,
        "covariates": layout,
        "future": future,
        "features": features,
        "targets": [values[index, len(features) :] for index in groups] if targets else None,
        "target_names": targets,
        "split_labels": [labels[index] for index in groups] if labels is not None else None,
        "rows": [index + row_offset for index in groups],
    }


def _split_labels(frame, split: str, source: str, row_offset: int) -> np.ndarray:
    """Each row's split (``train``, ``valid`` or ``test``) from the labels of column ``split`` (:data:`SPLIT_NAMES`);
    a label that names none is refused."""
    raw = frame[split].astype(str).str.strip().str.lower()
    bad = ~raw.isin(list(SPLIT_NAMES))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        cell = frame[split].iloc[row]
        cell = cell.item() if isinstance(cell, np.generic) else cell  # 0, not np.int64(0)
        raise ValueError(
            f"{source}: column {split!r}, row {row + row_offset}: {cell!r} is not a split name "
            f"(expected one of {sorted(SPLIT_NAMES)})"
        )
    return raw.map(SPLIT_NAMES).to_numpy()


def _check_distinct(named: dict, features: list, targets: list, source: str) -> None:
    """Refuse a column named twice among the features or the targets, or given two roles of ``named`` (series,
    time, split)."""
    for option, columns in (("features", features), ("targets", targets)):
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise ValueError(f"{source}: column {twice[0]!r} is named twice in {option}")
    roles = [(option, column) for option, column in named.items() if column is not None]
    for k, (option, column) in enumerate(roles):
        other = [o for o, c in roles[k + 1 :] if c == column]
        if other:
            raise ValueError(
                f"{source}: column {column!r} is given both as {option} and as {other[0]}: each needs a "
                "column of its own"
            )

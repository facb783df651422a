"""The checks of a :class:`~ppl_models.inference.data.datasets.SequenceDataset` as read: its series' values
(:func:`check_series`) and its features that carry no series of their own (:func:`leave_out_degenerate`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..validation import SettingError
from .data_warnings import warn_once
from .degenerate import degenerate_features
from .spec import DEGENERATE, setting_choice
from .value_checks import check_values

__all__ = ["check_series", "leave_out_degenerate"]


def leave_out_degenerate(dataset, degenerate: str):
    """With ``degenerate="drop"``, leave out of ``dataset`` the real-valued features that carry no series of their
    own (named in its ``left_out`` and in one warning; binary data is kept whole; a data set with no other feature
    is refused). Returns the data set."""
    setting_choice(degenerate, "degenerate", DEGENERATE)
    found = {} if degenerate == "keep" or dataset.binary else degenerate_features(dataset.sequences, dataset.features)
    layout = dataset.covariates
    if layout is not None:  # covariates are read, not scored: a constant or collinear one is kept
        found = {name: why for name, why in found.items() if name in layout.targets}
    if not found:
        return dataset
    if layout is not None and all(name in found for name in layout.targets):
        raise ValueError(f"{dataset.source}: no target moves on its own ({found}): nothing to forecast")
    reasons = [f"{name!r}: {why}" for name, why in found.items()]
    if len(found) == len(dataset.features):
        raise ValueError(f"{dataset.source}: no feature moves on its own ({'; '.join(reasons)}): nothing to model")
    keep = [d for d, name in enumerate(dataset.features) if name not in found]
    dataset.sequences = [s[:, keep] for s in dataset.sequences]
    dataset.features = [dataset.features[d] for d in keep]
    dataset.left_out = found
    if layout is not None:
        dataset.covariates = dataclasses.replace(layout, targets=tuple(t for t in layout.targets if t not in found))
    warn_once(
        dataset.source,
        "left out of the modelled and scored features:",
        reasons,
        f"every model is fit and scored on the others ({', '.join(map(repr, dataset.features))}), since a "
        "feature predicted exactly would decide the scores by itself",
        stacklevel=4,
    )
    return dataset


def check_series(dataset, missing: str, rows: list[np.ndarray] | None = None) -> None:
    """In ``dataset``, refuse short series and (``missing="error"``) NaN / inf; drop those series otherwise; warn on
    extremes. ``rows``: each series' rows in the file, for the messages."""
    names = dataset.features + dataset.target_names
    keep = []
    for i, name in enumerate(dataset.ids):
        values = (
            dataset.sequences[i]
            if not dataset.targets
            else np.concatenate([dataset.sequences[i], dataset.targets[i]], 1)
        )
        bad = ~np.isfinite(values)
        if bad.any():
            step, col = map(int, np.argwhere(bad)[0])
            where = f"row {rows[i][step]}" if rows is not None else f"step {step}"
            if missing == "error":
                what = "an empty (or NaN) cell" if np.isnan(values[step, col]) else f"{values[step, col]}"
                raise SettingError(
                    "missing",
                    f"{dataset.source}: column {names[col]!r}, {where} (series {name!r}): {what} "
                    "inside a series; fill it, or pass {missing='drop-series'} to drop such series",
                )
            continue
        if len(values) < 2:
            where = f" (row {rows[i][0]})" if rows is not None else ""
            raise ValueError(
                f"{dataset.source}: series {name!r}{where} has {len(values)} step; every series needs at least 2 steps"
            )
        keep.append(i)
    if len(keep) < len(dataset):
        dropped = [dataset.ids[i] for i in sorted(set(range(len(dataset))) - set(keep))]
        if not keep:
            raise ValueError(f"{dataset.source}: every series holds a NaN or infinite value")
        warn_once(
            dataset.source,
            f"dropped {len(dropped)} series holding NaN or infinite values",
            [f"({dropped[:5]}{'...' if len(dropped) > 5 else ''})"],
            "the others are kept",
        )
        for attribute in ("sequences", "ids", "targets", "split_labels"):
            if getattr(dataset, attribute) is not None:
                setattr(dataset, attribute, [getattr(dataset, attribute)[i] for i in keep])
    lines = np.concatenate([rows[i] for i in keep]) if rows is not None else None
    check_values(np.concatenate(dataset.sequences), dataset.source, dataset.features, lines=lines)

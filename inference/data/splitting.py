"""Cutting a :class:`~ppl_models.inference.data.datasets.SequenceDataset` (``dataset``) into train / validation / test
(:func:`split_dataset`): whole series by a seed, each series in time, or by a split column; a held-out segment that
starts inside its series keeps the series' earlier steps as its context."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..defaults import SPLIT_FRACTIONS
from ..validation import SettingError
from .spec import SPLIT_BY, setting_choice, setting_count, setting_fractions
from .splits import SPLITS, DataSplits
from .standardize import Standardizer

__all__ = ["split_dataset"]


def split_dataset(
    dataset,
    *,
    by: str = "series",
    fractions: Sequence[float] = SPLIT_FRACTIONS,
    seed: int = 0,
    column: bool | None = None,
    context: bool = True,
) -> DataSplits:
    """:meth:`SequenceDataset.split <ppl_models.inference.data.datasets.SequenceDataset.split>` of ``dataset``."""
    setting_choice(by, "by", SPLIT_BY, expected="'series' or 'time'")
    seed = setting_count(seed, "seed", minimum=0)
    use_column = dataset.split_labels is not None if column is None else bool(column)
    if use_column:
        if dataset.split_labels is None:
            raise SettingError("split", f"{dataset.source}: no split column was named ({{split=}})")
        parts, how = _by_labels(dataset, context), {"by": "column"}
    else:
        fractions = setting_fractions(fractions)
        parts = _by_series(dataset, fractions, seed) if by == "series" else _by_time(dataset, fractions, context)
        how = {"by": by, "fractions": list(fractions), "seed": seed}
    for name, part in zip(SPLITS, parts):
        if not part:
            raise SettingError(
                "fractions",
                f"{dataset.source}: the {name} split is empty ({len(dataset)} series, {how}); "
                "give more series, other {fractions}, or {by='time'}",
            )
    train, valid, test = (
        type(dataset)(
            [s for s, *_ in part],
            ids=[i for _, i, *_ in part],
            features=dataset.features,
            targets=[t for _, _, t, *_ in part] if dataset.targets else None,
            target_names=dataset.target_names,
            context=[c for *_, c, _ in part] if any(c for *_, c, _ in part) else None,
            origin=[o for *_, o in part],
            covariates=dataset.covariates,
            source=dataset.source,
        )
        for part in parts
    )
    targets = (
        Standardizer.fit(train.targets, dataset.target_names, binary=False, source=dataset.source, what="target")
        if dataset.targets
        else None
    )
    features = Standardizer.fit(train.sequences, dataset.features, binary=dataset.binary, source=dataset.source)
    return DataSplits(train, valid, test, how, features, targets)


def _part(dataset, i: int, cut: slice, name: str, context: int = 0):
    """``(sequence, id, targets, context, origin)`` of steps ``cut`` of series ``i``, with its first ``context``
    steps history."""
    return dataset.sequences[i][cut], name, dataset.targets[i][cut] if dataset.targets else None, int(context), i


def _by_series(dataset, fractions, seed: int):
    order = np.random.default_rng(seed).permutation(len(dataset))
    bounds = np.cumsum([0, *_allocate(len(dataset), fractions)])
    return [
        [_part(dataset, i, slice(None), dataset.ids[i]) for i in sorted(order[a:b])]
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def _by_time(dataset, fractions, context: bool):
    parts = [[], [], []]
    for i, name in enumerate(dataset.ids):
        length = len(dataset.sequences[i])
        bounds = np.cumsum([0, *_allocate(length, fractions)])
        for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            if b - a < 2:
                raise ValueError(
                    f"{dataset.source}: series {name!r} has {length} steps: too short to split by "
                    f"time into {list(fractions)} with at least 2 steps in each part"
                )
            start = 0 if k and context else a  # held-out segments keep the series' earlier steps as context
            parts[k].append(_part(dataset, i, slice(start, b), f"{name}[{a}:{b}]", a - start))
    return parts


def _by_labels(dataset, context: bool):
    parts = [[], [], []]
    for i, name in enumerate(dataset.ids):
        labels = dataset.split_labels[i]
        for k, split in enumerate(SPLITS):
            index = np.flatnonzero(labels == split)
            if len(index) == 0:
                continue
            if len(index) < 2:
                raise ValueError(
                    f"{dataset.source}: series {name!r} has {len(index)} {split} step; each part of a "
                    "series needs at least 2 steps"
                )
            run = index[-1] - index[0] + 1 == len(index)  # one run of steps: its history is the steps before
            if split != "train" and run and context:
                parts[k].append(_part(dataset, i, slice(0, index[-1] + 1), f"{name}:{split}", int(index[0])))
                continue
            target = dataset.targets[i][index] if dataset.targets else None
            parts[k].append((dataset.sequences[i][index], f"{name}:{split}", target, 0, i))
    return parts


def _allocate(total: int, fractions) -> list[int]:
    """``total`` items into three parts near ``fractions``, each at least 1 where ``total >= 3``."""
    counts = [max(1, int(round(total * f))) for f in fractions[:2]]
    counts.append(total - sum(counts))
    while counts[2] < 1 and max(counts[:2]) > 1:
        counts[int(np.argmax(counts[:2]))] -= 1
        counts[2] += 1
    return counts

"""Your own sequences as a data set: files or frames in, padded ``(x, mask)`` splits out.

:class:`SequenceDataset` holds a collection of sequences ``[T_i, D]`` of any lengths, with their
ids, feature names and (for a conditional model) targets ``[T_i, O]``. It is built from

* a long-format data frame (:meth:`SequenceDataset.from_dataframe`): one row per series and
  time step, a ``series`` id column (absent: one series), a ``time`` ordering column (absent:
  the frame's order) and ``features`` value columns (default: every other numeric column);
* a file (:meth:`SequenceDataset.from_file`), chosen by suffix: ``.csv`` and ``.parquet`` in
  that long format, ``.npz`` with ``x [N, T, D]`` and an optional ``mask [N, T]`` (or one
  array ``[T_i, D]`` per sequence), or a folder of ``.mid`` files read as 88-key piano rolls;
* a list of arrays (:meth:`SequenceDataset.from_sequences`).

:meth:`~SequenceDataset.split` cuts it into train / validation / test (by series or by time,
by fractions and a seed or by a split column) as :class:`DataSplits`. A held-out segment of a
series (split by time, or by a split column) keeps the series' earlier steps as its *context*:
they are read, not scored (``context``, :meth:`SequenceDataset.scored_mask`), so no model
starts cold at the segment's first step. The splits' :class:
:class:`Standardizer` is fit on the training split (real-valued data; binary data is left as
it is) and maps predictions back to the data's own units; targets, kept apart from the features,
get their own (``target_standardizer``). :meth:`~SequenceDataset.windows`
cuts long series into training windows; :meth:`DataSplits.chunked` cuts the long training series of very skewed
lengths into pieces, so that the padded training tensors hold at most :data:`PADDING_LIMIT` times the steps.
Every refusal is one ``ValueError`` naming the file, the column and the row.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..validation import check_positive_int
from .degenerate import degenerate_features
from .readers import (
    EXTREME_ABSOLUTE,
    EXTREME_SPREADS,
    FILE_SUFFIXES,
    TIME_ORDERS,
    DataWarning,
    check_values,
    numeric_columns,
    read_midi_folder,
    read_npz,
    read_table,
    row_order,
    series_ids,
    unique_columns,
    value_columns,
    warn_once,
)
from .standardize import Standardizer

__all__ = [
    "SequenceDataset",
    "DataSplits",
    "DataWarning",
    "check_values",
    "FILE_SUFFIXES",
    "MISSING",
    "DEGENERATE",
    "TIME_ORDERS",
    "EXTREME_ABSOLUTE",
    "EXTREME_SPREADS",
    "PADDING_LIMIT",
    "chunk_length",
    "skewed",
]

#: what to do with a NaN or infinite value inside a series
MISSING = ("error", "drop-series")
#: what a file reader does with real-valued features that carry no series of their own
#: (:func:`~ppl_models.inference.data.degenerate.degenerate_features`): leave them out with a warning, or keep them
DEGENERATE = ("drop", "keep")
SPLITS = ("train", "valid", "test")
#: a split whose padding to its longest sequence would hold more than this many times its steps is skewed: its long
#: training series are cut into pieces (:meth:`DataSplits.chunked`), and a warning says so
PADDING_LIMIT = 10
_SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "valid": "valid",
    "validation": "valid",
    "val": "valid",
    "test": "test",
    "testing": "test",
}


class SequenceDataset:
    """Sequences ``[T_i, D]`` of any lengths with their ids and feature names (and targets ``[T_i, O]``).

    Build one with :meth:`from_dataframe`, :meth:`from_file` or :meth:`from_sequences`;
    :meth:`padded` gives ``(x [N, T, D], mask [N, T])``. ``source`` names the file (or frame)
    in every message.
    """

    def __init__(
        self,
        sequences: list[np.ndarray],
        *,
        ids: list[str],
        features: list[str],
        targets: list[np.ndarray] | None = None,
        target_names: list[str] | None = None,
        split_labels: list[np.ndarray] | None = None,
        context: list[int] | None = None,
        origin: list[int] | None = None,
        source: str = "sequences",
    ):
        self.sequences = sequences
        self.ids = ids
        self.features = features
        self.targets = targets
        self.target_names = target_names or []
        self.split_labels = split_labels
        #: per sequence, its leading steps that are history (read, not scored); ``None``: every step is scored
        self.context = context
        #: per sequence, the index of the series of the source data set it was cut from (``None``: its own index)
        self.origin = origin
        self.source = source
        #: ``{feature: why}`` of the file's features left out (:meth:`from_dataframe`'s ``degenerate``)
        self.left_out: dict[str, str] = {}

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def from_sequences(
        cls,
        sequences: Sequence,
        *,
        ids: Sequence | None = None,
        features: Sequence | None = None,
        targets: Sequence | None = None,
        source: str = "sequences",
    ) -> SequenceDataset:
        """A data set from a list of arrays ``[T_i, D]`` (or ``[T_i]``) of any lengths, ``T_i >= 2``."""
        if isinstance(sequences, (np.ndarray, torch.Tensor)) or not isinstance(sequences, Sequence):
            raise TypeError(f"sequences: expected a list of arrays [T_i, D], got {type(sequences).__name__}")
        arrays = [_as_2d(s, f"{source}: sequence {i}") for i, s in enumerate(sequences)]
        if not arrays:
            raise ValueError(f"{source}: no sequences")
        dims = {a.shape[1] for a in arrays}
        if len(dims) != 1:
            raise ValueError(f"{source}: sequences must share their feature size D, got {sorted(dims)}")
        dim = dims.pop()
        if dim == 0:
            raise ValueError(f"{source}: the sequences have no features (shape [T_i, 0]); expected D >= 1")
        ids = [str(i) for i in (ids if ids is not None else range(len(arrays)))]
        features = [str(f) for f in (features if features is not None else [f"x{d}" for d in range(dim)])]
        if len(ids) != len(arrays) or len(features) != dim:
            raise ValueError(
                f"{source}: {len(ids)} ids and {len(features)} feature names for "
                f"{len(arrays)} sequences of {dim} features"
            )
        target_arrays = None
        if targets is not None:
            target_arrays = [_as_2d(t, f"{source}: targets {i}") for i, t in enumerate(targets)]
            if len(target_arrays) != len(arrays) or any(len(t) != len(a) for t, a in zip(target_arrays, arrays)):
                raise ValueError(f"{source}: targets must have one array per sequence, of the sequence's length")
        dataset = cls(
            arrays,
            ids=ids,
            features=features,
            targets=target_arrays,
            target_names=[f"y{o}" for o in range(target_arrays[0].shape[1])] if target_arrays else None,
            source=source,
        )
        dataset._check_values("error")
        return dataset

    @classmethod
    def from_dataframe(
        cls,
        frame,
        *,
        series: str | None = None,
        time: str | None = None,
        features: Sequence[str] | None = None,
        targets: Sequence[str] | None = None,
        split: str | None = None,
        missing: str = "error",
        time_order: str = "values",
        degenerate: str = "drop",
        source: str = "data frame",
        row_offset: int = 1,
    ) -> SequenceDataset:
        """A data set from a long-format ``pandas.DataFrame``: one row per series and time step.

        ``series``: the id column (``None``: one series); ``time``: the ordering column (``None``:
        the frame's order), read as numbers, dates (with their year) or numbered labels
        (``t0 .. t11``, ordered by the number; :func:`~ppl_models.inference.data.readers.time_keys`), a cell
        that reads otherwise refused; ``time_order="file"`` keeps the frame's order instead (the
        time column then only checked for duplicates); ``features``: the value columns (``None``:
        every other numeric column, numbers with thousands separators included; a text column
        with digits in it that is left out is named in a warning); ``targets``: columns a
        conditional model predicts (kept apart from the features); ``split``: a column of
        ``train`` / ``valid`` / ``test`` labels; ``missing``: ``"error"`` or ``"drop-series"``
        (drop, with a warning, each series holding a NaN or infinite value); ``degenerate``: ``"drop"`` leaves
        out, with a warning, each real-valued feature that is constant, constant within every series, or an exact
        linear function of the others (:func:`~ppl_models.inference.data.degenerate.degenerate_features`: it would
        decide any likelihood comparison by itself), ``"keep"`` keeps them. Messages give rows
        counted from ``row_offset`` (the line of the first data row in a CSV file is 2).
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame: expected a pandas.DataFrame, got {type(frame).__name__}")
        if missing not in MISSING:
            raise ValueError(f"missing: expected one of {list(MISSING)}, got {missing!r}")
        if time_order not in TIME_ORDERS:
            raise ValueError(f"time_order: expected one of {list(TIME_ORDERS)}, got {time_order!r}")
        _check_degenerate(degenerate)
        if len(frame) == 0:
            raise ValueError(f"{source}: no data rows")
        frame = frame.reset_index(drop=True)
        columns = unique_columns(frame.columns, source)
        frame.columns = columns
        named = {"series": series, "time": time, "split": split}
        _check_distinct(named, list(features or ()), list(targets or ()), source)
        for option, column in [
            *named.items(),
            *(("features", c) for c in features or ()),
            *(("targets", c) for c in targets or ()),
        ]:
            if column is not None and column not in columns:
                raise ValueError(f"{source}: column {column!r} (given as {option}) not found; columns: {columns}")
        reserved = {c for c in named.values() if c is not None} | set(targets or ())
        if features is None:
            features = value_columns(frame, reserved, source)
            if not features:
                raise ValueError(
                    f"{source}: no numeric value columns besides {sorted(reserved)}; name them with features="
                )
        features, targets = list(features), list(targets or [])
        both = [c for c in features if c in targets]
        if both:
            raise ValueError(f"{source}: column {both[0]!r} is named both as a feature and as a target")
        values = numeric_columns(frame, features + targets, source, row_offset)
        ids = series_ids(frame, series, source, row_offset)
        order = row_order(frame, ids, time, source, row_offset, time_order)
        labels = None
        if split is not None:
            raw = frame[split].astype(str).str.strip().str.lower()
            bad = ~raw.isin(list(_SPLIT_NAMES))
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                cell = frame[split].iloc[row]
                cell = cell.item() if isinstance(cell, np.generic) else cell  # 0, not np.int64(0)
                raise ValueError(
                    f"{source}: column {split!r}, row {row + row_offset}: {cell!r} is not a split name "
                    f"(expected one of {sorted(_SPLIT_NAMES)})"
                )
            labels = raw.map(_SPLIT_NAMES).to_numpy()
        ordered = ids[order]  # grouped by series, in order of first appearance: one cut where the id changes
        groups = np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)
        target_arrays = [values[index, len(features) :] for index in groups] if targets else None
        label_arrays = [labels[index] for index in groups] if labels is not None else None
        dataset = cls(
            [values[index, : len(features)] for index in groups],
            ids=[str(ids[g[0]]) for g in groups],
            features=features,
            targets=target_arrays,
            target_names=targets,
            split_labels=label_arrays,
            source=source,
        )
        dataset._check_values(missing, [index + row_offset for index in groups])
        return dataset._leave_out_degenerate(degenerate)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **options) -> SequenceDataset:
        """A data set read from ``path``, by suffix (see :data:`FILE_SUFFIXES`).

        ``.csv`` / ``.parquet`` take :meth:`from_dataframe`'s options (``time_order`` among them; and ``sep``
        for CSV);
        ``.npz`` takes ``features`` and ``degenerate``; a folder of ``.mid`` files takes ``fs`` (frames per second,
        default 4).
        """
        path = Path(path)
        if path.is_dir():
            rolls, ids = read_midi_folder(path, **options)
            return cls.from_sequences(rolls, ids=ids, features=[f"key{k}" for k in range(21, 109)], source=str(path))
        if not path.exists():
            raise ValueError(f"{path}: no such file")
        suffix = path.suffix.lower()
        if suffix not in FILE_SUFFIXES:
            raise ValueError(f"{path}: unknown suffix {path.suffix!r}; expected one of {sorted(FILE_SUFFIXES)}")
        if path.stat().st_size == 0:
            raise ValueError(f"{path}: the file is empty")
        if suffix == ".npz":
            arrays, ids = read_npz(path)
            dataset = cls.from_sequences(arrays, ids=ids, features=options.get("features"), source=str(path))
            return dataset._leave_out_degenerate(options.get("degenerate", "drop"))
        text = [options[key] for key in ("series",) if options.get(key) is not None]
        return cls.from_dataframe(
            read_table(path, suffix, options.pop("sep", ","), text),
            source=str(path),
            row_offset=2 if suffix == ".csv" else 1,
            **options,
        )

    # --- access ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.sequences)

    def __repr__(self) -> str:
        return (
            f"SequenceDataset({len(self)} series from {self.source}, {len(self.features)} features, "
            f"lengths {min(self.lengths)}..{max(self.lengths)}{', binary' if self.binary else ''})"
        )

    @property
    def lengths(self) -> list[int]:
        return [len(s) for s in self.sequences]

    @property
    def origins(self) -> list[int]:
        """Per sequence, the index of the series it was cut from (:attr:`origin`; its own index where there is none)."""
        return list(self.origin) if self.origin is not None else list(range(len(self)))

    @property
    def obs_dim(self) -> int:
        return len(self.features)

    @property
    def binary(self) -> bool:
        """Every value is 0 or 1: a Bernoulli emission suits it; anything else is Gaussian."""
        return all(np.isin(s, (0.0, 1.0)).all() for s in self.sequences)

    @property
    def emission(self) -> str:
        """``"bernoulli"`` for binary data, else ``"gaussian"``."""
        return "bernoulli" if self.binary else "gaussian"

    def padded(
        self, standardizer: Standardizer | None = None, *, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x [N, max T, D], mask [N, max T])``, zeros after each sequence's end, in standard units
        if a ``standardizer`` is given."""
        return _pad(self.sequences, dtype, standardizer)

    def rows(
        self, standardizer: Standardizer | None = None, *, dtype: torch.dtype = torch.float32
    ) -> list[torch.Tensor]:
        """Each sequence as a tensor ``[T_i, D]``: the rows of :meth:`padded` without their padding."""
        return _rows(self.sequences, dtype, standardizer)

    def scored_mask(self) -> torch.Tensor:
        """``scored [N, max T]``: the valid steps after each sequence's :attr:`context` (all valid steps where there
        is none), aligned with :meth:`padded`."""
        lengths = torch.tensor(self.lengths)
        first = torch.tensor(self.context if self.context is not None else [0] * len(self))
        steps = torch.arange(int(lengths.max()))
        return (steps < lengths.unsqueeze(1)) & (steps >= first.unsqueeze(1))

    def padded_targets(
        self, standardizer: Standardizer | None = None, *, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """The targets ``y [N, max T, O]`` (zeros after each end), in standard units if a ``standardizer``
        (e.g. :attr:`DataSplits.target_standardizer`) is given; refused when there are none."""
        if not self.targets:
            raise ValueError(f"{self.source}: no targets: name the target columns with targets=")
        return _pad(self.targets, dtype, standardizer)[0]

    # --- reshaping ------------------------------------------------------------------------
    def windows(self, window: int, stride: int | None = None, *, cover: bool = False) -> SequenceDataset:
        """Each series cut into windows of ``window`` steps, every ``stride`` steps (default ``window``).

        ``cover=True`` (held-out data): consecutive windows that cover every step once, the last
        one shorter where the series does not divide (kept if it has 2 steps or more), and a
        series shorter than ``window`` kept whole. Otherwise a series shorter than ``window`` is
        refused.
        """
        window = check_positive_int(window, name="window", minimum=2)
        if self.context is not None and any(self.context):
            raise ValueError(f"{self.source}: a held-out split that keeps its history is scored whole, not in windows")
        stride = window if cover else check_positive_int(window if stride is None else stride, name="stride")
        short = [(name, len(s)) for name, s in zip(self.ids, self.sequences) if len(s) < window]
        if short and not cover:
            raise ValueError(
                f"{self.source}: window {window} is longer than series {short[0][0]!r} "
                f"({short[0][1]} steps); choose window <= {min(self.lengths)}"
            )
        pieces = {"sequences": [], "targets": [], "labels": [], "ids": [], "origin": []}
        origins = self.origins
        for i, (name, seq) in enumerate(zip(self.ids, self.sequences)):
            last = len(seq) - 1 if cover else len(seq) - window
            for start in range(0, max(last, 0) + 1, stride):
                cut = slice(start, min(start + window, len(seq)))
                if cut.stop - start < 2:
                    continue
                pieces["sequences"].append(seq[cut])
                pieces["ids"].append(f"{name}[{start}:{cut.stop}]")
                pieces["origin"].append(origins[i])
                if self.targets:
                    pieces["targets"].append(self.targets[i][cut])
                if self.split_labels:
                    pieces["labels"].append(self.split_labels[i][cut])
        return SequenceDataset(
            pieces["sequences"],
            ids=pieces["ids"],
            features=self.features,
            targets=pieces["targets"] or None,
            target_names=self.target_names,
            split_labels=pieces["labels"] or None,
            origin=pieces["origin"],
            source=self.source,
        )

    def split(
        self,
        *,
        by: str = "series",
        fractions: Sequence[float] = (0.7, 0.15, 0.15),
        seed: int = 0,
        column: bool | None = None,
        context: bool = True,
    ) -> DataSplits:
        """Train / validation / test :class:`DataSplits`.

        ``by="series"``: whole series go to each split, shuffled by ``seed`` in the given
        ``fractions``; ``by="time"``: each series is cut in time, its first ``fractions[0]`` of
        steps to train, the next to validation, the rest to test. With a split column
        (``split=`` at construction; ``column=None`` uses it when there is one), each row goes
        where its label says, and ``by``, ``fractions`` and ``seed`` are not used.

        A validation or test segment that starts inside its series (by time; by a column whose
        labels of that split are one run of steps) keeps the series' earlier steps as its
        :attr:`context`: its sequence is the series up to the segment's end, and only the
        segment is scored (:meth:`scored_mask`). The training split never has context;
        ``context=False`` gives the held-out segments alone.
        """
        if by not in ("series", "time"):
            raise ValueError(f"by: expected 'series' or 'time', got {by!r}")
        seed = check_positive_int(seed, name="seed", minimum=0)
        use_column = self.split_labels is not None if column is None else bool(column)
        if use_column:
            if self.split_labels is None:
                raise ValueError(f"{self.source}: no split column was named (split=)")
            parts, how = self._split_by_labels(context), {"by": "column"}
        else:
            fractions = _fractions(fractions)
            parts = (
                self._split_by_series(fractions, seed) if by == "series" else self._split_by_time(fractions, context)
            )
            how = {"by": by, "fractions": list(fractions), "seed": seed}
        for name, part in zip(SPLITS, parts):
            if not part:
                raise ValueError(
                    f"{self.source}: the {name} split is empty ({len(self)} series, {how}); "
                    "give more series, other fractions, or split by time"
                )
        train, valid, test = (
            SequenceDataset(
                [s for s, *_ in part],
                ids=[i for _, i, *_ in part],
                features=self.features,
                targets=[t for _, _, t, *_ in part] if self.targets else None,
                target_names=self.target_names,
                context=[c for *_, c, _ in part] if any(c for *_, c, _ in part) else None,
                origin=[o for *_, o in part],
                source=self.source,
            )
            for part in parts
        )
        targets = (
            Standardizer.fit(train.targets, self.target_names, binary=False, source=self.source, what="target")
            if self.targets
            else None
        )
        features = Standardizer.fit(train.sequences, self.features, binary=self.binary, source=self.source)
        return DataSplits(train, valid, test, how, features, targets)

    def _parts(self, i: int, cut: slice, name: str, context: int = 0):
        """``(sequence, id, targets, context, origin)`` of steps ``cut`` of series ``i``, with its first ``context``
        steps history."""
        return self.sequences[i][cut], name, self.targets[i][cut] if self.targets else None, int(context), i

    def _split_by_series(self, fractions, seed):
        order = np.random.default_rng(seed).permutation(len(self))
        counts = _allocate(len(self), fractions)
        bounds = np.cumsum([0, *counts])
        return [
            [self._parts(i, slice(None), self.ids[i]) for i in sorted(order[a:b])]
            for a, b in zip(bounds[:-1], bounds[1:])
        ]

    def _split_by_time(self, fractions, context: bool):
        parts = [[], [], []]
        for i, name in enumerate(self.ids):
            length = len(self.sequences[i])
            bounds = np.cumsum([0, *_allocate(length, fractions)])
            for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                if b - a < 2:
                    raise ValueError(
                        f"{self.source}: series {name!r} has {length} steps: too short to split by "
                        f"time into {list(fractions)} with at least 2 steps in each part"
                    )
                start = 0 if k and context else a  # held-out segments keep the series' earlier steps as context
                parts[k].append(self._parts(i, slice(start, b), f"{name}[{a}:{b}]", a - start))
        return parts

    def _split_by_labels(self, context: bool):
        parts = [[], [], []]
        for i, name in enumerate(self.ids):
            labels = self.split_labels[i]
            for k, split in enumerate(SPLITS):
                index = np.flatnonzero(labels == split)
                if len(index) == 0:
                    continue
                if len(index) < 2:
                    raise ValueError(
                        f"{self.source}: series {name!r} has {len(index)} {split} step; each part of a "
                        "series needs at least 2 steps"
                    )
                run = index[-1] - index[0] + 1 == len(index)  # one run of steps: its history is the steps before
                if split != "train" and run and context:
                    parts[k].append(self._parts(i, slice(0, index[-1] + 1), f"{name}:{split}", int(index[0])))
                    continue
                target = self.targets[i][index] if self.targets else None
                parts[k].append((self.sequences[i][index], f"{name}:{split}", target, 0, i))
        return parts

    # --- checks ---------------------------------------------------------------------------
    def _leave_out_degenerate(self, degenerate: str) -> SequenceDataset:
        """With ``degenerate="drop"``, leave out the real-valued features that carry no series of their own (named in
        :attr:`left_out` and in one warning; binary data is kept whole; a data set with no other feature is
        refused). Returns the data set."""
        _check_degenerate(degenerate)
        found = {} if degenerate == "keep" or self.binary else degenerate_features(self.sequences, self.features)
        if not found:
            return self
        reasons = [f"{name!r}: {why}" for name, why in found.items()]
        if len(found) == len(self.features):
            raise ValueError(f"{self.source}: no feature moves on its own ({'; '.join(reasons)}): nothing to model")
        keep = [d for d, name in enumerate(self.features) if name not in found]
        self.sequences = [s[:, keep] for s in self.sequences]
        self.features = [self.features[d] for d in keep]
        self.left_out = found
        warn_once(
            self.source,
            "left out of the modelled and scored features:",
            reasons,
            f"every model is fit and scored on the others ({', '.join(map(repr, self.features))}), since a "
            "feature predicted exactly would decide the scores by itself",
            stacklevel=4,
        )
        return self

    def _check_values(self, missing: str, rows: list[np.ndarray] | None = None) -> None:
        """Refuse short series and (``missing="error"``) NaN / inf; drop those series otherwise; warn on extremes."""
        names = self.features + self.target_names
        keep = []
        for i, name in enumerate(self.ids):
            values = self.sequences[i] if not self.targets else np.concatenate([self.sequences[i], self.targets[i]], 1)
            bad = ~np.isfinite(values)
            if bad.any():
                step, col = map(int, np.argwhere(bad)[0])
                where = f"row {rows[i][step]}" if rows is not None else f"step {step}"
                if missing == "error":
                    what = "an empty (or NaN) cell" if np.isnan(values[step, col]) else f"{values[step, col]}"
                    raise ValueError(
                        f"{self.source}: column {names[col]!r}, {where} (series {name!r}): {what} "
                        "inside a series; fill it, or pass missing='drop-series' to drop such "
                        "series"
                    )
                continue
            if len(values) < 2:
                where = f" (row {rows[i][0]})" if rows is not None else ""
                raise ValueError(
                    f"{self.source}: series {name!r}{where} has {len(values)} step; every series needs at least 2 steps"
                )
            keep.append(i)
        if len(keep) < len(self):
            dropped = [self.ids[i] for i in sorted(set(range(len(self))) - set(keep))]
            if not keep:
                raise ValueError(f"{self.source}: every series holds a NaN or infinite value")
            warn_once(
                self.source,
                f"dropped {len(dropped)} series holding NaN or infinite values",
                [f"({dropped[:5]}{'...' if len(dropped) > 5 else ''})"],
                "the others are kept",
            )
            for attribute in ("sequences", "ids", "targets", "split_labels"):
                if getattr(self, attribute) is not None:
                    setattr(self, attribute, [getattr(self, attribute)[i] for i in keep])
        lines = np.concatenate([rows[i] for i in keep]) if rows is not None else None
        check_values(np.concatenate(self.sequences), self.source, self.features, lines=lines)


@dataclass
class DataSplits:
    """Train / validation / test :class:`SequenceDataset`, how they were cut, and the training split's
    :class:`Standardizer` of the features and (where there are targets, always real-valued) of the targets.

    Transformed splits (:meth:`~ppl_models.inference.data.transforms.SeriesTransform.apply`: log, differencing,
    per-series scaling) hold their ``transform`` and the splits as read (``levels``); :meth:`units` maps a held-out
    split back to the data's units, :meth:`level_scored` and :meth:`level_tensors` give the splits as read with the
    data steps the transformed splits score.
    """

    train: SequenceDataset
    valid: SequenceDataset
    test: SequenceDataset
    how: dict
    standardizer: Standardizer
    target_standardizer: Standardizer | None = None
    #: the :class:`~ppl_models.inference.data.transforms.SeriesTransform` the splits hold (before the
    #: standardisation); ``None``: the data as read
    transform: object = None
    #: the splits as read, before :attr:`transform` (their standardizer fit on the untransformed training split)
    levels: DataSplits | None = None

    def __iter__(self):
        return iter((self.train, self.valid, self.test))

    def windows(self, window: int, stride: int | None = None, *, held_out: str = "whole") -> DataSplits:
        """Training windows of ``window`` steps every ``stride``.

        ``held_out="whole"``: validation and test are scored whole, each step given all the earlier steps of its
        series (its held-out segment's :attr:`~SequenceDataset.context` included), since a window would start a
        model cold; ``"cover"``: they are cut into consecutive windows that count each step once
        (:meth:`SequenceDataset.windows`; splits without context only).
        """
        if held_out not in ("whole", "cover"):
            raise ValueError(f"held_out: expected 'whole' or 'cover', got {held_out!r}")
        if held_out == "cover" and self._transformed:
            raise ValueError(f"held_out='cover': transformed splits ({self.transform.name}) are scored whole")
        valid, test = (
            (self.valid, self.test)
            if held_out == "whole"
            else (self.valid.windows(window, cover=True), self.test.windows(window, cover=True))
        )
        return dataclasses.replace(
            self,
            train=self.train.windows(window, stride),
            valid=valid,
            test=test,
            how={**self.how, "window": window, "stride": stride or window},
        )

    def chunked(self, limit: float = PADDING_LIMIT) -> DataSplits:
        """These splits with each training series longer than :func:`chunk_length` steps cut into consecutive pieces
        of that many steps (:meth:`SequenceDataset.windows` with ``cover=True``; ``how["chunk"]``) where the training
        lengths are so skewed that padding them to the longest would hold more than ``limit`` times their steps;
        unchanged otherwise. Each split that skewed is named in one :class:`DataWarning` (held-out splits are scored
        whole, each step given its history)."""
        length = chunk_length(self.train.lengths, limit)
        named = [_skew(name, part) for name, part in zip(SPLITS, self) if skewed(part.lengths, limit)]
        cut = f"training series longer than {length} steps are cut into pieces of {length} steps; " if length else ""
        warn_once(
            self.train.source,
            "series lengths are very skewed:",
            named,
            f"{cut}held-out series are scored whole, each step given its history",
        )
        if length is None:
            return self
        return dataclasses.replace(
            self, train=self.train.windows(length, cover=True), how={**self.how, "chunk": length}
        )

    def tensors(self, *, standardize: bool = True, dtype: torch.dtype = torch.float32):
        """``[(x, mask)]`` of train, validation and test, in standard units unless ``standardize=False``."""
        standardizer = self.standardizer if standardize else None
        return [part.padded(standardizer, dtype=dtype) for part in self]

    def scored(self) -> dict[str, torch.Tensor | None]:
        """``{"valid": scored [N, T], "test": ...}`` (:meth:`SequenceDataset.scored_mask`), ``None`` for a split
        without context (every valid step scored)."""
        return {
            name: part.scored_mask() if part.context is not None else None
            for name, part in (("valid", self.valid), ("test", self.test))
        }

    def units(self, split: str):
        """The way from ``split``'s (``"valid"`` or ``"test"``) standard units back to the data's: the
        :attr:`standardizer` where the data is not transformed, else the split's
        :class:`~ppl_models.inference.data.transforms.DataUnits` (per-row maps, levels and Jacobians)."""
        if split not in SPLITS[1:]:
            raise ValueError(f"split: expected 'valid' or 'test', got {split!r}")
        if not self._transformed:
            return self.standardizer
        return self.transform.units(self.levels, split, self.standardizer)

    def first_scored(self, split: str) -> list[int]:
        """Per row of held-out ``split``, its first scored data step: its context, at least the differencing lag."""
        part = dict(zip(SPLITS, self._read))[split]
        return [max(c, self._lag) for c in part.context or [0] * len(part)]

    def level_scored(self) -> dict[str, torch.Tensor]:
        """``{"valid": scored [N, T], "test": ...}`` of the held-out splits as read (:meth:`level_tensors`): the data
        steps the (transformed) splits score, each row's from :meth:`first_scored` to its end."""
        scored = {}
        for name, part in zip(SPLITS[1:], list(self._read)[1:]):
            first = torch.tensor(self.first_scored(name))
            steps = torch.arange(max(part.lengths))
            scored[name] = (steps < torch.tensor(part.lengths).unsqueeze(1)) & (steps >= first.unsqueeze(1))
        return scored

    def level_tensors(self, *, dtype: torch.dtype = torch.float32):
        """``[(x, mask)]`` of train, validation and test as read (before any transform; the whole training parts,
        not windows, but cut into the pieces of :meth:`chunked` where it cut the training split), in the standard
        units of the standardizer fit on the untransformed training split."""
        read = self.levels if self.levels is not None else self
        if self.levels is not None and "chunk" in self.how:
            read = dataclasses.replace(read, train=read.train.windows(self.how["chunk"], cover=True))
        return read.tensors(dtype=dtype)

    def to_dict(self) -> dict:
        """What went where (series ids and step counts of the data as read, the first scored step of each held-out
        row), how, the transform and the standardisation: for the run folder."""
        record = {"how": self.how, "standardizer": self.standardizer.to_dict()}
        if self.target_standardizer is not None:
            record["target_standardizer"] = self.target_standardizer.to_dict()
        if self.transform is not None:
            record["transform"] = self.transform.to_dict()
        record.update(
            {
                name: {"ids": part.ids, "steps": part.lengths, "context": part.context or [0] * len(part)}
                for name, part in zip(SPLITS, self._read)
            }
        )
        for name in SPLITS[1:]:
            record[name]["first_scored"] = self.first_scored(name)
            if self.transform is not None:
                record[name]["transform"] = self.transform.name
        return record

    @property
    def _read(self) -> DataSplits:
        """The splits as read: :attr:`levels` under a transform other than none, else these."""
        return self.levels if self._transformed else self

    @property
    def _lag(self) -> int:
        return self.transform.lag if self.transform is not None else 0

    @property
    def _transformed(self) -> bool:
        """Whether the transform changes the rows' steps or their values (anything but none)."""
        return self.transform is not None and not self.transform.identity


# --- helpers ------------------------------------------------------------------------------
def _as_2d(array, name: str) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        array = array.detach().cpu().numpy()
    try:
        array = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers [T_i, D], got {type(array).__name__}") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name}: expected shape [T_i, D] or [T_i], got {list(array.shape)}")
    return array


def _rows(
    sequences: list[np.ndarray], dtype: torch.dtype, standardizer: Standardizer | None = None
) -> list[torch.Tensor]:
    """Each of ``sequences`` ``[T_i, D]`` as a tensor in ``dtype``, standardised (in float64, before the cast to
    ``dtype``) by ``standardizer`` if given."""
    if standardizer is None:
        return [torch.as_tensor(s, dtype=dtype) for s in sequences]
    return [standardizer.transform(torch.as_tensor(s, dtype=torch.float64)).to(dtype) for s in sequences]


def _pad(
    sequences: list[np.ndarray], dtype: torch.dtype, standardizer: Standardizer | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [N, max T, D] in dtype, mask [N, max T])`` of :func:`_rows`, zeros after each end: one sequence at a
    time, so nothing wider than ``dtype`` is ever padded."""
    rows = _rows(sequences, dtype, standardizer)
    lengths = torch.tensor([len(row) for row in rows])
    x = torch.zeros(len(rows), int(lengths.max()), rows[0].shape[1], dtype=dtype)
    for i, row in enumerate(rows):
        x[i, : len(row)] = row
    return x, torch.arange(x.shape[1]) < lengths.unsqueeze(1)


def chunk_length(lengths: Sequence[int], limit: float = PADDING_LIMIT) -> int | None:
    """The piece length ``C >= 2`` at which sequences of ``lengths``, each longer than ``C`` cut into consecutive
    pieces of ``C`` steps, pad to at most ``limit`` times their steps (pieces x ``C`` elements); ``None`` where
    padding them whole to the longest already does."""
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 1.5:
        raise ValueError(f"limit: expected a number >= 1.5 (pieces of 2 steps pad to up to 1.5 times), got {limit!r}")
    lengths = np.asarray(lengths, dtype=np.int64)
    budget = limit * lengths.sum()
    if not skewed(lengths, limit):
        return None
    fits, too_long = 2, int(lengths.max())
    while too_long - fits > 1:  # the pieces' padding grows with their length, up to multiples
        middle = (fits + too_long) // 2
        fits, too_long = (middle, too_long) if np.ceil(lengths / middle).sum() * middle <= budget else (fits, middle)
    return fits


def skewed(lengths: Sequence[int], limit: float = PADDING_LIMIT) -> bool:
    """Whether sequences of ``lengths`` padded to the longest would hold more than ``limit`` times their steps."""
    return _padding(lengths) > limit


def _padding(lengths: Sequence[int]) -> float:
    """How many times its steps sequences of ``lengths`` hold padded to the longest: ``N max(T_i) / sum(T_i)``."""
    return float(len(lengths) * np.max(lengths) / np.sum(lengths))


def _skew(name: str, part: SequenceDataset) -> str:
    """One line on split ``name``'s skewed lengths."""
    lengths = part.lengths
    name = {"train": "training", "valid": "validation"}.get(name, name)
    return (
        f"the {name} split's {len(part)} series have {min(lengths)} to {max(lengths)} steps, and padded to the "
        f"longest they would hold {_padding(lengths):.0f} times their {sum(lengths):,} steps"
    )


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


def _check_degenerate(degenerate) -> None:
    if degenerate not in DEGENERATE:
        raise ValueError(f"degenerate: expected one of {list(DEGENERATE)}, got {degenerate!r}")


def _fractions(fractions) -> tuple[float, float, float]:
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise ValueError(f"fractions: expected three numbers (train, valid, test), got {fractions!r}") from None
    if len(values) != 3 or any(not math.isfinite(f) or f <= 0 for f in values) or abs(sum(values) - 1) > 1e-6:
        raise ValueError(f"fractions: expected three positive numbers summing to 1, got {fractions!r}")
    return values


def _allocate(total: int, fractions) -> list[int]:
    """``total`` items into three parts near ``fractions``, each at least 1 where ``total >= 3``."""
    counts = [max(1, int(round(total * f))) for f in fractions[:2]]
    counts.append(total - sum(counts))
    while counts[2] < 1 and max(counts[:2]) > 1:
        counts[int(np.argmax(counts[:2]))] -= 1
        counts[2] += 1
    return counts

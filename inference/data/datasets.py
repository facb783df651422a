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
Every refusal is one ``ValueError`` naming the file, the column and the row (a
:class:`~ppl_models.inference.validation.SettingError` naming its key where a setting is at fault).

The pieces live in modules of their own, their public names importable from here too: the settings
(:mod:`.spec`: :class:`~ppl_models.inference.data.spec.FileSpec`), a frame's columns as sequences (:mod:`.frames`),
the checks of what was read (:mod:`.dataset_checks`), the split (:mod:`.splitting`) and its result (:mod:`.splits`),
skewed lengths (:mod:`.chunking`) and padding (:mod:`.padding`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..defaults import SPLIT_FRACTIONS
from ..validation import SettingError
from .chunking import PADDING_LIMIT, chunk_length, skewed
from .covariates import CovariateLayout
from .data_warnings import DataWarning
from .dataset_checks import check_series, leave_out_degenerate
from .frames import frame_sequences
from .padding import as_2d, pad_rows, tensor_rows
from .readers import FILE_SUFFIXES, read_midi_folder, read_npz, read_table
from .spec import DEGENERATE, MISSING, TIME_ORDERS, FileSpec, setting_count
from .splits import SPLITS, DataSplits
from .splitting import split_dataset
from .standardize import Standardizer
from .value_checks import EXTREME_ABSOLUTE, EXTREME_SPREADS, check_values

__all__ = [
    "SequenceDataset",
    "DataSplits",
    "DataWarning",
    "check_values",
    "FILE_SUFFIXES",
    "MISSING",
    "DEGENERATE",
    "TIME_ORDERS",
    "SPLITS",
    "EXTREME_ABSOLUTE",
    "EXTREME_SPREADS",
    "PADDING_LIMIT",
    "chunk_length",
    "skewed",
]


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
        covariates: CovariateLayout | None = None,
        future: dict[str, np.ndarray] | None = None,
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
        #: which columns are targets and which covariates (``None``: every feature is a target;
        #: :mod:`~ppl_models.inference.data.covariates`), and per series its known covariates after its last target
        self.covariates = covariates
        self.future = future or {}
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
        arrays = [as_2d(s, f"{source}: sequence {i}") for i, s in enumerate(sequences)]
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
            target_arrays = [as_2d(t, f"{source}: targets {i}") for i, t in enumerate(targets)]
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
        check_series(dataset, "error")
        return dataset

    @classmethod
    def from_dataframe(
        cls, frame, spec: FileSpec | None = None, *, source: str = "data frame", row_offset: int = 1, **settings
    ) -> SequenceDataset:
        """A data set from a long-format ``pandas.DataFrame``: one row per series and time step, its columns named by
        ``spec`` (a :class:`~ppl_models.inference.data.spec.FileSpec`) or by ``settings``, its fields.

        ``series``: the id column (``None``: one series); ``time``: the ordering column (``None``:
        the frame's order), read as numbers, dates (with their year) or numbered labels
        (``t0 .. t11``, ordered by the number; :func:`~ppl_models.inference.data.time_order.time_keys`), a cell
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
        spec = FileSpec.of(spec, **settings)
        read = frame_sequences(frame, spec, source, row_offset)
        rows = read.pop("rows")
        dataset = cls(**read, source=source)
        check_series(dataset, spec.missing, rows)
        return leave_out_degenerate(dataset, spec.degenerate)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, spec: FileSpec | None = None, *, fs: float = 4.0, **settings
    ) -> SequenceDataset:
        """A data set read from ``path``, by suffix (see :data:`FILE_SUFFIXES`), its columns named by ``spec`` (a
        :class:`~ppl_models.inference.data.spec.FileSpec`) or by ``settings``, its fields.

        ``.csv`` / ``.parquet`` read as :meth:`from_dataframe` (and ``sep`` for CSV); ``.npz`` takes ``features``
        and ``degenerate``; a folder of ``.mid`` files takes ``fs`` (frames per second, default 4).
        """
        path, spec = Path(path), FileSpec.of(spec, **settings)
        if (spec.covariates or spec.past_covariates) and (path.is_dir() or path.suffix.lower() == ".npz"):
            key = "covariates" if spec.covariates else "past_covariates"
            raise SettingError(key, f"{path}: {{{key}}} name columns of a .csv or .parquet file, which this is not")
        if path.is_dir():
            rolls, ids = read_midi_folder(path, fs=fs)
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
            dataset = cls.from_sequences(arrays, ids=ids, features=spec.features, source=str(path))
            return leave_out_degenerate(dataset, spec.degenerate)
        text = [spec.series] if spec.series is not None else []
        frame = read_table(path, suffix, spec.sep, text)
        return cls.from_dataframe(frame, spec, source=str(path), row_offset=2 if suffix == ".csv" else 1)

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
    def forecast_columns(self) -> int:
        """How many leading features are forecast: the targets of :attr:`covariates` (the covariates follow them),
        else every feature."""
        return len(self.covariates.targets) if self.covariates is not None else len(self.features)

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
        return pad_rows(self.sequences, dtype, standardizer)

    def rows(
        self, standardizer: Standardizer | None = None, *, dtype: torch.dtype = torch.float32
    ) -> list[torch.Tensor]:
        """Each sequence as a tensor ``[T_i, D]``: the rows of :meth:`padded` without their padding."""
        return tensor_rows(self.sequences, dtype, standardizer)

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
            raise SettingError("targets", f"{self.source}: no targets: name the target columns with {{targets=}}")
        return pad_rows(self.targets, dtype, standardizer)[0]

    # --- reshaping ------------------------------------------------------------------------
    def windows(self, window: int, stride: int | None = None, *, cover: bool = False) -> SequenceDataset:
        """Each series cut into windows of ``window`` steps, every ``stride`` steps (default ``window``).

        ``cover=True`` (held-out data): consecutive windows that cover every step once, the last
        one shorter where the series does not divide (kept if it has 2 steps or more), and a
        series shorter than ``window`` kept whole. Otherwise a series shorter than ``window`` is
        refused.
        """
        window = setting_count(window, "window", minimum=2)
        if self.context is not None and any(self.context):
            raise ValueError(f"{self.source}: a held-out split that keeps its history is scored whole, not in windows")
        stride = window if cover else setting_count(window if stride is None else stride, "stride")
        short = [(name, len(s)) for name, s in zip(self.ids, self.sequences) if len(s) < window]
        if short and not cover:
            raise SettingError(
                "window",
                f"{self.source}: {{window}} {window} is longer than series {short[0][0]!r} "
                f"({short[0][1]} steps); choose {{window}} <= {min(self.lengths)}",
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
            covariates=self.covariates,
            source=self.source,
        )

    def split(
        self,
        *,
        by: str = "series",
        fractions: Sequence[float] = SPLIT_FRACTIONS,
        seed: int = 0,
        column: bool | None = None,
        context: bool = True,
    ) -> DataSplits:
        """Train / validation / test :class:`DataSplits` (:mod:`.splitting`).

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
        return split_dataset(self, by=by, fractions=fractions, seed=seed, column=column, context=context)

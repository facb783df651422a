"""Train / validation / test :class:`DataSplits` of a :class:`~ppl_models.inference.data.datasets.SequenceDataset`:
their training windows, their pieces where the lengths are skewed, their tensors and their way back to the data's
units."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from .chunking import PADDING_LIMIT, chunk_length, padding_ratio, skewed
from .data_warnings import warn_once
from .standardize import Standardizer

__all__ = ["DataSplits", "SPLITS"]

SPLITS = ("train", "valid", "test")


@dataclass
class DataSplits:
    """Train / validation / test :class:`SequenceDataset`, how they were cut, and the training split's
    :class:`Standardizer` of the features and (where there are targets, always real-valued) of the targets.

    Transformed splits (:meth:`~ppl_models.inference.data.transforms.SeriesTransform.apply`: log, differencing,
    per-series scaling) hold their ``transform`` and the splits as read (``levels``); :meth:`units` maps a held-out
    split back to the data's units, :meth:`level_scored` and :meth:`level_tensors` give the splits as read with the
    data steps the transformed splits score.
    """

    train: Any  # each a SequenceDataset (datasets.py imports this module)
    valid: Any
    test: Any
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
        named = [_skew_line(name, part) for name, part in zip(SPLITS, self) if skewed(part.lengths, limit)]
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


def _skew_line(name: str, part) -> str:
    """One line on split ``name``'s skewed lengths."""
    lengths = part.lengths
    name = {"train": "training", "valid": "validation"}.get(name, name)
    return (
        f"the {name} split's {len(part)} series have {min(lengths)} to {max(lengths)} steps, and padded to the "
        f"longest they would hold {padding_ratio(lengths):.0f} times their {sum(lengths):,} steps"
    )

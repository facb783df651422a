"""A user's own file as a data set: ``[data] name = "file"`` (``--data PATH``), through
:mod:`ppl_models.inference.data.datasets`.

A command reads the file once (:func:`read_dataset`): a board's models, their runs and its figures, or a model's
recipe and its run, all split what that one read gave; a board's child processes are handed its reads
(:func:`save_reads`, :func:`load_reads`) rather than reading the file again.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from collections import OrderedDict
from pathlib import Path

from ppl_models.inference.atomic_files import atomic_write
from ppl_models.inference.data import DataSplits, FileSpec, SequenceDataset, Standardizer, resolve_likelihood
from ppl_models.inference.keyword_settings import field_names, options_with, sorted_keywords

from ..data import ExperimentData, LevelData

__all__ = ["CACHED_READS", "read_dataset", "save_reads", "load_reads", "file_data"]

#: the reads a process keeps (:func:`read_dataset`), the least recently used dropped first
CACHED_READS = 4
_reads: OrderedDict[tuple, SequenceDataset] = OrderedDict()
#: the cuts of those reads a process keeps (:func:`_cut_once`): ``{settings: (read, splits, records...)}``
_cuts: OrderedDict[str, tuple] = OrderedDict()


def read_dataset(path: str | Path, spec: FileSpec | None = None, *, fs: float = 4.0) -> SequenceDataset:
    """:meth:`~ppl_models.inference.data.datasets.SequenceDataset.from_file` of ``path`` with ``spec`` (the
    :class:`~ppl_models.inference.data.spec.FileSpec` of its columns) and ``fs``, read once in a process while the
    file is unchanged.

    The read is kept under the resolved path, the file's size, modification time and inode (each file's, for a
    folder of MIDI files) and the settings its reader uses; a file written since (or other settings) is read anew.
    The data set returned is shared: callers derive their splits and tensors from it and never change it.
    """
    spec = spec or FileSpec()
    key = (str(Path(path).resolve()), _signature(Path(path)), json.dumps(_read_by(path, spec, fs), default=str))
    if key not in _reads:
        _keep(_reads, key, SequenceDataset.from_file(path, spec, fs=fs))
    _reads.move_to_end(key)
    return _reads[key]


def _keep(cache: OrderedDict, key, value) -> None:
    """``cache[key] = value``, the least recently used entries dropped beyond :data:`CACHED_READS`."""
    cache[key] = value
    while len(cache) > CACHED_READS:
        cache.popitem(last=False)


def save_reads(path: str | Path) -> Path:
    """Write the reads this process keeps (:func:`read_dataset`) to ``path`` (atomically), for :func:`load_reads` in a
    child process; ``path``."""
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(pickle.dumps(list(_reads.items()))))


def load_reads(path: str | Path) -> None:
    """Keep the reads :func:`save_reads` wrote at ``path`` (a file this library wrote: they are unpickled) as this
    process's own: :func:`read_dataset` then returns them while their files are unchanged, and reads a file written
    since anew."""
    for key, dataset in pickle.loads(Path(path).read_bytes()):
        _keep(_reads, key, dataset)


def _read_by(path, spec: FileSpec, fs: float) -> dict:
    """The settings the reader of ``path`` uses: ``fs`` for a folder, the features for an ``.npz``, else the
    columns."""
    if Path(path).is_dir():
        return {"fs": fs}
    if Path(path).suffix.lower() == ".npz":
        return {"features": spec.features, "degenerate": spec.degenerate}
    return spec.reading()


def _signature(path: Path) -> tuple | None:
    """``(size, modification time in ns, inode)`` of the file at ``path``, of every file of a folder by name, or
    ``None`` where there is nothing (the reader then names what is missing)."""
    if path.is_dir():
        return tuple((p.name, *_signature(p)) for p in sorted(path.iterdir()) if p.is_file())
    if not path.is_file():
        return None
    status = path.stat()
    return status.st_size, status.st_mtime_ns, status.st_ino


def file_data(
    path: str,
    spec: FileSpec | None = None,
    *,
    fs: float = 4.0,
    standardizer: dict | None = None,
    transform: str = "auto",
    season: int | None = None,
    history: bool = False,
    likelihood: str = "auto",
    **settings,
) -> ExperimentData:
    """The ``[data] name = "file"`` builder: the file at ``path`` read, split and windowed by ``spec`` (a
    :class:`~ppl_models.inference.data.spec.FileSpec`, default its defaults, with ``settings``, its fields as
    keywords, in place), transformed and standardised.

    ``path`` is a ``.csv``, ``.parquet``, ``.npz`` or a folder of ``.mid`` files. The spec's ``series`` / ``time`` /
    ``features`` / ``targets`` / ``split`` name the columns of a long-format
    table (:meth:`~ppl_models.inference.data.datasets.SequenceDataset.from_dataframe`, whose ``degenerate`` leaves out
    features that are constant or exact linear functions of others, named in the split record's ``left_out``),
    whose ``time_order`` is ``"values"`` (by the time column's numbers, dates or numbered labels) or ``"file"`` (the
    file's order); ``split_by`` is ``"series"``
    or ``"time"``, with ``fractions`` (train, valid, test; default 0.7, 0.15, 0.15) and
    ``split_seed``, unless a ``split`` column decides; ``window`` / ``stride`` cut training windows
    (held-out splits are scored whole: a held-out segment of a series keeps the series' earlier steps as context,
    read but not scored: :attr:`~ppl_models.experiments.data.ExperimentData.scored`); where the training lengths are
    very skewed, the long training series are cut into pieces that keep the padding within
    :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` times the steps
    (:meth:`~ppl_models.inference.data.datasets.DataSplits.chunked`, with a warning). ``fs``: the frame rate of MIDI
    files. ``transform`` (:func:`~ppl_models.inference.data.resolve_transform`): ``"auto"`` (chosen on the
    validation split among log, a seasonal profile, differencing at lag 1 or ``season`` and per-series scaling),
    ``"none"`` or a spec like ``"log+difference"``; training windows are cut from the transformed training split.
    Real-valued features are then standardised on the training split (or by ``standardizer``, a
    :meth:`~ppl_models.inference.data.Standardizer.to_dict` record: a trained model's own, to judge or forecast new
    data in its units); the tensors are in those units, each held-out split's way back to the data's units is
    :meth:`~ppl_models.experiments.data.ExperimentData.units`, and the data as read is
    :attr:`~ppl_models.experiments.data.ExperimentData.levels`. ``history=True`` reads each series whole, in every
    split, as the history of a forecast past its end: no split and no training windows (a run's transform and
    ``standardizer`` apply, per-series scales from each series' own steps). ``likelihood``
    (:func:`~ppl_models.inference.data.resolve_likelihood`): ``"auto"`` (counts for non-negative integers, neither
    transformed nor standardised, unless none is below 20), ``"gaussian"``, ``"poisson"``, ``"negbin"``,
    ``"lognormal"`` or ``"real"``; the split record's ``likelihood`` says which and why. An unknown keyword is a
    ``TypeError`` naming it.
    """
    (settings,) = sorted_keywords("file_data", settings, {"FileSpec": field_names(FileSpec)})
    spec = options_with(FileSpec, spec, settings, name="spec")
    if standardizer is not None:  # a trained model's features, as it was trained on them
        spec = dataclasses.replace(spec, features=standardizer.get("features", spec.features), degenerate="keep")
    dataset = read_dataset(path, spec, fs=fs)
    splits, choice, chosen = _cut_once(dataset, spec, transform, season, history, likelihood)
    if standardizer is not None:
        splits = copy.copy(splits)  # the cut is shared: this caller's standardiser is its own
        splits.standardizer = _recorded(standardizer, dataset.features, path)
    train, valid, test = splits.tensors()
    units = {name: splits.units(name) for name in ("valid", "test")}
    kind = _kind(chosen["name"])
    return ExperimentData(
        train,
        valid,
        test,
        f"{path} ({len(dataset)} series, {dataset.obs_dim} features, {kind})",
        binary=dataset.binary,
        standardizer=units["test"],
        split_units=units,
        split_record={
            **copy.deepcopy(splits.to_dict()),  # the cut is shared: this record is the caller's own
            "transform": choice,
            "left_out": dataset.left_out,
            "likelihood": chosen,
        },
        scored=splits.scored(),
        levels=_levels(splits),
        covariates=dataset.covariates,
        future=dataset.future,
    )


def _cut_once(
    dataset: SequenceDataset, spec: FileSpec, transform: str, season: int | None, history: bool, likelihood: str
) -> tuple[DataSplits, dict, dict]:
    """:func:`_cut`, once in a process for the same read of the file and the same settings (the automatic transform's
    choice fits an AR model per candidate; a board builds its data once per model and again for its figures). The
    splits are shared, never changed by a caller; the records are each caller's own."""
    key = repr((id(dataset), spec, transform, season, history, likelihood))
    entry = _cuts.get(key)
    if entry is None or entry[0] is not dataset:  # not cut yet, or from a read since dropped
        _keep(_cuts, key, (dataset, *_cut(dataset, spec, transform, season, history, likelihood)))
    _cuts.move_to_end(key)
    _, splits, choice, chosen = _cuts[key]
    return splits, copy.deepcopy(choice), copy.deepcopy(chosen)


def _cut(
    dataset: SequenceDataset, spec: FileSpec, transform: str, season: int | None, history: bool, likelihood: str
) -> tuple[DataSplits, dict, dict]:
    """``(splits, the transform chosen, the likelihood chosen)``: ``dataset`` split by ``spec`` (every series whole
    in each split for ``history``), prepared for its likelihood, transformed, cut into training windows and chunked
    (:func:`file_data`)."""
    window = None if history else spec.window
    if history:
        splits = _whole(dataset)
    else:
        splits = dataset.split(by=spec.split_by, fractions=spec.split_fractions, seed=spec.split_seed)
    splits, choice, chosen = resolve_likelihood(
        likelihood, splits, transform, season=season, window=window, prefix="data."
    )
    if window is not None:
        splits = splits.windows(window, spec.stride)
    return splits.chunked(), choice, chosen


def _kind(likelihood: str) -> str:
    """The data's kind in its one-line description, by its ``likelihood``."""
    if likelihood == "bernoulli":
        return "binary"
    if likelihood in ("poisson", "negbin"):
        return f"counts, {likelihood}, not standardised"
    return "real-valued, standardised on the training split"


def _whole(dataset: SequenceDataset) -> DataSplits:
    """Every series of ``dataset`` whole in each split (``how``: ``{"by": "none"}``), standardised on all of them."""
    standardizer = Standardizer.fit(dataset.sequences, dataset.features, binary=dataset.binary, source=dataset.source)
    return DataSplits(dataset, dataset, dataset, {"by": "none"}, standardizer)


def _levels(splits: DataSplits) -> LevelData:
    """The file as read (:class:`~ppl_models.experiments.data.LevelData`) behind transformed ``splits``."""
    train, valid, test = splits.level_tensors()
    return LevelData(train, valid, test, splits.level_scored(), splits.levels.standardizer)


def _recorded(record: dict, features: list[str], path) -> Standardizer:
    """A run's recorded standardisation, checked against the features of the file at ``path``."""
    try:
        standardizer = Standardizer.from_dict(record)
    except (KeyError, TypeError) as error:
        raise ValueError(f"data.standardizer: expected features, mean and scale, got {record!r}") from error
    if standardizer.features != list(features):
        raise ValueError(f"{path}: features {list(features)} differ from the trained model's {standardizer.features}")
    return standardizer

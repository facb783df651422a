"""Data sets as padded tensors: the container and the access to the shared offline data.

Every data set comes as a :class:`ExperimentData`: three splits of ``(x [N, T, D],
mask [N, T])`` pairs, padded at the end, ready for the training loop. The loaders and
generators of the data sets themselves live with their tasks, in :mod:`ppl_models.experiments.tasks`.

Real data is read in place from a data folder, never downloaded and never copied
into the project: ``data_dir`` argument (the command line's ``--data-dir``), else the
``PPL_MODELS_DATA`` environment variable, else the first ``shared/data`` in the working
folder or one of its parents (:func:`resolve_data_dir`). Each file is checked against the
folder's ``SHA256SUMS`` before it is read.

A file that does not hold what its loader expects (a MATLAB file without its array or with
one of the wrong shape; a CSV file that is empty, holds a header only, has a truncated row
or a cell that is not a number) is one ``ValueError`` naming the file, the array or column
and, where there is one, the line. Values are then checked by :func:`check_values`: a
non-finite value is refused the same way, and an extreme one (see :data:`EXTREME_ABSOLUTE`
and :data:`EXTREME_SPREADS`) gives one :class:`DataWarning` per file, naming its columns.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ppl_models.inference.data.readers import EXTREME_ABSOLUTE, EXTREME_SPREADS, DataWarning, check_values

__all__ = [
    "SPLITS",
    "SplitData",
    "SupervisedData",
    "ExperimentData",
    "LevelData",
    "pad_sequences",
    "resolve_data_dir",
    "verified_path",
    "load_mat",
    "mat_array",
    "SharedCsvRows",
    "read_shared_csv",
    "check_values",
    "DataWarning",
    "EXTREME_ABSOLUTE",
    "EXTREME_SPREADS",
]

DATA_ENV = "PPL_MODELS_DATA"
#: the splits of every data container, in order
SPLITS = ("train", "valid", "test")


class SplitData:
    """What every data container has: train / validation / test splits, each a tuple whose first entry is
    ``x [N, T, D]`` (:meth:`part`), and a one-line ``description``."""

    description: str

    def part(self, name: str) -> tuple:
        """The tuple of split ``name`` (one of :data:`SPLITS`)."""
        if name not in SPLITS:
            raise ValueError(f"split: expected one of {list(SPLITS)}, got {name!r}")
        return self._split(name)

    def _split(self, name: str) -> tuple:
        return getattr(self, name)

    @property
    def obs_dim(self) -> int:
        """``D``: the features of each step of ``x``."""
        return self.part("train")[0].shape[-1]


class SupervisedData(SplitData):
    """A supervised task's data: ``splits`` ``{"train" | "valid" | "test": (x [N, T, D], mask [N, T] or None, y)}``
    (``y`` per step ``[N, T, O]`` or per sequence ``[N]``)."""

    splits: dict

    def _split(self, name: str) -> tuple:
        return self.splits[name]

    @property
    def train(self) -> tuple:
        return self.splits["train"]

    @property
    def valid(self) -> tuple:
        return self.splits["valid"]

    @property
    def test(self) -> tuple:
        return self.splits["test"]


@dataclass
class LevelData:
    """A user's file as read, before its transform (log, differencing, per-series scaling), for models that take the
    levels themselves: train / validation / test ``(x [N, T, D], mask [N, T])`` (the whole training parts) in the
    units of ``standardizer`` (fit on the untransformed training split), and ``scored``: ``{"valid": [N, T],
    "test": ...}``, the data steps the transformed splits score (each held-out row's from its first scored step)."""

    train: tuple[torch.Tensor, torch.Tensor]
    valid: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    scored: dict
    standardizer: object


@dataclass
class ExperimentData(SplitData):
    """What an experiment trains and is judged on: train / validation / test splits, each ``(x [N, T, D], mask
    [N, T])``, with a description (a user's file enters as :class:`~ppl_models.inference.data.SequenceDataset` and
    leaves its splits here)."""

    train: tuple[torch.Tensor, torch.Tensor]
    valid: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    description: str
    #: the generating model of synthetic data: its ``log_likelihood(x, mask) -> [B]`` and ``to(device)``
    #: give the runner the exact log-likelihood under the true parameters
    truth: object = None
    binary: bool = False  # every value is 0 or 1 (piano rolls): judged by Brier score and reliability
    #: ``(samples [S, N, T, D], x [N, T, D]) -> {name: value}``: figures of a predictive against the true law
    truth_metrics: Callable[[torch.Tensor, torch.Tensor], dict] | None = None
    #: a user's file (:mod:`ppl_models.inference.data.datasets`): the way back to the data's units from the test
    #: split's tensors: the training split's standardisation, or for transformed data the test split's
    #: :class:`~ppl_models.inference.data.DataUnits`; evaluations, forecasts and plots map back through it
    #: (:meth:`units` gives each held-out split's)
    standardizer: object = None
    #: a user's file: what went where (series ids, step counts), how it was cut, and the standardisation
    split_record: dict | None = None
    #: ``{"valid": scored [N, T] or None, "test": ...}``: the steps of each held-out split that are scored, the
    #: others (a held-out segment's history) read as context; ``None`` (or a split's ``None``): every valid step
    scored: dict | None = None
    #: a user's file: ``{"valid": units, "test": units}``, each held-out split's way back to the data's units
    #: (:meth:`units`); ``None``: :attr:`standardizer` serves both
    split_units: dict | None = None
    #: a user's file as read, before its transform, with the data steps the splits above score (:class:`LevelData`)
    levels: LevelData | None = None
    #: leading steps of every sequence that are given as inputs only (a file that gives the step before each
    #: sequence); marked unscored in :attr:`scored`, and a model must read them so (its ``input_steps``)
    input_steps: int = 0
    #: a user's file read with covariates: which columns are targets and which covariates
    #: (:class:`~ppl_models.inference.data.covariates.CovariateLayout`; ``None``: every column is a target), and per
    #: series id the known covariates of the rows after its last target (``future``, ``[H, C]`` in the file's units)
    covariates: object = None
    future: dict | None = None

    def scored_mask(self, split: str) -> torch.Tensor | None:
        """``scored [N, T]`` of ``split`` (``"valid"`` or ``"test"``), or ``None`` where every valid step is scored."""
        return (self.scored or {}).get(split)

    def units(self, split: str):
        """The way from ``split``'s (``"valid"`` or ``"test"``) tensors back to the data's units, for
        :func:`~ppl_models.inference.evaluate` and :func:`~ppl_models.inference.one_step_mse` (``standardizer=``):
        a :class:`~ppl_models.inference.data.Standardizer`, the split's
        :class:`~ppl_models.inference.data.DataUnits` (transformed data), or ``None`` (the data's own units)."""
        if split not in ("valid", "test"):
            raise ValueError(f"split: expected 'valid' or 'test', got {split!r}")
        return (self.split_units or {}).get(split, self.standardizer)


def sample_splits(
    source, sizes: Sequence[int], num_steps: int, first_seed: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Train / validation / test ``(x [n, num_steps, D], mask [n, num_steps] all True)`` drawn from a source.

    Split ``i`` of size ``sizes[i]`` is ``source.sample(n, num_steps, generator)`` with its own
    generator seeded ``first_seed + i``, so the validation and test sets do not change with the
    training set's size.
    """
    splits = []
    for index, n in enumerate(sizes):
        x = source.sample(n, num_steps, torch.Generator().manual_seed(first_seed + index))
        splits.append((x, torch.ones(x.shape[:2], dtype=torch.bool)))
    return splits


def pad_sequences(sequences: Sequence, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack variable-length ``[T_i, D]`` arrays into ``x [N, max T, D]`` (zeros after the end) and ``mask [N, T]``."""
    if len(sequences) == 0:
        raise ValueError("sequences must not be empty")
    tensors = [torch.as_tensor(np.asarray(s), dtype=dtype) for s in sequences]
    if any(t.dim() != 2 for t in tensors):
        raise ValueError("sequences must each have shape [T_i, D]")
    dims = {t.shape[1] for t in tensors}
    if len(dims) != 1:
        raise ValueError(f"sequences must share their feature size D, got sizes {sorted(dims)}")
    lengths = torch.tensor([t.shape[0] for t in tensors])
    x = torch.zeros(len(tensors), int(lengths.max()), dims.pop(), dtype=dtype)
    for i, t in enumerate(tensors):
        x[i, : t.shape[0]] = t
    mask = torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    return x, mask


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The shared data folder (one with a ``SHA256SUMS`` file): ``data_dir`` (the command line's ``--data-dir``),
    else ``$PPL_MODELS_DATA``, else the first ``shared/data`` found in the working folder or one of its parents."""
    given = data_dir if data_dir is not None else os.environ.get(DATA_ENV) or None
    if given is not None:
        if not (Path(given) / "SHA256SUMS").is_file():
            where = "data_dir (--data-dir)" if data_dir is not None else DATA_ENV
            raise ValueError(
                f"{where}: {given} is no data folder (it has no SHA256SUMS file listing its files' SHA-256 sums)"
            )
        return Path(given).resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "shared" / "data" / "SHA256SUMS").is_file():
            return folder / "shared" / "data"
    raise ValueError(
        f"data_dir: no shared/data folder (one with a SHA256SUMS file) in {here} or its parents; give the data "
        f"folder on the command line with --data-dir DIR (data_dir=DIR in Python), or set {DATA_ENV}=DIR"
    )


def verified_path(relative: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of ``relative`` inside the data folder, after checking its SHA-256 against ``SHA256SUMS``."""
    root = resolve_data_dir(data_dir)
    sums = _read_sums(root / "SHA256SUMS")
    if relative not in sums:
        raise ValueError(f"{relative!r} is not listed in {root / 'SHA256SUMS'}")
    path = root / relative
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != sums[relative]:
        raise ValueError(f"{path} does not match its SHA-256 in SHA256SUMS: the file is corrupt or was changed")
    return path


def _read_sums(path: Path) -> dict[str, str]:
    """``{relative name: sha256 hex digest}`` of a ``sha256sum`` file; a malformed line is a ``ValueError``."""
    sums = {}
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            raise ValueError(
                f"{path} line {number}: expected a SHA-256 digest (64 hex digits), spaces and a file "
                f"name, as sha256sum writes them; got {line.strip()[:80]!r}"
            )
        sums[parts[1].strip().lstrip("*").lstrip("./")] = parts[0].lower()
    return sums


def load_mat(relative: str, data_dir: str | os.PathLike | None = None, *, arrays: Sequence[str] = ()) -> dict:
    """``scipy.io.loadmat`` of a checked data file (:func:`verified_path`); a file it cannot read is a
    ``ValueError`` naming the file (a matching checksum only says the file is the one listed), and so is one
    without each of ``arrays``."""
    from scipy.io import loadmat

    path = verified_path(relative, data_dir)
    try:
        raw = loadmat(path)
    except Exception as error:  # scipy raises MatReadError, ValueError, TypeError... on a bad file
        raise ValueError(f"{path} is not a readable MATLAB file ({type(error).__name__}: {error})") from None
    for name in arrays:
        if name not in raw:
            held = sorted(key for key in raw if not key.startswith("__"))
            raise ValueError(f"{path} has no array {name!r} (it holds {held})")
    return raw


def mat_array(value, where: str, *, ndim: int, min_shape: Sequence[int] = ()) -> np.ndarray:
    """``value`` (an array read from a file) as a float64 array with ``ndim`` dims, each at least ``min_shape``.

    ``where`` names it in the one-line ``ValueError`` otherwise (e.g. ``"swimmer/x.mat: array 'trajs'"``).
    """
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a numeric array, got {np.asarray(value).dtype} entries") from None
    wanted = ", ".join(f">= {m}" for m in min_shape) if min_shape else ", ".join("N" * ndim)
    if array.ndim != ndim or any(size < least for size, least in zip(array.shape, min_shape)):
        raise ValueError(f"{where} must have {ndim} dimensions of sizes [{wanted}], got shape {list(array.shape)}")
    return array


@dataclass
class SharedCsvRows:
    """A CSV file of the shared data folder as text: its header and rows (every row as long as the header), with each
    row's line in the file."""

    name: str
    header: list[str]
    rows: list[list[str]]
    lines: list[int]

    def index(self, column: str) -> int:
        """Position of ``column`` in the header; a ``ValueError`` naming the file if it has none."""
        if column not in self.header:
            raise ValueError(f"{self.name} has no column {column!r} (its header: {self.header[:20]})")
        return self.header.index(column)

    def numbers(self, columns: Sequence[str], parse: Callable[[str], float] = float) -> np.ndarray:
        """``[rows, len(columns)]`` float64 of ``parse(cell)``; a cell it cannot read names its line and column."""
        positions = [self.index(c) for c in columns]
        try:
            return np.array([[parse(row[p]) for p in positions] for row in self.rows], dtype=np.float64)
        except (TypeError, ValueError):
            pass
        for row, line in zip(self.rows, self.lines):  # find the cell to name
            for column, position in zip(columns, positions):
                try:
                    parse(row[position])
                except (TypeError, ValueError) as error:
                    raise ValueError(
                        f"{self.name} line {line}, column {column!r}: {row[position]!r} is not a number ({error})"
                    ) from None
        raise AssertionError("unreachable: some cell failed to parse")

    def where(self, keep: Callable[[list[str]], bool]) -> SharedCsvRows:
        """The table with only the rows ``keep`` accepts; a ``ValueError`` if none is left."""
        kept = [(row, line) for row, line in zip(self.rows, self.lines) if keep(row)]
        if not kept:
            raise ValueError(f"{self.name} has no data rows (only a header and empty rows)")
        return SharedCsvRows(self.name, self.header, [row for row, _ in kept], [line for _, line in kept])


def read_shared_csv(relative: str, data_dir: str | os.PathLike | None = None, *, delimiter: str = ",") -> SharedCsvRows:
    """A checked CSV file of the shared data folder (:func:`verified_path`) as :class:`SharedCsvRows` of text cells.

    The built-in tasks read their files with this, not with the reader of a user's files
    (:func:`ppl_models.inference.data.readers.read_table`, a ``pandas.DataFrame``): each task parses its own cells
    (a decimal comma, dates as column names, ``-200`` for a missing value) and every refusal names the file's line,
    where pandas would fill a truncated row with NaN and guess the cells' types. Refused with one ``ValueError``
    naming the file: an empty file, a header without data rows, a row with more or fewer cells than the header (a
    truncated line names its line), a file that is not text.
    """
    path = verified_path(relative, data_dir)
    header, rows, lines = None, [], []
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            for row in reader:
                if not row:  # a blank line
                    continue
                if header is None:
                    header = row
                elif len(row) != len(header):
                    raise ValueError(
                        f"{relative} line {reader.line_num}: {len(row)} cells where the header has "
                        f"{len(header)} (a truncated or malformed row)"
                    )
                else:
                    rows.append(row)
                    lines.append(reader.line_num)
    except (UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"{relative} is not a readable CSV file ({error})") from None
    if header is None:
        raise ValueError(f"{relative} is empty: expected a header line and data rows")
    if not rows:
        raise ValueError(f"{relative} holds a header but no data rows")
    return SharedCsvRows(relative, header, rows, lines)

"""Data sets as padded tensors: the container and the access to the shared offline data.

Every data set comes as a :class:`SequenceData`: three splits of ``(x [N, T, D],
mask [N, T])`` pairs, padded at the end, ready for the training loop. The loaders and
generators of the data sets themselves live with their tasks, in :mod:`experiments.tasks`.

Real data is read in place from a data folder, never downloaded and never copied
into the project: ``data_dir`` argument, else the ``PPL_MODELS_DATA`` environment
variable, else ``../shared/data`` from the working directory or from the project
root. Each file is checked against the folder's ``SHA256SUMS`` before it is read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = ["SequenceData", "pad_sequences", "resolve_data_dir", "verified_path", "load_mat"]

DATA_ENV = "PPL_MODELS_DATA"


@dataclass
class SequenceData:
    """Train / validation / test splits, each ``(x [N, T, D], mask [N, T])``, plus a description."""

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

    @property
    def obs_dim(self) -> int:
        return self.train[0].shape[-1]


def sample_splits(source, sizes: Sequence[int], num_steps: int,
                  first_seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
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
    """The shared data folder: the argument, ``$PPL_MODELS_DATA``, or ``../shared/data``."""
    candidates = [data_dir] if data_dir is not None else []
    if not candidates and os.environ.get(DATA_ENV):
        candidates = [os.environ[DATA_ENV]]
    if not candidates:
        root = Path(__file__).resolve().parent.parent
        candidates = [Path.cwd() / ".." / "shared" / "data", root / ".." / "shared" / "data"]
    for candidate in candidates:
        if (Path(candidate) / "SHA256SUMS").is_file():
            return Path(candidate).resolve()
    raise ValueError(
        f"data_dir: no data folder with a SHA256SUMS file at {[str(c) for c in candidates]}; "
        f"pass data_dir or set {DATA_ENV}"
    )


def verified_path(relative: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of ``relative`` inside the data folder, after checking its SHA-256 against ``SHA256SUMS``."""
    root = resolve_data_dir(data_dir)
    sums = {}
    for line in (root / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*").lstrip("./")] = digest
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


def load_mat(relative: str, data_dir: str | os.PathLike | None = None) -> dict:
    """``scipy.io.loadmat`` of a checked data file (:func:`verified_path`); a file it cannot read is a
    ``ValueError`` naming the file (a matching checksum only says the file is the one listed)."""
    from scipy.io import loadmat

    path = verified_path(relative, data_dir)
    try:
        return loadmat(path)
    except Exception as error:  # scipy raises MatReadError, ValueError, TypeError... on a bad file
        raise ValueError(f"{path} is not a readable MATLAB file ({type(error).__name__}: {error})") from None

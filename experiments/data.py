"""Data sets as padded tensors: synthetic generators and loaders of the shared offline data.

Every data set comes as a :class:`SequenceData`: three splits of ``(x [N, T, D],
mask [N, T])`` pairs, padded at the end, ready for the training loop.

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

from inference.validation import check_positive_int

__all__ = ["SequenceData", "pad_sequences", "resolve_data_dir", "verified_path", "lgssm_synthetic", "polyphonic",
           "swimmer", "air_quality"]

DATA_ENV = "PPL_MODELS_DATA"
POLYPHONIC = {"jsb": "JSB_Chorales.mat", "nottingham": "Nottingham.mat", "musedata": "MuseData.mat",
              "piano": "Piano_midi.mat"}  # fmt: skip


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


def lgssm_synthetic(
    latent_dim: int = 2,
    obs_dim: int = 2,
    num_train: int = 64,
    num_valid: int = 16,
    num_test: int = 32,
    num_steps: int = 50,
    seed: int = 0,
) -> SequenceData:
    """Sequences from a random stable LGSSM (its parameters are kept in ``truth``)."""
    from ppl_models import LinearGaussianSSM

    for name, value in (("latent_dim", latent_dim), ("obs_dim", obs_dim), ("num_train", num_train),
                        ("num_valid", num_valid), ("num_test", num_test), ("num_steps", num_steps)):  # fmt: skip
        check_positive_int(value, name=name)
    generator = torch.Generator().manual_seed(seed)
    truth = LinearGaussianSSM.random(latent_dim, obs_dim, generator=generator)
    splits = []
    for n in (num_train, num_valid, num_test):
        x, _ = truth.sample(n, num_steps, generator=generator)
        splits.append((x, torch.ones(n, num_steps, dtype=torch.bool)))
    return SequenceData(*splits, description=f"LGSSM synthetic (Dz={latent_dim}, Dx={obs_dim}, T={num_steps})",
                        truth=truth)  # fmt: skip


def polyphonic(
    name: str = "jsb",
    data_dir: str | os.PathLike | None = None,
    *,
    train_chunk: int | None = None,
    max_sequences: int | None = None,
) -> SequenceData:
    """One of the four polyphonic music sets (88-key binary piano rolls, standard splits).

    Args:
        name: ``jsb``, ``nottingham``, ``musedata`` or ``piano``.
        data_dir: the shared data folder (see :func:`resolve_data_dir`).
        train_chunk: cut training sequences into pieces of at most this many steps (faster
            truncated training on the long pieces; validation and test stay whole).
        max_sequences: keep only the first this many sequences of each split (quick demos).
    """
    from scipy.io import loadmat

    if name not in POLYPHONIC:
        raise ValueError(f"name must be one of {sorted(POLYPHONIC)}, got {name!r}")
    for key, value in (("train_chunk", train_chunk), ("max_sequences", max_sequences)):
        if value is not None:
            check_positive_int(value, name=key)
    raw = loadmat(verified_path(f"polyphonic/{POLYPHONIC[name]}", data_dir))
    splits = []
    for key in ("traindata", "validdata", "testdata"):
        rolls = list(raw[key].ravel())[:max_sequences]
        if key == "traindata" and train_chunk is not None:
            rolls = [roll[start : start + train_chunk] for roll in rolls for start in range(0, len(roll), train_chunk)]
        splits.append(pad_sequences(rolls))
    notes = "".join(f", {k}={v}" for k, v in (("train_chunk", train_chunk), ("max_sequences", max_sequences)) if v)
    return SequenceData(*splits, description=f"polyphonic music: {POLYPHONIC[name]} (88 keys{notes})", binary=True)


SWIMMER_OBSERVATIONS = (0, 1, 8, 9, 10)  # observation columns of the trajectories (see the data README)


def swimmer(
    train: str = "1.0", valid: str = "0.5", test: str = "0.8", data_dir: str | os.PathLike | None = None
) -> SequenceData:
    """Swimmer robot trajectories ``[25, 100, 5]`` per split: the observation columns, real-valued.

    Each split is one file ``swimmers_trajs_<mix>.mat`` (the policy's exploration mix; the
    convention is to train on 1.0 and test on 0.8). Values are standardised by the training
    split's per-column mean and standard deviation.
    """
    from scipy.io import loadmat

    names = {"train": train, "valid": valid, "test": test}
    arrays = {}
    for split, mix in names.items():
        if mix not in ("0.0", "0.5", "0.8", "1.0"):
            raise ValueError(f"{split} must be one of '0.0', '0.5', '0.8', '1.0', got {mix!r}")
        trajs = loadmat(verified_path(f"swimmer/swimmers_trajs_{mix}.mat", data_dir))["trajs"]
        arrays[split] = torch.as_tensor(trajs[..., list(SWIMMER_OBSERVATIONS)], dtype=torch.float32)
    mean, std = arrays["train"].mean((0, 1)), arrays["train"].std((0, 1))
    splits = [((v - mean) / std, torch.ones(v.shape[:2], dtype=torch.bool)) for v in arrays.values()]
    return SequenceData(*splits, description=f"Swimmer observations (train {train}, valid {valid}, test {test})")


AIR_QUALITY_SENSORS = ("PT08.S1(CO)", "PT08.S2(NMHC)", "PT08.S3(NOx)", "PT08.S4(NO2)", "PT08.S5(O3)")


def air_quality(
    window: int = 100, fractions: tuple[float, float] = (0.7, 0.1), data_dir: str | os.PathLike | None = None
) -> SequenceData:
    """UCI Air Quality: the five metal-oxide sensor responses, hourly, as ``window``-hour sequences.

    Preprocessing: the file's missing values (``-200``; whole hours where every sensor is
    out) are filled by linear interpolation in time; the series is cut into consecutive
    non-overlapping windows of ``window`` hours; the first ``fractions[0]`` of the windows
    train, the next ``fractions[1]`` validate and the rest test (chronological, so no test
    hour precedes a training hour); values are standardised by the training windows'
    per-sensor mean and standard deviation.
    """
    import csv

    check_positive_int(window, name="window")
    train_share, valid_share = fractions
    if not (0 < train_share and 0 < valid_share and train_share + valid_share < 1):
        raise ValueError(f"fractions must be two positive shares summing below 1, got {fractions!r}")
    with open(verified_path("air_quality/AirQualityUCI.csv", data_dir), newline="") as handle:
        rows = [row for row in csv.DictReader(handle, delimiter=";") if row.get("Date")]
    values = np.array([[float(row[c].replace(",", ".")) for c in AIR_QUALITY_SENSORS] for row in rows])
    hours = np.arange(len(values))
    for column in values.T:
        missing = column == -200
        column[missing] = np.interp(hours[missing], hours[~missing], column[~missing])
    count = len(values) // window
    if count < 3:
        raise ValueError(f"window={window} leaves fewer than 3 sequences of {len(values)} hours")
    sequences = torch.as_tensor(values[: count * window].reshape(count, window, -1), dtype=torch.float32)
    cut_train, cut_valid = round(count * train_share), round(count * (train_share + valid_share))
    parts = sequences[:cut_train], sequences[cut_train:cut_valid], sequences[cut_valid:]
    mean, std = parts[0].mean((0, 1)), parts[0].std((0, 1))
    splits = [((p - mean) / std, torch.ones(p.shape[:2], dtype=torch.bool)) for p in parts]
    return SequenceData(*splits, description=f"UCI air quality, 5 sensors, {window}-hour sequences "
                        f"({len(parts[0])}/{len(parts[1])}/{len(parts[2])} train/valid/test)")  # fmt: skip

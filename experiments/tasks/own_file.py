"""A user's own file as a data set: ``[data] name = "file"`` (``--data PATH``), through :mod:`inference.datasets`."""

from __future__ import annotations

from pathlib import Path

from inference.datasets import SequenceDataset

from ..data import SequenceData

__all__ = ["file_data"]


def file_data(path: str, series: str | None = None, time: str | None = None, features: list[str] | None = None,
              targets: list[str] | None = None, split: str | None = None, split_by: str = "series",
              fractions: list[float] | None = None, split_seed: int = 0, window: int | None = None,
              stride: int | None = None, missing: str = "error", sep: str = ",", fs: float = 4.0) -> SequenceData:
    """Read ``path`` (``.csv``, ``.parquet``, ``.npz`` or a folder of ``.mid`` files), split it and standardise it.

    ``series`` / ``time`` / ``features`` / ``targets`` / ``split`` name the columns of a long-format
    table (:meth:`~inference.datasets.SequenceDataset.from_dataframe`); ``split_by`` is ``"series"``
    or ``"time"``, with ``fractions`` (train, valid, test; default 0.7, 0.15, 0.15) and
    ``split_seed``, unless a ``split`` column decides; ``window`` / ``stride`` cut training windows
    (held-out splits into consecutive windows). Real-valued features are standardised on the
    training split; the tensors are in those standard units.
    """
    table = {"series": series, "time": time, "features": features, "targets": targets, "split": split,
             "missing": missing, "sep": sep}
    suffix = Path(path).suffix.lower()
    options = {"fs": fs} if Path(path).is_dir() else {"features": features} if suffix == ".npz" else table
    dataset = SequenceDataset.from_file(path, **{k: v for k, v in options.items() if v is not None})
    splits = dataset.split(by=split_by, fractions=fractions or (0.7, 0.15, 0.15), seed=split_seed)
    if window is not None:
        splits = splits.windows(window, stride)
    train, valid, test = splits.tensors()
    kind = "binary" if dataset.binary else "real-valued, standardised on the training split"
    return SequenceData(train, valid, test, f"{path} ({len(dataset)} series, {dataset.obs_dim} features, {kind})",
                        binary=dataset.binary, standardizer=splits.standardizer,
                        split_record=splits.to_dict())  # fmt: skip

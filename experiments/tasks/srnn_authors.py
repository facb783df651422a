"""The SRNN authors' own preprocessed music files (github marcofraccaro/srnn, ``data/*_raw_batchsize16_seqlen100.npz``).

Each file holds ``x_train`` / ``u_train`` and ``x_valid`` / ``u_valid``, ``[N, 100, K]`` chunks of 100 steps,
and ``x_test`` / ``u_test`` ``[N, T_max, K]``, the whole test pieces, with ``mask_test [N, T_max]`` (1 at the
valid steps, which come first). ``u`` is ``x`` one step late: the input at step ``t`` is the roll at ``t - 1``,
and ``u[:, 0]`` is the roll before each chunk or piece (in the JSB test file, each piece's first chord).

With ``first_input="given"`` (the default, as the authors' code reads the files) every sequence starts with one
input-only step, ``u[:, 0]``, followed by ``x``; that step is unscored (``scored``) and the model reads it as its
first input (an SRNN with ``first_step_is_input=True``). With ``first_input="silence"`` the sequences are ``x``
alone and the model's first input is silence.

The training chunks are :data:`FILE_STREAMS` continuous streams: chunk ``i + 16`` continues chunk ``i``. In the
file's order (``order="file"``, the default) they are shuffled by the trainer and each starts from a zero recurrent
state. The authors' code runs them in order and carries the state from chunk to chunk: ``order="streams"`` lays
the training chunks out stream by stream (stream ``s``: the file's chunks ``s, s + 16, s + 32, ...``), the layout
of ``TrainConfig.streams = 16`` (truncated BPTT over continuous streams, the state carried from one chunk to the
next).
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import torch

from ..data import ExperimentData, verified_path

__all__ = ["SRNN_AUTHORS_SETS", "by_stream", "srnn_authors"]

#: set name -> the file's name in the shared data folder's ``srnn_authors/``
SRNN_AUTHORS_SETS = {name: f"{name}_raw_batchsize16_seqlen100.npz" for name in ("jsb", "nottingham", "muse", "piano")}
#: how a sequence's first input is formed: the file's ``u[:, 0]`` as an input-only step, or silence
FIRST_INPUTS = ("given", "silence")
#: the order of the training chunks: the file's, or stream by stream
ORDERS = ("file", "streams")
#: the continuous streams the files' training chunks are dealt from (their batch size)
FILE_STREAMS = 16
_KEYS = ("x_train", "u_train", "x_valid", "u_valid", "x_test", "u_test", "mask_test")


def srnn_authors(
    name: str = "jsb",
    data_dir: str | os.PathLike | None = None,
    *,
    max_sequences: int | None = None,
    first_input: str = "given",
    order: str = "file",
) -> ExperimentData:
    """One of the authors' four sets: train / valid ``(x [N, 1 + 100, K], mask all True)``, test
    ``(x [N, 1 + T_max, K], mask [N, 1 + T_max])``, each sequence after its given first input (without it with
    ``first_input="silence"``).

    Args:
        name: ``jsb``, ``nottingham``, ``muse`` or ``piano``.
        data_dir: the shared data folder (see :func:`~ppl_models.experiments.data.resolve_data_dir`).
        max_sequences: keep only the first this many chunks / pieces of each split (quick checks).
        first_input: ``"given"`` or ``"silence"`` (:data:`FIRST_INPUTS`).
        order: the training chunks in the file's order or stream by stream (``"file"`` or ``"streams"``, see the
            module's text); ``max_sequences`` then keeps the first chunks of that order.
    """
    if name not in SRNN_AUTHORS_SETS:
        raise ValueError(f"name must be one of {sorted(SRNN_AUTHORS_SETS)}, got {name!r}")
    if first_input not in FIRST_INPUTS:
        raise ValueError(f"first_input must be one of {list(FIRST_INPUTS)}, got {first_input!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {list(ORDERS)}, got {order!r}")
    if max_sequences is not None and (
        isinstance(max_sequences, bool) or not isinstance(max_sequences, int) or max_sequences < 1
    ):
        raise ValueError(f"max_sequences must be a positive int, got {max_sequences!r}")
    relative = f"srnn_authors/{SRNN_AUTHORS_SETS[name]}"
    arrays = read_arrays(verified_path(relative, data_dir), relative)
    if order == "streams":
        arrays = {**arrays, **{key: by_stream(arrays[key], relative) for key in ("x_train", "u_train")}}
    return authors_splits(arrays, relative, max_sequences=max_sequences, first_input=first_input)


def by_stream(chunks: np.ndarray, where: str) -> np.ndarray:
    """The training ``chunks [N, ...]`` stream by stream: the file's chunks ``s, s + 16, s + 32, ...`` for stream
    ``s = 0 .. 15`` (``N`` must be a multiple of :data:`FILE_STREAMS`)."""
    if len(chunks) % FILE_STREAMS:
        raise ValueError(
            f"{where}: order='streams' needs the training chunks to be a multiple of {FILE_STREAMS} streams, "
            f"got {len(chunks)} chunks"
        )
    return chunks.reshape(-1, FILE_STREAMS, *chunks.shape[1:]).swapaxes(0, 1).reshape(chunks.shape)


def read_arrays(path: os.PathLike, where: str) -> dict[str, np.ndarray]:
    """The arrays :data:`_KEYS` of the ``.npz`` file at ``path`` (named ``where`` in errors)."""
    try:
        with np.load(path, allow_pickle=False) as held:
            arrays = {key: held[key] for key in held.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:  # numpy reads a non-.npz file as a pickle and refuses
        raise ValueError(
            f"{where} is not a readable .npz file of arrays ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:120]})"
        ) from None
    missing = [key for key in _KEYS if key not in arrays]
    if missing:
        raise ValueError(f"{where} has no array {missing[0]!r} (it holds {sorted(arrays)}; expected {list(_KEYS)})")
    return {key: arrays[key] for key in _KEYS}


def authors_splits(
    arrays: dict[str, np.ndarray], where: str, *, max_sequences: int | None = None, first_input: str = "given"
) -> ExperimentData:
    """Check the authors' arrays (shapes, binary rolls, the mask, ``u`` as ``x`` one step late) and make the splits
    (each sequence after its first input ``u[:, 0]`` with ``first_input="given"``)."""
    keep = slice(None, max_sequences)
    (x_train, u_train), (x_valid, u_valid) = (_chunks(arrays, split, where) for split in ("train", "valid"))
    x_test, u_test, mask_test = _test_pieces(arrays, where)
    keys = {x.shape[-1] for x in (x_train, x_valid, x_test)}
    if len(keys) != 1:
        raise ValueError(f"{where}: x_train, x_valid and x_test must share their number of keys K, got {sorted(keys)}")
    splits = [(x, torch.ones(x.shape[:2], dtype=torch.bool)) for x in (x_train[keep], x_valid[keep])]
    splits.append((x_test[keep], mask_test[keep]))
    given = first_input == "given"
    if given:
        firsts = (u[keep, :1] for u in (u_train, u_valid, u_test))
        splits = [(torch.cat([u, x], 1), torch.cat([mask[:, :1], mask], 1)) for u, (x, mask) in zip(firsts, splits)]
    steps = int(mask_test.sum())
    description = (
        f"SRNN authors' {where.rsplit('/', 1)[-1]}: {len(x_train)} training / {len(x_valid)} validation "
        f"chunks of {x_train.shape[1]} steps, {len(x_test)} whole test pieces ({steps} steps)"
        + (", each after its given first input" if given else ", each after a silent first input")
        + (f", max_sequences={max_sequences}" if max_sequences else "")
    )
    scored = {name: _after_first(split[1]) for name, split in zip(("valid", "test"), splits[1:])} if given else None
    return ExperimentData(*splits, description=description, binary=True, scored=scored, input_steps=int(given))


def _after_first(mask: torch.Tensor) -> torch.Tensor:
    """``mask [N, T]`` with every row's first step cleared: the steps scored after an input-only first step."""
    scored = mask.clone()
    scored[:, 0] = False
    return scored


def _rolls(arrays: dict, key: str, where: str) -> np.ndarray:
    """``arrays[key]`` as a float32 ``[N, T, K]`` array (its values are checked by the caller)."""
    array = np.asarray(arrays[key])
    if array.dtype.kind not in "biuf" or array.ndim != 3 or min(array.shape) < 1:
        raise ValueError(
            f"{where}: array {key!r} must be a numeric [N, T, K] array with N, T, K >= 1, got dtype "
            f"{array.dtype} and shape {list(array.shape)}"
        )
    return array.astype(np.float32)


def _check_binary(values: np.ndarray, key: str, where: str) -> None:
    if not np.isin(values, (0.0, 1.0)).all():
        odd = np.unique(values[~np.isin(values, (0.0, 1.0))])[:3].tolist()
        raise ValueError(f"{where}: array {key!r} must hold only 0 and 1 at the valid steps, got values such as {odd}")


def _check_shift(u: np.ndarray, x: np.ndarray, valid: np.ndarray, split: str, where: str) -> None:
    """``u[:, t] == x[:, t - 1]`` wherever steps ``t - 1`` and ``t`` are valid (``valid [N, T]`` bool)."""
    both = valid[:, 1:] & valid[:, :-1]
    bad = both & (u[:, 1:] != x[:, :-1]).any(-1)
    if bad.any():
        row, step = np.argwhere(bad)[0]
        raise ValueError(
            f"{where}: u_{split} must be x_{split} one step late (u[:, t] == x[:, t - 1]), but "
            f"sequence {row} differs at step {step + 1}"
        )


def _chunks(arrays: dict, split: str, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``[N, T, K]`` chunks ``x`` and inputs ``u`` of ``split`` (``train`` or ``valid``), every step valid."""
    x, u = (_rolls(arrays, f"{kind}_{split}", where) for kind in ("x", "u"))
    if u.shape != x.shape:
        raise ValueError(f"{where}: u_{split} must have x_{split}'s shape {list(x.shape)}, got {list(u.shape)}")
    _check_binary(x, f"x_{split}", where)
    _check_shift(u, x, np.ones(x.shape[:2], dtype=bool), split, where)
    _check_binary(u[:, :1], f"u_{split}", where)
    return torch.from_numpy(x), torch.from_numpy(u)


def _test_pieces(arrays: dict, where: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole test pieces ``x [N, T_max, K]`` and inputs ``u`` (zeros after each end) and ``mask [N, T_max]``
    bool."""
    x, u = _rolls(arrays, "x_test", where), _rolls(arrays, "u_test", where)
    mask = np.asarray(arrays["mask_test"])
    if mask.shape != x.shape[:2] or u.shape != x.shape:
        raise ValueError(
            f"{where}: mask_test must be [N, T_max] = {list(x.shape[:2])} and u_test x_test's shape "
            f"{list(x.shape)}, got {list(mask.shape)} and {list(u.shape)}"
        )
    if not np.isin(mask, (0, 1)).all():
        raise ValueError(f"{where}: mask_test must hold only 0 and 1, got other values")
    mask = mask.astype(bool)
    lengths = mask.sum(1)
    if (lengths == 0).any() or (mask != (np.arange(mask.shape[1]) < lengths[:, None])).any():
        raise ValueError(
            f"{where}: mask_test must mark a non-empty prefix of each test piece (valid steps first), "
            f"got a piece with none or with a valid step after padding"
        )
    _check_binary(x[mask], "x_test", where)
    _check_shift(u, x, mask, "test", where)
    _check_binary(u[:, :1], "u_test", where)
    x[~mask], u[~mask] = 0.0, 0.0
    return torch.from_numpy(x), torch.from_numpy(u), torch.from_numpy(mask)

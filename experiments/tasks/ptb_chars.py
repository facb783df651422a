"""Character-level Penn Treebank (the PSRNN paper's PTB experiments), from the shared data folder.

The three files ``ptb_chars/ptb.{train,valid,test}.txt`` are read whole and each character becomes
one symbol of the training text's alphabet, one-hot: ``x [N, T, K]`` floats with ``K`` the number
of distinct training characters. A held-out character the training text never shows is dropped by
default, as the PSRNN authors' reader does (``unseen="unk"`` maps it to one extra symbol instead,
``"error"`` refuses the file).

The training text is cut into consecutive chunks of ``train_chunk`` characters (the BPTT horizon), in text order:
by default the training loop starts each chunk afresh from the model's initial state; with ``[train] streams = S``
(:class:`~ppl_models.inference.training.TrainConfig`) it cuts the chunks into ``S`` contiguous streams and carries the
state from one chunk of a stream to the next, as the authors' code does (truncated BPTT). The validation and test texts
are cut into rows of ``eval_chunk`` scored characters, each row read after the ``context`` characters that precede it
in the text (the ``scored`` steps of :class:`~ppl_models.experiments.data.ExperimentData`): every character is scored
once, given at least ``context`` characters of history (all of it near the start of the text). ``eval_chunk = 0``
scores each held-out text as one row, the state carried over the whole text (the authors' test protocol).
"""

from __future__ import annotations

import os

import torch

from ppl_models.inference.validation import check_choice, check_positive_int

from ..data import ExperimentData, pad_sequences, verified_path

__all__ = ["ptb_chars", "alphabet", "encode_text", "held_out_rows", "UNSEEN"]

SPLITS = ("train", "valid", "test")
#: what becomes of a held-out character the training text never shows
UNSEEN = ("drop", "unk", "error")


def alphabet(text: str) -> list[str]:
    """The distinct characters of ``text``, sorted: symbol ``k`` is ``alphabet(text)[k]``."""
    return sorted(set(text))


def encode_text(text: str, symbols: list[str], unseen: str = "drop", *, where: str = "text") -> torch.Tensor:
    """The symbol ids ``[n]`` (long) of ``text``'s characters in ``symbols``.

    A character outside ``symbols`` is dropped (``unseen="drop"``), becomes the extra id ``len(symbols)``
    (``"unk"``), or is a ``ValueError`` naming ``where`` and its position (``"error"``).
    """
    check_choice(unseen, UNSEEN, name="unseen")
    index = {c: k for k, c in enumerate(symbols)}
    if unseen == "error":
        for position, c in enumerate(text):
            if c not in index:
                raise ValueError(
                    f"{where}: character {c!r} at position {position} is not in the training text's "
                    f'alphabet of {len(symbols)} characters (use unseen="drop" or "unk")'
                )
    ids = [index.get(c, len(symbols)) for c in text if unseen == "unk" or c in index]
    return torch.tensor(ids, dtype=torch.long)


def held_out_rows(ids: torch.Tensor, chunk: int, context: int) -> tuple[list[torch.Tensor], list[int]]:
    """Rows of ``ids [n]``: row ``i`` is ``ids[max(0, i chunk - context) : (i + 1) chunk]``; returns the rows and
    how many context steps each starts with (its steps before ``i chunk``, read but not scored). ``chunk = 0``: one
    row, the whole text (``context`` must then be 0)."""
    if chunk == 0:
        if context:
            raise ValueError(f"context must be 0 when eval_chunk is 0 (one row, the whole text), got {context}")
        return [ids], [0]
    rows, contexts = [], []
    for start in range(0, len(ids), chunk):
        first = max(0, start - context)
        rows.append(ids[first : start + chunk])
        contexts.append(start - first)
    return rows, contexts


def _one_hot(rows: list[torch.Tensor], num_symbols: int) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_sequences([torch.nn.functional.one_hot(r, num_symbols).float() for r in rows])


def ptb_chars(
    data_dir: str | os.PathLike | None = None,
    train_chunk: int = 35,
    eval_chunk: int = 1000,
    context: int = 100,
    unseen: str = "drop",
) -> ExperimentData:
    """Penn Treebank characters, one-hot ``[N, T, K]`` per split; held-out rows scored after their ``context``.

    Args:
        data_dir: the shared data folder (see :func:`~ppl_models.experiments.data.resolve_data_dir`).
        train_chunk: characters per training sequence.
        eval_chunk: scored characters per validation / test row (0: the whole text as one row, ``context`` 0).
        context: characters of history read before each held-out row (0: each row starts afresh).
        unseen: ``"drop"``, ``"unk"`` or ``"error"`` for held-out characters the training text lacks.
    """
    check_positive_int(train_chunk, name="train_chunk")
    for name, value in (("eval_chunk", eval_chunk), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    check_choice(unseen, UNSEEN, name="unseen")
    texts = {}
    for split in SPLITS:
        path = verified_path(f"ptb_chars/ptb.{split}.txt", data_dir)
        try:
            texts[split] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text ({error})") from None
        if not texts[split]:
            raise ValueError(f"{path} is empty")
    symbols = alphabet(texts["train"])
    size = len(symbols) + (unseen == "unk")
    train_ids = encode_text(texts["train"], symbols, where="ptb_chars/ptb.train.txt")
    train = _one_hot(list(train_ids.split(train_chunk)), size)
    held, scored = {}, {}
    for split in ("valid", "test"):
        ids = encode_text(texts[split], symbols, unseen, where=f"ptb_chars/ptb.{split}.txt")
        if len(ids) == 0:
            raise ValueError(f"ptb_chars/ptb.{split}.txt holds no character of the training text's alphabet")
        rows, contexts = held_out_rows(ids, eval_chunk, context)
        held[split] = _one_hot(rows, size)
        steps = torch.arange(held[split][0].shape[1])
        scored[split] = (steps >= torch.tensor(contexts)[:, None]) & held[split][1]
    extra = " + 1 unseen-character symbol" if unseen == "unk" else ""
    held_out = f"rows of {eval_chunk} after {context} characters of context" if eval_chunk else "texts as one row"
    description = (
        f"Penn Treebank characters: {len(symbols)} symbols{extra}, train in chunks of {train_chunk}, "
        f"held-out {held_out} (unseen={unseen})"
    )
    return ExperimentData(train, held["valid"], held["test"], description=description, binary=True, scored=scored)

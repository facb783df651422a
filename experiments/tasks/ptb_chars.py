"""Character-level Penn Treebank (the PSRNN paper's PTB experiments), from the shared data folder.

The three files ``ptb_chars/ptb.{train,valid,test}.txt`` are read whole and each character becomes
one symbol of the training text's alphabet, one-hot: ``x [N, T, K]`` floats with ``K`` the number
of distinct training characters. A held-out character the training text never shows is dropped by
default, as the PSRNN authors' reader does (``unseen="unk"`` maps it to one extra symbol instead,
``"error"`` refuses the file).

The training text is cut into consecutive chunks of ``train_chunk`` characters (the BPTT horizon): the
training loop starts each chunk afresh from the model's initial state (the authors' code carries the
state from one chunk to the next). The validation and test texts are cut into rows of ``eval_chunk``
scored characters, each row read after the ``context`` characters that precede it in the text (the
``scored`` steps of :class:`~ppl_models.experiments.data.ExperimentData`): every character is scored
once, given at least ``context`` characters of history (all of it near the start of the text).
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
    how many context steps each starts with (its steps before ``i chunk``, read but not scored)."""
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
        eval_chunk: scored characters per validation / test row.
        context: characters of history read before each held-out row (0: each row starts afresh).
        unseen: ``"drop"``, ``"unk"`` or ``"error"`` for held-out characters the training text lacks.
    """
    for name, value in (("train_chunk", train_chunk), ("eval_chunk", eval_chunk)):
        check_positive_int(value, name=name)
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"context must be an int >= 0, got {context!r}")
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
    description = (
        f"Penn Treebank characters: {len(symbols)} symbols{extra}, train in chunks of {train_chunk}, "
        f"held-out rows of {eval_chunk} after {context} characters of context (unseen={unseen})"
    )
    return ExperimentData(train, held["valid"], held["test"], description=description, binary=True, scored=scored)

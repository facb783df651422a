"""What a one-step forecaster carries from one drawn step to the next: :class:`Carry`, and the carry of a torch
recurrent module (:func:`recurrent_carry`)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

__all__ = ["Carry", "recurrent_carry"]


class Carry(NamedTuple):
    """What a forecast carries from one drawn step to the next, for each path: ``state [N, S]``, from which the next
    step is drawn (``None``: the predictive over the paths in ``memory`` decides), and ``memory``, what carries the
    state on (a recurrent module's hidden state; by default the paths so far ``[N, P, D]``, rerun at every step).
    Its tensors hold the ``N`` rows first."""

    state: torch.Tensor | None
    memory: object

    def repeated(self, copies: int) -> Carry:
        """The carry of ``copies`` paths per row, sample-major (path ``s`` of row ``b`` is row ``s N + b``): every
        tensor in it holds its rows first."""
        return _map_tensors(lambda tensor: tensor.repeat(copies, *[1] * (tensor.dim() - 1)), self)

    @property
    def nbytes(self) -> int:
        """The bytes of the carry's tensors."""
        return sum(tensor.nbytes for tensor in _tensors(self))


def recurrent_carry(rnn: nn.RNNBase, inputs: torch.Tensor, carry: Carry | None = None) -> Carry:
    """The carry of torch recurrent module ``rnn`` (batch first) after ``inputs [N, P, I]``, on from ``carry``
    (``None``: the zero state): its last output ``[N, S]`` (zeros for ``P = 0``) and its hidden state, rows first
    (``[N, layers, S]``, a pair of them for an LSTM)."""
    if not inputs.shape[1]:
        return Carry(inputs.new_zeros(inputs.shape[0], rnn.hidden_size), None)
    hidden = None if carry is None else _map_tensors(lambda tensor: tensor.transpose(0, 1).contiguous(), carry.memory)
    outputs, hidden = rnn(inputs, hidden)
    return Carry(outputs[:, -1], _map_tensors(lambda tensor: tensor.transpose(0, 1), hidden))


def _tensors(tree):
    """The tensors in ``tree`` (a :class:`Carry`, tuples and lists)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _tensors(item)


def _map_tensors(function, tree):
    """``tree`` (tensors in a :class:`Carry`, tuples and lists) with ``function`` applied to each of its tensors."""
    if isinstance(tree, torch.Tensor):
        return function(tree)
    if isinstance(tree, Carry):
        return Carry(*(_map_tensors(function, item) for item in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map_tensors(function, item) for item in tree)
    return tree

"""A recurrent state carried from one batch to the next: truncated BPTT over continuous streams.

A model that can carry its state subclasses :class:`CarriesState` and reads :attr:`CarriesState.carried` in its
forward pass: where it is not ``None``, the pass over ``x [B, T, D]`` starts from ``carried.start`` (``None``: the
model's own first state) instead of its initial state, and leaves the state after the last step of ``x`` in
``carried.final``. The objective and its ``(x, mask)`` protocol are untouched: the :class:`~.trainer.Trainer` (with
``TrainConfig.streams``) wraps each training step in :meth:`CarriesState.carrying` and starts the next batch of the
same streams from the final state, detached (:func:`detached`). What the state is (a tensor, or a tuple or list of
them) is the model's affair.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..protocol_terms import Unsupported

__all__ = ["CarriedState", "CarriesState", "detached", "require_carried_state"]


@dataclass
class CarriedState:
    """The state a pass starts from (``start``; ``None``: the model's own first state) and the one it ends in
    (``final``, set by the model's pass: the state after the last step of its input, padding steps included)."""

    start: object = None
    final: object = None


class CarriesState:
    """Mixin of models whose recurrent state can be carried over from a previous batch (see the module's text)."""

    #: the carried state of the pass in progress, inside :meth:`carrying`; ``None`` otherwise
    carried: CarriedState | None = None

    @contextmanager
    def carrying(self, start: object = None) -> Iterator[CarriedState]:
        """Within the block, passes start from ``start`` and leave their final state in the yielded box."""
        box, previous = CarriedState(start), self.carried
        self.carried = box
        try:
            yield box
        finally:
            self.carried = previous


def require_carried_state(model: object, *, setting: str = "TrainConfig.streams") -> CarriesState:
    """``model`` if it can carry its state; :class:`~ppl_models.inference.protocol_terms.Unsupported` otherwise."""
    if not isinstance(model, CarriesState):
        raise Unsupported(
            f"{setting}: {type(model).__name__} cannot carry its state from one batch to the next (it is not a "
            "CarriesState model: no recurrent state to start a batch from); train it without streams"
        )
    return model


def detached(state: object) -> object:
    """``state`` (a tensor, or tuples and lists of them) with every tensor detached from its graph."""
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, (tuple, list)):
        return type(state)(detached(item) for item in state)
    return state

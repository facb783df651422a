"""The random streams of a training run: seeds derived per purpose, and a process's RNG state as checkpoint values."""

from __future__ import annotations

import numpy as np
import pyro.util
import torch

__all__ = ["SHUFFLE_STREAM", "MODEL_STREAM", "NORM_STREAM", "derived_seed", "rng_state", "set_rng_state"]

#: first key of a derived seed, so the shuffling stream and the model's stream never coincide
SHUFFLE_STREAM, MODEL_STREAM, NORM_STREAM = 0, 1, 2


def derived_seed(*keys: int) -> int:
    """A 32-bit seed mixed from non-negative integers (distinct keys give unrelated seeds)."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


def rng_state() -> dict:
    """This process's RNG states (torch CPU, CUDA, numpy, ``random``) as plain tensors and Python values."""
    state = pyro.util.get_rng_state()
    kind, keys, position, has_gauss, cached = state["numpy"]
    state["numpy"] = (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached)
    state["cuda"] = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return state


def set_rng_state(state: dict) -> None:
    """Restore the RNG states of :func:`rng_state` (CUDA's only where CUDA is available)."""
    kind, keys, position, has_gauss, cached = state["numpy"]
    numpy_state = (kind, keys.numpy().astype(np.uint32), position, has_gauss, cached)
    pyro.util.set_rng_state({"torch": state["torch"].cpu(), "random": state["random"], "numpy": numpy_state})
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])

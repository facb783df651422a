"""Log-densities below the floating-point range: held at the dtype's lowest value, with one warning.

An observation far out (1e30 under a unit-scale Gaussian in float32) has a log-density below
the dtype's range: it overflows to ``-inf`` and makes every sum over it ``-inf``. Every engine
and model treats it the same way. The value is held at the dtype's lowest finite value
(``torch.finfo(dtype).min``), so the result stays finite (an upper bound there), and one
``RuntimeWarning`` names the argument, how many valid values fell below the range and where the
first is. A NaN or ``+inf`` is a failure, not an extreme (a model that cannot score the value, or
a network that overflowed on it or on an earlier one) and raises one ``ValueError`` naming the first
(the particle filter's is its subclass :class:`~ppl_models.inference.particle_filter.FilterFailed`).

The particle filter holds its incremental log-weights inside its loop and reports with
:func:`raise_failures` and :func:`warn_saturated`; exact likelihoods sum their per-step
log-densities with :func:`saturated_sum`, the exact one-step predictive holds them with
:func:`saturate`, and the objectives hold their per-sequence bounds with :func:`saturate`.
The reports read tensor values, so they run only while
:func:`~ppl_models.inference.validation.value_checks_enabled` (not inside a CUDA-graph capture).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from .validation import value_checks_enabled

__all__ = ["saturate", "saturated_sum", "warn_saturated", "raise_failures", "each_warning_once"]

#: the messages :func:`warn_saturated` has shown inside :func:`each_warning_once` (``None`` outside it)
_SHOWN: ContextVar[set | None] = ContextVar("shown_saturation_warnings", default=None)

#: why a value falls below the range, and what to do
_ADVICE = (
    "an observation outside the model's support or so far out that its log-density overflows; "
    "{consequence}; use float64 or rescale the data"
)

#: why a log-density is NaN or +inf, and what to do
_FAILURE = (
    "the model cannot score this value, or its network overflowed on it or on an earlier value of the "
    "sequence; rescale the data or use float64"
)


def _where(index: tuple[int, ...], name: str) -> str:
    """``"step t of sequence b (x[b, t])"`` for a ``[B, T]`` index, ``"sequence b (x[b])"`` for a ``[B]`` one."""
    if len(index) == 2:
        return f"step {index[1]} of sequence {index[0]} ({name}[{index[0]}, {index[1]}])"
    return f"sequence {index[0]} ({name}[{index[0]}])"


def raise_failures(
    failed: torch.Tensor,
    *,
    name: str = "x",
    what: str = "the log-density",
    cause: str = _FAILURE,
    error: type[ValueError] = ValueError,
) -> None:
    """Raise one ``error`` naming the first true entry of ``failed`` (``[B, T]`` or ``[B]``), if any.

    ``error``: ``ValueError`` or a subclass (the particle filter's
    :class:`~ppl_models.inference.particle_filter.FilterFailed`).
    """
    if bool(failed.any()):
        first = tuple(int(i) for i in failed.nonzero()[0])
        raise error(f"{what} is NaN or +inf at {_where(first, name)}: {cause}")


def warn_saturated(
    saturated: torch.Tensor,
    *,
    dtype: torch.dtype,
    name: str = "x",
    what: str = "the log-density",
    consequence: str = "held at the dtype's lowest value there, the result is an upper bound",
    stacklevel: int = 3,
) -> None:
    """One ``RuntimeWarning`` if any entry of ``saturated`` (``[B, T]`` or ``[B]``) is true: how many, the first."""
    count = int(saturated.sum())
    if count:
        first = tuple(int(i) for i in saturated.nonzero()[0])
        unit = "step" if saturated.dim() == 2 else "sequence"
        values = f"{count} valid {unit}{'s' if count > 1 else ''} of {name}"
        message = (
            f"{what} fell below the {dtype} range (-inf) at {values}, the first at {_where(first, name)}: "
            + _ADVICE.format(consequence=consequence)
        )
        shown = _SHOWN.get()
        if shown is None or message not in shown:
            warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
        if shown is not None:
            shown.add(message)


def saturate(
    log_density: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    name: str = "x",
    what: str = "the log-density",
    failures: bool = True,
    stacklevel: int = 4,
) -> torch.Tensor:
    """``log_density`` (``[B, T]`` per step or ``[B]`` per sequence) with ``-inf`` held at the dtype's lowest value.

    Entries where ``mask`` (same shape) is false are set to 0 and never reported. A ``-inf`` at
    a valid entry warns (:func:`warn_saturated`); a NaN or ``+inf`` there raises
    (:func:`raise_failures`) unless ``failures=False`` (then it passes through, for a caller
    with its own report, such as the trainer's divergence check). Gradients pass through the
    entries that are not held.
    """
    lowest = torch.finfo(log_density.dtype).min
    if value_checks_enabled():
        values = log_density.detach()
        valid = torch.ones_like(values, dtype=torch.bool) if mask is None else mask
        if failures:
            raise_failures(valid & (values.isnan() | (values == torch.inf)), name=name, what=what)
        warn_saturated(valid & (values == -torch.inf), dtype=values.dtype, name=name, what=what, stacklevel=stacklevel)
    held = log_density.clamp(min=lowest)
    return held if mask is None else torch.where(mask, held, torch.zeros_like(held))


def saturated_sum(
    log_density: torch.Tensor, mask: torch.Tensor | None = None, *, name: str = "x", what: str = "the log-density"
) -> torch.Tensor:
    """``[B]``: the sum over steps of ``log_density [B, T]`` held by :func:`saturate`, the sum held too.

    A sum of held steps (or of finite ones near the lowest value) overflows again; it is held at
    the lowest value as well, with a warning of its own where no single step had one.
    """
    steps = saturate(log_density, mask, name=name, what=what, stacklevel=5)
    total = steps.sum(-1)
    lowest = torch.finfo(total.dtype).min
    if value_checks_enabled():
        overflowed = total.detach() == -torch.inf
        overflowed &= ~(steps.detach() == lowest).any(-1)  # those were reported step by step
        warn_saturated(overflowed, dtype=total.dtype, name=name, what=f"the sum over the steps of {what}", stacklevel=4)
    return total.clamp(min=lowest)


@contextmanager
def each_warning_once():
    """Within the block, :func:`warn_saturated` gives each message once (several estimators reading the same
    saturated steps warn once, not once each)."""
    token = _SHOWN.set(set())
    try:
        yield
    finally:
        _SHOWN.reset(token)

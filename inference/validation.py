"""Checks of user input at the public boundary.

Every check raises a ``ValueError`` (wrong value) or ``TypeError`` (wrong type)
whose message names the argument, what was expected and what was received.
Hot loops never call these; the public entry points do, once.

Checks that read tensor *values* (a NaN, a mask's order, a class index) wait for the device;
inside a CUDA-graph capture (:mod:`ppl_models.inference.training.cuda_graphs`) that is forbidden, so
:func:`value_checks` turns them off there, and the graph's caller checks each new input
outside the capture instead. Shape, dtype and type checks always run.

Settings whose tensors grow with a sample count are estimated before they are allocated
(:func:`check_memory`): on Linux an allocation larger than the free memory often succeeds (the
kernel overcommits) and the process is killed later, while the pages are filled, with no message.
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import os
import re
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "InputTypeError",
    "SettingError",
    "check_sequences",
    "check_scored",
    "check_choice",
    "check_positive_int",
    "check_draw_count",
    "check_seed",
    "check_flag",
    "check_probability",
    "value_checks",
    "value_checks_enabled",
    "available_memory",
    "check_memory",
]

_VALUE_CHECKS = contextvars.ContextVar("value_checks", default=True)


class InputTypeError(TypeError):
    """A ``TypeError`` raised by these checks: an input of the wrong type, not a bug (the CLI shows it as one line)."""


class SettingError(ValueError):
    """A bad value of a setting, which :attr:`key` names (``window``, ``missing``, ``fractions``).

    The message is a template in which ``{key}`` and ``{key=value}`` name settings (the value as the Python API
    writes it: ``{missing='drop-series'}``). ``str(error)`` spells them as the Python API's keyword arguments
    (``window``, ``missing='drop-series'``); :meth:`spelled` spells them with a caller's own names (the command
    line's flags) from the keys, without reading the text.
    """

    def __init__(self, key: str, template: str):
        self.key, self.template = key, template
        super().__init__(self.spelled(_keyword))

    def spelled(self, spell) -> str:
        """The message with each ``{key}`` / ``{key=value}`` as ``spell(key, value)`` (``value`` ``None`` for a bare
        key)."""
        return _SETTING.sub(lambda match: spell(match.group(1), match.group(2)), self.template)


#: a setting named in a :class:`SettingError`'s template: ``{key}`` or ``{key=value}``
_SETTING = re.compile(r"\{([A-Za-z_][\w.]*)(?:=([^{}]*))?\}")


def _keyword(key: str, value: str | None) -> str:
    return key if value is None else f"{key}={value}"


@contextlib.contextmanager
def value_checks(enabled: bool):
    """Turn the checks that read tensor values on or off inside the block (on by default)."""
    token = _VALUE_CHECKS.set(bool(enabled))
    try:
        yield
    finally:
        _VALUE_CHECKS.reset(token)


def value_checks_enabled() -> bool:
    """Whether checks that read tensor values (and so synchronise a device) run."""
    return _VALUE_CHECKS.get()


def check_sequences(
    x, mask=None, *, name: str = "x", feature_size: int | None = None, model=None, prefix: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a batch of sequences and return ``(x, mask)``.

    Args:
        x: observations ``[B, T, D]`` (floating point, finite where ``mask`` is true; the
            padding may hold anything, NaN included).
        mask: optional bool ``[B, T]``; ``True`` marks valid steps, which come first in
            each row (variable-length sequences padded at the end). Defaults to all true.
            ``prefix=False``: any selection of steps (a figure pooled over entries, of scored steps, say).
        name: argument name used in error messages.
        feature_size: expected ``D``, if the caller knows it.
        model: the ``nn.Module`` that will read ``x``: ``x`` must have the dtype of its
            floating-point parameters, ``D`` its ``obs_dim`` if it has one (and
            ``feature_size`` is not given), and the values pass its ``check_values`` if it
            has one (e.g. binary entries for a Bernoulli emission).

    Returns:
        ``x`` and ``mask`` as a bool tensor ``[B, T]`` on ``x``'s device. Where the padding holds
        anything but 0 (NaN, inf, 1e30), ``x`` is a new tensor with the padding set to 0 (the
        caller's is left as it is), so that nothing there reaches a network, a distribution's
        checks or a product with the mask; the valid steps, and gradients through them, are
        unchanged. Otherwise ``x`` itself comes back, so that a model's programs called with the
        returned tensor recognise it (``MarkovStateSpace.sharing_context``). This reads values:
        with the value checks off the padding is left as it is.
    """
    if not isinstance(x, torch.Tensor):
        raise InputTypeError(f"{name} must be a torch.Tensor of shape [B, T, D], got {type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(f"{name} must have shape [B, T, D] (3 dims), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise InputTypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if model is not None:
        _check_dtype(x, model, name)
        obs_dim = getattr(model, "obs_dim", None)
        feature_size = obs_dim if feature_size is None and isinstance(obs_dim, int) else feature_size
    batch, steps, features = x.shape
    if batch == 0:
        raise ValueError(f"{name} is an empty batch: expected B >= 1, got shape {tuple(x.shape)}")
    if steps == 0:
        raise ValueError(f"{name} has no time steps: expected T >= 1, got shape {tuple(x.shape)}")
    if feature_size is not None and features != feature_size:
        raise ValueError(f"{name} must have {feature_size} features (last dim), got {features}")
    if mask is None:
        mask = torch.ones(batch, steps, dtype=torch.bool, device=x.device)
    else:
        if not isinstance(mask, torch.Tensor):
            raise InputTypeError(f"mask must be a torch.Tensor of shape [B, T], got {type(mask).__name__}")
        if tuple(mask.shape) != (batch, steps):
            raise ValueError(f"mask must have shape [B, T] = {(batch, steps)} to match {name}, got {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            raise InputTypeError(f"mask must be a bool tensor, got dtype {mask.dtype}")
        if prefix and steps > 1 and value_checks_enabled() and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError(
                "mask must mark a prefix of each sequence (valid steps first, padding after); got a True after a False"
            )
    if value_checks_enabled():
        values, valid = x.detach(), mask.unsqueeze(-1)
        if bool((valid & ~torch.isfinite(values)).any()):
            raise ValueError(f"{name} contains NaN or inf at valid (unmasked) steps")
        if bool((~valid & (values != 0)).any()):  # the padding is never read: make it harmless
            x = torch.where(valid, x, x.new_zeros(()))
        check_values = getattr(model, "check_values", None)
        if callable(check_values):
            check_values(x, mask, name=name)
    return x, mask


def check_scored(scored, mask: torch.Tensor, *, name: str = "scored") -> torch.Tensor | None:
    """``scored [N, T]`` checked against ``mask [N, T]``: a bool tensor of its shape whose steps are valid ones and
    follow each row's context (its valid steps that are not scored, which come first); ``None`` passes through.

    A ``ValueError`` (``TypeError`` for a non-tensor) names ``name`` otherwise.
    """
    if scored is None:
        return None
    if not isinstance(scored, torch.Tensor) or scored.dtype != torch.bool:
        got = f"a {scored.dtype} tensor" if isinstance(scored, torch.Tensor) else type(scored).__name__
        raise InputTypeError(f"{name} must be a bool tensor [N, T] of the steps to score, got {got}")
    if scored.shape != mask.shape:
        raise ValueError(f"{name} must have the mask's shape {list(mask.shape)}, got {list(scored.shape)}")
    scored = scored.to(mask.device)
    if bool((scored & ~mask).any()):
        raise ValueError(f"{name} marks padding steps (outside mask): only valid steps can be scored")
    if bool((scored[:, :-1] & ~scored[:, 1:] & mask[:, 1:]).any()):
        raise ValueError(
            f"{name}: each row's scored steps must follow its context, to the row's end (a context "
            "step after a scored one)"
        )
    return scored


def _check_dtype(x: torch.Tensor, model, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` has the dtype of ``model``'s floating-point parameters."""
    if not isinstance(model, torch.nn.Module):
        return
    tensors = [*model.parameters(), *model.buffers()]
    dtype = next((t.dtype for t in tensors if t.is_floating_point()), None)
    if dtype is not None and x.dtype != dtype:
        raise InputTypeError(
            f"{name} has dtype {x.dtype} but the model's parameters are {dtype}: convert one of them, "
            f"{name}.to({dtype}) or model.to({x.dtype})"
        )


def check_choice(value, choices, *, name: str):
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_positive_int(value, *, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` (a numpy integer too); raise unless it is one, >= ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InputTypeError(f"{name} must be an int >= {minimum}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_draw_count(value, *, name: str) -> int:
    """Raise unless ``value`` is 0 (no draws) or an ``int`` >= 2: one draw has no spread to judge."""
    expected = "0 (none) or an int >= 2"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    if value < 0 or value == 1:
        raise ValueError(f"{name} must be {expected}, got {value}")
    return int(value)


def check_seed(value, *, name: str = "seed") -> int | None:
    """Raise unless ``value`` is ``None`` or an ``int`` in ``[0, 2**32)`` (a seed of torch, numpy and ``random``)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise InputTypeError(f"{name} must be None or an int in [0, 2**32), got {type(value).__name__} {value!r}")
    if value is not None and not 0 <= value < 2**32:
        raise ValueError(f"{name} must be None or an int in [0, 2**32), got {value}")
    return value if value is None else int(value)


def check_flag(value, *, name: str) -> bool:
    """Raise unless ``value`` is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InputTypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def check_probability(value, *, name: str, open_left: bool = False) -> float:
    """Raise unless ``value`` is a number in [0, 1] (or (0, 1] with ``open_left``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputTypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    low_ok = value > 0 if open_left else value >= 0
    if not (low_ok and value <= 1):
        interval = "(0, 1]" if open_left else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return float(value)


def check_dropout(value, *, name: str = "dropout") -> float:
    """Raise unless ``value`` is a dropout rate, a number in ``[0, 1)``."""
    rate = check_probability(value, name=name)
    if rate == 1.0:
        raise ValueError(f"{name} must be in [0, 1): a rate of 1 drops every unit")
    return rate


def available_memory() -> int | None:
    """Bytes this process may still allocate: ``MemAvailable`` of ``/proc/meminfo`` (else free pages by
    ``os.sysconf``), capped by a cgroup v2 limit (``memory.max - memory.current``); ``None`` if unknown."""
    candidates = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                candidates.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, ValueError, OSError):
            pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            candidates.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return min(candidates) if candidates else None


def check_memory(needs: dict[str, tuple[int, int, str]], available: int | None = None) -> None:
    """Raise one ``ValueError`` naming the largest setting if the memory ``needs`` (``{setting: (value, bytes,
    how)}``), held together, exceed ``available`` bytes (default :func:`available_memory`; unknown: no check)."""
    available = available_memory() if available is None else available
    if available is None or not needs:
        return
    total = sum(size for _, size, _ in needs.values())
    if total <= available:
        return
    name, (value, size, how) = max(needs.items(), key=lambda item: item[1][1])
    others = f"; {_gib(total)} with the other settings" if total > 1.01 * size else ""
    raise ValueError(
        f"{name}={value} needs at least {_gib(size)} of memory ({how}{others}), but {_gib(available)} "
        f"are available: lower {name}"
    )


def _gib(size: int) -> str:
    return f"{size / 2**30:.3g} GiB"

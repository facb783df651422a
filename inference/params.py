"""Save and load a model's parameters by names relative to the model, whatever its Pyro name.

Pyro's parameter store names a module's parameters ``<pyro_name>$$$<parameter>``, and each
:class:`~ppl_models.inference.protocol.SequenceModel` instance gets a ``pyro_name`` of its own in order of
creation (``vrnn``, ``vrnn_1``, ...). A store file written in one process therefore need not
match the names of the same model made in another, and ``pyro.module(name, model,
update_module_params=True)`` then restores nothing, without a word. :func:`save_params` and
:func:`load_params` (``SequenceModel.save_params`` / ``load_params``) avoid the names:

* :func:`save_params` writes the model's ``state_dict`` (parameters and buffers, names relative
  to the model) atomically;
* :func:`load_params` reads that file, a plain ``state_dict`` checkpoint
  (``torch.save(model.state_dict(), path)``), a :class:`~ppl_models.inference.training.Trainer` checkpoint,
  or a Pyro parameter-store file (``pyro.get_param_store().save(path)``), whose entries it
  matches by the relative names, and refuses a file that does not hold every parameter of the
  model, with a ``ValueError`` naming the file and what is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyro
import pyro.distributions.constraints as pyro_constraints
import torch
from pyro.params import param_with_module_name
from torch.distributions import constraints, transform_to

from .atomic_files import save_torch

__all__ = ["PARAMS_FORMAT", "save_params", "load_params"]

#: the ``format`` entry of a file written by :func:`save_params`
PARAMS_FORMAT = "ppl-models-params-1"


def save_params(model: torch.nn.Module, path: str | os.PathLike) -> Path:
    """Write ``model``'s parameters and buffers, by names relative to it, to ``path`` (atomically)."""
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    return save_torch(
        path,
        {
            "format": PARAMS_FORMAT,
            "class": type(model).__name__,
            "pyro_name": getattr(model, "pyro_name", None),
            "state_dict": state,
        },
    )


@torch.no_grad()
def load_params(model: torch.nn.Module, path: str | os.PathLike, *, name: str | None = None) -> torch.nn.Module:
    """Load the parameters in ``path`` into ``model`` (in place) and return it.

    Args:
        path: a file of :func:`save_params`, a ``state_dict``, a ``Trainer`` checkpoint, or a
            Pyro parameter-store file.
        name: for a parameter-store file, the Pyro name the model was saved under (default: the
            model's own ``pyro_name`` if the file has it, else the one name in the file whose
            parameters are exactly the model's).

    Entries of Pyro's parameter store under the model's ``pyro_name`` are pointed at the loaded
    tensors, so that ``SVI`` goes on from them. Raises ``ValueError`` (naming ``path``) for a file
    that is not one of these, lacks a parameter of ``model`` or holds one of another shape.
    """
    content = _read(path)
    if isinstance(content, dict) and set(content) == {"params", "constraints"}:
        state, strict = _from_param_store(model, content, path, name), False
    else:
        if name is not None:
            raise ValueError(f"name applies to Pyro parameter-store files only; {path} is a state_dict file")
        state, strict = _state_dict(content, path), True
    _check_state(model, state, path, strict)
    model.load_state_dict(state, strict=strict)
    _refresh_param_store(model)
    return model


def _read(path):
    """``torch.load`` without arbitrary code: tensors, plain values, and the store's constraint objects."""
    allowed = [
        obj
        for module in (constraints, pyro_constraints)
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, constraints.Constraint)
    ]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as error:  # torch.load fails in many ways on a bad file; none is the caller's bug
        raise ValueError(
            f"{path} is not a readable parameter file (torch.load raised {type(error).__name__}: "
            f"{str(error).splitlines()[0][:200]})"
        ) from error


def _state_dict(content, path) -> dict:
    if isinstance(content, dict) and content.get("format") == PARAMS_FORMAT:
        return content["state_dict"]
    if isinstance(content, dict) and isinstance(content.get("objective"), dict):  # a Trainer checkpoint
        return {k.removeprefix("model."): v for k, v in content["objective"].items() if k.startswith("model.")}
    if (
        isinstance(content, dict)
        and content
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in content.items())
    ):
        return content
    raise ValueError(
        f"{path} holds no parameters: expected a file of save_params, a state_dict, a Trainer "
        "checkpoint or a Pyro parameter-store file"
    )


def _from_param_store(model, content, path, name) -> dict:
    """The store entries of one Pyro name, by relative name, constrained as the store keeps them."""
    by_name: dict[str, dict[str, torch.Tensor]] = {}
    for full, value in content["params"].items():
        prefix, divider, relative = full.partition(param_with_module_name("", ""))
        if divider:
            constraint = content["constraints"].get(full, constraints.real)
            by_name.setdefault(prefix, {})[relative] = transform_to(constraint)(value).detach()
    own = {n for n, p in model.named_parameters() if p.requires_grad}
    if name is None:
        matching = [prefix for prefix, entries in by_name.items() if set(entries) == own]
        own_name = getattr(model, "pyro_name", None)
        name = own_name if own_name in matching else (matching[0] if len(matching) == 1 else None)
        if name is None:
            found = ", ".join(f"{p!r} ({len(e)} parameters)" for p, e in sorted(by_name.items())) or "none"
            why = (
                f"several ({', '.join(map(repr, matching))}) match: pass name="
                if matching
                else (f"none holds exactly the {len(own)} parameters of this {type(model).__name__}")
            )
            raise ValueError(f"{path} is a Pyro parameter-store file with module names {found}; {why}")
    elif name not in by_name:
        raise ValueError(f"{path} has no parameters under the Pyro name {name!r}; it has {sorted(by_name)}")
    return by_name[name]


def _check_state(model, state, path, strict) -> None:
    expected = model.state_dict()
    needed = set(expected) if strict else {n for n, p in model.named_parameters() if p.requires_grad}
    missing, unexpected = sorted(needed - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{path} does not hold the parameters of this {type(model).__name__}: missing "
            f"{missing[:5]}{' ...' if len(missing) > 5 else ''}, unexpected "
            f"{unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    wrong = [
        f"{n} {tuple(state[n].shape)} (the model's: {tuple(expected[n].shape)})"
        for n in state
        if tuple(state[n].shape) != tuple(expected[n].shape)
    ]
    if wrong:
        raise ValueError(
            f"{path} holds parameters of other shapes than this {type(model).__name__}'s: {'; '.join(wrong[:3])}"
        )


def _refresh_param_store(model) -> None:
    """Point the store's entries of ``model.pyro_name`` (if any) at the model's own, just loaded, tensors."""
    prefix = getattr(model, "pyro_name", None)
    if prefix is None:
        return
    store = pyro.get_param_store()
    for relative, parameter in model.named_parameters():
        full = param_with_module_name(prefix, relative)
        if full in store and store.get_param(full) is not parameter:
            store[full] = parameter

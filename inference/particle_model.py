"""The interface a particle filter drives: a *particle model* is any object with two methods (see
:class:`ParticleModel`):

* ``start(x, mask, num_particles) -> (state, context)``: the state before the
  first step, a dict of tensors ``[K, B, ...]``, and any per-sequence context the
  steps need (precomputed features, for instance);
* ``step(state, t, x_t, context, *, reparameterize=True) -> Step``: propose the
  state at step ``t`` from ``state`` and ``x_t [B, D]`` and return the new state
  with its incremental log-weight ``log p(z_t, x_t | past) - log q(z_t | past, x_t)``
  and its complete-data log-density ``log p(z_t, x_t | past)``, each ``[K, B]``.
  ``reparameterize=False`` asks for Fisher's identity: the proposed state must be
  sampled without a gradient path (``sample`` rather than ``rsample``) and
  ``log_joint`` is required; otherwise ``log_joint`` may be ``None``.

and optionally (:data:`PARTICLE_OPTIONS`) ``simulate(state, t, context) -> (state, x_t)``,
a draw from the model one step ahead, used for predictive samples and forecasts, and
``predict_mean(state, t, context) -> [K, B, D]``, the mean of ``x_t`` given each
particle, used for one-step predictive means (note probabilities, for instance). A model
declares the optional methods it defines in its class attribute ``particle_options``
(``frozenset({"simulate", "predict_mean"})``; none when absent); the filter and forecasts
read that declaration (:func:`particle_option`).

A run that fails (a NaN or ``+inf`` incremental log-weight at a valid step) raises
:class:`FilterFailed`, a ``ValueError`` naming the step and the sequence, as Pyro's
``SMCFailed`` is one for ``SMCFilter``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

__all__ = ["Step", "ParticleModel", "FilterFailed", "PARTICLE_OPTIONS", "particle_option", "declared_options"]

#: the optional methods of the particle-model interface -> their signature; a model lists those it defines
#: in ``particle_options``
PARTICLE_OPTIONS = {
    "simulate": "simulate(state, t, context) -> (state, x_t)",
    "predict_mean": "predict_mean(state, t, context) -> [K, B, D]",
}


class FilterFailed(ValueError):
    """A particle-filter run failed: a NaN or ``+inf`` incremental log-weight at a valid step.

    The message names the first failed step and sequence (``x[b, t]``) and the likely cause. A
    ``ValueError``, as Pyro's ``SMCFailed`` is, so code that catches bad values catches it too.
    """


class Step(NamedTuple):
    """What a particle model's ``step`` returns (all tensors lead with ``[K, B]``).

    ``log_joint`` is needed only when ``step`` was called with ``reparameterize=False``.
    """

    state: dict[str, torch.Tensor]
    log_weight: torch.Tensor
    log_joint: torch.Tensor | None


class ParticleModel(Protocol):
    """The interface the filter drives; see the module docstring."""

    #: the optional methods it defines (keys of :data:`PARTICLE_OPTIONS`); a model without the attribute has none
    particle_options: frozenset[str] = frozenset()

    def start(self, x: torch.Tensor, mask: torch.Tensor, num_particles: int) -> tuple[dict, Any]: ...

    def step(self, state: dict, t: int, x_t: torch.Tensor, context: Any, *, reparameterize: bool = True) -> Step: ...


def particle_option(model, name: str, *, needed_for: str | None = None):
    """The optional method ``name`` (a key of :data:`PARTICLE_OPTIONS`) of a particle model that declares it.

    Raises ``ValueError`` naming the model and the method when its ``particle_options`` do not
    declare ``name`` (``needed_for``: what asked for it, for the message), and ``TypeError`` when
    they declare it but the model defines no such method.
    """
    declared = declared_options(model)
    if name not in declared:
        asker = f"{needed_for} needs" if needed_for else "this call needs"
        raise ValueError(
            f"{asker} {PARTICLE_OPTIONS[name]}, which {type(model).__name__} does not declare in "
            f"its particle_options ({sorted(declared)})"
        )
    return getattr(model, name)


def declared_options(model) -> frozenset[str]:
    """``model.particle_options``, checked: known names, each a method the model defines."""
    declared = getattr(model, "particle_options", frozenset())
    name = type(model).__name__
    if not isinstance(declared, (set, frozenset)) or not declared <= PARTICLE_OPTIONS.keys():
        raise TypeError(f"{name}.particle_options must be a frozenset of {sorted(PARTICLE_OPTIONS)}, got {declared!r}")
    for option in sorted(declared):
        if not callable(getattr(model, option, None)):
            raise TypeError(
                f"{name} declares {option!r} in its particle_options but defines no method {PARTICLE_OPTIONS[option]}"
            )
    return declared

"""Builders that take a spec: ``builder(path, spec, ...)``, where ``spec`` is a dataclass of settings (a
:class:`~ppl_models.inference.data.spec.FileSpec`) that a configuration table gives by its fields.

A :class:`SpecEntry` of the registry (:mod:`ppl_models.experiments.registry`) declares its builder's spec class: a
table's keys are then the builder's own keyword parameters and the spec's fields (:func:`table_parameters`), and
:func:`spec_call` builds the spec from the table before it calls the builder.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

from .config import check_arguments
from .experiment_table import Entry

__all__ = ["SpecEntry", "table_parameters", "spec_call"]

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class SpecEntry(Entry):
    """An :class:`Entry` whose builder takes a ``spec``: an instance of the dataclass ``spec``, built from a table's
    keys that are its fields."""

    spec: type


def table_parameters(builder, spec: type | None = None) -> dict[str, inspect.Parameter]:
    """The keys a table may give ``builder``, by name, as parameters (each with its default): the builder's named
    parameters, its ``spec`` parameter replaced by the fields of the dataclass ``spec`` that are not among them."""
    own = {name: p for name, p in inspect.signature(builder).parameters.items() if p.kind in _NAMED}
    if spec is None:
        return own
    keys = {}
    for name, parameter in own.items():
        if name != "spec":
            keys[name] = parameter
            continue
        for field in dataclasses.fields(spec):
            if field.name not in own:
                default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
                keys[field.name] = inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=default)
    return keys


def spec_call(builder, spec: type, params: dict, where: str, **fixed):
    """``builder(**fixed, **others, spec=spec(**fields))``: the keys of ``params`` that are fields of ``spec`` (and
    not the builder's own parameters) make the spec, the others go to the builder; each value is checked against its
    annotation first (:func:`~ppl_models.experiments.config.check_arguments`, ``where`` naming the table)."""
    own = table_parameters(builder)
    fields = {key: value for key, value in params.items() if key not in own}
    others = {key: value for key, value in params.items() if key in own}
    check_arguments(spec, fields, where)
    check_arguments(builder, others, where)
    return builder(**fixed, **others, spec=spec(**fields))

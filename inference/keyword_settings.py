"""Settings given as keywords to a short signature, ``f(..., options=None, **settings)``: :func:`sorted_keywords` sorts
them into the groups they fill (the fields of a settings dataclass, a call's extras) and :func:`options_with` puts a
group into its dataclass. An unknown keyword is one ``TypeError`` naming it and the known ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from .validation import InputTypeError

__all__ = ["field_names", "sorted_keywords", "options_with"]


def field_names(cls: type, *, without: Collection[str] = ()) -> tuple[str, ...]:
    """The field names of the dataclass ``cls``, in order, but those of ``without``."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in without)


def sorted_keywords(call: str, keywords: Mapping, groups: Mapping[str, Collection[str]]) -> list[dict]:
    """``keywords`` (the keyword arguments of ``call``) as one dict per group of ``groups`` (``{label: names}``, a
    name in one group only), in the groups' order; a keyword of no group is an ``InputTypeError`` (a ``TypeError``)
    naming it and each group's names."""
    known = {name for names in groups.values() for name in names}
    unknown = sorted(set(keywords) - known)
    if unknown:
        listed = ", ".join(f"{label} {list(names)}" for label, names in groups.items())
        raise InputTypeError(f"{call}() got unknown keyword arguments {unknown}; known: {listed}")
    return [{key: value for key, value in keywords.items() if key in names} for names in groups.values()]


def options_with(cls: type, options, settings: Mapping, *, name: str = "options"):
    """``options`` (an instance of the dataclass ``cls``; ``None``: ``cls(**settings)``) with ``settings``, fields of
    ``cls``, in place (the dataclass checks them); an ``options`` of another type is an ``InputTypeError`` naming
    ``name``."""
    if options is None:
        return cls(**settings)
    if not isinstance(options, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise InputTypeError(f"{name} must be {article} {cls.__name__} or None, got {type(options).__name__}")
    return dataclasses.replace(options, **settings) if settings else options

"""The data as :func:`~ppl_models.inference.evaluation.evaluate` reads it: in batches of similar lengths, put back
in data order (padded, or packed to the scored steps where the lengths are skewed: :func:`packed_layout`), and mapped
from the model's (standardised) units back to the data's own."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping

import torch
from torch import nn

from ..data import DataUnits, Standardizer
from ..data.datasets import skewed
from ..training import length_batches, trim_padding
from ..validation import InputTypeError

__all__ = ["Units", "batches", "in_order", "packed_layout", "check_some_valid", "modelled_columns"]


def check_some_valid(mask: torch.Tensor, caller: str) -> None:
    """Raise ``ValueError`` unless ``mask [N, T]`` has a valid step (``caller`` names the function that needs one)."""
    if not bool(mask.any()):
        raise ValueError(f"mask has no valid step: {caller}() needs at least one True entry")


def batches(x: torch.Tensor, mask: torch.Tensor, size: int, device) -> Iterator[tuple[torch.Tensor, ...]]:
    """``(index [b], x [b, T', D], mask [b, T'])``: ``size`` sequences of similar lengths at a time, longest first,
    cut to their longest and moved to ``device``."""
    for index in length_batches(mask, size):
        xb, mb = trim_padding(x[index], mask[index])
        yield index, xb.to(device), mb.to(device)


def packed_layout(mask: torch.Tensor) -> bool:
    """Whether an evaluation of rows ``mask [N, T]`` keeps its per-step arrays packed to the scored steps: where
    their lengths are skewed, padding them to the longest holding more than
    :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` times their valid steps (the data side's rule)."""
    return skewed(mask.sum(1).tolist())


def in_order(pieces: list[torch.Tensor], indices: list[torch.Tensor], steps: int, batch_dim: int = 0) -> torch.Tensor:
    """Per-batch outputs (time at ``batch_dim + 1``, where there is one) padded to ``steps``, in data order."""
    if pieces[0].dim() > batch_dim + 1:
        pieces = [
            nn.functional.pad(p, (0, 0) * (p.dim() - batch_dim - 2) + (0, steps - p.shape[batch_dim + 1]))
            for p in pieces
        ]
    order = torch.cat(indices).argsort()
    return torch.cat(pieces, batch_dim).index_select(batch_dim, order)


def modelled_columns(model, covariates, features: int) -> int:
    """How many leading columns of data with ``features`` columns an evaluation scores: the model's
    ``modelled_features`` (a model of targets that reads covariates as inputs), else the targets of the data's
    :class:`~ppl_models.inference.data.covariates.CovariateLayout` ``covariates``, else every column."""
    declared = getattr(model, "modelled_features", None)
    layout = None if covariates is None else covariates.modelled
    if declared is not None and layout is not None and declared != layout:
        raise ValueError(
            f"covariates: the data's layout has {layout} target columns, the model {type(model).__name__} models "
            f"{declared}"
        )
    columns = declared if declared is not None else layout if layout is not None else features
    if not 0 < columns <= features:
        raise ValueError(f"modelled_features: expected 1 to {features} leading columns, got {columns}")
    return int(columns)


class Units:
    """The way from the model's (standardised, maybe transformed) units back to the data's: values and log densities,
    of the scored columns only.

    ``standardizer``: a :class:`~ppl_models.inference.data.Standardizer`, its ``to_dict()``, ``None`` (the units are
    the data's) or the :class:`~ppl_models.inference.data.DataUnits` of transformed data (per-row maps, the levels
    differences build on, per-step Jacobians), checked against ``like [N, T, D]``. ``columns``: the leading columns
    scored (:func:`modelled_columns`; default all ``D``): every value these units give back (:meth:`values`,
    :meth:`observed`, :meth:`kept`) holds those ``[..., columns]`` only, and the Jacobian of a log density counts
    them only, so that covariate columns (inputs, not forecast) weigh in no figure. The methods take the rows
    ``index`` ``[b]`` of ``like`` a batch holds (``None``: every row), which only transformed data reads.
    """

    def __init__(self, standardizer, like: torch.Tensor, columns: int | None = None):
        self.columns = like.shape[-1] if columns is None else int(columns)
        self.transform = standardizer if isinstance(standardizer, DataUnits) else None
        if self.transform is not None:
            self.transform.check(like)
            self.transform = self.transform.leading(self.columns)
            standardizer = None
        self.standardizer = _check_standardizer(standardizer, like.shape[-1])
        if self.standardizer is not None and self.columns < like.shape[-1]:
            kept = slice(0, self.columns)
            self.standardizer = Standardizer(
                self.standardizer.mean[kept], self.standardizer.scale[kept], self.standardizer.features[kept]
            )
            self.standardizer = None if self.standardizer.identity else self.standardizer
        scale = torch.tensor(self.standardizer.scale if self.standardizer else [1.0], dtype=torch.float64)
        self.log_jacobian = -float(scale.log().sum())  # log |d z / d x| per step

    @property
    def changed(self) -> bool:
        """Whether the model's units differ from the data's."""
        return self.standardizer is not None or self.transform is not None

    def kept(self, values: torch.Tensor) -> torch.Tensor:
        """``values [..., D]`` at the scored columns ``[..., columns]``."""
        return values[..., : self.columns]

    def values(self, z: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """One-step values ``z [..., b, T', D]`` of rows ``index`` in the data's units (float64 where they differ), at
        the scored columns."""
        z = self.kept(z)
        if self.transform is not None:
            return self.transform.values(z, index)
        return z if self.standardizer is None else self.standardizer.inverse(z, dtype=torch.float64)

    def observed(self, x: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """The data ``x [b, T', D]`` of rows ``index`` in the data's units, at the scored columns: transformed data's
        rows as read, at its positions."""
        if self.transform is not None:
            return self.transform.observed_at(index, x.shape[-2])
        return self.values(x)

    def step_log_density(self, log_density: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """Per-step log densities ``[b, T']`` of rows ``index`` in the data's units."""
        if self.transform is not None:
            return log_density.double() + self.transform.log_jacobian(index, log_density.shape[-1])
        return log_density if self.standardizer is None else log_density + self.log_jacobian

    def sequence_log_density(
        self, log_density: torch.Tensor, scored: torch.Tensor, index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Log densities ``[b]`` of the ``scored [b, T']`` steps of rows ``index``, in the data's units."""
        scored = scored.cpu()
        if self.transform is not None:
            jacobian = self.transform.log_jacobian(index, scored.shape[-1])
            return log_density.double() + (jacobian * scored).sum(-1)
        if self.standardizer is None:
            return log_density
        return log_density + self.log_jacobian * scored.sum(1).to(log_density)


def _check_standardizer(standardizer, features: int) -> Standardizer | None:
    """``standardizer`` (a :class:`Standardizer`, its ``to_dict()`` or ``None``) checked against ``features``;
    ``None`` for one that changes nothing."""
    if isinstance(standardizer, Mapping):
        if not {"mean", "scale", "features"} <= set(standardizer):
            raise ValueError(
                "standardizer must have the keys 'mean', 'scale' and 'features' of "
                f"Standardizer.to_dict(), got {sorted(map(str, standardizer))}"
            )
        try:
            standardizer = Standardizer.from_dict(standardizer)
        except TypeError:
            raise ValueError(
                "standardizer's 'mean', 'scale' and 'features' must be lists, got "
                f"{ {k: type(v).__name__ for k, v in standardizer.items()} }"
            ) from None
    if standardizer is None:
        return None
    if not isinstance(standardizer, Standardizer):
        raise InputTypeError(
            "standardizer must be a Standardizer or its to_dict() (ppl_models.inference.data), "
            f"got {type(standardizer).__name__}"
        )
    for name in ("mean", "scale"):
        if len(getattr(standardizer, name)) != features:
            raise ValueError(
                f"standardizer: {len(getattr(standardizer, name))} features for data of {features} (in its {name})"
            )
    if not all(_finite(m) for m in standardizer.mean):
        raise ValueError(f"standardizer.mean must be finite numbers, got {standardizer.mean}")
    if not all(_finite(s) and s > 0 for s in standardizer.scale):
        raise ValueError(f"standardizer.scale must be finite and positive, got {standardizer.scale}")
    return None if standardizer.identity else standardizer


def _finite(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)

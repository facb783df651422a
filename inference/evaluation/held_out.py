"""The data an evaluation judges: :class:`HeldOutData`, the held-out sequences with the steps to score, the units
they are read in, their kind and their source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["HeldOutData"]


@dataclass(frozen=True, eq=False)
class HeldOutData:
    """The held-out data of an evaluation; :func:`~ppl_models.inference.evaluation.evaluate_held_out` checks it
    against the model it judges.

    Attributes:
        x, mask: the sequences ``[N, T, D]`` as the model sees them and ``[N, T]`` (valid steps first; ``None``:
            all valid).
        scored: ``[N, T]`` bool, the steps to judge (held-out segments), each row's earlier valid steps its
            context (:func:`~ppl_models.inference.validation.check_scored`); ``None``: every valid step.
        valid: the validation split ``(x, mask)``, on which a noise refit fits a model's noise.
        standardizer: the :class:`~ppl_models.inference.data.Standardizer` under which ``x`` is held (or its
            ``to_dict()``), or the :class:`~ppl_models.inference.data.DataUnits` of ``x``'s rows: the figures are
            reported in the data's own units.
        binary: judge as binary data (Brier score, reliability); ``None``: every valid value is 0 or 1.
        description: names the data in the metrics.
        covariates: the data's :class:`~ppl_models.inference.data.covariates.CovariateLayout` where it has
            covariate columns: only its targets are scored, as for a model that declares ``modelled_features``.
        truth: the data's source, a model with an exact ``log_likelihood``; ``truth_metrics``:
            ``(draws, x) -> {name: value}``.
    """

    x: torch.Tensor
    mask: torch.Tensor | None = None
    scored: torch.Tensor | None = None
    valid: tuple[torch.Tensor, torch.Tensor] | None = None
    standardizer: Any = None
    binary: bool | None = None
    description: str = "data"
    truth: Any = None
    truth_metrics: Callable | None = None
    covariates: Any = None

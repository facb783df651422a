"""What :func:`~ppl_models.inference.evaluation.evaluate` returns: :class:`Evaluation`, the figures and the draws
behind them, and how the pieces gathered batch by batch are put in data order (:func:`held_in_order`): padded like
the data, or packed to the scored steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import calibration
from .batch_estimates import Gathered
from .data_layout import Units, in_order

__all__ = ["Evaluation", "held_in_order"]


@dataclass
class Evaluation:
    """What :func:`evaluate` found: ``metrics`` (a JSON-ready dict) and the draws behind it.

    ``predictive``: one-step draws ``[S, N, T, D]`` (real-valued data, ``predictive_samples > 0``);
    ``log_density``: their per-step log density ``[N, T]`` where the model gives one;
    ``probabilities``: ``E[x_t | x_<t]`` ``[N, T, D]`` (binary data); ``posterior``: the guide's
    draws as ``InferenceData`` (``posterior_draws > 0``); ``x``, ``mask``: the data, ``[N, T, D]``, ``[N, T]``;
    ``scored``: the steps judged ``[N, T]`` (the valid steps after each row's context; ``mask`` where there is none).

    That is the padded layout. Where the data's lengths are skewed
    (:func:`~ppl_models.inference.evaluation.data_layout.packed_layout`: padding its rows to the longest would hold more
    than :data:`~ppl_models.inference.data.datasets.PADDING_LIMIT` times their valid steps), the per-step arrays hold
    the ``n`` scored steps only, in data order (by row, then step), as one row: ``x [1, n, D]``, ``mask`` and
    ``scored`` ``[1, n]`` (all true), ``predictive [S, 1, n, D]``, ``log_density [1, n]``, ``probabilities
    [1, n, D]``; ``positions [2, n]`` then gives each step's row and time step in the data (``None`` in the padded
    layout). Either way the figures are those of the scored steps, and
    :meth:`predictive_data` stores them alike.
    """

    metrics: dict
    x: torch.Tensor
    mask: torch.Tensor
    predictive: torch.Tensor | None = None
    log_density: torch.Tensor | None = None
    probabilities: torch.Tensor | None = None
    posterior: Any = None
    scored: torch.Tensor | None = None
    positions: torch.Tensor | None = None

    def __getitem__(self, key: str):
        return self.metrics[key]

    def steps_of(self, row: int) -> tuple[int, torch.Tensor]:
        """``(held, steps)``: where data row ``row``'s scored steps are held, ``x[held][steps]`` (``steps``: bool
        ``[T]``, or ``[n]`` in the packed layout)."""
        if self.positions is None:
            return row, (self.mask if self.scored is None else self.scored)[row]
        return 0, self.positions[0] == row

    def predictive_data(self):
        """ArviZ ``InferenceData`` of the one-step draws (posterior predictive) and the observed data at the scored
        steps (:func:`~ppl_models.inference.calibration.to_inference_data`; padded and packed layouts alike)."""
        if self.positions is not None:
            return calibration.to_inference_data(self.predictive, self.x, positions=self.positions)
        return calibration.to_inference_data(
            self.predictive, self.x, mask=self.mask if self.scored is None else self.scored
        )

    def to_inference_data(self):
        """ArviZ ``InferenceData``: the observed data with the one-step predictive draws as posterior
        predictive (:meth:`predictive_data`), and the guide's draws with their pointwise log-likelihood where they
        were taken."""
        if self.predictive is None:
            if self.posterior is not None:
                return self.posterior
            raise ValueError(
                "evaluate() took no predictive draws: pass predictive_samples > 0 (real-valued data) "
                "or posterior_draws > 0"
            )
        idata = self.predictive_data()
        if self.posterior is not None:
            idata.extend(self.posterior)
        return idata


def held_in_order(metrics: dict, gathered: Gathered, x, mask, scored, units: Units) -> Evaluation:
    """The :class:`Evaluation` of ``metrics`` and the ``gathered`` pieces put in data order: padded like ``x [N, T, D]``
    (``mask``, ``scored`` ``[N, T]``), or packed to the scored steps (:attr:`Gathered.packed`)."""
    steps = x.shape[1]
    if gathered.packed:
        return _packed_in_order(metrics, gathered, steps)
    draws = in_order(gathered.draws, gathered.indices, steps, batch_dim=1) if gathered.draws else None
    log_density = (
        in_order(gathered.log_density, gathered.indices, steps) if draws is not None and gathered.log_density else None
    )
    probabilities = in_order(gathered.probabilities, gathered.indices, steps) if gathered.probabilities else None
    return Evaluation(metrics, units.observed(x), mask, draws, log_density, probabilities, scored=scored)


def _packed_in_order(metrics: dict, gathered: Gathered, steps: int) -> Evaluation:
    """The :class:`Evaluation` in the packed layout: the ``n`` scored steps of rows of ``steps`` steps as one row, by
    row then time step."""
    positions = torch.cat(gathered.positions, 1)
    order = (positions[0] * steps + positions[1]).argsort()

    def put(pieces: list[torch.Tensor], dim: int = 0) -> torch.Tensor | None:
        return torch.cat(pieces, dim).index_select(dim, order).unsqueeze(dim) if pieces else None

    every = torch.ones(1, len(order), dtype=torch.bool)
    draws = put(gathered.draws, 1)
    log_density = put(gathered.log_density) if draws is not None else None
    return Evaluation(
        metrics,
        put(gathered.observed),
        every,
        draws,
        log_density,
        put(gathered.probabilities),
        scored=every,
        positions=positions[:, order],
    )

"""Covariates of a user's file: columns read as inputs of the forecast, not forecast themselves.

Two kinds, named by a :class:`~ppl_models.inference.data.spec.FileSpec`:

* ``covariates``: known in the future (a calendar, a planned price). The forecast of step ``t`` may read their value
  at ``t``;
* ``past_covariates``: known only up to now (a related series). The forecast of step ``t`` reads their values up to
  ``t - 1`` only.

Both enter the data as columns after the forecast targets, so every step of the data pipeline (split, transform,
standardisation, windows) carries them, in the one layout :func:`lead_known` gives: row ``t`` of a sequence holds
``[y_t, c_{t+1}, p_t]`` (targets, known covariates one step ahead, past-only covariates). A model that predicts row
``t`` from rows ``< t`` then reads exactly ``c_{<=t}`` and ``p_{<t}``, and no future value of a past-only covariate.
The last row of a series holds the next known value where the file gives one (a row after the series' last target
with the known covariates filled: :func:`cut_future`), else its own (only read to forecast past the end, which then
takes the file's future rows).

:class:`CovariateLayout` records which columns are which; the targets are the layout's first ``targets`` columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..validation import SettingError

__all__ = ["CovariateLayout", "COVARIATE_KEYS", "check_covariate_columns", "cut_future", "lead_known"]

#: the settings that name covariates, and what each column kind is
COVARIATE_KEYS = {"covariates": "known in the future", "past_covariates": "known only up to now"}


@dataclass(frozen=True)
class CovariateLayout:
    """The columns of a data set read with covariates: ``targets`` (forecast and scored), then ``known`` (future-known
    covariates, one step ahead), then ``past`` (past-only covariates), in that order."""

    targets: tuple[str, ...]
    known: tuple[str, ...] = ()
    past: tuple[str, ...] = ()

    @property
    def features(self) -> list[str]:
        """Every column in the data's order: ``targets + known + past``."""
        return [*self.targets, *self.known, *self.past]

    @property
    def modelled(self) -> int:
        """How many leading columns are forecast and scored (the targets)."""
        return len(self.targets)

    @property
    def known_slice(self) -> slice:
        return slice(len(self.targets), len(self.targets) + len(self.known))

    def to_dict(self) -> dict:
        return {"targets": list(self.targets), "covariates": list(self.known), "past_covariates": list(self.past)}

    def checked_future(self, x: torch.Tensor, future, horizon: int) -> torch.Tensor:
        """``future`` (the known covariates of the ``horizon`` steps after each row of ``x [B, T, D]``,
        ``[B, >= H, C]``) as a tensor like ``x``'s; a ``ValueError`` for a forecast of more than one step with
        past-only covariates (their values after the origin are unknown), a shape that does not fit or a missing
        value in the window."""
        if self.past and horizon > 1:
            raise ValueError(
                f"horizon: {horizon} steps with past_covariates {list(self.past)}: their values after the "
                "forecast origin are unknown and this model does not forecast them; forecast one step, or give them "
                "as known covariates"
            )
        future = torch.as_tensor(future, dtype=x.dtype, device=x.device)
        if self.known and (future.dim() != 3 or future.shape[0] != x.shape[0] or future.shape[1] < horizon):
            raise ValueError(
                f"future: expected the known covariates {list(self.known)} of the {horizon} steps ahead "
                f"[{x.shape[0]}, {horizon}, {len(self.known)}], got {list(future.shape)}"
            )
        if self.known and not bool(torch.isfinite(future[:, :horizon]).all()):
            raise ValueError(f"future: a value of {list(self.known)} is missing in the forecast window")
        return future

    @classmethod
    def from_dict(cls, record: dict) -> CovariateLayout:
        return cls(tuple(record["targets"]), tuple(record["covariates"]), tuple(record["past_covariates"]))


def check_covariate_columns(
    columns: list[str], known: tuple[str, ...], past: tuple[str, ...], reserved: dict[str, str | None], source: str
) -> None:
    """Refuse a covariate column the file lacks, one named twice (or under both kinds), or one that already has
    another role (``reserved``: ``{option: column}`` of the series, time and split columns); a
    :class:`~ppl_models.inference.validation.SettingError` naming the option and the column."""
    seen: dict[str, str] = {}
    for key, names in (("covariates", known), ("past_covariates", past)):
        for name in names:
            if name not in columns:
                raise SettingError(key, f"{source}: column {name!r} (given as {{{key}}}) not found; columns: {columns}")
            if name in seen:
                raise SettingError(
                    key, f"{source}: column {name!r} is given twice as a covariate ({{{seen[name]}}} and {{{key}}})"
                )
            roles = [option for option, column in reserved.items() if column == name]
            if roles:
                raise SettingError(
                    key,
                    f"{source}: column {name!r} (given as {{{key}}}) is also the {roles[0]} column; a covariate "
                    "needs a value column of its own",
                )
            seen[name] = key


def cut_future(
    values: np.ndarray, groups: list[np.ndarray], layout: CovariateLayout, ids: list[str], source: str, row_offset: int
) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """``(history groups, future)``: each series' rows (``groups``, indices into ``values [rows, columns]`` in time
    order, columns as ``layout.features``) without its trailing rows whose targets are all empty, and per series id
    the known covariates of those rows ``[H, len(known)]``. A covariate missing in the history, or a known one
    missing in a trailing row (the forecast past the end reads it), is refused; so is a series with no target
    value."""
    history, future = [], {}
    targets = len(layout.targets)
    for index, name in zip(groups, ids):
        empty = np.isnan(values[index, :targets]).all(1)
        last = len(index) - int(np.argmin(empty[::-1])) if not empty.all() else 0
        if last == 0:
            raise ValueError(f"{source}: series {name!r} has no value of its targets {list(layout.targets)}")
        if last < len(index):
            ahead = values[index[last:], layout.known_slice]
            missing = np.argwhere(~np.isfinite(ahead))
            if len(missing):
                step, col = map(int, missing[0])
                raise SettingError(
                    "covariates",
                    f"{source}: column {layout.known[col]!r} (given as {{covariates}}), row "
                    f"{int(index[last + step]) + row_offset} (series {name!r}): no value after the series' last "
                    "target; a forecast past the end needs every known covariate there (fill it, or remove the row)",
                )
            future[name] = ahead
        _check_history(values[index[:last], targets:], index[:last], layout, name, source, row_offset)
        history.append(index[:last])
    return history, future


def _check_history(covariates: np.ndarray, rows: np.ndarray, layout, name: str, source: str, row_offset: int) -> None:
    """Refuse an empty or non-finite covariate cell among a series' history rows."""
    missing = np.argwhere(~np.isfinite(covariates))
    if len(missing):
        step, col = map(int, missing[0])
        key = "covariates" if col < len(layout.known) else "past_covariates"
        raise SettingError(
            key,
            f"{source}: column {(layout.known + layout.past)[col]!r} (given as {{{key}}}), row "
            f"{int(rows[step]) + row_offset} (series {name!r}): no value; a covariate needs a value at every step "
            "that has a target",
        )


def lead_known(sequences: list[np.ndarray], layout: CovariateLayout, future: dict[str, np.ndarray], ids: list[str]):
    """Each sequence ``[T, D]`` (columns as ``layout.features``) with its known covariates moved one step earlier:
    row ``t`` holds ``c_{t+1}``; the last row the series' first future value (``future``), else its own."""
    if not layout.known:
        return sequences
    cut = layout.known_slice
    led = []
    for sequence, name in zip(sequences, ids):
        sequence = sequence.copy()
        sequence[:-1, cut] = sequence[1:, cut]
        if name in future and len(future[name]):
            sequence[-1, cut] = future[name][0]
        led.append(sequence)
    return led

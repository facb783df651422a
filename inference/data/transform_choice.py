"""Which transform fits a user's series (:func:`choose_transform`: a pooled Gaussian AR(p) per feature judges each
candidate on the validation split, in the data's units) and a configuration's ``transform`` read
(:func:`resolve_transform`: ``"auto"``, ``"none"`` or a spec like ``"log+difference"``)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import torch

from ..validation import SettingError
from .chunking import skewed
from .data_units import DataUnits
from .seasons import detect_season
from .splits import DataSplits
from .transforms import SeriesTransform, binary_splits, flat_features

__all__ = ["choose_transform", "resolve_transform", "AR_ORDER", "TIE_NATS"]

#: the most lags of the pooled AR model that judges the candidates
AR_ORDER = 4
#: candidates within this many nats per scored step of the best tie: the simplest of them is chosen
TIE_NATS = 0.01
#: the noise variance (standard units) below which the judging AR model's is floored
_SMALLEST_VARIANCE = 1e-8


def resolve_transform(
    spec: str,
    splits: DataSplits,
    *,
    season: int | None = None,
    window: int | None = None,
    prefix: str = "",
    logs: bool | None = None,
) -> tuple[DataSplits, dict]:
    """``(splits transformed, record)`` by ``spec``: ``"auto"`` (:func:`choose_transform`), ``"none"`` or a spec
    (:meth:`SeriesTransform.parse`; a seasonal lag from ``season`` or :func:`detect_season`), refused in one line
    naming ``prefix + "transform"`` (or ``"season"``) where it cannot apply. The record holds the transform, the
    season and, for ``"auto"``, the candidates' figures. ``window``: training windows to be cut afterwards (a
    transform must leave each training row that many steps). ``logs``: ``"auto"`` chooses among the candidates
    with log only (``True``), without it only (``False``) or among all (``None``)."""
    name = f"{prefix}transform"
    season = _check_season(season, f"{prefix}season")
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        transform, record, applied = _choose(splits, season, window, logs)
        return applied, record
    found = season if season is not None else _detected(splits)
    transform = SeriesTransform.parse(spec, season=found, name=name)
    refused = transform.refusal_error(splits.levels if splits.levels is not None else splits, window=window)
    if refused is not None:
        raise SettingError(refused.key, f"{name}: {transform.name!r}: {refused.template}")
    return transform.apply(splits), {**transform.to_dict(), "spec": spec, "season": found}


def choose_transform(
    splits: DataSplits, *, season: int | None = None, window: int | None = None
) -> tuple[SeriesTransform, dict]:
    """The transform of ``splits`` (as read) whose pooled Gaussian AR(p) (:data:`AR_ORDER` lags at most, per
    feature, least squares on the transformed standardised training split) gives the highest one-step log density
    per scored validation data step in the data's units, given each row's context; of the candidates within
    :data:`TIE_NATS` of the best, the simplest is chosen (without per-series scales, then with fewer parts, then
    with the shorter lag).

    The candidates: log (positive data) x differencing at lag 0, 1 and the season ``m`` (``season``, else
    :func:`detect_season` on the training split), or a seasonal profile of period ``m`` removed then lag 0 or 1, x
    per-series scaling (scales and profiles where every held-out series has a training part); one whose rows are
    too short for its lag (or for training ``window``), or that leaves a target constant on the training split (a
    linear trend differenced), is left out. With covariates (``splits.train.covariates``) the figure is the targets'
    alone. Binary data: none.
    Returns ``(transform, record)``: the record lists every candidate's figure (``"candidates"``) and why others
    were left out (``"left_out"``)."""
    transform, record, _ = _choose(splits, _check_season(season, "season"), window)
    return transform, record


def _choose(
    splits: DataSplits, season: int | None, window: int | None, logs: bool | None = None
) -> tuple[SeriesTransform, dict, DataSplits]:
    """:func:`choose_transform` among the candidates with log (``logs`` ``True``), without (``False``) or all
    (``None``), with the winner's transformed splits (its data warnings, alone, shown)."""
    base = splits.levels if splits.levels is not None else splits
    found = season if season is not None else _detected(base)
    figures, left_out, fits = {}, {}, []
    candidates = [SeriesTransform()] if binary_splits(base) else _candidates(found)
    for candidate in [c for c in candidates if logs is None or c.log == logs]:
        fit = _fit(candidate, base, window)
        if isinstance(fit, str):
            left_out[candidate.name] = fit
            continue
        figures[candidate.name] = fit[0]
        fits.append((candidate, *fit))
    best = max(figures.values())
    transform, _, order, applied, caught = next(fit for fit in fits if fit[1] >= best - TIE_NATS)  # simplest first
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    record = {
        **transform.to_dict(),
        "spec": "auto",
        "season": found,
        "chosen_by": f"one-step log density per scored validation step (nats, the data's units) of a pooled "
        f"Gaussian AR({order}) per feature fit on the transformed training split",
        "candidates": figures,
        "left_out": left_out,
    }
    return transform, record, applied


def _fit(candidate: SeriesTransform, base: DataSplits, window: int | None) -> str | tuple:
    """``(figure, AR order, transformed splits, the warnings their standardiser gave)`` of ``candidate`` on ``base``
    (:func:`_ar_figure`), or why it is no candidate."""
    reason = candidate.refusal(base, window=window)
    if reason is not None:
        return reason
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        applied = candidate.apply(base)
    reason = None if candidate.identity else _made_constant(applied)
    return reason if reason is not None else (*_ar_figure(applied), applied, caught)


def _made_constant(applied: DataSplits) -> str | None:
    """Why a transform is no candidate for the data: it makes a target that varies on the training split constant
    there (a model of it would have no noise; a covariate made constant, a month's number seasonally differenced
    say, is only an input that says nothing)."""
    targets = applied.train.forecast_columns
    made = flat_features(np.concatenate(applied.train.sequences)[:, :targets]) & ~flat_features(
        np.concatenate(applied.levels.train.sequences)[:, :targets]
    )
    if not made.any():
        return None
    return f"it makes feature {applied.train.features[int(np.argmax(made))]!r} constant on the training split"


def _candidates(season: int | None) -> list[SeriesTransform]:
    """Every combination of log, lag (0, 1, ``season``), a seasonal profile (with lag 0 or 1) and per-series
    scaling, simplest first: without fitted per-series scales, then with fewer parts, then with the shorter lag."""
    seasonal = season not in (None, 1)
    lags = [0, 1] + ([season] if seasonal else [])
    removals = [(0, lag) for lag in lags] + ([(season, 0), (season, 1)] if seasonal else [])
    every = [
        SeriesTransform(log, lag, scale, profile)
        for log, (profile, lag), scale in itertools.product((False, True), removals, (False, True))
    ]
    return sorted(every, key=lambda t: (t.series_scale, t.log + (t.lag > 0) + (t.profile > 0), t.lag))


def _ar_figure(applied: DataSplits) -> tuple[float, int]:
    """``(mean log density per scored validation data step, order p)`` of a pooled Gaussian AR(p) per feature fit on
    ``applied``'s transformed standardised training split (mean 0, so no intercept: a drift the standardiser takes
    from differences is one a model of levels must find), in the data's units, of the targets only (covariates are
    read, not forecast)."""
    rows = applied.train.rows(applied.standardizer, dtype=torch.float64)  # row by row: no padding to the longest
    order = max(1, min(AR_ORDER, min(applied.train.lengths) - 1))
    design = torch.cat([_design(row.unsqueeze(0), order)[0, order:] for row in rows])  # [n, D, p]
    target = torch.cat([row[order:] for row in rows])  # [n, D]
    # gelsd: the default CPU driver (gelsy) is not bit-reproducible from call to call, and the choice must be
    driver = "gelsd" if design.device.type == "cpu" else None
    weights = torch.linalg.lstsq(design.transpose(0, 1), target.T.unsqueeze(-1), driver=driver).solution  # [D, p, 1]
    residuals = target - torch.einsum("ndk,dk->nd", design, weights.squeeze(-1))
    variance = residuals.pow(2).mean(0).clamp(min=_SMALLEST_VARIANCE)
    valid = applied.valid.rows(applied.standardizer, dtype=torch.float64)
    units = applied.transform.units(applied.levels, "valid", applied.standardizer).leading(
        applied.valid.forecast_columns
    )
    scored = applied.valid.scored_mask()
    groups = [[i] for i in range(len(valid))] if skewed(applied.valid.lengths) else [None]  # skewed: row by row
    total = sum(_scored_log_density(valid, index, units, scored, weights.squeeze(-1), variance) for index in groups)
    return total / int(scored.sum()), order


def _scored_log_density(
    rows: list[torch.Tensor],
    index: list[int] | None,
    units: DataUnits,
    scored: torch.Tensor,
    weights: torch.Tensor,
    variance: torch.Tensor,
) -> float:
    """The log density in the data's units (``units``, of the leading features it keeps) of the ``scored [N, T]``
    steps of the standardised ``rows`` ``index`` (``None``: all), padded to their longest, under the AR model of
    ``weights [D, p]`` and noise ``variance [D]``."""
    x = torch.nn.utils.rnn.pad_sequence(rows if index is None else [rows[i] for i in index], batch_first=True)
    mean = torch.einsum("ntdk,dk->ntd", _design(x, weights.shape[-1]), weights)
    targets = units.offset.shape[1]
    log_density = torch.distributions.Normal(mean, variance.sqrt()).log_prob(x)[..., :targets].sum(-1)
    log_density = log_density + units.log_jacobian(index, x.shape[1])
    kept = scored if index is None else scored[index]
    return float(log_density[kept[:, : x.shape[1]]].sum())


def _design(x: torch.Tensor, order: int) -> torch.Tensor:
    """``[N, T, D, order]``: the ``order`` previous values of each step of ``x [N, T, D]`` (0 before a row's
    start)."""
    lags = [torch.nn.functional.pad(x, (0, 0, k, 0))[:, : x.shape[1]] for k in range(1, order + 1)]
    return torch.stack(lags, -1)


def _detected(splits: DataSplits) -> int | None:
    """The season of ``splits``' training split as read (:func:`detect_season`); ``None`` for binary data."""
    base = splits.levels if splits.levels is not None else splits
    return None if binary_splits(base) else detect_season(base.train.sequences)


def _check_season(season, name: str) -> int | None:
    if season is None:
        return None
    if isinstance(season, bool) or not isinstance(season, (int, np.integer)) or season < 2:
        raise SettingError("season", f"{name}: expected an integer >= 2 (steps per cycle), got {season!r}")
    return int(season)

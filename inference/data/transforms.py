"""Transforms that fit real series, chosen on the validation split and undone for every figure in the data's units.

A :class:`SeriesTransform` applies, in this order, to every row of a
:class:`~ppl_models.inference.data.datasets.DataSplits` (:meth:`SeriesTransform.apply`):

* ``log``: ``y = log x`` (every value of every feature positive);
* differencing at lag ``L`` (1: first differences; ``m``: seasonal): ``w[t'] = y[t' + L] - y[t']``. A row loses its
  first ``L`` steps: position ``t'`` of a transformed row is data step ``t' + L``; a held-out row's context becomes
  ``max(context - L, 0)``, so its first scored data step is ``max(context, L)``;
* per-series scaling: each row centred and scaled by its series' training part (after log and differencing), where
  every held-out row's series has one (a split by time or by a column);

then the global :class:`~ppl_models.inference.data.standardize.Standardizer`, fit on the transformed training
split. :class:`DataUnits` maps a held-out split back, row by row: a model's value ``z`` at position ``t'`` of row
``r`` is ``u = offset_r + scale_r z``, then ``y = u + level`` (the observed level ``L`` steps earlier) and
``x = exp(y)`` with log; its log density in the data's units is that of ``z`` less ``sum_d log scale_{r,d}`` and,
with log, ``sum_d log x_{t,d}``.

:func:`choose_transform` fits a pooled Gaussian AR(p) per feature (least squares on the transformed, standardised
training split) under each applicable candidate and keeps the one whose one-step log density per scored validation
data step, in the data's units, is highest (the simplest of those within :data:`TIE_NATS` of it).
:func:`resolve_transform` reads a configuration's ``transform`` (``"auto"``, ``"none"`` or a spec like
``"log+difference"``).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from .datasets import SPLITS, DataSplits, SequenceDataset, skewed
from .standardize import Standardizer

__all__ = [
    "SeriesTransform",
    "DataUnits",
    "choose_transform",
    "resolve_transform",
    "detect_season",
    "AR_ORDER",
    "TIE_NATS",
    "SEASON_THRESHOLD",
    "LONGEST_SEASON",
]

#: the most lags of the pooled AR model that judges the candidates
AR_ORDER = 4
#: a detected season is kept only where the autocorrelation of first differences at its lag exceeds this
SEASON_THRESHOLD = 0.3
#: the longest season looked for
LONGEST_SEASON = 400
#: the parts of a transform spec, joined by ``+`` (``seasonal-difference-12`` names its lag)
PARTS = ("log", "difference", "seasonal-difference", "series-scale")
#: candidates within this many nats per scored step of the best tie: the simplest of them is chosen
TIE_NATS = 0.01
#: the noise variance (standard units) below which the judging AR model's is floored
_SMALLEST_VARIANCE = 1e-8


@dataclass(frozen=True)
class SeriesTransform:
    """``log``, differencing at ``lag`` (0: none) and ``series_scale`` (per-series scaling), applied in that order."""

    log: bool = False
    lag: int = 0
    series_scale: bool = False

    @property
    def identity(self) -> bool:
        return not (self.log or self.lag or self.series_scale)

    @property
    def name(self) -> str:
        """``"none"`` or the parts joined by ``+``: ``log``, ``difference`` (lag 1) or ``seasonal-difference-<m>``,
        ``series-scale``."""
        parts = ["log"] if self.log else []
        if self.lag:
            parts.append("difference" if self.lag == 1 else f"seasonal-difference-{self.lag}")
        if self.series_scale:
            parts.append("series-scale")
        return "+".join(parts) or "none"

    @classmethod
    def parse(cls, spec: str, *, season: int | None = None, name: str = "transform") -> SeriesTransform:
        """The transform ``spec`` names: ``"none"`` or parts of :data:`PARTS` joined by ``+``;
        ``"seasonal-difference"`` takes its lag from ``season`` (``"seasonal-difference-12"`` names it)."""
        if not isinstance(spec, str):
            raise TypeError(f"{name}: expected a str like 'log+difference', got {type(spec).__name__}")
        if spec.strip().lower() == "none":
            return cls()
        parts = [part.strip().lower() for part in spec.split("+")]
        options, lags = {"log": False, "series_scale": False}, []
        for part in parts:
            if part in ("log", "series-scale"):
                options[part.replace("-", "_")] = True
            elif part == "difference":
                lags.append(1)
            elif part.startswith("seasonal-difference"):
                lags.append(_seasonal_lag(part, season, name))
            else:
                raise ValueError(
                    f"{name}: unknown part {part!r} in {spec!r}; expected 'auto', 'none' or parts of "
                    f"{list(PARTS)} joined by '+'"
                )
        if len(lags) > 1 or len(set(parts)) < len(parts):
            raise ValueError(f"{name}: {spec!r} names a part twice (one log, one lag of differencing, one scaling)")
        return cls(log=options["log"], lag=lags[0] if lags else 0, series_scale=options["series_scale"])

    def refusal(self, splits: DataSplits, *, window: int | None = None) -> str | None:
        """Why this transform cannot apply to ``splits`` (as read), in one line; ``None`` where it can. ``window``:
        the training windows to cut from the transformed training split (each row must keep that many steps)."""
        if self.identity:
            return None
        if _binary(splits):
            return "binary (0/1) data is modelled as it is"
        reasons = (
            _non_positive(splits) if self.log else None,
            _too_short(splits, self.lag, window),
            _untrained(splits) if self.series_scale else None,
        )
        return next((reason for reason in reasons if reason is not None), None)

    def apply(self, splits: DataSplits) -> DataSplits:
        """``splits`` (as read; a transformed one is taken back to its :attr:`~DataSplits.levels`) transformed, with
        the global standardizer refit on the transformed training split; ``ValueError`` where it cannot apply."""
        base = splits.levels if splits.levels is not None else splits
        reason = self.refusal(base)
        if reason is not None:
            raise ValueError(f"transform {self.name!r}: {reason}")
        if self.identity:
            return dataclasses.replace(base, transform=self, levels=base)
        stats = self._series_stats(base.train)
        train, valid, test = (self._part(part, stats) for part in base)
        standardizer = Standardizer.fit(train.sequences, train.features, binary=False, source=train.source)
        return DataSplits(
            train, valid, test, base.how, standardizer, base.target_standardizer, transform=self, levels=base
        )

    def units(self, levels: DataSplits, split: str, standardizer: Standardizer) -> DataUnits:
        """The :class:`DataUnits` of ``split`` (``"valid"`` or ``"test"``) of ``levels`` (the splits as read) under
        this transform and the global ``standardizer``."""
        part = dict(zip(SPLITS, levels))[split]
        centre, spread = np.zeros((len(part), part.obs_dim)), np.ones((len(part), part.obs_dim))
        if self.series_scale:
            stats = self._series_stats(levels.train)
            centre, spread = (np.stack([stats[origin][k] for origin in part.origins]) for k in (0, 1))
        mean, scale = np.asarray(standardizer.mean), np.asarray(standardizer.scale)
        data, mask = part.padded(dtype=torch.float64)
        return DataUnits(
            torch.as_tensor(centre + spread * mean),
            torch.as_tensor(spread * scale),
            torch.where(mask.unsqueeze(-1), data, torch.ones((), dtype=torch.float64)),
            torch.tensor(part.lengths),
            log=self.log,
            lag=self.lag,
            features=list(part.features),
        )

    def to_dict(self) -> dict:
        return {"name": self.name, "log": self.log, "lag": self.lag, "series_scale": self.series_scale}

    # --- the maps -------------------------------------------------------------------------
    def _forward(self, values: np.ndarray) -> np.ndarray:
        """One row ``[T, D]`` logged and differenced: ``[T - lag, D]``."""
        values = np.log(values) if self.log else values
        return values[self.lag :] - values[: -self.lag] if self.lag else values

    def _series_stats(self, train: SequenceDataset) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``{series: (mean [D], scale [D])}`` of each series' logged, differenced training steps (scale 1 for a
        constant feature; ``{}`` without per-series scaling)."""
        if not self.series_scale:
            return {}
        pooled = {}
        for origin, values in zip(train.origins, train.sequences):
            pooled.setdefault(origin, []).append(self._forward(values))
        stats = {}
        for origin, rows in pooled.items():
            values = np.concatenate(rows)
            stats[origin] = values.mean(0), np.where(_flat(values), 1.0, values.std(0))
        return stats

    def _part(self, part: SequenceDataset, stats: dict) -> SequenceDataset:
        """A split's rows transformed (context and targets cut by the lag), before the global standardiser."""
        rows = [self._forward(values) for values in part.sequences]
        if self.series_scale:
            rows = [(row - stats[origin][0]) / stats[origin][1] for row, origin in zip(rows, part.origins)]
        context = [max(c - self.lag, 0) for c in part.context] if part.context is not None else None
        return SequenceDataset(
            rows,
            ids=part.ids,
            features=part.features,
            targets=[t[self.lag :] for t in part.targets] if part.targets else None,
            target_names=part.target_names,
            context=context if context and any(context) else None,
            origin=part.origins,
            source=part.source,
        )


@dataclass
class DataUnits:
    """The way back from a transformed held-out split's standard units to the data's own, row by row.

    ``offset``, ``scale`` ``[N, D]``: ``u = offset + scale z`` undoes the global standardiser and the per-series
    scaling; ``data`` ``[N, T, D]``: the rows as read (float64, 1 after each row's end), ``lengths`` ``[N]`` their
    steps; ``log``: ``u`` is in log space; ``lag``: the differencing lag ``L`` (position ``t'`` of a transformed row
    is data step ``t' + L``). Methods take the rows ``index`` ``[b]`` a batch holds (default: every row).
    """

    offset: torch.Tensor
    scale: torch.Tensor
    data: torch.Tensor
    lengths: torch.Tensor
    log: bool = False
    lag: int = 0
    features: list[str] = field(default_factory=list)

    @property
    def positions(self) -> int:
        """The transformed rows' longest length: ``T - lag``."""
        return self.data.shape[1] - self.lag

    @property
    def observed(self) -> torch.Tensor:
        """``[N, T - L, D]``: the data as read at each transformed position (data step ``t' + L``)."""
        return self.data[:, self.lag :]

    @property
    def levels(self) -> torch.Tensor:
        """``[N, T - L, D]``: the level (log space with log) ``L`` steps before each position; zeros for ``L = 0``."""
        return self._levels(slice(None), slice(0, self.positions)) if self.lag else torch.zeros_like(self.observed)

    def check(self, like: torch.Tensor) -> None:
        """Raise ``ValueError`` unless ``like [N, T', D]`` (the transformed data) fits these rows."""
        rows, features = self.offset.shape
        if like.dim() != 3 or list(like.shape) != [rows, self.positions, features]:
            raise ValueError(
                f"standardizer: DataUnits of {rows} rows of {self.positions} steps and {features} "
                f"features (another split's?) for data of shape {list(like.shape)}"
            )

    def values(self, z: torch.Tensor, index: torch.Tensor | None = None, start: int = 0) -> torch.Tensor:
        """One-step values ``z [..., b, H, D]`` of positions ``start ..`` of rows ``index``, in the data's units
        (float64): each from the observed level ``L`` steps before it."""
        index = self._rows(index)
        u = self._affine(z, index)
        if self.lag:
            u = u + self._levels(index, slice(start, start + z.shape[-2]))
        return u.exp() if self.log else u

    def observed_at(self, index: torch.Tensor | None = None, steps: int | None = None, start: int = 0) -> torch.Tensor:
        """``[b, steps, D]``: the data as read at positions ``start ..`` of rows ``index`` (default: to the end)."""
        index = self._rows(index)
        stop = self.positions if steps is None else start + steps
        return self.observed[index, start:stop]

    def log_jacobian(self, index: torch.Tensor | None = None, steps: int | None = None) -> torch.Tensor:
        """``[b, steps]``: ``log |dz / dx_t|`` at each position of rows ``index``: ``- sum_d log scale_d`` and, with
        log, ``- sum_d log x_{t,d}`` (0 after a row's end)."""
        index = self._rows(index)
        steps = self.positions if steps is None else steps
        jacobian = -self.scale[index].log().sum(-1, keepdim=True).expand(len(index), steps)
        if self.log:
            jacobian = jacobian - self.observed_at(index, steps).log().sum(-1)
        return jacobian

    def forecast(self, z: torch.Tensor, index: torch.Tensor | None = None, start=None) -> torch.Tensor:
        """Forecast draws ``z [S, b, H, D]`` of the positions after each row's first ``start`` (an int or ``[b]``;
        default: the row's end) in the data's units (float64): each difference added to the observed or forecast
        level ``L`` steps before, then ``exp`` with log."""
        index = self._rows(index)
        u = self._affine(z, index)
        ends = self.lengths[index] - self.lag
        start = ends if start is None else torch.as_tensor(start).expand(len(index))
        if bool((start > ends).any()) or bool((start < 0).any()):
            raise ValueError(f"start: each row's forecast starts within its {ends.tolist()} transformed steps")
        if self.lag:
            levels = torch.empty_like(u)
            for h in range(u.shape[-2]):
                before = self._levels(index, start + h) if h < self.lag else levels[..., h - self.lag, :]
                levels[..., h, :] = u[..., h, :] + before
            u = levels
        return u.exp() if self.log else u

    def _rows(self, index) -> torch.Tensor:
        return torch.arange(self.offset.shape[0]) if index is None else torch.as_tensor(index).cpu()

    def _affine(self, z: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``offset + scale z`` of rows ``index``, ``z [..., b, H, D]`` (float64, on the CPU)."""
        return self.offset[index].unsqueeze(-2) + self.scale[index].unsqueeze(-2) * z.detach().double().cpu()

    def _levels(self, rows, steps) -> torch.Tensor:
        """The data as read at ``data[rows, steps]``, in log space with log (only those entries taken)."""
        data = self.data[rows, steps]
        return data.log() if self.log else data


def detect_season(
    sequences: list[np.ndarray], *, threshold: float = SEASON_THRESHOLD, longest: int = LONGEST_SEASON
) -> int | None:
    """The lag in ``2 .. min(T / 2, longest)`` (``T``: the longest sequence) with the largest autocorrelation of first
    differences, pooled over the ``sequences [T_i, D]`` and averaged over features; ``None`` unless it exceeds
    ``threshold``."""
    top = min(max(len(s) for s in sequences) // 2, longest)
    if top < 2:
        return None
    covariance = np.zeros((top + 1, sequences[0].shape[1]))
    for values in sequences:
        centred = np.diff(values, axis=0)
        centred = centred - centred.mean(0)
        n = len(centred)
        spectrum = np.fft.rfft(centred, n=2 * n, axis=0)
        lags = min(n, top + 1)
        covariance[:lags] += np.fft.irfft(spectrum * spectrum.conj(), n=2 * n, axis=0)[:lags]
    varying = covariance[0] > 0
    if not varying.any():
        return None
    correlation = (covariance[:, varying] / covariance[0, varying]).mean(1)
    lag = fundamental_lag(correlation[2:]) + 2
    return lag if correlation[lag] > threshold else None


#: a divisor of the best lag whose autocorrelation is within this share of the best is the season (the best lag is
#: one of its multiples)
SEASON_PEAK_SHARE = 0.9


def fundamental_lag(autocorrelation: np.ndarray, first: int = 2) -> int:
    """The index of the season in ``autocorrelation [lags]`` (entry ``i`` for lag ``first + i``): the lag with the
    largest value, or the shortest ``1/j`` of it (``j <= 6``, to a step) whose value is within
    :data:`SEASON_PEAK_SHARE` of it: a yearly season of weekly data correlates about as much at 52, 104 and 156
    weeks, and 52 is its period."""
    best = int(autocorrelation.argmax())
    lag, top = best + first, float(autocorrelation[best])
    for parts in range(6, 1, -1):
        near = [d - first for d in range(round(lag / parts) - 1, round(lag / parts) + 2) if d >= first]
        if near and top > 0 and max(autocorrelation[i] for i in near) >= SEASON_PEAK_SHARE * top:
            return max(near, key=lambda i: autocorrelation[i])
    return best


def resolve_transform(
    spec: str, splits: DataSplits, *, season: int | None = None, window: int | None = None, prefix: str = ""
) -> tuple[DataSplits, dict]:
    """``(splits transformed, record)`` by ``spec``: ``"auto"`` (:func:`choose_transform`), ``"none"`` or a spec
    (:meth:`SeriesTransform.parse`; a seasonal lag from ``season`` or :func:`detect_season`), refused in one line
    naming ``prefix + "transform"`` (or ``"season"``) where it cannot apply. The record holds the transform, the
    season and, for ``"auto"``, the candidates' figures. ``window``: training windows to be cut afterwards (a
    transform must leave each training row that many steps)."""
    name = f"{prefix}transform"
    season = _check_season(season, f"{prefix}season")
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        transform, record, applied = _choose(splits, season, window)
        return applied, record
    found = season if season is not None else _detected(splits)
    transform = SeriesTransform.parse(spec, season=found, name=name)
    reason = transform.refusal(splits.levels if splits.levels is not None else splits, window=window)
    if reason is not None:
        raise ValueError(f"{name}: {transform.name!r}: {reason}")
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
    :func:`detect_season` on the training split) x per-series scaling (where every held-out series has a training
    part); one whose rows are too short for its lag (or for training ``window``), or that leaves a feature constant
    on the training split (a linear trend differenced), is left out. Binary data: none.
    Returns ``(transform, record)``: the record lists every candidate's figure (``"candidates"``) and why others
    were left out (``"left_out"``)."""
    transform, record, _ = _choose(splits, _check_season(season, "season"), window)
    return transform, record


def _choose(splits: DataSplits, season: int | None, window: int | None) -> tuple[SeriesTransform, dict, DataSplits]:
    """:func:`choose_transform`, with the winner's transformed splits (its data warnings, alone, shown)."""
    base = splits.levels if splits.levels is not None else splits
    found = season if season is not None else _detected(base)
    figures, left_out, fits = {}, {}, []
    for candidate in [SeriesTransform()] if _binary(base) else _candidates(found):
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
    """Why a transform is no candidate for the data: it makes a feature that varies on the training split constant
    there (a model of it would have no noise)."""
    made = _flat(np.concatenate(applied.train.sequences)) & ~_flat(np.concatenate(applied.levels.train.sequences))
    if not made.any():
        return None
    return f"it makes feature {applied.train.features[int(np.argmax(made))]!r} constant on the training split"


def _flat(values: np.ndarray) -> np.ndarray:
    """``[D]``: whether each feature of ``values [n, D]`` is constant (no spread beyond float64 rounding)."""
    return ~(values.std(0) > 4 * np.finfo(np.float64).eps * np.abs(values).max(0))


def _candidates(season: int | None) -> list[SeriesTransform]:
    """Every combination of log, lag (0, 1, ``season``) and per-series scaling, simplest first: without fitted
    per-series scales, then with fewer parts, then with the shorter lag."""
    lags = [0, 1] + ([season] if season not in (None, 1) else [])
    every = [
        SeriesTransform(log, lag, scale) for log, lag, scale in itertools.product((False, True), lags, (False, True))
    ]
    return sorted(every, key=lambda t: (t.series_scale, t.log + (t.lag > 0), t.lag))


def _ar_figure(applied: DataSplits) -> tuple[float, int]:
    """``(mean log density per scored validation data step, order p)`` of a pooled Gaussian AR(p) per feature fit on
    ``applied``'s transformed standardised training split (mean 0, so no intercept: a drift the standardiser takes
    from differences is one a model of levels must find), in the data's units."""
    rows = applied.train.rows(applied.standardizer, dtype=torch.float64)  # row by row: no padding to the longest
    order = max(1, min(AR_ORDER, min(applied.train.lengths) - 1))
    design = torch.cat([_design(row.unsqueeze(0), order)[0, order:] for row in rows])  # [n, D, p]
    target = torch.cat([row[order:] for row in rows])  # [n, D]
    weights = torch.linalg.lstsq(design.transpose(0, 1), target.T.unsqueeze(-1)).solution  # [D, p, 1]
    residuals = target - torch.einsum("ndk,dk->nd", design, weights.squeeze(-1))
    variance = residuals.pow(2).mean(0).clamp(min=_SMALLEST_VARIANCE)
    valid = applied.valid.rows(applied.standardizer, dtype=torch.float64)
    units = applied.transform.units(applied.levels, "valid", applied.standardizer)
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
    """The log density in the data's units (``units``) of the ``scored [N, T]`` steps of the standardised ``rows``
    ``index`` (``None``: all), padded to their longest, under the AR model of ``weights [D, p]`` and noise
    ``variance [D]``."""
    x = torch.nn.utils.rnn.pad_sequence(rows if index is None else [rows[i] for i in index], batch_first=True)
    mean = torch.einsum("ntdk,dk->ntd", _design(x, weights.shape[-1]), weights)
    log_density = torch.distributions.Normal(mean, variance.sqrt()).log_prob(x).sum(-1)
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
    return None if _binary(base) else detect_season(base.train.sequences)


def _non_positive(splits: DataSplits) -> str | None:
    """Why log cannot apply: the first feature with a value <= 0 in a split of ``splits``."""
    for split, part in zip(SPLITS, splits):
        for row, values in zip(part.ids, part.sequences):
            bad = np.flatnonzero((values <= 0).any(0))
            if len(bad):
                return (
                    f"feature {part.features[bad[0]]!r} has a non-positive value ({values[:, bad[0]].min():g}) "
                    f"in series {row!r} of the {split} split; log needs values > 0"
                )
    return None


def _too_short(splits: DataSplits, lag: int, window: int | None) -> str | None:
    """Why differencing at ``lag`` cannot apply: a row of ``lag + 1`` steps or fewer, or a training row left shorter
    than ``window``."""
    for split, part in zip(SPLITS, splits):
        for row, steps in zip(part.ids, part.lengths):
            if steps <= lag + 1:
                return f"series {row!r} of the {split} split has {steps} steps: differencing at lag {lag} needs more"
            if split == "train" and window is not None and steps - lag < window:
                return (
                    f"training series {row!r} has {steps} steps, {steps - lag} after differencing at lag {lag}: "
                    f"fewer than window {window}"
                )
    return None


def _untrained(splits: DataSplits) -> str | None:
    """Why per-series scaling cannot apply: a held-out row whose series has no training part."""
    trained = set(splits.train.origins)
    for split, part in list(zip(SPLITS, splits))[1:]:
        for row, origin in zip(part.ids, part.origins):
            if origin not in trained:
                return (
                    f"series {row!r} of the {split} split has no training part: per-series scaling needs each "
                    "held-out series' training steps (split by time, or by a column)"
                )
    return None


def _binary(splits: DataSplits) -> bool:
    """Whether every value of every split is 0 or 1."""
    return all(part.binary for part in splits)


def _seasonal_lag(part: str, season: int | None, name: str) -> int:
    """The lag of a ``seasonal-difference`` part: its own number (``seasonal-difference-12``), else ``season``."""
    match = re.fullmatch(r"seasonal-difference(?:-([0-9]+))?", part)
    if match is None or (match[1] is not None and int(match[1]) < 2):
        raise ValueError(
            f"{name}: {part!r}: expected seasonal-difference-<m> with an integer m >= 2 (or "
            "seasonal-difference, whose lag is the season)"
        )
    if match[1] is not None:
        return int(match[1])
    if season is None:
        raise ValueError(
            f"{name}: 'seasonal-difference' needs a season: none was given (season) and the "
            f"training split shows none (autocorrelation of first differences above "
            f"{SEASON_THRESHOLD})"
        )
    return season


def _check_season(season, name: str) -> int | None:
    if season is None:
        return None
    if isinstance(season, bool) or not isinstance(season, (int, np.integer)) or season < 2:
        raise ValueError(f"{name}: expected an integer >= 2 (steps per cycle), got {season!r}")
    return int(season)

"""Transforms that fit real series, chosen on the validation split and undone for every figure in the data's units.

A :class:`SeriesTransform` applies, in this order, to every row of a
:class:`~ppl_models.inference.data.datasets.DataSplits` (:meth:`SeriesTransform.apply`):

* ``log``: ``y = log x`` of the forecast columns (every value positive; covariates, which follow them, are kept);
* a seasonal profile of period ``m`` removed: ``y[t] - p_s[t mod m]``, where ``p_s`` is series ``s``'s seasonal index
  on its training steps by classical decomposition (:func:`seasonal_index`; steps counted from the series' first) of
  each target, and 0 for the covariates (their own seasonal pattern, a month's dummy say, is what a model reads);
* differencing at lag ``L`` (1: first differences; ``m``: seasonal): ``w[t'] = y[t' + L] - y[t']``. A row loses its
  first ``L`` steps: position ``t'`` of a transformed row is data step ``t' + L``; a held-out row's context becomes
  ``max(context - L, 0)``, so its first scored data step is ``max(context, L)``;
* per-series scaling: each row centred and scaled by its series' training part (after log and differencing), where
  every held-out row's series has one (a split by time or by a column);

then the global :class:`~ppl_models.inference.data.standardize.Standardizer`, fit on the transformed training
split. :class:`~ppl_models.inference.data.data_units.DataUnits` maps a held-out split back, row by row: a model's
value ``z`` at position ``t'`` of row ``r`` is ``u = offset_r + scale_r z``, then ``y = u + level`` (the observed
level ``L`` steps earlier, less its profile) plus the position's profile, and ``x = exp(y)`` with log; its log
density in the data's units is that of ``z`` less ``sum_d log scale_{r,d}`` and, with log, ``sum_d log x_{t,d}``.

Which transform fits is chosen in :mod:`ppl_models.inference.data.transform_choice`; the season of a seasonal
difference is found in :mod:`ppl_models.inference.data.seasons` (:func:`detect_season`, importable from here too).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np
import torch

from ..validation import SettingError
from .data_units import DataUnits
from .datasets import SequenceDataset
from .seasons import SEASON_THRESHOLD, detect_season, fundamental_lag
from .splits import SPLITS, DataSplits
from .standardize import Standardizer

__all__ = [
    "SeriesTransform",
    "DataUnits",
    "PARTS",
    "detect_season",
    "fundamental_lag",
    "flat_features",
    "seasonal_index",
]

#: the parts of a transform spec, joined by ``+`` (``seasonal-difference-12`` names its lag)
PARTS = ("log", "seasonal-profile", "difference", "seasonal-difference", "series-scale")


@dataclass(frozen=True)
class SeriesTransform:
    """``log``, a seasonal profile of period ``profile`` removed (0: none), differencing at ``lag`` (0: none) and
    ``series_scale`` (per-series scaling), applied in that order."""

    log: bool = False
    lag: int = 0
    series_scale: bool = False
    profile: int = 0

    @property
    def identity(self) -> bool:
        return not (self.log or self.lag or self.series_scale or self.profile)

    @property
    def name(self) -> str:
        """``"none"`` or the parts joined by ``+``: ``log``, ``seasonal-profile-<m>``, ``difference`` (lag 1) or
        ``seasonal-difference-<m>``, ``series-scale``."""
        parts = ["log"] if self.log else []
        if self.profile:
            parts.append(f"seasonal-profile-{self.profile}")
        if self.lag:
            parts.append("difference" if self.lag == 1 else f"seasonal-difference-{self.lag}")
        if self.series_scale:
            parts.append("series-scale")
        return "+".join(parts) or "none"

    @classmethod
    def parse(cls, spec: str, *, season: int | None = None, name: str = "transform") -> SeriesTransform:
        """The transform ``spec`` names: ``"none"`` or parts of :data:`PARTS` joined by ``+``;
        ``"seasonal-difference"`` and ``"seasonal-profile"`` take their period from ``season``
        (``"seasonal-difference-12"`` names it)."""
        if not isinstance(spec, str):
            raise TypeError(f"{name}: expected a str like 'log+difference', got {type(spec).__name__}")
        if spec.strip().lower() == "none":
            return cls()
        parts = [part.strip().lower() for part in spec.split("+")]
        options, lags, profiles = {"log": False, "series_scale": False}, [], []
        for part in parts:
            if part in ("log", "series-scale"):
                options[part.replace("-", "_")] = True
            elif part == "difference":
                lags.append(1)
            elif part.startswith("seasonal-difference"):
                lags.append(_seasonal_lag(part, season, name))
            elif part.startswith("seasonal-profile"):
                profiles.append(_seasonal_lag(part, season, name))
            else:
                raise SettingError(
                    "transform",
                    f"{name}: unknown part {part!r} in {spec!r}; expected 'auto', 'none' or parts of "
                    f"{list(PARTS)} joined by '+'",
                )
        if len(lags) > 1 or len(profiles) > 1 or len(set(parts)) < len(parts):
            raise SettingError(
                "transform",
                f"{name}: {spec!r} names a part twice (one log, one profile, one lag of differencing, one scaling)",
            )
        if profiles and lags and lags[0] > 1:
            raise SettingError(
                "transform",
                f"{name}: {spec!r}: a seasonal difference already removes a seasonal profile; use one of them",
            )
        return cls(
            log=options["log"],
            lag=lags[0] if lags else 0,
            series_scale=options["series_scale"],
            profile=profiles[0] if profiles else 0,
        )

    def refusal(self, splits: DataSplits, *, window: int | None = None) -> str | None:
        """Why this transform cannot apply to ``splits`` (as read), in one line; ``None`` where it can. ``window``:
        the training windows to cut from the transformed training split (each row must keep that many steps)."""
        error = self.refusal_error(splits, window=window)
        return None if error is None else str(error)

    def refusal_error(self, splits: DataSplits, *, window: int | None = None) -> SettingError | None:
        """:meth:`refusal` as a :class:`~ppl_models.inference.validation.SettingError` (key ``window`` where the
        training windows are too long for it, else ``transform``), for a caller to add to and raise."""
        if self.identity:
            return None
        if binary_splits(splits):
            return SettingError("transform", "binary (0/1) data is modelled as it is")
        too_short = _too_short(splits, self.lag, window)
        reasons = (
            _non_positive(splits) if self.log else None,
            too_short,
            _untrained(splits) if self.series_scale or self.profile else None,
            _unaligned(splits, self.profile) if self.profile else None,
        )
        reason = next((reason for reason in reasons if reason is not None), None)
        if reason is None:
            return None
        return SettingError("window" if reason is too_short and "{window}" in reason else "transform", reason)

    def apply(self, splits: DataSplits) -> DataSplits:
        """``splits`` (as read; a transformed one is taken back to its :attr:`~DataSplits.levels`) transformed, with
        the global standardizer refit on the transformed training split; ``ValueError`` where it cannot apply."""
        base = splits.levels if splits.levels is not None else splits
        reason = self.refusal(base)
        if reason is not None:
            raise ValueError(f"transform {self.name!r}: {reason}")
        if self.identity:
            return dataclasses.replace(base, transform=self, levels=base)
        profiles = self._profiles(base.train)
        stats = self._series_stats(base.train, profiles)
        train, valid, test = (self._part(part, profiles, stats) for part in base)
        standardizer = Standardizer.fit(train.sequences, train.features, binary=False, source=train.source)
        return DataSplits(
            train, valid, test, base.how, standardizer, base.target_standardizer, transform=self, levels=base
        )

    def units(self, levels: DataSplits, split: str, standardizer: Standardizer) -> DataUnits:
        """The :class:`DataUnits` of ``split`` (``"valid"`` or ``"test"``) of ``levels`` (the splits as read) under
        this transform and the global ``standardizer``."""
        part = dict(zip(SPLITS, levels))[split]
        centre, spread = np.zeros((len(part), part.obs_dim)), np.ones((len(part), part.obs_dim))
        profiles = self._profiles(levels.train)
        if self.series_scale:
            stats = self._series_stats(levels.train, profiles)
            centre, spread = (np.stack([stats[origin][k] for origin in part.origins]) for k in (0, 1))
        profile = torch.as_tensor(np.stack([profiles[origin] for origin in part.origins])) if profiles else None
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
            profile=profile,
            logged=part.forecast_columns,
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "log": self.log,
            "lag": self.lag,
            "series_scale": self.series_scale,
            "profile": self.profile,
        }

    # --- the maps -------------------------------------------------------------------------
    def _logged(self, values: np.ndarray, columns: int) -> np.ndarray:
        """``values [T, D]`` with, under log, its leading ``columns`` (the forecast ones) logged."""
        if not self.log:
            return values
        return np.concatenate([np.log(values[:, :columns]), values[:, columns:]], 1)

    def _forward(self, values: np.ndarray, columns: int, profile: np.ndarray | None = None) -> np.ndarray:
        """One row ``[T, D]`` logged (its leading ``columns``), less its series' seasonal ``profile [m, D]`` (from the
        row's first step), and differenced: ``[T - lag, D]``."""
        values = self._logged(values, columns)
        if profile is not None:
            values = values - profile[np.arange(len(values)) % len(profile)]
        return values[self.lag :] - values[: -self.lag] if self.lag else values

    def _profiles(self, train: SequenceDataset) -> dict[int, np.ndarray]:
        """``{series: profile [m, D]}``: each series' seasonal index on its logged training steps
        (:func:`seasonal_index`; places counted from its training row's first step; ``{}`` without a profile), 0 in
        the columns of covariates (``train.covariates``)."""
        if not self.profile:
            return {}
        targets = train.forecast_columns
        profiles = {}
        for origin, values in zip(train.origins, train.sequences):
            profiles[origin] = seasonal_index(self._logged(values, targets), self.profile)
            profiles[origin][:, targets:] = 0.0
        return profiles

    def _series_stats(
        self, train: SequenceDataset, profiles: dict[int, np.ndarray]
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``{series: (mean [D], scale [D])}`` of each series' transformed training steps before scaling (scale 1 for
        a constant feature; ``{}`` without per-series scaling)."""
        if not self.series_scale:
            return {}
        pooled = {}
        for origin, values in zip(train.origins, train.sequences):
            pooled.setdefault(origin, []).append(self._forward(values, train.forecast_columns, profiles.get(origin)))
        stats = {}
        for origin, rows in pooled.items():
            values = np.concatenate(rows)
            stats[origin] = values.mean(0), np.where(flat_features(values), 1.0, values.std(0))
        return stats

    def _part(self, part: SequenceDataset, profiles: dict, stats: dict) -> SequenceDataset:
        """A split's rows transformed (context and targets cut by the lag), before the global standardiser."""
        columns = part.forecast_columns
        rows = [
            self._forward(values, columns, profiles.get(origin)) for values, origin in zip(part.sequences, part.origins)
        ]
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
            covariates=part.covariates,
            source=part.source,
        )


def _non_positive(splits: DataSplits) -> str | None:
    """Why log cannot apply: the first forecast feature (covariates are not logged) with a value <= 0 in a split of
    ``splits``."""
    for split, part in zip(SPLITS, splits):
        for row, values in zip(part.ids, part.sequences):
            bad = np.flatnonzero((values[:, : part.forecast_columns] <= 0).any(0))
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
                    f"fewer than {{window}} {window}"
                )
    return None


def _untrained(splits: DataSplits) -> str | None:
    """Why per-series scaling or a profile cannot apply: a held-out row whose series has no training part."""
    trained = set(splits.train.origins)
    for split, part in list(zip(SPLITS, splits))[1:]:
        for row, origin in zip(part.ids, part.origins):
            if origin not in trained:
                return (
                    f"series {row!r} of the {split} split has no training part: per-series scaling and seasonal "
                    "profiles need each held-out series' training steps (split by time, or by a column)"
                )
    return None


def _unaligned(splits: DataSplits, period: int) -> str | None:
    """Why a seasonal profile of ``period`` cannot apply: a series with more than one training row, a training row
    shorter than two periods, or a held-out row that does not start with its series' training row (each step's
    place in the season is counted from the series' first step)."""
    train = splits.train
    first = {}
    for row, origin, values in zip(train.ids, train.origins, train.sequences):
        if origin in first:
            return (
                f"series {row!r} has more than one training row: a seasonal profile counts each step's place in "
                "the season from the series' first step (training windows are cut afterwards)"
            )
        if len(values) < 2 * period:
            return f"training series {row!r} has {len(values)} steps: a seasonal profile of {period} needs two cycles"
        first[origin] = values
    for split, part in list(zip(SPLITS, splits))[1:]:
        for row, origin, values in zip(part.ids, part.origins, part.sequences):
            if origin not in first:
                continue  # no training part: :func:`_untrained` says so
            head = first[origin][: len(values)]
            if not np.array_equal(values[: len(head)], head, equal_nan=True):
                return (
                    f"series {row!r} of the {split} split does not start at its series' first step: a seasonal "
                    "profile counts each step's place in the season from there"
                )
    return None


def binary_splits(splits: DataSplits) -> bool:
    """Whether every value of every split is 0 or 1."""
    return all(part.binary for part in splits)


def _seasonal_lag(part: str, season: int | None, name: str) -> int:
    """The period of a ``seasonal-difference`` or ``seasonal-profile`` part: its own number
    (``seasonal-difference-12``), else ``season``."""
    kind = "seasonal-profile" if part.startswith("seasonal-profile") else "seasonal-difference"
    match = re.fullmatch(rf"{kind}(?:-([0-9]+))?", part)
    if match is None or (match[1] is not None and int(match[1]) < 2):
        raise SettingError(
            "transform",
            f"{name}: {part!r}: expected {kind}-<m> with an integer m >= 2 (or {kind}, whose period is the season)",
        )
    if match[1] is not None:
        return int(match[1])
    if season is None:
        raise SettingError(
            "season",
            f"{name}: {kind!r} needs a season: none was given ({{season}}) and the "
            f"training split shows none (autocorrelation of first differences above "
            f"{SEASON_THRESHOLD})",
        )
    return season


def seasonal_index(values: np.ndarray, period: int) -> np.ndarray:
    """``[period, D]``: the seasonal index of ``values [T, D]`` (``T >= 2 period``) by classical decomposition: the
    trend is the centred moving average over one period (weights ``1/m``, or ``1/2m`` at both ends of ``m + 1``
    steps for an even ``m``), and the index at place ``k`` is the mean of the values less the trend at steps
    ``t = k mod m``, centred to sum to 0 over the period. A trend shifts no place against another, as the plain mean
    of each place's steps would where the row ends partway through a period."""
    width = period + 1 - period % 2
    weights = np.full(width, 1.0 / period)
    if period % 2 == 0:
        weights[[0, -1]] = 0.5 / period
    windows = np.lib.stride_tricks.sliding_window_view(values, width, axis=0)  # [T - width + 1, D, width]
    trend = windows @ weights
    first = width // 2
    detrended = values[first : first + len(trend)] - trend
    places = (first + np.arange(len(trend))) % period
    index = np.stack([detrended[places == k].mean(0) for k in range(period)])
    return index - index.mean(0)


def flat_features(values: np.ndarray) -> np.ndarray:
    """``[D]``: whether each feature of ``values [n, D]`` is constant (no spread beyond float64 rounding)."""
    return ~(values.std(0) > 4 * np.finfo(np.float64).eps * np.abs(values).max(0))

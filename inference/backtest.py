"""A rolling-origin, multi-step backtest: forecasts of ``H`` steps made from many origins of each series, each
conditioned on the history before it, judged per step ahead in the data's units.

At an origin ``o`` of a row, the forecaster sees the row's steps ``< o`` (a prefix: the mask is cut there, and the
later values are zeroed) and draws the ``H`` steps ``o .. o + H - 1``; its targets are those steps up to the first
that is not scored (a horizon running past the row's end, or its scored steps, is cut there). Each row gets up to
``origins`` origins, evenly spaced over its scored steps that follow at least one step of history, from the first
to the last (a row with fewer such steps gets one origin per step: ``origins_possible``). All rows' ``i``-th
origins go to the forecaster in one call. No forecast has a target more than :func:`longest_reach` steps ahead (the
longest run of scored steps after step 0); a horizon beyond it, or past every origin's run, gets no figure.

The figures of real-valued data, per step ahead ``h = 1 .. H``, are pooled over rows, origins and features, in the
data's units:

* ``crps``: the continuous ranked probability score of the draws
  (:func:`ppl_models.inference.calibration.crps`);
* ``coverage_50``, ``coverage_80``, ``coverage_95``: the share of targets inside the draws' central interval of
  that level (:func:`ppl_models.inference.calibration.coverage`);
* ``mse``: the squared error of the draws' mean;
* ``mase``: the absolute error of the draws' median over the row's in-sample scale, the mean absolute
  ``season``-lag difference ``|x_t - x_{t - season}|`` of its history before the origin, per feature. A history
  of at most ``season`` steps has no such difference and a constant one has a scale of 0: those forecasts (per
  feature) are left out of MASE and counted (``mase_left_out``).

Binary (0/1) data gets the figures of a probability instead, per step ahead, from
:func:`ppl_models.inference.evaluation.binary_calibration` (the one-step evaluation's): each forecast's probability of
a 1 is the share of its draws that are 1; ``brier`` (the Brier score), ``ece`` (the expected calibration error over
10 bins), ``mean_probability`` and ``frequency_of_ones``. Interval coverage, CRPS (the Brier score again, for 0/1
draws) and MASE say little of 0/1 values and are not computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .calibration import coverage, crps
from .data import DataUnits
from .evaluation.figures import binary_calibration
from .validation import InputTypeError, check_memory, check_positive_int, check_sequences

__all__ = ["LEVELS", "Backtest", "backtest", "origin_steps", "longest_reach"]

#: the levels of the central intervals whose coverage a backtest reports
LEVELS = (0.5, 0.8, 0.95)
#: the arguments of ``forecast`` that the backtest itself gives
_RESERVED = ("x", "mask", "horizon", "num_samples", "generator")


@dataclass
class Backtest:
    """What a backtest found.

    Attributes:
        per_horizon: ``{name: [H values]}``, entry ``h - 1`` for ``h`` steps ahead: ``h``, ``targets`` (the
            forecast steps judged there, each of ``D`` values), then for real-valued data ``crps``, ``coverage_50``,
            ``coverage_80``, ``coverage_95``, ``mse``, ``mase`` and ``mase_targets`` (the values, steps times
            features, that MASE judged), for binary data ``brier``, ``ece``, ``mean_probability`` and
            ``frequency_of_ones``; ``None`` where nothing was judged.
        origins_used: ``[N]`` origins per row: ``min(origins, origins_possible)``.
        origins_possible: ``[N]`` the scored steps of each row after step 0, each of which can be an origin.
        forecasts: forecasts made, the sum of ``origins_used``.
        mase_left_out: forecasts times features left out of MASE (a history without a ``season``-lag difference,
            or constant at that lag); ``None`` for binary data.
        binary: whether the data was judged as binary (0/1).
        horizon, origins, season, num_samples: the settings.
    """

    per_horizon: dict[str, list]
    origins_used: list[int]
    origins_possible: list[int]
    forecasts: int
    mase_left_out: int | None
    binary: bool
    horizon: int
    origins: int
    season: int
    num_samples: int

    def to_dict(self) -> dict:
        """The result as plain JSON-ready values."""
        return asdict(self)


@torch.no_grad()
def backtest(
    forecaster,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    scored: torch.Tensor | None = None,
    *,
    horizon: int,
    origins: int,
    num_samples: int = 200,
    standardizer=None,
    season: int = 1,
    generator: torch.Generator | None = None,
    forecast_kwargs: Mapping | None = None,
    binary: bool | None = None,
) -> Backtest:
    """Backtest ``forecaster`` on ``x [N, T, D]`` from up to ``origins`` origins per row, ``horizon`` steps ahead.

    Args:
        forecaster: anything with ``forecast(x, mask, horizon, num_samples, generator=...) -> [S, B, H, D]``,
            joint draws of the ``H`` steps after each row's last valid step (a
            :class:`~ppl_models.inference.protocol.SequenceModel`, a classical forecaster).
        x, mask: the series ``[N, T, D]`` in the forecaster's units and ``[N, T]`` (valid steps first).
        scored: ``[N, T]`` the steps that may be forecast, a subset of ``mask`` (a held-out segment; the steps
            before it are history only); ``None``: every valid step but the first.
        horizon, origins, num_samples: ``H``, origins per row, draws per forecast (``>= 2``).
        standardizer: maps ``x`` and the draws back to the data's units (its ``inverse``, in float64), or ``None``;
            for transformed data (log, differencing, per-series scaling) the
            :class:`~ppl_models.inference.data.DataUnits` of ``x``'s rows (differences integrated from the level
            before each origin; targets and MASE's history as read).
        season: the lag of MASE's in-sample differences (1: the naive forecast's errors).
        generator: the forecaster's source of randomness.
        forecast_kwargs: more keyword arguments of ``forecast`` (``num_particles``).
        binary: judge the draws as probabilities of 0/1 values (Brier score, calibration error; the draws must be 0
            or 1); default: every valid value of ``x`` is 0 or 1.

    Returns:
        A :class:`Backtest`; see the module docstring for its figures.
    """
    x, mask, scored = _check_data(x, mask, scored)
    binary = _check_binary(binary, x, mask)
    forecast = _check_forecaster(forecaster, forecast_kwargs, generator)
    horizon = check_positive_int(horizon, name="horizon")
    num_samples = check_positive_int(num_samples, name="num_samples", minimum=2)
    season = check_positive_int(season, name="season")
    _check_standardizer(standardizer, x)
    _check_draw_memory(num_samples, x.shape[0], horizon, x.shape[-1])
    starts = origin_steps(scored, origins)
    used = [len(row) for row in starts]
    if not any(used):
        raise ValueError("scored marks no step after a first step of history: nothing to forecast")
    totals = _BinaryTotals(horizon) if binary else _Totals(horizon)
    for i in range(max(used)):
        rows = [r for r, row in enumerate(starts) if len(row) > i]
        start = torch.tensor([starts[r][i] for r in rows], device=x.device)
        history, history_mask = _history(x[rows], start)
        draws = _checked_draws(
            forecast(history, history_mask, horizon, num_samples), (num_samples, len(rows), horizon, x.shape[-1]), i
        ).to(x.device)
        target, valid = _targets(x[rows], scored[rows], start, horizon)
        draws, target, scale = _in_data_units(standardizer, draws, target, history, torch.tensor(rows), start, season)
        totals.add(_checked_binary(draws, i) if binary else draws, target, valid, scale)
    return Backtest(
        totals.per_horizon(),
        used,
        _possible(scored),
        sum(used),
        totals.mase_left_out,
        binary,
        horizon,
        origins,
        season,
        num_samples,
    )


def origin_steps(scored: torch.Tensor, origins: int) -> list[list[int]]:
    """Per row of ``scored [N, T]``, up to ``origins`` origin steps: evenly spaced over its scored steps after step
    0, from the first to the last (rounded to the nearest, halves up; all of them where there are fewer)."""
    origins = check_positive_int(origins, name="origins")
    steps = [torch.nonzero(row[1:]).flatten().add(1).tolist() for row in scored.cpu()]
    return [[row[_spaced(i, len(row), origins)] for i in range(min(origins, len(row)))] for row in steps]


def longest_reach(mask: torch.Tensor, scored: torch.Tensor | None = None) -> int:
    """The most steps ahead that a forecast from an origin of ``scored [N, T]`` (default: every valid step of ``mask``
    but the first) can have targets for: the longest run of consecutive scored steps after step 0 of any row."""
    steps = (_default_scored(mask) if scored is None else scored)[:, 1:].cpu().int()
    run, longest = torch.zeros(steps.shape[0], dtype=torch.int), 0
    for column in steps.T:
        run = (run + 1) * column
        longest = max(longest, int(run.max()))
    return longest


def _possible(scored: torch.Tensor) -> list[int]:
    """``[N]`` the steps of each row of ``scored [N, T]`` that can be an origin (scored, after step 0)."""
    return scored[:, 1:].sum(1).tolist()


def _spaced(i: int, size: int, count: int) -> int:
    """The ``i``-th of ``min(count, size)`` indices evenly spaced over ``0 .. size - 1`` (integer arithmetic)."""
    count = min(count, size)
    return 0 if count == 1 else (2 * i * (size - 1) + count - 1) // (2 * (count - 1))


def _history(x: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows' steps before ``start [B]``: ``x [B, max(start), D]`` (zero from each row's start on) and its mask."""
    steps = torch.arange(int(start.max()), device=x.device)
    history_mask = steps < start[:, None]
    return x[:, : steps.shape[0]] * history_mask[..., None], history_mask


def _targets(x: torch.Tensor, scored: torch.Tensor, start: torch.Tensor, horizon: int):
    """``x [B, H, D]`` at steps ``start .. start + H - 1`` of each row and ``[B, H]`` whether each is a target: scored,
    as every step before it from the origin on."""
    steps = start[:, None] + torch.arange(horizon, device=x.device)
    inside = steps < x.shape[1]
    steps = steps.clamp(max=x.shape[1] - 1)
    target = x.gather(1, steps[..., None].expand(-1, -1, x.shape[-1]))
    return target, (inside & scored.gather(1, steps)).int().cumprod(1).bool()


def _units(values: torch.Tensor, standardizer) -> torch.Tensor:
    """``values [..., D]`` in the data's units, float64."""
    return values.double() if standardizer is None else standardizer.inverse(values, dtype=torch.float64)


def _in_data_units(standardizer, draws, target, history, rows, start, season: int):
    """``(draws [S, B, H, D], target [B, H, D], MASE scale [B, D])`` of one origin ``start [B]`` of ``rows``, in the
    data's units (float64): by the standardizer's inverse, or for transformed data by its
    :class:`~ppl_models.inference.data.DataUnits` (the draws' differences added to the level before them, the
    targets and the history as read, the history ``lag`` steps longer)."""
    if not isinstance(standardizer, DataUnits):
        return (
            _units(draws, standardizer),
            _units(target, standardizer),
            _mase_scale(_units(history, standardizer), start, season),
        )
    start, device = start.cpu(), draws.device
    steps = (start[:, None] + torch.arange(target.shape[1])).clamp(max=standardizer.positions - 1)
    observed = standardizer.observed[rows].gather(1, steps[..., None].expand(-1, -1, target.shape[-1]))
    first = start + standardizer.lag  # each origin's step in the data as read
    scale = _mase_scale(_history(standardizer.data[rows], first)[0], first, season)
    return standardizer.forecast(draws, rows, start).to(device), observed.to(device), scale.to(device)


def _mase_scale(history: torch.Tensor, start: torch.Tensor, season: int) -> torch.Tensor:
    """``[B, D]`` mean ``|x_t - x_{t - season}|`` over ``season <= t < start`` of ``history [B, T, D]``; NaN where
    there is no such step."""
    lagged = (history[:, season:] - history[:, :-season]).abs()
    inside = torch.arange(lagged.shape[1], device=history.device) + season < start[:, None]
    total = (lagged * inside[..., None]).sum(1)
    count = inside.sum(1, keepdim=True)
    return torch.where(count > 0, total / count.clamp(min=1), torch.nan)


class _Totals:
    """Sums per step ahead over the origins' forecasts, and the figures they give."""

    def __init__(self, horizon: int):
        self.targets, self.crps, self.squared, self.mase, self.mase_targets = ([0.0] * horizon for _ in range(5))
        self.covered = {level: [0.0] * horizon for level in LEVELS}
        self.mase_left_out = 0

    def add(self, draws, target, valid, scale) -> None:
        """One origin's ``draws [S, B, H, D]``, ``target [B, H, D]``, ``valid [B, H]`` and MASE ``scale [B, D]``."""
        counts = valid.sum(0)
        step_crps = crps(draws, target, valid).nan_to_num()
        squared = (draws.mean(0) - target).pow(2).mean(-1)
        usable = torch.isfinite(scale) & (scale > 0)
        self.mase_left_out += int((~usable).sum())
        ratio = ((_median(draws) - target).abs() / scale[:, None]).where(usable[:, None] & valid[..., None], 0)
        mase_counts = (usable[:, None] & valid[..., None]).sum((0, 2))
        for h in torch.nonzero(counts).flatten().tolist():
            count = int(counts[h])
            self.targets[h] += count
            self.crps[h] += float(step_crps[:, h].sum())
            self.squared[h] += float(squared[:, h][valid[:, h]].sum())
            self.mase[h] += float(ratio[:, h].sum())
            self.mase_targets[h] += int(mase_counts[h])
            rates = coverage(draws[:, :, h : h + 1], target[:, h : h + 1], LEVELS, valid[:, h : h + 1])
            for level in LEVELS:
                self.covered[level][h] += rates[level] * count

    def per_horizon(self) -> dict[str, list]:
        """The figures per step ahead (``None`` where nothing was judged)."""
        figures = {
            "h": list(range(1, len(self.targets) + 1)),
            "targets": [int(n) for n in self.targets],
            "crps": _means(self.crps, self.targets),
        }
        figures.update(
            {f"coverage_{round(100 * level)}": _means(self.covered[level], self.targets) for level in LEVELS}
        )
        figures.update(
            mse=_means(self.squared, self.targets),
            mase=_means(self.mase, self.mase_targets),
            mase_targets=[int(n) for n in self.mase_targets],
        )
        return figures


class _BinaryTotals:
    """The probabilities of a 1 and the outcomes per step ahead over the origins' forecasts, and the figures they give
    (:func:`~ppl_models.inference.evaluation.binary_calibration`)."""

    mase_left_out = None

    def __init__(self, horizon: int):
        self.probabilities, self.outcomes = [[] for _ in range(horizon)], [[] for _ in range(horizon)]

    def add(self, draws, target, valid, scale=None) -> None:
        """One origin's 0/1 ``draws [S, B, H, D]``, ``target [B, H, D]`` and ``valid [B, H]``."""
        probability = draws.mean(0)
        for h, (kept, judged) in enumerate(zip(self.probabilities, self.outcomes)):
            kept.append(probability[:, h][valid[:, h]])
            judged.append(target[:, h][valid[:, h]])

    def per_horizon(self) -> dict[str, list]:
        """The figures per step ahead (``None`` where nothing was judged)."""
        names = ("brier", "ece", "mean_probability", "frequency_of_ones")
        figures = {
            "h": list(range(1, len(self.outcomes) + 1)),
            "targets": [sum(len(part) for part in judged) for judged in self.outcomes],
            **{name: [] for name in names},
        }
        for kept, judged, count in zip(self.probabilities, self.outcomes, figures["targets"]):
            found = (
                binary_calibration(
                    torch.cat(kept)[:, None], torch.cat(judged)[:, None], torch.ones(count, 1, dtype=torch.bool)
                )
                if count
                else {}
            )
            for name in names:
                figures[name].append(found.get(name))
        return figures


def _checked_binary(draws: torch.Tensor, index: int) -> torch.Tensor:
    """``draws [S, B, H, D]`` of binary data at origin ``index``, in its units; raise unless each is 0 or 1."""
    other = draws[(draws != 0) & (draws != 1)]
    if other.numel():
        raise ValueError(
            f"forecaster.forecast must draw 0 or 1 on binary data, got {float(other[0]):g} at origin {index}"
        )
    return draws


def _means(totals: list[float], counts: list[float]) -> list[float | None]:
    """``total / count`` per step ahead, ``None`` where the count is 0."""
    return [total / count if count else None for total, count in zip(totals, counts)]


def _median(draws: torch.Tensor) -> torch.Tensor:
    """The draws' median along dim 0 (the mean of the two middle draws for an even count)."""
    ordered = draws.sort(0).values
    return (ordered[(draws.shape[0] - 1) // 2] + ordered[draws.shape[0] // 2]) / 2


def _check_data(x, mask, scored):
    """``(x, mask, scored)`` checked; ``scored`` defaults to every valid step but the first."""
    x, mask = check_sequences(x, mask)
    if scored is None:
        return x, mask, _default_scored(mask)
    if not isinstance(scored, torch.Tensor) or scored.dtype != torch.bool:
        raise InputTypeError(f"scored must be a bool torch.Tensor [N, T] or None, got {_kind(scored)}")
    if tuple(scored.shape) != tuple(mask.shape):
        raise ValueError(f"scored must have shape [N, T] = {tuple(mask.shape)} to match x, got {tuple(scored.shape)}")
    scored = scored.to(mask.device)
    if bool((scored & ~mask).any()):
        raise ValueError("scored must mark valid steps only (a subset of mask), got a True where mask is False")
    return x, mask, scored


def _default_scored(mask: torch.Tensor) -> torch.Tensor:
    """``[N, T]`` every valid step of ``mask`` but each row's first."""
    scored = mask.clone()
    scored[:, 0] = False
    return scored


def _check_binary(binary, x: torch.Tensor, mask: torch.Tensor) -> bool:
    """``binary`` checked (a bool or ``None``); ``None``: whether every valid value of ``x`` is 0 or 1."""
    if binary is not None and not isinstance(binary, bool):
        raise InputTypeError(f"binary must be a bool or None, got {type(binary).__name__}")
    values = x[mask]
    return bool(((values == 0) | (values == 1)).all()) if binary is None else binary


def _check_forecaster(forecaster, forecast_kwargs, generator):
    """``forecast(x, mask, horizon, num_samples)`` of ``forecaster`` with ``generator`` and ``forecast_kwargs``."""
    method = getattr(forecaster, "forecast", None)
    if not callable(method):
        raise InputTypeError(
            "forecaster must have a method forecast(x, mask, horizon, num_samples, generator=...), "
            f"got {type(forecaster).__name__}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InputTypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if forecast_kwargs is not None and not isinstance(forecast_kwargs, Mapping):
        raise InputTypeError(f"forecast_kwargs must be a dict or None, got {type(forecast_kwargs).__name__}")
    clash = sorted(set(forecast_kwargs or {}) & set(_RESERVED))
    if clash:
        raise ValueError(f"forecast_kwargs must not hold {clash}: the backtest gives those itself")
    options = {**(forecast_kwargs or {}), "generator": generator}
    return lambda x, mask, horizon, num_samples: method(x, mask, horizon, num_samples, **options)


def _check_standardizer(standardizer, x: torch.Tensor) -> None:
    features = x.shape[-1]
    if standardizer is None:
        return
    if isinstance(standardizer, DataUnits):
        standardizer.check(x)
        return
    if not callable(getattr(standardizer, "inverse", None)) or not hasattr(standardizer, "mean"):
        raise InputTypeError(f"standardizer must be a Standardizer or None, got {type(standardizer).__name__}")
    if len(standardizer.mean) != features:
        raise ValueError(f"standardizer has {len(standardizer.mean)} features, x has {features}")


def _check_draw_memory(num_samples: int, rows: int, horizon: int, features: int) -> None:
    """Refuse ``num_samples`` whose draws of one origin, with their float64 copies, exceed the free memory."""
    size = num_samples * rows * horizon * features
    how = f"{num_samples} x {rows} x {horizon} x {features} draws (samples x rows x steps x features), 3 float64 copies"
    check_memory({"num_samples": (num_samples, 3 * 8 * size, how)})


def _checked_draws(draws, shape: tuple, index: int) -> torch.Tensor:
    """The forecaster's draws at origin ``index`` as a tensor (a numpy array is taken too); raise unless they are
    finite, of ``shape``."""
    if isinstance(draws, np.ndarray):
        draws = torch.from_numpy(draws)
    if not isinstance(draws, torch.Tensor) or tuple(draws.shape) != shape:
        raise ValueError(
            f"forecaster.forecast must return draws [S, B, H, D] = {list(shape)} at origin {index}, got {_kind(draws)}"
        )
    if not bool(torch.isfinite(draws).all()):
        raise ValueError(f"forecaster.forecast returned NaN or inf draws at origin {index}")
    return draws


def _kind(value) -> str:
    """A value's type, with its dtype and shape for a tensor."""
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor of shape {list(value.shape)}"
    return type(value).__name__

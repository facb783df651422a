"""A rolling-origin, multi-step backtest: forecasts of ``H`` steps made from many origins of each series, each
conditioned on the history before it, judged per step ahead in the data's units.

At an origin ``o`` of a row, the forecaster sees the row's steps ``< o`` (a prefix: the mask is cut there, and the
later values are zeroed) and draws the ``H`` steps ``o .. o + H - 1``; its targets are those steps up to the first
that is not scored (a horizon running past the row's end, or its scored steps, is cut there). Each row gets up to
``origins`` origins, evenly spaced over its scored steps that follow at least one step of history, from the first
to the last (a row with fewer such steps gets one origin per step: ``origins_possible``). All rows' ``i``-th
origins go to the forecaster in one call (``starts`` gives the origins instead, and ``on_forecast`` sees each
origin's draws and targets). No forecast has a target more than :func:`longest_reach` steps ahead (the longest run
of scored steps after step 0); a horizon beyond it, or past every origin's run, gets no figure.

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

**Covariates.** Data read with covariates (``HeldOutData.covariates``, a
:class:`~ppl_models.inference.data.covariates.CovariateLayout`: row ``t`` holds the targets of ``t`` and the known
covariates of ``t + 1``) are judged on their target columns alone. A forecaster with
``forecast_given(x, mask, future, horizon, num_samples, ...)`` is given, at each origin ``o``, the known covariates
of the ``H`` steps from ``o`` (``future [B, H, C]``, read from rows ``o - 1 .. o + H - 2`` of the data: the
covariate columns, never the targets); one without forecasts from the rows before the origin alone.

:func:`backtest` takes the data and settings as arguments; :func:`backtest_held_out` takes them as a
:class:`~ppl_models.inference.evaluation.HeldOutData` and a :class:`BacktestOptions`. The sums per step ahead are in
:mod:`ppl_models.inference.backtest_totals`, the checks of the arguments and draws in
:mod:`ppl_models.inference.backtest_checks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from .backtest_checks import (
    check_binary,
    check_data,
    check_draw_memory,
    check_forecaster,
    check_standardizer,
    check_starts,
    checked_binary,
    checked_draws,
    default_scored,
)
from .backtest_totals import LEVELS, BinaryTotals, Totals
from .data import DataUnits
from .evaluation.held_out import HeldOutData
from .keyword_settings import field_names, options_with, sorted_keywords
from .validation import InputTypeError, check_positive_int

__all__ = ["LEVELS", "Backtest", "BacktestOptions", "backtest", "backtest_held_out", "origin_steps", "longest_reach"]


@dataclass
class Backtest:
    """What a backtest found.

    Attributes:
        per_horizon: ``{name: [H values]}``, entry ``h - 1`` for ``h`` steps ahead: ``h``, ``targets`` (the
            forecast steps judged there, each of ``D`` values), then for real-valued data ``crps``, ``coverage_50``,
            ``coverage_80``, ``coverage_95``, ``mse``, ``mase`` and ``mase_targets`` (the values, steps times
            features, that MASE judged), for binary data ``brier``, ``ece``, ``mean_probability`` and
            ``frequency_of_ones``; ``None`` where nothing was judged.
        origins_used: ``[N]`` origins per row: ``min(origins, origins_possible)``, or as many as ``starts`` gives.
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


@dataclass(frozen=True)
class BacktestOptions:
    """The settings of a backtest, each checked when the options are made.

    Attributes:
        horizon: ``H``, the steps ahead of each forecast.
        origins: the most origins per row.
        num_samples: draws per forecast (``>= 2``).
        season: the lag of MASE's in-sample differences (1: the naive forecast's errors).
    """

    horizon: int
    origins: int
    num_samples: int = 200
    season: int = 1

    def __post_init__(self):
        object.__setattr__(self, "horizon", check_positive_int(self.horizon, name="horizon"))
        object.__setattr__(self, "num_samples", check_positive_int(self.num_samples, name="num_samples", minimum=2))
        object.__setattr__(self, "season", check_positive_int(self.season, name="season"))
        object.__setattr__(self, "origins", check_positive_int(self.origins, name="origins"))


#: the settings :func:`backtest` takes as keywords besides those of its data: the fields of :class:`BacktestOptions`
#: and the keyword arguments of :func:`backtest_held_out`
OPTION_NAMES = field_names(BacktestOptions)
RUN_NAMES = ("generator", "forecast_kwargs", "starts", "on_forecast")


def backtest(
    forecaster,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    scored: torch.Tensor | None = None,
    options: BacktestOptions | None = None,
    **settings,
) -> Backtest:
    """Backtest ``forecaster`` on ``x [N, T, D]`` from up to ``origins`` origins per row, ``horizon`` steps ahead.

    Args:
        forecaster: anything with ``forecast(x, mask, horizon, num_samples, generator=...) -> [S, B, H, D]``,
            joint draws of the ``H`` steps after each row's last valid step (a
            :class:`~ppl_models.inference.protocol.SequenceModel`, a classical forecaster).
        x, mask: the series ``[N, T, D]`` in the forecaster's units and ``[N, T]`` (valid steps first).
        scored: ``[N, T]`` the steps that may be forecast, a subset of ``mask`` (a held-out segment; the steps
            before it are history only); ``None``: every valid step but the first.
        options: the :class:`BacktestOptions`; ``settings``: any of its fields as keywords, in place of its values
            (``backtest(forecaster, x, mask, horizon=4, origins=10)``), and the other keywords below.
        horizon, origins, num_samples: ``H``, origins per row, draws per forecast (``>= 2``).
        standardizer: maps ``x`` and the draws back to the data's units (its ``inverse``, in float64), or ``None``;
            for transformed data (log, differencing, per-series scaling) the
            :class:`~ppl_models.inference.data.DataUnits` of ``x``'s rows (differences integrated from the level
            before each origin; targets and MASE's history as read).
        season: the lag of MASE's in-sample differences (1: the naive forecast's errors).
        generator: the forecaster's source of randomness.
        forecast_kwargs: more keyword arguments of ``forecast`` (``num_particles``).
        starts: per row, its origin steps (each a scored step after step 0, increasing), in place of those
            :func:`origin_steps` spaces out: the same origins for several forecasters whose data differ.
        on_forecast: called after each origin's forecasts as ``on_forecast(rows, start, draws, target, valid)``:
            the rows' indices ``[B]`` (a list), their origin steps ``start [B]``, ``draws [S, B, H, D]`` and
            ``target [B, H, D]`` in the data's units (float64) and ``valid [B, H]`` (a target there).
        binary: judge the draws as probabilities of 0/1 values (Brier score, calibration error; the draws must be 0
            or 1); default: every valid value of ``x`` is 0 or 1.
        covariates: the :class:`~ppl_models.inference.data.covariates.CovariateLayout` of data read with
            covariates: only its targets are judged, and a forecaster with ``forecast_given`` is given the known
            covariates of the steps ahead (see the module docstring).

    Returns:
        A :class:`Backtest`; see the module docstring for its figures. The data make a
        :class:`~ppl_models.inference.evaluation.HeldOutData` and the settings a :class:`BacktestOptions`, run by
        :func:`backtest_held_out`; an unknown keyword is a ``TypeError`` naming it.
    """
    chosen, given, run = sorted_keywords(
        "backtest",
        settings,
        {
            "BacktestOptions": OPTION_NAMES,
            "HeldOutData": ("standardizer", "binary", "covariates"),
            "backtest_held_out": RUN_NAMES,
        },
    )
    options = options_with(BacktestOptions, options, chosen)
    return backtest_held_out(forecaster, HeldOutData(x, mask, scored=scored, **given), options, **run)


@torch.no_grad()
def backtest_held_out(
    forecaster,
    data: HeldOutData,
    options: BacktestOptions,
    *,
    generator: torch.Generator | None = None,
    forecast_kwargs: Mapping | None = None,
    starts: Sequence[Sequence[int]] | None = None,
    on_forecast: Callable | None = None,
) -> Backtest:
    """Backtest ``forecaster`` on ``data`` (its ``x``, ``mask``, ``scored``, ``standardizer`` and ``binary``, as
    :func:`backtest` takes them) with ``options``, from the origins ``starts`` where given; see :func:`backtest`."""
    if not isinstance(data, HeldOutData) or not isinstance(options, BacktestOptions):
        raise InputTypeError(
            f"data and options must be a HeldOutData and a BacktestOptions, got {type(data).__name__} "
            f"and {type(options).__name__}"
        )
    x, mask, scored = check_data(data.x, data.mask, data.scored)
    binary = check_binary(data.binary, x, mask)
    forecast = check_forecaster(forecaster, forecast_kwargs, generator)
    layout = data.covariates
    columns = x.shape[-1] if layout is None else layout.modelled
    given = None if layout is None else _forecast_given(forecaster, forecast_kwargs, generator, layout)
    horizon, num_samples, season = options.horizon, options.num_samples, options.season
    check_standardizer(data.standardizer, x)
    check_draw_memory(num_samples, x.shape[0], horizon, x.shape[-1])
    starts = origin_steps(scored, options.origins) if starts is None else check_starts(starts, scored)
    if on_forecast is not None and not callable(on_forecast):
        raise InputTypeError(f"on_forecast must be callable or None, got {type(on_forecast).__name__}")
    used = [len(row) for row in starts]
    if not any(used):
        raise ValueError("scored marks no step after a first step of history: nothing to forecast")
    totals = BinaryTotals(horizon) if binary else Totals(horizon)
    for i in range(max(used)):
        rows = [r for r, row in enumerate(starts) if len(row) > i]
        start = torch.tensor([starts[r][i] for r in rows], device=x.device)
        history, history_mask = _history(x[rows], start)
        if given is None:
            draws = forecast(history, history_mask, horizon, num_samples)
        else:
            draws = given(history, history_mask, _known_ahead(x[rows], start, horizon, layout), horizon, num_samples)
        draws = checked_draws(draws, (num_samples, len(rows), horizon, x.shape[-1]), i).to(x.device)
        target, valid = _targets(x[rows], scored[rows], start, horizon)
        draws, target, scale = (
            values[..., :columns]  # the targets alone: covariates are inputs
            for values in _in_data_units(data.standardizer, draws, target, history, torch.tensor(rows), start, season)
        )
        totals.add(checked_binary(draws, i) if binary else draws, target, valid, scale)
        if on_forecast is not None:
            on_forecast(rows, start, draws, target, valid)
    return Backtest(
        totals.per_horizon(),
        used,
        _possible(scored),
        sum(used),
        totals.mase_left_out,
        binary,
        horizon,
        options.origins,
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
    steps = (default_scored(mask) if scored is None else scored)[:, 1:].cpu().int()
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


def _forecast_given(forecaster, forecast_kwargs, generator, layout) -> Callable | None:
    """``forecast(x, mask, future, horizon, num_samples) -> [S, B, H, D]`` by ``forecaster``'s ``forecast_given``
    (draws of the targets, or of every column; the other columns 0), ``None`` where it has none."""
    method = getattr(forecaster, "forecast_given", None)
    if method is None:
        return None
    options = {**(forecast_kwargs or {}), "generator": generator}

    def forecast(x, mask, future, horizon, num_samples):
        draws = method(x, mask, future, horizon, num_samples, **options)
        if draws.shape[-1] == layout.modelled < x.shape[-1]:
            draws = torch.cat([draws, draws.new_zeros(*draws.shape[:-1], x.shape[-1] - layout.modelled)], -1)
        return draws

    return forecast


def _known_ahead(x: torch.Tensor, start: torch.Tensor, horizon: int, layout) -> torch.Tensor:
    """``[B, H, C]``: the known covariates of steps ``start .. start + H - 1`` of rows ``x [B, T, D]``, in the rows
    before each (the covariate columns of rows ``start - 1 ..``; past the data's end, its last row's)."""
    steps = (start[:, None] - 1 + torch.arange(horizon, device=x.device)).clamp(max=x.shape[1] - 1)
    return x.gather(1, steps[..., None].expand(-1, -1, x.shape[-1]))[..., layout.known_slice]


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

"""Forecasts past the end of the data: :func:`forecast_beyond` draws ``horizon`` steps after each test series of a
finished run (``ppl-models forecast --beyond H``) and writes their mean and quantiles, in the data's units, to
``beyond.csv``; a horizon whose paths would not fit in memory is refused first (:class:`HorizonTooLong`). A run that
reads known covariates forecasts the targets given the covariates of the file's rows after each series' last target
(:mod:`~ppl_models.experiments.covariate_futures`); a horizon past those rows, or of more than one step with
past-only covariates, is refused first too."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ppl_models.covariate_model import CovariateInputs, reads_covariates
from ppl_models.inference.atomic_files import write_text
from ppl_models.inference.defaults import FORECAST_PARTICLES, FORECAST_SAMPLES
from ppl_models.inference.validation import check_positive_int
from ppl_models.predictors import ExactPredictiveModel

from .covariate_futures import covariate_paths, file_future, future_rows, model_units, past_refusal
from .forecasting import load_run, paths_in_units
from .memory_guard import available_memory

__all__ = ["BEYOND_QUANTILES", "PATH_BYTES", "HorizonTooLong", "forecast_beyond"]

#: the quantiles of a forecast past the end of the data (:func:`forecast_beyond`)
BEYOND_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: the bytes each number of the paths ``[S, B, H, D]`` of :func:`forecast_beyond` takes at its peak, at least: in the
#: data's units (float64) with a sorted copy and its int64 indices for the quantiles (the float32 draws are gone)
PATH_BYTES = 3 * 8


class HorizonTooLong(ValueError):
    """A horizon refused before any step is drawn: ``reason`` says why, ``limit`` is the most steps that fit."""

    def __init__(self, horizon: int, limit: int, reason: str, name: str = "horizon"):
        self.horizon, self.limit, self.reason = horizon, limit, reason
        super().__init__(f"{name}={horizon} {reason}: at most {max(limit, 0)} steps ahead fit")

    def named(self, name: str) -> HorizonTooLong:
        """The same refusal naming the setting ``name`` (the command line's ``--beyond``)."""
        return HorizonTooLong(self.horizon, self.limit, self.reason, name)


@torch.no_grad()
def forecast_beyond(
    folder: str | Path,
    out: str | Path,
    *,
    horizon: int,
    num_samples: int = FORECAST_SAMPLES,
    num_particles: int = FORECAST_PARTICLES,
    device: str = "cpu",
    data_path: str | Path | None = None,
    seed: int = 0,
) -> Path:
    """Forecast ``horizon`` steps past the end of each test sequence of a finished run (for a user's file split by
    time: past the end of the file, each series given all of its steps) and write ``out/beyond.csv``.

    ``data_path``: forecast past the end of this file instead, read whole as each series' history (no split; the
    run's columns, transform and standardisation), so a file of each series' last few steps will do. Per series
    (its id as the file names it), step ahead and feature, the CSV gives the mean and the :data:`BEYOND_QUANTILES`
    of ``num_samples`` paths in the data's units; for binary (0/1) data, ``probability_of_1``, the share of the
    paths that draw a 1 (a quantile of 0/1 draws is 0 or 1, or a value no draw takes). A horizon whose paths would
    not fit in memory is refused first (:class:`HorizonTooLong`). A run that reads known
    covariates draws the targets (the CSV's features) given those of the file's rows after each series' last target
    (the file's units, put in the run's); a horizon past the fewest such rows of a series, or of more than one step
    with past-only covariates, is refused first. Returns the CSV's path.
    """
    import pandas as pd

    check_positive_int(horizon, name="horizon")
    check_positive_int(num_samples, name="num_samples")
    _, data, model = load_run("run", folder, device, data_path, history=data_path is not None)
    given = reads_covariates(model)
    if not model.supports("forecast") and not given:
        raise ValueError(f"run {folder}: {type(model).__name__} cannot forecast ({model.limitations['forecast']})")
    x, mask = data.test
    record = data.split_record or {}
    names = _series_names(record, len(x))
    _check_beyond(model, horizon, num_samples, x, mask)
    torch.manual_seed(seed)
    if given:
        future = model_units(data, "test", _file_future(data, names, horizon))
        paths = covariate_paths(model, x.to(device), mask.to(device), future, horizon, num_samples).cpu()
    else:
        paths = model.forecast(x.to(device), mask.to(device), horizon, num_samples, num_particles=num_particles).cpu()
    paths = paths_in_units(data, paths, "test", None)  # after each row's end, in the data's units
    features = record.get("standardizer", {}).get("features") or [f"x{d}" for d in range(x.shape[-1])]
    if given:  # the targets alone: the covariates are inputs
        paths, features = paths[..., : model.modelled_features], features[: model.modelled_features]
    figures = _binary_figures(paths) if data.binary else _real_figures(paths)
    rows = [
        {
            "series": names[b],
            "step_ahead": h + 1,
            "feature": feature,
            **{column: float(values[b, h, d]) for column, values in figures.items()},
        }
        for b in range(len(x))
        for h in range(horizon)
        for d, feature in enumerate(features)
    ]
    path = Path(out) / "beyond.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, pd.DataFrame(rows).to_csv(index=False))
    return path


def _file_future(data, names: list[str], horizon: int) -> torch.Tensor:
    """``[B, H, C]``: the known covariates of the ``horizon`` steps after each series' end (the file's units), or a
    :class:`HorizonTooLong` where past-only covariates are read beyond one step or the file has fewer rows ahead."""
    layout = data.covariates
    why = past_refusal(layout, horizon)
    if why is not None:
        raise HorizonTooLong(horizon, 1, why)
    fewest = future_rows(data, names)
    if fewest < horizon:
        raise HorizonTooLong(
            horizon,
            fewest,
            f"goes past the file's rows of the known covariates {list(layout.known)} after a series' last target "
            f"({fewest}; a forecast reads those of every step ahead: add rows with the covariates and no target)",
        )
    return file_future(data, names, horizon)


def _check_beyond(model, horizon: int, num_samples: int, x: torch.Tensor, mask: torch.Tensor) -> None:
    """Refuse a ``horizon`` whose paths ``[S, B, H, D]`` (:data:`PATH_BYTES` each number) and the state each path
    carries (:func:`_carry_bytes`) exceed the available memory: :class:`HorizonTooLong`."""
    rows, _, features = x.shape
    available = available_memory()
    state, growth = _carry_bytes(model, x, mask)
    per_step, fixed = num_samples * rows * (features * PATH_BYTES + growth), num_samples * rows * state
    needed = fixed + horizon * per_step
    if available is not None and needed > available:
        carried = f", and each path's state: {state} bytes, {growth} more a step" if state else ""
        raise HorizonTooLong(
            horizon,
            (available - fixed) // per_step,
            f"needs at least {needed / 2**30:.3g} GiB of memory ({num_samples} paths x {rows} series "
            f"x {horizon} steps x {features} features x {PATH_BYTES} bytes{carried}), but "
            f"{available / 2**30:.3g} GiB are available",
        )


def _carry_bytes(model, x: torch.Tensor, mask: torch.Tensor) -> tuple[int, int]:
    """The bytes of one path's :class:`~ppl_models.predictors.Carry` after the longest sequence of ``x [B, T, D]``
    and the bytes each step adds to it (a Transformer's keys and values); ``(0, 0)`` for a model that carries none
    (a particle model: its state is the filter's)."""
    if isinstance(model, CovariateInputs):
        model = model.inner  # it carries the inner model's state
    if not isinstance(model, ExactPredictiveModel):
        return 0, 0
    row = int(mask.sum(1).argmax())
    history = x[row : row + 1, : int(mask[row].sum())].to(next(model.parameters()).device)
    carry = model.carry_start(history)
    return carry.nbytes, max(model.carry_on(carry, history[:, -1]).nbytes - carry.nbytes, 0)


def _series_names(record: dict, count: int) -> list[str]:
    """The series id of each of the ``count`` test rows as its file names it: the row's id in ``record`` (a
    :meth:`~ppl_models.inference.data.DataSplits.to_dict`) less what the split added, the steps ``[a:b]`` of a split
    by time or the ``:test`` of a split by a column; ``0, 1, ...`` for data without ids."""
    ids = record.get("test", {}).get("ids") or [str(i) for i in range(count)]
    by = record.get("how", {}).get("by")
    if by == "time":
        return [re.fullmatch(r"(.*)\[\d+:\d+\]", i, flags=re.DOTALL).group(1) for i in ids]
    return [i.removesuffix(":test") for i in ids] if by == "column" else list(ids)


def _real_figures(paths: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{column: [B, H, D]}``: the mean and the :data:`BEYOND_QUANTILES` of real-valued paths ``[S, B, H, D]``."""
    levels = torch.quantile(paths.double(), torch.tensor(BEYOND_QUANTILES, dtype=torch.float64), dim=0)
    return {"mean": paths.mean(0), **{f"q{round(100 * q):02d}": levels[k] for k, q in enumerate(BEYOND_QUANTILES)}}


def _binary_figures(paths: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"probability_of_1": [B, H, D]}``: the share of the 0/1 paths ``[S, B, H, D]`` that draw a 1 at each step."""
    return {"probability_of_1": paths.double().mean(0)}

"""The known covariates of the steps after a forecast origin, for the forecasters that read them.

Data read with covariates (:mod:`ppl_models.inference.data.covariates`) hold, in row ``t``, the targets of ``t`` and
the known covariates of ``t + 1``. A forecast of the ``H`` steps after a row's first ``start`` rows reads the known
covariates of those steps: ``future [b, H, C]``, ``future[:, h]`` the value in the row before step ``start + h``
(row ``start - 1 + h``). They come from the file's rows after a series' last target
(:attr:`~ppl_models.experiments.data.ExperimentData.future`, :func:`file_future`) or, for an origin inside the data,
from the data's own rows after the origin (never their targets). :func:`model_units` puts them in the units the
model reads (the run's standardisation, or its transform), and :func:`covariate_paths` draws the targets given them
(:meth:`~ppl_models.covariate_model.CovariateInputs.forecast_given`).
"""

from __future__ import annotations

import numpy as np
import torch

from ppl_models.inference.data import DataUnits

__all__ = ["future_rows", "file_future", "model_units", "covariate_paths", "past_refusal"]


def past_refusal(layout, horizon: int) -> str | None:
    """Why a forecast of ``horizon`` steps cannot read data with the covariate ``layout``: past-only covariates have
    no value after the origin, so only a forecast of one step reads them; ``None`` where it can."""
    if layout is None or not layout.past or horizon <= 1:
        return None
    return (
        f"with past_covariates {list(layout.past)}: their values after the forecast origin are unknown and are not "
        "forecast, so only one step ahead reads them"
    )


def future_rows(data, names: list[str]) -> int:
    """The fewest rows after its last target (``data.future``) of the series ``names``: how many steps ahead the
    file gives the known covariates of (any number where it has none)."""
    if not data.covariates.known:
        return np.iinfo(np.int64).max
    return min(len((data.future or {}).get(name, ())) for name in names)


def file_future(data, names: list[str], horizon: int) -> torch.Tensor:
    """``[B, H, C]`` float64, in the file's units: the known covariates of the ``horizon`` steps after the last
    target of each series ``names``, from its rows with empty targets (``data.future``; :func:`future_rows` of
    them at least ``horizon``)."""
    width = len(data.covariates.known)
    if not width:
        return torch.zeros(len(names), horizon, 0, dtype=torch.float64)
    return torch.as_tensor(np.stack([np.asarray(data.future[name][:horizon], dtype=np.float64) for name in names]))


def model_units(data, split: str, future: torch.Tensor, start=None, rows=None) -> torch.Tensor:
    """``future [b, H, C]`` (the known covariates of the ``H`` steps after each row's first ``start`` rows, an int or
    ``[b]``, default the row's end, of rows ``rows`` of ``split``; in the data's units) in the model's units: the
    split's standardisation, or its transform (log where it takes the covariates, the seasonal profile, the
    difference from the level ``L`` rows before, from the data or from ``future`` itself, and the per-series
    scaling)."""
    layout, units = data.covariates, data.units(split)
    future = torch.as_tensor(future, dtype=torch.float64)
    known = layout.known_slice
    if units is None:
        return future
    if not isinstance(units, DataUnits):
        mean = torch.as_tensor(np.asarray(units.mean, dtype=np.float64)[known])
        return (future - mean) / torch.as_tensor(np.asarray(units.scale, dtype=np.float64)[known])
    index = torch.arange(units.offset.shape[0]) if rows is None else torch.as_tensor(rows).cpu()
    ends = units.lengths[index] - units.lag
    start = ends if start is None else torch.as_tensor(start).expand(len(index))
    logged = units.log and (units.logged is None or units.logged > known.start)  # a run's log takes its targets'
    if logged and not bool((future > 0).all()):
        raise ValueError(f"future: the run models log values, and a value of {list(layout.known)} ahead is <= 0")
    level = future.log() if logged else future
    rows_ahead = start.unsqueeze(-1) + units.lag - 1 + torch.arange(future.shape[1])  # the data rows holding them
    seasonal = units.seasonal_at(index, rows_ahead)  # 0 without a profile
    anomaly = level - seasonal[..., known] if torch.is_tensor(seasonal) else level
    value = anomaly.clone()
    for h in range(future.shape[1] if units.lag else 0):  # row start - 1 + h, less the level L rows before
        if h <= units.lag:
            value[:, h] -= units.levels_at(index, start - 1 + h)[:, known]
        else:
            value[:, h] -= anomaly[:, h - units.lag]
    return (value - units.offset[index, known].unsqueeze(1)) / units.scale[index, known].unsqueeze(1)


def covariate_paths(model, x, mask, future: torch.Tensor, horizon: int, num_samples: int) -> torch.Tensor:
    """``[S, B, H, D]``: paths of ``model`` (a :class:`~ppl_models.covariate_model.CovariateInputs`) after each row
    of ``x [B, T, D]`` given the known covariates ``future [B, H, C]`` (the model's units) of the steps ahead: its
    draws of the targets, the covariate columns 0 (they are inputs: no figure reads them)."""
    targets = model.forecast_given(x, mask, future.to(device=x.device, dtype=x.dtype), horizon, num_samples)
    inputs = targets.new_zeros(*targets.shape[:-1], x.shape[-1] - targets.shape[-1])
    return torch.cat([targets, inputs], -1)

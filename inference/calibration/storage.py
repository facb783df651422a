"""ArviZ storage of draws and observations: ``InferenceData`` for ArviZ's statistics and plots, netCDF files.

A batch with padding is stored as its valid steps only (one dim ``step`` with coordinates
``sequence`` and ``time``), so that no padding reaches ArviZ; draws already packed to their steps (``positions``)
are stored the same way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from ..arviz_compat import az, dataset, inference_data, is_inference_data
from ..atomic_files import atomic_write
from ._checks import _as_float_tensor, _check_predictive, _to_numpy

__all__ = [
    "SEQUENCE_DIMS",
    "to_inference_data",
    "posterior_inference_data",
    "stack_sequence_sites",
    "save_inference_data",
]

SEQUENCE_DIMS = ("sequence", "time", "feature")


def to_inference_data(
    predictive,
    observed,
    *,
    mask=None,
    positions=None,
    log_likelihood=None,
    posterior: Mapping[str, object] | None = None,
    var_name: str = "x",
    coords: Mapping[str, Sequence] | None = None,
) -> az.InferenceData:
    """Pack draws and observations into an ArviZ ``InferenceData`` (an ``xarray.DataTree`` on ArviZ 1.x).

    Args:
        predictive: draws ``[S, B, T, D]`` (torch or numpy): one-step predictive draws for
            calibration, or replicates given posterior draws (:func:`posterior_inference_data`).
        observed: observations ``[B, T, D]``.
        mask: optional bool ``[B, T]``.
        positions: optional ``[2, n]`` integers, for draws already packed to ``n`` steps (``predictive [S, 1, n, D]``,
            ``observed [1, n, D]``, no ``mask``): each step's sequence and time, stored along ``step`` with those
            coordinates, as the valid steps of a batch with padding are.
        log_likelihood: optional ``[S, B, T, D]`` pointwise log-likelihood of each entry given
            each draw (:class:`~ppl_models.inference.pointwise.PosteriorDraws`), for ``az.loo``, ``az.waic``
            and ``az.plot_loo_pit``.
        posterior: optional ``{name: [S, B, T, ...]}`` the draws themselves (latent paths);
            ArviZ's ``loo`` reads the number of chains from this group.
        var_name: name of the data variable in every group.
        coords: optional coordinate values per dimension, e.g. ``{"feature": ["x", "y"]}``.

    Returns:
        ``InferenceData`` with groups ``posterior_predictive`` (dims chain=1, draw=S, sequence,
        time, feature), ``observed_data`` (sequence, time, feature) and, if given,
        ``log_likelihood`` (chain, draw, sequence, time, feature) and ``posterior`` (chain,
        draw, sequence, time, ``<name>_dim``). A batch with padding is stored as its valid steps
        only: the dims ``(sequence, time)`` become one dim ``step``, with coordinates
        ``sequence`` and ``time`` along it, so that no padding reaches ArviZ's statistics (packed draws
        likewise, their coordinates from ``positions``).
    """
    if not isinstance(var_name, str) or not var_name:
        raise ValueError(f"var_name must be a non-empty string, got {var_name!r}")
    predictive, observed, mask = _check_predictive(predictive, observed, mask)
    pack = _step_packer(mask) if positions is None else _checked_positions(positions, observed, mask)
    coordinates = _step_coordinates(mask, pack, positions)
    step_dims = list(SEQUENCE_DIMS[:2]) if pack is None else ["step"]
    dims = {var_name: step_dims + ["feature"]}

    def group(values, draws=True):
        return _with_step_coords(dataset(values, coords=coords, dims=dims, draws=draws), coordinates)

    groups = {
        "posterior_predictive": group({var_name: _packed(predictive, pack, draws=True)}),
        "observed_data": group({var_name: _packed(observed, pack)}, draws=False),
    }
    if log_likelihood is not None:
        values = _as_float_tensor(log_likelihood, "log_likelihood").to(predictive.device)
        if values.shape[1:] != predictive.shape[1:] or values.shape[0] < 1:
            raise ValueError(
                f"log_likelihood must have shape [S, B, T, D] with [B, T, D] = "
                f"{tuple(predictive.shape[1:])}, got {tuple(values.shape)}"
            )
        if not bool(torch.isfinite(values[:, mask]).all()):
            raise ValueError("log_likelihood contains NaN or inf at valid (unmasked) steps")
        groups["log_likelihood"] = group({var_name: _packed(values, pack, draws=True)})
    if posterior is not None:
        groups["posterior"] = _posterior_dataset(posterior, mask, pack, coordinates, step_dims, coords)
    return inference_data(groups)


def posterior_inference_data(
    model, x, mask=None, num_draws: int = 100, *, targets=None, var_name: str | None = None, **options
) -> az.InferenceData:
    """``InferenceData`` for ``az.loo``, ``az.waic`` and ``az.plot_loo_pit`` of any model with Pyro programs.

    Draws the model's latent sites from its guide (:func:`ppl_models.inference.pointwise.posterior_draws`,
    which takes ``options`` such as ``resample`` and ``parallel``) and stores them as the
    ``posterior``, each entry's log-likelihood given each draw as ``log_likelihood``, replicates
    of the data given each draw as ``posterior_predictive``, and the data as ``observed_data``.

    Args:
        model: a :class:`~ppl_models.inference.protocol.SequenceModel` declaring ``programs``.
        x: ``[B, T, D]`` data (the inputs of a conditional model); mask: optional ``[B, T]``.
        num_draws: ``S``.
        targets: the targets ``y`` of a conditional model (PF-RNN), which are then the observed data.
        var_name: name of the observed variable (default ``"y"`` for a conditional model, else ``"x"``).
    """
    from ..pointwise import posterior_draws  # deferred: pointwise imports the state-space engines

    draws = posterior_draws(model, x, mask, num_draws, targets=targets, **options)
    observed = x if targets is None else (targets.unsqueeze(-1) if targets.dim() == 2 else targets)
    posterior = draws.latents or {"log_weight": draws.log_weights}
    name = var_name or ("y" if targets is not None else "x")
    return to_inference_data(
        draws.replicates, observed, mask=mask, log_likelihood=draws.log_likelihood, posterior=posterior, var_name=name
    )


def stack_sequence_sites(samples: Mapping[str, torch.Tensor], site: str = "x", *, event_dim: int = 1) -> torch.Tensor:
    """One ``[S, B, T, D]`` tensor of a sequence variable from ``pyro.infer.Predictive`` output.

    The collection's programs name a variable per step, ``x_0, x_1, ...`` (``MarkovStateSpace``,
    VRNN, ``y_0, ...`` for the PF-RNN program) or ``t0/x, t1/x, ...`` (the SMC Transformer),
    each ``[S, B, D]``; models without latent variables have one site ``x`` ``[S, B, T, D]``.
    ``Predictive`` pads a site's batch dims to the program's plate nesting (the PF-RNN program's
    ``y_t`` come back ``[S, 1, B, O]``): those size-1 dims are dropped. ``event_dim=0`` reads sites
    of one class index per step (``[S, B]``, a categorical emission) as ``D = 1``. The steps are
    stacked in time order; give the result to :func:`to_inference_data` for ArviZ, with dims
    ``(chain, draw, sequence, time, feature)``.

    Note that ``Predictive(model, guide=guide)(x)`` returns the *observed* values at observed
    sites: for replicates of the data use :func:`ppl_models.inference.pointwise.posterior_predictive`.
    """
    if not isinstance(samples, Mapping):
        raise TypeError(f"samples must be the dict Predictive returns, got {type(samples).__name__}")
    if event_dim not in (0, 1) or isinstance(event_dim, bool):
        raise ValueError(f"event_dim must be 1 (a vector per step) or 0 (a class index per step), got {event_dim!r}")
    if site in samples and samples[site].dim() >= 3 + event_dim:
        return _unpadded(samples[site], site, "BTD"[: 2 + event_dim])
    pattern = re.compile(rf"{re.escape(site)}_(\d+)|t(\d+)/{re.escape(site)}")
    steps = {}
    for name, value in samples.items():
        match = pattern.fullmatch(name)
        if match:
            steps[int(match.group(1) or match.group(2))] = _unpadded(value, name, "BD"[: 1 + event_dim])
    if not steps or sorted(steps) != list(range(len(steps))):
        raise ValueError(
            f"samples must hold the sites {site}_0, {site}_1, ... (or t0/{site}, ...) of every step, "
            f"or one site {site!r} [S, B, T, D]; got {sorted(samples)}"
        )
    return torch.stack([steps[t] for t in range(len(steps))], dim=-2)


def _unpadded(value: torch.Tensor, name: str, layout: str) -> torch.Tensor:
    """``value [S, 1, ..., 1, *layout]`` without the plate padding; ``D = 1`` added if ``layout`` has none."""
    kept = len(layout)
    if value.dim() < kept + 1 or any(size != 1 for size in value.shape[1 : value.dim() - kept]):
        raise ValueError(
            f"samples[{name!r}] must have shape [S, (1, ...,) {', '.join(layout)}] (Predictive pads "
            f"plates with size-1 dims), got {tuple(value.shape)}"
        )
    value = value.reshape(value.shape[0], *value.shape[value.dim() - kept :])
    return value if layout.endswith("D") else value.unsqueeze(-1)


def save_inference_data(idata: az.InferenceData, path: str | os.PathLike) -> Path:
    """Write ``idata`` to a netCDF file (``.nc``, ArviZ's default h5netcdf engine), atomically."""
    if not is_inference_data(idata):
        raise TypeError(
            f"idata must be an arviz.InferenceData (an xarray.DataTree on ArviZ 1.x), got {type(idata).__name__}"
        )
    return atomic_write(path, lambda tmp: idata.to_netcdf(tmp))


# --------------------------------------------------------------------------- helpers


def _step_packer(mask: torch.Tensor) -> torch.Tensor | None:
    """Indices of the valid steps in the flattened ``[B * T]`` grid, or ``None`` when every step is valid."""
    return None if bool(mask.all()) else mask.flatten().nonzero().squeeze(-1)


def _packed(values: torch.Tensor, pack, *, draws: bool = False) -> np.ndarray:
    """``[(S,) B, T, ...]`` as numpy, with a leading chain dim for draws; valid steps only when ``pack``."""
    if pack is not None:
        lead = values.shape[:1] if draws else ()
        flat = values.reshape(*lead, -1, *values.shape[len(lead) + 2 :])
        values = flat.index_select(len(lead), pack.to(values.device))
    values = _to_numpy(values)
    return values[None] if draws else values


def _checked_positions(positions, observed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The flat indices ``[n]`` of draws packed to ``n`` steps (``observed [1, n, D]``, every step of ``mask``
    valid), ``positions [2, n]`` checked against them."""
    if not isinstance(positions, torch.Tensor) or positions.dtype != torch.int64:
        raise TypeError(f"positions must be an int64 torch.Tensor [2, n], got {type(positions).__name__}")
    if observed.shape[0] != 1 or not bool(mask.all()) or positions.shape != (2, observed.shape[1]):
        raise ValueError(
            f"positions [2, n] go with draws packed to n steps (observed [1, n, D], no mask): got "
            f"positions {list(positions.shape)}, observed {list(observed.shape)}"
        )
    return torch.arange(observed.shape[1])


def _step_coordinates(mask: torch.Tensor, pack, positions) -> tuple[np.ndarray, np.ndarray] | None:
    """``(sequence [n], time [n])`` of the packed steps (``positions``, else the valid steps of ``mask``), or
    ``None`` when the batch is stored whole."""
    if positions is not None:
        return _to_numpy(positions[0]), _to_numpy(positions[1])
    return None if pack is None else np.divmod(_to_numpy(pack), mask.shape[1])


def _with_step_coords(dataset, coordinates):
    """Add the ``sequence`` and ``time`` ``coordinates`` along the ``step`` dim of a packed dataset."""
    if coordinates is None or "step" not in dataset.dims:
        return dataset
    sequence, time = coordinates
    return dataset.assign_coords(sequence=("step", sequence), time=("step", time))


def _posterior_dataset(posterior, mask, pack, coordinates, step_dims, coords):
    if not isinstance(posterior, Mapping) or not posterior:
        raise ValueError(f"posterior must be a non-empty dict name -> [S, B, T, ...] draws, got {posterior!r}")
    values, dims = {}, {}
    batch, steps = mask.shape
    for name, draws in posterior.items():
        draws = _as_float_tensor(draws, f"posterior[{name!r}]")
        if draws.dim() == 2 and draws.shape[1] == batch:  # one value per draw and sequence
            values[name], dims[name] = _to_numpy(draws)[None], ["sequence"]
            continue
        if draws.dim() < 3 or draws.shape[1:3] != (batch, steps):
            raise ValueError(
                f"posterior[{name!r}] must have shape [S, B, T, ...] with [B, T] = {(batch, steps)}, "
                f"got {tuple(draws.shape)}"
            )
        values[name] = _packed(draws, pack, draws=True)
        dims[name] = step_dims + [f"{name}_dim_{i}" for i in range(draws.dim() - 3)]
    per_sequence = [name for name, names in dims.items() if names == ["sequence"]]
    if pack is not None and per_sequence and len(per_sequence) < len(dims):
        raise ValueError(
            f"posterior variables {per_sequence} are per sequence [S, B]: with padding they cannot share "
            "a group with per-step variables [S, B, T, ...]"
        )
    return _with_step_coords(dataset(values, coords=coords, dims=dims), coordinates)

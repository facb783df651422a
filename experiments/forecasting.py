"""Many-steps-ahead forecasts of trained runs, judged on the test split (the SMC Transformer paper's Figure 3).

Each test sequence's first ``observed`` steps are given; the model then forecasts the next
``horizon`` steps with ``S`` sampled paths, each path feeding its own draws back, by its
protocol method ``forecast`` (:class:`ppl_models.inference.protocol.SequenceModel`): particle models
through the shared filter on the prefix, one-step predictors (MC-dropout LSTMs with one
stochastic pass per path and step) by extending each path one step at a time.

:func:`compare_forecasts` runs this for several run folders and writes ``forecast.json``,
``forecast.md`` (coverage, interval width, CRPS, PIT KS of the forecasts, MSE of their mean)
and ``forecast.png`` (Figure 3: observed days, truth, and mean +/- one standard deviation of
each run's paths for a few test sequences). Coverage is reported pooled over all steps ahead
and per step ahead (``coverage_by_step``). With ``recalibrate``, each run also forecasts the
validation split the same way, fits :func:`ppl_models.inference.recalibration.fit_recalibration` on it
and reports its corrected test forecasts as a second row (``<label> + <method>``). Data sets
that model transformed values (the COVID task's ``transform``) map forecasts and outcomes
back by their ``untransform(values, split)`` before any metric; a user's file trained under a transform (log,
differencing, per-series scaling) maps them back by its test split's
:class:`~ppl_models.inference.data.DataUnits` (the differences added to the observed or forecast level before them),
``observed`` counting the data's own steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from matplotlib.figure import Figure

from ppl_models import SMCTransformer
from ppl_models.inference import calibration
from ppl_models.inference.atomic_files import write_json, write_text
from ppl_models.inference.data import DataUnits
from ppl_models.inference.defaults import FORECAST_PARTICLES, FORECAST_SAMPLES
from ppl_models.inference.recalibration import RECALIBRATION_METHODS, coverage_by_step, fit_recalibration
from ppl_models.inference.training import load_checkpoint
from ppl_models.inference.validation import check_positive_int

from .build import build_experiment
from .config import check_config
from .memory_guard import FLOAT32, check_memory
from .run_folder import check_run_folder, load_run_checkpoint, read_config_json
from .run_plots import save_png

__all__ = ["ForecastSpec", "compare_forecasts", "load_run", "paths_in_units"]


def load_run(label: str, folder, device: str, data_path: str | Path | None = None, *, history: bool = False):
    """``(config, data, model)`` of the run ``label`` in ``folder``, its best checkpoint loaded on ``device``.

    ``data_path``: forecast this file instead of the run's data (a run trained on a file keeps its
    column options and the standardisation its checkpoint records); ``history=True`` reads it whole, each series
    its own history, in every split (no split). The checkpoint is checked against the
    run's own ``config.json``, the returned ``config`` is the one the forecast reads its data by.
    """
    folder = check_run_folder(folder, name=f"run {label!r}:")
    config = read_config_json(folder / "config.json")
    if config.get("kind") == "supervised":
        raise ValueError(f"run {label!r}: {folder} is a supervised run; forecasts need a likelihood run")
    config = check_config(config)
    forecast = config if data_path is None else {**config, "data": _file_data(folder, config, data_path, history)}
    data, model, objective = build_experiment(forecast)
    load_run_checkpoint(folder, objective, config)
    model.to(device).eval()
    return forecast, data, model


def _file_data(folder: Path, config: dict, path: str | Path, history: bool = False) -> dict:
    """The ``[data]`` section that reads the file at ``path`` as the run in ``folder`` read its data: a run on a
    file keeps its column options; the transform and the standardisation are the ones its checkpoint records (else
    ``data_split.json``; a run that records no transform had none). ``history``: the file read whole, unsplit."""
    options = config["data"] if config["data"].get("name") == "file" else {"name": "file"}
    data = {**options, "path": str(path), "transform": _recorded_transform(folder)}
    if history:
        data["history"] = True
    standardizer = _recorded_standardizer(folder)
    return data if standardizer is None else {**data, "standardizer": standardizer}


def _recorded_standardizer(folder: Path) -> dict | None:
    """The standardisation a run was trained in: its ``best.pt``'s experiment, else ``data_split.json``; ``None``
    for a run on data that is not standardised."""
    best = folder / "checkpoints" / "best.pt"
    recorded = (load_checkpoint(best).get("experiment") or {}).get("data_standardizer") if best.is_file() else None
    if recorded is None and (folder / "data_split.json").is_file():
        recorded = read_config_json(folder / "data_split.json").get("standardizer")
    return recorded


def _recorded_transform(folder: Path) -> str:
    """The name of the transform a run was trained under: its ``best.pt``'s experiment, else ``data_split.json``;
    ``"none"`` for a run that records none."""
    best = folder / "checkpoints" / "best.pt"
    recorded = (load_checkpoint(best).get("experiment") or {}).get("data_transform") if best.is_file() else None
    if recorded is None and (folder / "data_split.json").is_file():
        recorded = (read_config_json(folder / "data_split.json").get("transform") or {}).get("name")
    return recorded or "none"


def _em_sites(model) -> tuple[str, ...]:
    """The covariances per-sequence EM can fit in ``model`` (none for a model without ``fine_tuned``)."""
    return tuple(model.variances()) if isinstance(model, SMCTransformer) else ()


def _check_em(loaded: dict, em_iterations: int, em_sites) -> None:
    """Refuse EM options that no run can use, and ``em_sites`` a run with EM does not have."""
    if em_sites is not None and em_iterations == 0:
        raise ValueError("em_sites needs em_iterations > 0 (--em-iterations N): without EM steps nothing is fitted")
    if em_iterations == 0:
        return
    tuned = {label: _em_sites(model) for label, (_, _, model) in loaded.items() if _em_sites(model)}
    if not tuned:
        models = sorted({config["model"]["name"] for config, _, _ in loaded.values()})
        raise ValueError(
            f"em_iterations: no run has per-sequence EM (models {models}; only SMC Transformer runs "
            "have covariances to fit)"
        )
    for label, valid in tuned.items():
        unknown = [site for site in em_sites or () if site not in valid]
        if unknown or (em_sites is not None and not em_sites):
            model = loaded[label][0]["model"]["name"]
            raise ValueError(
                f"em_sites: run {label!r} (model {model!r}) has no covariances {unknown or list(em_sites)}; "
                f"its valid sites are {', '.join(valid)}"
            )


@dataclass(frozen=True)
class ForecastSpec:
    """The settings of :func:`compare_forecasts`, checked when the spec is made (one ``ValueError`` naming the setting).

    ``observed`` steps are given (default the data's ``observed_days``, COVID: 40) and ``horizon`` steps forecast
    (default the rest of each sequence) by ``num_samples`` paths (at least 2), a particle model filtering with
    ``num_particles``. With ``em_iterations > 0``, models with ``fine_tuned`` (the SMC Transformer) first fit each
    test sequence's own covariances (``em_sites``, default all) by that many EM steps on its observed steps (the
    paper's section 4.2). With ``recalibrate`` (``"scale"`` or ``"conformal"``), a correction fitted on the
    validation split's forecasts (pooled over the steps ahead, or per step with ``recalibrate_per_step``) gives each
    run a second row. ``shown`` test sequences are drawn; ``seed`` seeds the draws on ``device``; ``data_path``
    forecasts the test split of this file instead (``--data``), in the data's own units.
    """

    observed: int | None = None
    horizon: int | None = None
    num_samples: int = FORECAST_SAMPLES
    num_particles: int = FORECAST_PARTICLES
    em_iterations: int = 0
    em_sites: tuple[str, ...] | None = None
    recalibrate: str | None = None
    recalibrate_per_step: bool = False
    shown: int = 3
    seed: int = 0
    device: str = "cpu"
    data_path: str | Path | None = None

    def __post_init__(self):
        em_iterations, num_samples = self.em_iterations, self.num_samples
        if isinstance(em_iterations, bool) or not isinstance(em_iterations, int) or em_iterations < 0:
            raise ValueError(f"em_iterations must be an int >= 0, got {em_iterations!r}")
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 2:
            raise ValueError(
                f"num_samples must be an int >= 2 (a forecast's spread needs two paths), got {num_samples!r}"
            )
        if self.recalibrate is not None and self.recalibrate not in RECALIBRATION_METHODS:
            raise ValueError(f"recalibrate must be one of {RECALIBRATION_METHODS} or None, got {self.recalibrate!r}")
        if isinstance(self.em_sites, str):
            object.__setattr__(self, "em_sites", (self.em_sites,))
        elif self.em_sites is not None:
            object.__setattr__(self, "em_sites", tuple(self.em_sites))


def compare_forecasts(runs: dict[str, str | Path], out: str | Path, spec: ForecastSpec = ForecastSpec()) -> dict:
    """Forecast the test split of every run in ``runs`` (``{label: run folder}``) as ``spec`` says; write the report
    (``forecast.json``, ``forecast.md``, ``forecast.png``) to ``out``. Returns ``{label: metrics}``.

    All runs must use the same data set. Every run is loaded and checked before any forecast: its model forecasts (a
    run that reads covariates is refused: :mod:`~ppl_models.experiments.beyond_forecasts` and a backtest give it
    them), ``em_sites`` (which
    needs ``em_iterations > 0``) among the covariances of each run's model that has EM, and the ``S x B x H x D``
    float32 forecasts within the available memory. The report says which runs were fitted by EM.
    """
    if not runs:
        raise ValueError("runs must name at least one run folder")
    out = Path(out)
    loaded = {label: load_run(label, folder, spec.device, spec.data_path) for label, folder in runs.items()}
    for label, (_, data, model) in loaded.items():
        if not model.supports("forecast"):
            why = model.limitations.get("forecast", "not declared")
            reads = " (--beyond H and ppl-models backtest give it them)" if getattr(data, "covariates", None) else ""
            raise ValueError(f"run {label!r}: {type(model).__name__} cannot forecast the test split: {why}{reads}")
    _check_em(loaded, spec.em_iterations, spec.em_sites)
    windows = _windows(loaded, spec.observed, spec.horizon, spec.num_samples)  # every run checked before any forecast
    results, bands = {}, {}
    for label, (config, data, model) in loaded.items():
        for row_label, (row_samples, target, method, tuned) in _forecast_rows(
            label, model, data, windows[label], spec
        ).items():
            results[row_label] = {
                "model": config["model"]["name"],
                "em_iterations": spec.em_iterations if tuned else 0,
                "recalibration": _recalibration_name(method, spec.recalibrate_per_step),
                **_scores(row_samples, target),
            }
            bands[row_label] = (row_samples.mean(0), row_samples.std(0))
    data = list(loaded.values())[-1][1]
    start, steps = windows[list(loaded)[-1]]
    report = {
        "data": next(iter(loaded.values()))[1].description,
        "observed": start,
        "horizon": steps,
        "samples": spec.num_samples,
        "runs": {k: str(v) for k, v in runs.items()},
        "metrics": results,
    }
    write_json(out / "forecast.json", report)
    write_text(out / "forecast.md", _table(report))
    truth = _truth(data, "test")
    _plot((truth, start, steps), bands, min(spec.shown, truth.shape[0]), out / "forecast.png")
    return results


def _forecast_rows(label: str, model, data, window: tuple[int, int], spec: ForecastSpec) -> dict:
    """``{row label: (forecasts [S, B, H, D], outcomes [B, H, D], recalibration method or None, tuned by EM)}`` of
    one run: its test forecasts and, with ``spec.recalibrate``, their recalibrated copy (``<label> + <method>``)."""
    start, steps = window
    generator = torch.Generator(device=spec.device).manual_seed(spec.seed)
    torch.manual_seed(spec.seed)
    tuned = spec.em_iterations > 0 and isinstance(model, SMCTransformer)  # per-sequence EM is SMC-T's alone
    em = {"iterations": spec.em_iterations, "sites": spec.em_sites} if tuned else None
    options = {"num_samples": spec.num_samples, "num_particles": spec.num_particles, "em": em, "generator": generator}
    samples, target = _forecast_split(model, data, "test", start, steps, **options)
    rows = {label: (samples, target, None, tuned)}
    if spec.recalibrate is not None:
        validation = _forecast_split(model, data, "valid", start, steps, **options)
        fitted = fit_recalibration(*validation, spec.recalibrate, per_step=spec.recalibrate_per_step)
        rows[f"{label} + {spec.recalibrate}"] = (fitted.apply(samples), target, spec.recalibrate, tuned)
    return rows


def _windows(loaded: dict, observed: int | None, horizon: int | None, num_samples: int) -> dict[str, tuple]:
    """``{label: (observed steps, steps ahead)}`` (the data's own steps) of each run, after checking the runs share
    one data set of equal-length test sequences and that ``num_samples`` paths of them fit in memory."""
    windows, description = {}, None
    for label, (_, data, _) in loaded.items():
        x, mask = data.test
        if not bool(mask.all()):
            raise ValueError(f"run {label!r}: forecasts need test sequences of equal length")
        lag, total = _lag(data), x.shape[1] + _lag(data)  # a differenced row starts lag steps into the data
        # the COVID data set says how many days are observed; others need --observed
        start = getattr(data, "observed_days", None) if observed is None else observed
        if start is None or not lag < start < total:
            raise ValueError(
                f"observed must be in {lag + 1}..{total - 1} (steps given before forecasting), got {start!r}"
            )
        steps = total - start if horizon is None else check_positive_int(horizon, name="horizon")
        if start + steps > total:
            raise ValueError(f"observed + horizon = {start + steps} exceeds the {total} test steps")
        if description not in (None, data.description):
            raise ValueError(f"run {label!r} uses other data than the runs before it: {data.description!r}")
        description = data.description
        size = [num_samples, x.shape[0], steps, x.shape[-1]]
        check_memory(
            {
                "num_samples": (
                    num_samples,
                    num_samples * x.shape[0] * steps * x.shape[-1] * FLOAT32,
                    " x ".join(map(str, size)) + " (paths x sequences x steps x features) x 4 bytes",
                )
            }
        )
        windows[label] = start, steps
    return windows


def _forecast_split(
    model,
    data,
    split: str,
    start: int,
    steps: int,
    *,
    num_samples: int,
    num_particles: int,
    em: dict | None,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forecasts ``[S, B, steps, D]`` of ``split`` from its first ``start`` steps of data, and the outcomes
    ``[B, steps, D]``, in the data's own units (:func:`paths_in_units`, :func:`_truth`).

    The prefix goes to ``generator``'s device. With ``em`` (``{"iterations", "sites"}``) each
    sequence first gets its own covariances.
    """
    values, valid = getattr(data, split)
    if not bool(valid.all()):
        raise ValueError(f"forecasts need {split} sequences of equal length")
    first = start - _lag(data)  # the model's steps: a differenced row starts lag steps into the data
    prefix = values[:, :first].to(generator.device)
    if em is not None:
        model = model.fine_tuned(
            prefix, iterations=em["iterations"], num_particles=num_particles, sites=em["sites"], generator=generator
        )
    samples = model.forecast(prefix, None, steps, num_samples, num_particles=num_particles, generator=generator).cpu()
    return paths_in_units(data, samples, split, first), _truth(data, split)[:, start : start + steps]


def _lag(data) -> int:
    """The differencing lag of ``data``'s transform: its rows start that many steps into the data (0: none)."""
    return getattr(data.units("test"), "lag", 0)


def _truth(data, split: str) -> torch.Tensor:
    """``[N, T, D]``: the rows of ``split`` in the data's own units, from the data's first step (a differenced row's
    first ``lag`` steps included)."""
    units = data.units(split)
    if isinstance(units, DataUnits):
        return units.data
    return _in_units(data, getattr(data, split)[0], split)


def paths_in_units(data, paths: torch.Tensor, split: str, first: int, rows=None) -> torch.Tensor:
    """Forecasts ``paths [S, b, H, D]`` of rows ``rows`` (default all) of ``split``, after their first ``first``
    steps as the model sees them, in the data's own units (a transform undone by the split's
    :class:`~ppl_models.inference.data.DataUnits`)."""
    units = data.units(split)
    if isinstance(units, DataUnits):
        return units.forecast(paths, rows, first)
    return _in_units(data, paths, split)


def _in_units(data, values: torch.Tensor, split: str) -> torch.Tensor:
    """``values [..., D]`` of ``split`` in the data's own units: by the data set's ``untransform`` (COVID) or by
    the standardisation of a user's file."""
    if getattr(data, "untransform", None) is not None:
        return data.untransform(values, split)
    return values if data.standardizer is None else data.standardizer.inverse(values, dtype=torch.float64)


def _recalibration_name(method: str | None, per_step: bool) -> str:
    if method is None:
        return "none"
    return f"{method} ({'per step' if per_step else 'pooled'}, validation split)"


def _scores(samples: torch.Tensor, target: torch.Tensor) -> dict:
    """Pooled calibration metrics, MSE of the mean path and coverage per step ahead of forecasts ``[S, B, H, D]``."""
    metrics = calibration.calibration_summary(samples, target)
    metrics["mse"] = float(((samples.mean(0) - target) ** 2).mean())
    metrics["coverage_by_step"] = {f"{level:g}": rates for level, rates in coverage_by_step(samples, target).items()}
    return metrics


def _table(report: dict) -> str:
    described = ("model", "em_iterations", "recalibration", "coverage_by_step")
    keys = [k for k in next(iter(report["metrics"].values())) if k not in described]
    lines = [
        f"# Forecasts: {report['data']}",
        "",
        f"{report['observed']} steps observed, {report['horizon']} forecast, {report['samples']} paths each.",
        "",
        "| run | EM steps per sequence | recalibration | " + " | ".join(keys) + " |",
        "|---|---:|---|" + "---:|" * len(keys),
    ]
    for label, row in report["metrics"].items():
        lines.append(
            f"| {label} | {row['em_iterations']} | {row['recalibration']} | "
            + " | ".join(f"{row[k]:.4f}" for k in keys)
            + " |"
        )
    for level in ("0.8", "0.95"):
        lines += [
            "",
            f"Coverage of the {float(level):.0%} interval by step ahead:",
            "",
            "| run | " + " | ".join(str(h + 1) for h in range(report["horizon"])) + " |",
            "|---|" + "---:|" * report["horizon"],
        ]
        for label, row in report["metrics"].items():
            lines.append(f"| {label} | " + " | ".join(f"{v:.2f}" for v in row["coverage_by_step"][level]) + " |")
    return "\n".join(lines) + "\n"


def _plot(truth, bands, shown: int, path: Path) -> None:
    x, start, steps = truth
    figure = Figure(figsize=(4.5 * shown, 3.2))
    axes = figure.subplots(1, shown, squeeze=False)
    days = torch.arange(start + steps)
    ahead = days[start:]
    for i, axis in enumerate(axes[0]):
        axis.plot(days, x[i, : start + steps, 0], color="black", lw=1.2, label="truth")
        for label, (mean, std) in bands.items():
            line = axis.plot(ahead, mean[i, :, 0], lw=1.2, label=label)[0]
            axis.fill_between(
                ahead, mean[i, :, 0] - std[i, :, 0], mean[i, :, 0] + std[i, :, 0], color=line.get_color(), alpha=0.25
            )
        axis.axvline(start - 0.5, color="grey", ls=":")
        axis.set_title(f"test sequence {i}")
        axis.set_xlabel("step")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    save_png(figure, path)

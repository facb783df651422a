"""The backtest of a finished run (``ppl-models backtest RUN_DIR``): its model's forecasts of ``H`` steps from many
origins of each test series, each conditioned on the history before it (:mod:`ppl_models.inference.backtest`), judged
per step ahead in the data's units.

The best checkpoint is loaded as :func:`ppl_models.experiments.runner.evaluate` loads it. On a split by time the
test series' earlier steps are history only and the origins lie in the held-out segment (the data's ``scored``
test mask); otherwise every step of a test series but its first may be an origin. ``backtest.json`` (every figure)
and ``backtest.md`` (a table per step ahead) are written, each atomically, to ``out`` (default ``RUN_DIR/backtest``).
"""

from __future__ import annotations

from pathlib import Path

import pyro
import torch

from ppl_models.inference.backtest import backtest
from ppl_models.inference.io import write_json, write_text
from ppl_models.inference.validation import check_positive_int

from .build import build_experiment, resolve_device
from .config import check_config
from .forecasting import FORECAST_PARTICLES
from .run_folder import check_run_folder, check_writable, load_run_checkpoint, read_config_json

__all__ = ["backtest_run"]


def backtest_run(run_dir: str | Path, *, horizon: int, origins: int, num_samples: int = 200,
                 num_particles: int = FORECAST_PARTICLES, season: int = 1, device: str | None = None,
                 out: str | Path | None = None) -> dict:  # fmt: skip
    """Backtest the best checkpoint of the run in ``run_dir`` on its test split; write ``backtest.json`` and
    ``backtest.md`` to ``out`` (default ``RUN_DIR/backtest``) and return the report.

    ``horizon`` steps ahead from up to ``origins`` origins per test series, ``num_samples`` draws per forecast,
    ``num_particles`` for a particle model's filter, ``season`` the lag of MASE's scale (see
    :func:`ppl_models.inference.backtest.backtest`).
    """
    run_dir = check_run_folder(run_dir)
    for name, value in (("horizon", horizon), ("origins", origins), ("num_particles", num_particles),
                        ("season", season)):  # fmt: skip
        check_positive_int(value, name=name)
    check_positive_int(num_samples, name="num_samples", minimum=2)
    out = check_writable(Path(out) if out is not None else run_dir / "backtest", "out")
    config, data, model, device = _load(run_dir, device)
    if not model.supports("forecast"):
        raise ValueError(f"run_dir {run_dir}: model {config['model']['name']!r} cannot forecast "
                         f"({model.limitations.get('forecast', 'not declared')})")  # fmt: skip
    x, mask = (tensor.to(device) for tensor in data.test)
    scored = data.scored_mask("test") if hasattr(data, "scored_mask") else None
    pyro.set_rng_seed(config["seed"])
    generator = torch.Generator(device=device).manual_seed(config["seed"])
    result = backtest(model, x, mask, scored, horizon=horizon, origins=origins, num_samples=num_samples,
                      standardizer=data.standardizer, season=season, generator=generator,
                      forecast_kwargs={"num_particles": num_particles})  # fmt: skip
    report = {"run_dir": str(run_dir), "model": config["model"]["name"], "data": data.description, "split": "test",
              "units": "the data's" if getattr(data, "untransform", None) is None else "the model's (transformed)",
              "num_particles": num_particles, **result.to_dict()}  # fmt: skip
    write_json(out / "backtest.json", report)
    write_text(out / "backtest.md", _table(report))
    return report


def _load(run_dir: Path, device: str | None):
    """``(config, data, model, device)`` of the run, its best checkpoint loaded on ``device`` (default the run's)."""
    config = read_config_json(run_dir / "config.json")
    if config.get("kind") == "supervised":
        raise ValueError(f"run_dir {run_dir} is a supervised run: a backtest needs a model of the series")
    config = check_config(config)
    device = resolve_device(device or config["device"])
    data, model, objective = build_experiment(config)
    load_run_checkpoint(run_dir, objective, config)
    return config, data, model.to(device).eval(), device


def _table(report: dict) -> str:
    """``backtest.md``: one row per step ahead."""
    figures = report["per_horizon"]
    used = sorted(set(report["origins_used"]))
    origins = f"{used[0]}" if len(used) == 1 else f"{used[0]} to {used[-1]}"
    lines = [f"# Backtest: {report['model']} on {report['data']}", "",
             f"{report['forecasts']} forecasts of {report['horizon']} steps from {origins} origins "
             f"per test series, {report['num_samples']} draws each, in {report['units']} units; MASE scaled by the "
             f"history's lag-{report['season']} differences ({report['mase_left_out']} forecasts x features "
             "without one left out).", "",
             "| h | targets | CRPS | coverage 80 % | MSE | MASE |", "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for h, count, *values in zip(figures["h"], figures["targets"], figures["crps"], figures["coverage_80"],
                                 figures["mse"], figures["mase"]):  # fmt: skip
        lines.append(f"| {h} | {count} | " + " | ".join("-" if v is None else f"{v:.4g}" for v in values) + " |")
    return "\n".join(lines) + "\n"

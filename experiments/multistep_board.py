"""``ppl-models leaderboard ... --horizon H --origins N``: every row of a board judged on forecasts of ``H`` steps from
the same origins of each test series, beside its one-step figures.

**Origins.** Up to ``N`` per test series, evenly spaced (:func:`~ppl_models.inference.backtest.origin_steps`) over
its scored test steps that every row can forecast from: a model whose transform differences at lag ``L`` starts its
series ``L`` steps later, so each origin has at least ``1 + L`` steps of history for the largest ``L`` of the board's
models (:func:`common_origins`). The same steps of the data as read are every row's origins and targets.

**Rows, each given only the history before the origin.** A model of the collection is its run's best checkpoint
(:func:`~ppl_models.experiments.forecasting.load_run`), filtered on each series' steps before the origin (its
``forecast`` of the history, the later steps masked out and zeroed). A classical row is its forecaster fitted on the
training split as the board fitted it, then *refitted* at each origin on the series' own steps before it (ARIMA's and
ETS's searches, the VAR's coefficients, the naive forecasts' noise; the training split's pooled fit where that
history is too short). Both go through :func:`~ppl_models.inference.backtest.backtest_held_out` with
:data:`~ppl_models.inference.defaults.BACKTEST_SAMPLES` draws a forecast, in the data's units.

**Covariates.** A model in :class:`~ppl_models.covariate_model.CovariateInputs` and the ``arimax`` row are also given
the known covariates of the ``H`` rows after the origin, never their targets (:mod:`~ppl_models.inference.backtest`);
only the targets are judged; with past-only covariates a horizon of more than one step is refused.

**Figures** (:mod:`~ppl_models.experiments.multistep_scores`): per step ahead the CRPS of the draws (the energy form
``E|X - y| - E|X - X'| / 2``, :func:`~ppl_models.inference.calibration.crps`) and the coverage of their central
80 % interval, pooled over series, origins and features; the means over horizons; and against the classical row of
lowest mean CRPS, a paired bootstrap interval of the difference in mean CRPS and its verdict (``beats`` / ``tie`` /
``behind``). Rows rank by mean CRPS; a row flagged for coverage (its one-step validation coverage, or the multi-step
80 % coverage averaged over horizons, outside :data:`~ppl_models.experiments.board_flags.COVERAGE_RANGE`) is not
ranked first.

Each row's figures are kept in ``OUT/multistep/<row>.json`` beside what they were computed from (the settings, the
origins, the hash of the run's best checkpoint or the classical row's key): a rerun keeps them.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from functools import partial
from pathlib import Path

import pyro
import torch

from ppl_models.covariate_model import reads_covariates
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.backtest import BacktestOptions, backtest_held_out, longest_reach, origin_steps
from ppl_models.inference.backtest_checks import default_scored
from ppl_models.inference.defaults import BACKTEST_SAMPLES, FORECAST_PARTICLES
from ppl_models.inference.evaluation.held_out import HeldOutData
from ppl_models.inference.validation import check_positive_int

from .board_flags import COVERAGE_RANGE
from .board_training import attempt
from .build import resolve_device
from .classical_rows import KEY_FILE, data_units, fitted_classical
from .classical_work import ProgressLine
from .covariate_futures import past_refusal
from .forecasting import load_run
from .multistep_scores import (
    BOOTSTRAP_RESAMPLES,
    INTERVAL_LEVEL,
    MIN_CLUSTERS,
    PairRecord,
    mean_over_horizons,
    pair_shares,
    paired_bootstrap,
    verdict,
)
from .run_folder import read_config_json

__all__ = ["MULTISTEP_FOLDER", "check_multistep", "check_reach", "common_origins", "judge_rows", "multistep_section"]

#: the board's folder of the rows' multi-step figures
MULTISTEP_FOLDER = "multistep"
#: the definition of the multi-step figures, in their keys: figures computed under an earlier one are computed again
VERSION = 1
#: the figures per step ahead a row keeps
FIGURES = ("h", "targets", "crps", "coverage_50", "coverage_80", "coverage_95")


def check_multistep(horizon: int | None, origins: int | None) -> tuple[int, int] | None:
    """``(horizon, origins)`` where a multi-step table is asked for (both given, each an integer >= 1), ``None``
    where neither is; one without the other is a ``ValueError``."""
    if horizon is None and origins is None:
        return None
    if horizon is None or origins is None:
        given, missing = ("--horizon", "--origins") if origins is None else ("--origins", "--horizon")
        raise ValueError(f"{given} asks for the multi-step table, which needs {missing} too (--horizon H --origins N)")
    return check_positive_int(horizon, name="horizon"), check_positive_int(origins, name="origins")


def check_reach(data, horizon: int) -> None:
    """Refuse a multi-step table on ``data`` (:class:`~ppl_models.experiments.data.ExperimentData`) that is binary,
    read with past-only covariates beyond one step, or whose test series hold no run of ``horizon`` scored steps
    after a first step of history."""
    if data.binary:
        raise ValueError(
            "--horizon: the multi-step table judges forecasts of real values (CRPS, coverage); on 0/1 data "
            "ppl-models backtest RUN --horizon H --origins N gives the Brier score and ECE per step ahead"
        )
    why = past_refusal(getattr(data, "covariates", None), horizon)
    if why is not None:
        raise ValueError(f"--horizon {horizon}: {why} (--past-covariates); choose --horizon 1")
    longest = longest_reach(data.levels.test[1], _scored(data))
    if not longest:
        raise ValueError("--horizon: the test series have no held-out step with history before it: nothing to forecast")
    if horizon > longest:
        raise ValueError(
            f"--horizon {horizon} is longer than the longest held-out segment of a test series ({longest} steps "
            f"with history before them), so no forecast has a target that far ahead: choose --horizon {longest} "
            "or less"
        )


def common_origins(data, runs: dict[str, Path], origins: int) -> list[list[int]]:
    """Per test series of ``data``, up to ``origins`` origin steps of the data as read that every row can forecast
    from: its scored steps after the first ``1 + L`` (``L`` the largest differencing lag of the transforms of the
    ``runs``, ``{model: run folder}``), evenly spaced."""
    lag = max((_transform_lag(folder) for folder in runs.values()), default=0)
    candidates = _scored(data).clone()
    candidates[:, : lag + 1] = False
    starts = origin_steps(candidates, origins)
    if not any(starts):
        raise ValueError(
            f"--origins: no test series has a held-out step after {lag + 1} steps of history (the models' "
            "transforms difference at that lag), so the multi-step table has no origin"
        )
    return starts


def judge_rows(
    out: Path,
    data,
    folders: dict[str, Path],
    one_step: list[dict],
    horizon: int,
    origins: int,
    device: str | None = None,
    season: int | None = None,
) -> dict:
    """Judge the rows ``folders`` (``{name: run folder or classical row folder}``) of the board in ``out`` whose
    one-step rows are ``one_step`` (ranked, with their ``kind`` and flags) on forecasts of ``horizon`` steps from the
    same origins (:func:`common_origins`) on ``device`` (``None``: each run's own), a classical row with ``season``
    (``None``: detected); return the ``multistep`` section of ``leaderboard.json`` (:func:`multistep_section`),
    keeping each row's figures computed earlier from the same settings, origins and row."""
    started = time.perf_counter()
    kinds = {row["model"]: row["kind"] for row in one_step}
    runs = {name: folder for name, folder in folders.items() if kinds[name] == "collection"}
    starts = common_origins(data, runs, origins)
    settings = {"version": VERSION, "horizon": horizon, "samples": BACKTEST_SAMPLES, "origins": starts}
    results, failed = {}, {}
    for name, folder in folders.items():
        kind = kinds[name]
        key = json.loads(json.dumps({**settings, "row": _row_source(folder, kind)}, sort_keys=True))
        path = out / MULTISTEP_FOLDER / f"{name}.json"
        kept = _kept(path, key)
        if kept is not None:
            print(f"{name}: multi-step figures computed earlier from the same row and settings, kept ({path})")
            results[name] = {**kept, "kind": kind}
            continue
        print(f"{name}: forecasting {horizon} steps ahead from the multi-step origins", flush=True)
        if kind == "collection":
            work = partial(_judge_run, name, folder, starts, horizon, device)
        else:
            work = partial(_judge_classical, name, data, starts, horizon, season)
        reason = attempt(name, partial(_judge_into, results, name, kind, work, path, key))
        if reason is not None:
            failed[name] = (kind, reason)
    section = multistep_section(results, failed, one_step, horizon=horizon, origins=origins, starts=starts)
    section["seconds"] = time.perf_counter() - started
    print(f"multi-step table: {section['seconds']:.0f} s", flush=True)
    return section


def multistep_section(
    results: dict[str, dict],
    failed: dict[str, tuple[str, str]],
    one_step: list[dict],
    *,
    horizon: int,
    origins: int,
    starts: list[list[int]],
) -> dict:
    """The ``multistep`` section of ``leaderboard.json`` from each row's figures (``results``: ``{name: {kind,
    per_horizon, crps_mean, coverage_80_mean, forecasts, seconds, pairs}}``) and failures (``{name: (kind, reason)}``):
    the rows compared with the classical row of lowest mean CRPS, flagged and ranked."""
    classical = {n: r for n, r in results.items() if r["kind"] == "classical" and r["crps_mean"] is not None}
    reference = min(classical, key=lambda n: classical[n]["crps_mean"], default=None)
    series = {s for r in results.values() for s in r["pairs"]["series"]}
    by_series = len(series) >= MIN_CLUSTERS
    flags = {row["model"]: row.get("flags") or [] for row in one_step}
    rows = [
        {
            "model": name,
            "kind": result["kind"],
            "per_horizon": result["per_horizon"],
            "crps_mean": result["crps_mean"],
            "coverage_80_mean": result["coverage_80_mean"],
            "forecasts": result["forecasts"],
            "seconds": result["seconds"],
            "versus": _versus(result, results[reference], reference, by_series) if reference else None,
            "flags": _flags(result, flags.get(name, [])),
        }
        for name, result in results.items()
    ]
    rows += [
        {"model": n, "kind": kind, "failed": why, "flags": [f"failed: {why}"]} for n, (kind, why) in failed.items()
    ]
    ranked, ranking = _ranked(rows)
    return {
        "horizon": horizon,
        "origins": origins,
        "samples": BACKTEST_SAMPLES,
        "particles": FORECAST_PARTICLES,
        "origin_steps": starts,
        "forecasts": sum(len(row) for row in starts),
        "reference": reference,
        "interval": {
            "method": "paired bootstrap, percentile interval",
            "resampled": "series" if by_series else "(series, origin) pairs",
            "resamples": BOOTSTRAP_RESAMPLES,
            "level": INTERVAL_LEVEL,
            "seed": 0,
        },
        "ranking": ranking,
        "rows": ranked,
    }


def _judge_into(results: dict, name: str, kind: str, work, path: Path, key: dict) -> None:
    """Run ``work()`` (a row's figures), keep them in ``path`` with ``key`` and in ``results[name]``."""
    result = work()
    write_json(path, {"key": key, "result": result})
    results[name] = {**result, "kind": kind}


def _judge_run(name: str, folder: Path, starts: list[list[int]], horizon: int, device: str | None) -> dict:
    """A model's figures: its run's best checkpoint, filtered on each series' history before each origin."""
    device = str(resolve_device(device or read_config_json(folder / "config.json")["device"]))
    config, data, model = load_run(name, folder, device)
    if not model.supports("forecast") and not reads_covariates(model):
        raise ValueError(f"{name} cannot forecast ({model.limitations.get('forecast', 'not declared')})")
    x, mask = (tensor.to(device) for tensor in data.test)
    units = data.units("test")
    return _judge(
        name,
        model,
        HeldOutData(
            x, mask, scored=data.scored_mask("test"), standardizer=units, binary=False, covariates=data.covariates
        ),
        starts,
        horizon,
        lag=getattr(units, "lag", 0),
        seed=config["seed"],
        forecast_kwargs={"num_particles": FORECAST_PARTICLES},
    )


def _judge_classical(name: str, data, starts: list[list[int]], horizon: int, season: int | None) -> dict:
    """A classical row's figures: fitted on the training split as the board fitted it, refitted on each series'
    history before each origin (seed 0, as the board's)."""
    model = fitted_classical(name, data, season=season, progress=ProgressLine(name))
    x, mask = data_units(data.levels, "test")
    held_out = HeldOutData(x, mask, scored=data.levels.scored["test"], binary=False, covariates=data.covariates)
    return _judge(name, model, held_out, starts, horizon, lag=0, seed=0, forecast_kwargs={}, row_by_row=True)


def _judge(
    name: str,
    model,
    held_out: HeldOutData,
    starts: list[list[int]],
    horizon: int,
    *,
    lag: int,
    seed: int,
    forecast_kwargs: dict,
    row_by_row: bool = False,
) -> dict:
    """The figures of ``model`` on ``held_out`` from the origins ``starts`` (steps of the data as read; ``lag``
    steps earlier in the model's own, transformed series)."""
    if held_out.x.shape[0] != len(starts):
        raise ValueError(f"{name}: its test split has {held_out.x.shape[0]} series, the board's {len(starts)}")
    clock = time.perf_counter()
    pairs = PairRecord(lag)
    counted = _Counted(model, ProgressLine(f"{name}: multi-step"), sum(map(len, starts)), row_by_row)
    pyro.set_rng_seed(seed)
    result = backtest_held_out(
        counted,
        held_out,
        BacktestOptions(horizon=horizon, origins=max(map(len, starts)), num_samples=BACKTEST_SAMPLES),
        generator=torch.Generator(device=held_out.x.device).manual_seed(seed),
        forecast_kwargs=forecast_kwargs,
        starts=[[step - lag for step in row] for row in starts],
        on_forecast=pairs,
    )
    figures = {key: result.per_horizon[key] for key in FIGURES}
    return {
        "per_horizon": figures,
        "crps_mean": mean_over_horizons(figures["crps"]),
        "coverage_80_mean": mean_over_horizons(figures["coverage_80"]),
        "forecasts": result.forecasts,
        "seconds": time.perf_counter() - clock,
        "pairs": pairs.to_dict(),
    }


class _Counted:
    """``model``'s ``forecast`` (and ``forecast_given``, where it has one) that tells ``progress`` how many of
    ``total`` forecasts are made; ``row_by_row``: one series at a time (a classical row fits each series' history in
    turn: the same draws as all at once)."""

    def __init__(self, model, progress: ProgressLine, total: int, row_by_row: bool):
        self.model, self.progress, self.total, self.row_by_row, self.done = model, progress, total, row_by_row, 0
        if hasattr(model, "forecast_given"):
            self.forecast_given = self._forecast_given

    def forecast(self, x, mask, horizon, num_samples, **options):
        return self._each(lambda rows: self.model.forecast(x[rows], mask[rows], horizon, num_samples, **options), x)

    def _forecast_given(self, x, mask, future, horizon, num_samples, **options):
        return self._each(
            lambda rows: self.model.forecast_given(x[rows], mask[rows], future[rows], horizon, num_samples, **options),
            x,
        )

    def _each(self, forecast, x):
        if not self.row_by_row:
            return self._told(forecast(slice(None)), x.shape[0])
        return torch.cat([self._told(forecast(slice(i, i + 1)), 1) for i in range(x.shape[0])], 1)

    def _told(self, draws, count: int):
        self.done += count
        self.progress("forecasts", self.done, self.total)
        return draws


def _versus(result: dict, reference: dict, name: str, by_series: bool) -> dict:
    """A row against the ``reference`` row ``name``: the difference in mean CRPS over their shared (series, origin)
    pairs with its paired bootstrap interval and verdict."""
    if result is reference:
        return {"reference": name, "difference": 0.0, "low": None, "high": None, "verdict": "reference"}
    own, other = _shares(result), _shares(reference)
    if set(own) != set(other):
        raise ValueError(f"the multi-step rows were judged on different origins than {name}'s")
    pairs = sorted(own)
    differences = [own[pair] - other[pair] for pair in pairs]
    low, high = paired_bootstrap(differences, [s for s, _ in pairs] if by_series else None)
    difference = sum(differences) / len(differences)
    return {"reference": name, "difference": difference, "low": low, "high": high, "verdict": verdict(low, high)}


def _shares(result: dict) -> dict[tuple[int, int], float]:
    """``{(series, origin): its share of the row's mean CRPS}`` (:func:`pair_shares`)."""
    pairs = result["pairs"]
    return dict(zip(zip(pairs["series"], pairs["origins"]), pair_shares(pairs["crps"]).tolist()))


def _flags(result: dict, one_step_flags: list[str]) -> list[str]:
    """A row's coverage flags: its one-step row's validation coverage flag, and a multi-step 80 % coverage (mean over
    horizons) outside :data:`COVERAGE_RANGE`."""
    flags = [flag for flag in one_step_flags if flag.startswith("validation coverage")]
    coverage = result["coverage_80_mean"]
    if coverage is not None and not COVERAGE_RANGE[0] <= coverage <= COVERAGE_RANGE[1]:
        flags.append(f"multi-step coverage at 80 % is {coverage:.2f}")
    return flags


def _ranked(rows: list[dict]) -> tuple[list[dict], str | None]:
    """``rows`` by mean CRPS (failed rows last), the best row without a flag first; and why, where it is not the row
    of lowest mean CRPS."""
    ranked = sorted(rows, key=lambda row: (bool(row.get("failed")), _mean(row)))
    leader = next((row for row in ranked if not row["flags"] and math.isfinite(_mean(row))), None)
    if leader is None or leader is ranked[0]:
        return ranked, None
    above = [row for row in ranked if _mean(row) < _mean(leader)]
    why = "; ".join(f"{row['model']}: {', '.join(row['flags'])}" for row in above)
    first = [leader, *(row for row in ranked if row is not leader)]
    return first, f"{leader['model']} is ranked first as the best row without a flag; those of lower mean CRPS are " + (
        f"flagged ({why})"
    )


def _mean(row: dict) -> float:
    value = row.get("crps_mean")
    return value if value is not None and math.isfinite(value) else math.inf


def _scored(data) -> torch.Tensor:
    """``[N, T]`` the scored test steps of ``data`` as read."""
    scored = data.levels.scored.get("test")
    return default_scored(data.levels.test[1]) if scored is None else scored


def _transform_lag(folder: Path) -> int:
    """The differencing lag of the transform of the run in ``folder`` (its ``data_split.json``; 0: none)."""
    path = folder / "data_split.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    return int((record.get("transform") or {}).get("lag", 0))


def _row_source(folder: Path, kind: str):
    """What a row's forecasts come from: the hash of a run's best checkpoint, or a classical row's key."""
    if kind == "classical":
        return json.loads((folder / KEY_FILE).read_text())
    return hashlib.sha256((folder / "checkpoints" / "best.pt").read_bytes()).hexdigest()


def _kept(path: Path, key: dict) -> dict | None:
    """The figures kept in ``path`` where they were computed from ``key``, else ``None``."""
    try:
        saved = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None
    return saved.get("result") if isinstance(saved, dict) and saved.get("key") == key else None

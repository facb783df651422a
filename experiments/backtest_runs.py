"""The backtest of a finished run or of a board's classical row (``ppl-models backtest FOLDER``): forecasts of ``H``
steps from many origins of each test series, each conditioned on the history before it
(:mod:`ppl_models.inference.backtest`), judged per step ahead in the data's units.

A run's best checkpoint is loaded as :func:`ppl_models.experiments.runner.evaluate` loads it. A classical row's folder
(``OUT/classical/<name>`` of a leaderboard) has no checkpoint: its forecaster is fitted again on the board's training
split, as the board fitted it (:func:`~ppl_models.experiments.classical_rows.classical_row`), and judged on the same
test series. On a split by time the test series' earlier steps are history only and the origins lie in the held-out
segment (the data's ``scored`` test mask); otherwise every step of a test series but its first may be an origin. A
horizon longer than every held-out segment is refused (no forecast would have a target that far ahead). On data read
with known covariates a run that reads them, and the ``arimax`` row, are given the covariates of the steps after
each origin (never their targets) and only the targets are judged; with past-only covariates a horizon of more than
one step is refused.
``backtest.json`` (every figure) and ``backtest.md`` (the counts in words, a table per step ahead) are written, each
atomically, to ``out`` (default ``FOLDER/backtest``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pyro
import torch

from ppl_models.covariate_model import reads_covariates
from ppl_models.inference.atomic_files import write_json, write_text
from ppl_models.inference.backtest import backtest, longest_reach
from ppl_models.inference.defaults import BACKTEST_SAMPLES, FORECAST_PARTICLES
from ppl_models.inference.validation import check_positive_int

from .build import build_experiment, resolve_device
from .classical_rows import classical_row, data_units, fitted_classical, is_classical_folder
from .config import check_config
from .covariate_futures import past_refusal
from .run_folder import check_run_folder, check_writable, load_run_checkpoint, read_config_json

__all__ = ["backtest_run"]

#: the table's columns ``(figure, title)`` for real-valued and for binary data
REAL_COLUMNS = (("crps", "CRPS"), ("coverage_80", "coverage 80 %"), ("mse", "MSE"), ("mase", "MASE"))
BINARY_COLUMNS = (
    ("brier", "Brier"),
    ("ece", "ECE"),
    ("mean_probability", "mean probability"),
    ("frequency_of_ones", "frequency of 1s"),
)


class _Subject(NamedTuple):
    """What is backtested: the report's first fields, the forecaster, the test split ``x [N, T, D]``, ``mask [N, T]``,
    ``scored [N, T]`` (or ``None``), its way back to the data's units, whether it is binary, the seed, and more
    keyword arguments of the forecaster's ``forecast``, and the data's covariate layout (or ``None``)."""

    header: dict
    model: object
    x: torch.Tensor
    mask: torch.Tensor
    scored: torch.Tensor | None
    standardizer: object
    binary: bool
    seed: int
    forecast_kwargs: dict
    covariates: object = None


def backtest_run(
    run_dir: str | Path,
    *,
    horizon: int,
    origins: int,
    num_samples: int = BACKTEST_SAMPLES,
    num_particles: int = FORECAST_PARTICLES,
    season: int = 1,
    device: str | None = None,
    out: str | Path | None = None,
    row: str | None = None,
) -> dict:
    """Backtest the best checkpoint of the run in ``run_dir``, or the classical row of a board in ``run_dir``
    (``OUT/classical/<name>``, on the CPU), on its test split; write ``backtest.json`` and ``backtest.md`` to ``out``
    (default ``RUN_DIR/backtest``) and return the report.

    ``horizon`` steps ahead (at most the longest held-out segment of a test series) from up to ``origins`` origins per
    test series, ``num_samples`` draws per forecast, ``num_particles`` for a particle model's filter, ``season`` the
    lag of MASE's scale (see :func:`ppl_models.inference.backtest.backtest`). ``row``: ``run_dir`` is a leaderboard
    folder and the row of that name (a model's run or a classical row, :func:`board_row`) is backtested.
    """
    run_dir = board_row(run_dir, row) if row is not None else Path(run_dir)
    if (run_dir / "leaderboard.json").is_file():
        raise ValueError(
            f"run_dir {run_dir} is a leaderboard folder: name one of its rows with --row ({_rows(run_dir)})"
        )
    for name, value in (
        ("horizon", horizon),
        ("origins", origins),
        ("num_particles", num_particles),
        ("season", season),
    ):
        check_positive_int(value, name=name)
    check_positive_int(num_samples, name="num_samples", minimum=2)
    classical = is_classical_folder(run_dir)
    if not classical:
        check_run_folder(run_dir)
    out = check_writable(Path(out) if out is not None else run_dir / "backtest", "out")
    subject = _classical(run_dir, horizon) if classical else _run(run_dir, horizon, device, num_particles)
    pyro.set_rng_seed(subject.seed)
    generator = torch.Generator(device=subject.x.device).manual_seed(subject.seed)
    result = backtest(
        subject.model,
        subject.x,
        subject.mask,
        subject.scored,
        horizon=horizon,
        origins=origins,
        num_samples=num_samples,
        standardizer=subject.standardizer,
        season=season,
        generator=generator,
        forecast_kwargs=subject.forecast_kwargs,
        binary=subject.binary,
        covariates=subject.covariates,
    )
    report = {**subject.header, "features": subject.x.shape[-1], **result.to_dict()}
    write_json(out / "backtest.json", report)
    write_text(out / "backtest.md", _table(report))
    return report


def _run(run_dir: Path, horizon: int, device: str | None, num_particles: int) -> _Subject:
    """A run's model (its best checkpoint, on ``device``) and test split."""
    config, data, model, device = _load(run_dir, device)
    if not model.supports("forecast") and not reads_covariates(model):
        raise ValueError(
            f"run_dir {run_dir}: model {config['model']['name']!r} cannot forecast "
            f"({model.limitations.get('forecast', 'not declared')})"
        )
    x, mask = (tensor.to(device) for tensor in data.test)
    scored = data.scored_mask("test")
    _check_horizon(horizon, mask, scored, data.covariates)
    header = {
        "run_dir": str(run_dir),
        "model": config["model"]["name"],
        "kind": "collection",
        "data": data.description,
        "split": "test",
        "units": "the data's" if getattr(data, "untransform", None) is None else "the model's (transformed)",
        "num_particles": num_particles,
    }
    options = {"num_particles": num_particles}
    return _Subject(
        header, model, x, mask, scored, data.standardizer, data.binary, config["seed"], options, data.covariates
    )


def _classical(folder: Path, horizon: int) -> _Subject:
    """A board's classical row: its forecaster fitted again on the board's training split, the board's test split as
    read (seed 0, as the board's)."""
    name, data = classical_row(folder)
    x, mask = data_units(data.levels, "test")
    scored = data.levels.scored["test"]
    _check_horizon(horizon, mask, scored, data.covariates)  # before the fit, which can take a while
    header = {
        "run_dir": str(folder),
        "model": name,
        "kind": "classical",
        "data": data.description,
        "split": "test",
        "units": "the data's",
    }
    model = fitted_classical(name, data, season=_board_season(folder))
    return _Subject(header, model, x, mask, scored, None, False, 0, {}, data.covariates)


def board_row(board: str | Path, name: str) -> Path:
    """The folder of row ``name`` of the leaderboard in ``board`` (its ``leaderboard.json``): a model's run folder or
    a classical row's; a ``ValueError`` naming the board's rows where it has none of that name (or failed)."""
    board = Path(board)
    path = board / "leaderboard.json"
    if not path.is_file():
        raise ValueError(
            f"run_dir {board}: --row {name!r} names a row of a leaderboard, but {board} has no leaderboard.json"
        )
    rows = {row["model"]: row for row in json.loads(path.read_text())["rows"]}
    same = {other: row for row in rows.values() for other in row.get("same_as") or ()}
    row = rows.get(name) or same.get(name)
    if row is None or not row.get("run"):
        why = "failed on the board" if row is not None else "is not a row of it"
        raise ValueError(f"--row {name!r} {why}: the board {board} has rows {_rows(board)}")
    folder = Path(row["run"])  # as the board was given its folder; else where a board keeps its rows
    return folder if folder.is_dir() else board / ("classical" if row["kind"] == "classical" else "runs") / row["model"]


def _rows(board: Path) -> str:
    """The names of the rows of the leaderboard in ``board`` that can be backtested, joined by commas."""
    rows = json.loads((board / "leaderboard.json").read_text())["rows"]
    return ", ".join(row["model"] for row in rows if row.get("run"))


def _board_season(folder: Path) -> int | None:
    """The season a board gave its classical row in ``folder`` (its ``key.json``), ``None`` where none was given."""
    key = folder / "key.json"
    return json.loads(key.read_text()).get("season") if key.is_file() else None


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


def _check_horizon(horizon: int, mask: torch.Tensor, scored: torch.Tensor | None, covariates=None) -> None:
    """Refuse a ``horizon`` longer than the longest held-out segment of the test series (``scored [N, T]``, default
    every step of ``mask [N, T]`` but each series' first): no forecast has a target further ahead; or of more than
    one step with the past-only covariates of the layout ``covariates``."""
    why = past_refusal(covariates, horizon)
    if why is not None:
        raise ValueError(f"horizon {horizon} (--horizon) {why}: choose --horizon 1")
    longest = longest_reach(mask, scored)
    if not longest:
        raise ValueError("the test series have no held-out step with history before it: nothing to forecast")
    if horizon > longest:
        raise ValueError(
            f"horizon {horizon} (--horizon) is longer than the longest held-out segment of a test series "
            f"({longest} steps with history before them), so no forecast has a target that far ahead: "
            f"choose --horizon {longest} or less"
        )


def _table(report: dict) -> str:
    """``backtest.md``: the counts and figures in words, then one row per step ahead that has a target."""
    figures = report["per_horizon"]
    columns = BINARY_COLUMNS if report["binary"] else REAL_COLUMNS
    lines = [
        f"# Backtest: {report['model']} on {report['data']}",
        "",
        " ".join(_counts(report)),
        "",
        _binary_note() if report["binary"] else _real_note(report),
        "",
        "| h | targets | " + " | ".join(title for _, title in columns) + " |",
        "|---:" * (len(columns) + 2) + "|",
    ]
    for i, (h, count) in enumerate(zip(figures["h"], figures["targets"])):
        if count:
            values = (figures[name][i] for name, _ in columns)
            lines.append(f"| {h} | {count} | " + " | ".join("-" if v is None else f"{v:.4g}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def _counts(report: dict) -> list[str]:
    """Sentences of what was forecast and judged: forecasts, origins (and why fewer than asked), targets."""
    used, possible, asked = report["origins_used"], report["origins_possible"], report["origins"]
    series, forecasts, targets = len(used), report["forecasts"], report["per_horizon"]["targets"]
    sentences = [
        f"{forecasts} forecasts of {report['horizon']} steps ahead from {_span(used)} origins per test "
        f"series ({series} series), {report['num_samples']} draws each, in {report['units']} "
        "units."
    ]
    short = [count for count in possible if count < asked]
    if short:
        which, where = (
            (f"each of the {series} test series has", "per series")
            if len(short) == series
            else (f"{len(short)} of the {series} test series have", "for those")
        )
        sentences.append(
            f"Fewer origins than the {asked} asked: {which} only {_span(short)} held-out steps with "
            f"history before them (one origin each), so {_span(short)} origins were used "
            f"{where}."
        )
    fewer = [h for h, count in zip(report["per_horizon"]["h"], targets) if 0 < count < forecasts]
    if fewer:
        sentences.append(
            f"A forecast's steps past the end of its series' held-out steps have no target, so from "
            f"h = {fewer[0]} on fewer than the {forecasts} forecasts are judged (the targets "
            "column)."
        )
    empty = [str(h) for h, count in zip(report["per_horizon"]["h"], targets) if not count]
    if empty:
        sentences.append(
            f"No forecast has a target at h = {', '.join(empty)} (no origin lies that far before the "
            "end of its held-out steps), so the table has no row there."
        )
    return sentences


def _real_note(report: dict) -> str:
    """What the columns of real-valued data are, and how many forecasts MASE judged."""
    season, left = report["season"], report["mase_left_out"]
    pairs = report["forecasts"] * report["features"]
    judged = (
        f"all {pairs} forecast-feature pairs had one"
        if not left
        else f"{left} of the {pairs} forecast-feature pairs had none (a history of at most {season} steps, or "
        "constant at that lag) and are left out of MASE"
    )
    return (
        f"Per step ahead h: CRPS, the share of targets inside the draws' central 80 % interval, the MSE of the "
        f"draws' mean, and MASE: the absolute error of the draws' median over the mean absolute lag-{season} "
        f"change of the series' history before the origin ({judged})."
    )


def _binary_note() -> str:
    """What the columns of binary data are."""
    return (
        "Binary (0/1) data: a forecast's probability of a 1 at each step ahead is the share of its draws that are "
        "1, judged per step ahead h by the Brier score (0 is perfect, 0.25 a constant 0.5) and the expected "
        "calibration error (10 bins), beside the mean probability and the frequency of 1s; interval coverage, "
        "CRPS and MASE say little of 0/1 values and are not reported."
    )


def _span(counts: list[int]) -> str:
    """``"7"`` or ``"5 to 7"``: the range of ``counts``."""
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low} to {high}"

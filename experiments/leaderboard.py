"""``ppl-models leaderboard --data PATH``: which model suits my data, and are its uncertainties right?

Every model trains at its default recipe (:mod:`ppl_models.experiments.recipes`) on the same splits of the
file, each in ``OUT/runs/<model>`` (a finished run made on the same data with the same settings is
kept, an interrupted one resumes; see :func:`run_leaderboard`), and the board is written from their
``metrics.json``:

* ``leaderboard.json`` / ``leaderboard.md``: per model, the held-out log-likelihood in nats per
  step with the estimator named (the exact one where the model has it, else its tightest bound),
  CRPS, coverage at 50 / 80 / 95 %, PIT KS (real-valued data; Brier score and ECE for binary
  data), the one-step MSE, wall time of training and evaluation, best and last epoch, and parameter count;
* ``calibration.png``: coverage against nominal level and the PIT ECDF of every model side by side;
* ``fan_chart.png``: a forecast of one test series per model (median, 50 % and 90 % bands), in the
  data's units;
* with ``horizon`` and ``origins``, a multi-step table (:mod:`~ppl_models.experiments.multistep_board`):
  every row's forecasts from the same origins of each test series, per step ahead and against the best classical row.

Of the default models, those that cannot represent the data are listed under the board with the
reason (``not run: MODEL: reason``; ``not_run`` in ``leaderboard.json``); so is every model, named or not, that
cannot read the file's covariates (``--covariates``: only the exact one-step predictors read them). A model or
classical forecaster that fails
(its run diverges, its settings or a file are wrong, its child process dies) keeps its row, with its one-line reason
(``failed``, and a flag) and no figures; the other rows are trained, ranked and drawn. A board none of whose rows
could be scored is a ``ValueError``. Forecasters that are one (seasonal naive without a season is the last value)
are one row, and the board says why (``same`` in ``leaderboard.json``).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from ppl_models.inference.atomic_files import folder_lock, read_jsonl, remove_stale_temporaries, write_json, write_text

from . import board_plots, compare, multistep_board, own_data
from .board_flags import board_warnings, flag_rows, ranking_note
from .board_markdown import board_markdown
from .board_training import DEFAULT_BUDGET, attempt, train_models, tuned_rows
from .build import COVARIATE_REFUSAL, CovariatesRefused
from .classical_rows import (
    CLASSICAL_ROWS,
    applicable_classical,
    classical_forecaster_row,
    kept_row,
    named_row_refusals,
    row_key,
    run_classical,
    same_rows,
)
from .classical_work import PARALLEL_ROWS, ProgressLine, series_map
from .multistep_table import multistep_markdown
from .recipes import RECIPES, DataNotRepresentable
from .registry import DATASETS, build
from .run_folder import FINISHED, check_writable, is_finished

__all__ = ["DEFAULT_MODELS", "BOARD_FILES", "run_leaderboard", "leaderboard_rows"]

#: the models a board compares when ``--models`` is not given: every density model of the registry
DEFAULT_MODELS = tuple(RECIPES)

#: what a board writes into ``out`` besides its ``runs/`` folder
BOARD_FILES: tuple[str, ...] = ("leaderboard.json", "leaderboard.md", "calibration.png", "fan_chart.png", "classical")
#: what the board's figures were drawn from (``{figure: the files of its rows' folders}``), beside them
FIGURES_RECORD = "figures.json"
BOARD_FILES += ("tuning", "logs", multistep_board.MULTISTEP_FOLDER, FIGURES_RECORD)
#: a row's figures of calibration (``None`` where the data's kind has none: CRPS to PIT KS for real values, Brier and
#: ECE for binary data)
CALIBRATION_KEYS = ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95", "pit_ks", "brier", "ece")


def run_leaderboard(
    path: str | Path,
    out: str | Path,
    models: list[str] | None = None,
    overrides: list[str] = (),
    device: str | None = None,
    *,
    retrain: bool = False,
    classical: list[str] | None = None,
    jobs: int = 1,
    budget: int = DEFAULT_BUDGET,
    horizon: int | None = None,
    origins: int | None = None,
) -> list[dict]:
    """Train each of ``models`` (default :data:`DEFAULT_MODELS`) on the file at ``path``; write the board to ``out``.

    ``overrides`` (``section.key=value``) apply to every model after its recipe (``data.series=...``
    name the file's columns); ``MODEL:section.key=value`` applies to that model only. Every
    configuration is built, and so checked, before any training; of the default models, those that
    cannot represent the data are left out and listed with the reason. ``out`` is locked while the
    board runs. A rerun into the same ``out`` keeps each finished run, resumes an interrupted one
    and starts again one that has not trained an epoch; a run made on other data (the file's content
    hash) or with other settings is refused by name before anything trains, or, with ``retrain``,
    trained again. ``budget`` trials per model search its settings on the validation split (trial 0: its
    recipe) and ``jobs`` models train at once, each in a child process
    (:mod:`~ppl_models.experiments.board_training`). The classical forecasters named in ``classical`` (default:
    those of :data:`~ppl_models.experiments.classical_rows.CLASSICAL_ROWS` that suit the data; ``[]``: none;
    :mod:`~ppl_models.experiments.classical_rows`) are rows of the same board, judged on the same scored steps, and
    kept on a rerun made on the same file with the same settings (the series of ARIMA and ETS predicted in ``jobs``
    processes, a progress line every few seconds: :mod:`~ppl_models.experiments.classical_work`); each row carries
    its flags (:mod:`~ppl_models.experiments.board_flags`). With ``horizon`` and ``origins`` (both or neither, checked
    before anything trains) every row is also judged on forecasts of ``horizon`` steps from up to ``origins`` origins
    per test series (:mod:`~ppl_models.experiments.multistep_board`). A model or forecaster that fails on a user
    error (or whose child process fails) is a row with its reason (``failed``) and no figures, and a rerun tries it
    again; a board with no row scored is one ``ValueError`` giving each reason. Returns the rows of
    ``leaderboard.json``.
    """
    multistep = multistep_board.check_multistep(horizon, origins)
    configs, not_run = _configs(path, models, overrides, device)
    _check_board_folder(Path(out))
    out = check_writable(out, "out")
    table = next(iter(configs.values()))["data"]
    data = build(table, DATASETS, "data")  # the read of the models' own splits
    if multistep:
        multistep_board.check_reach(data, multistep[0])
    with folder_lock(out, "out"):
        remove_stale_temporaries(out)
        folders, failed = train_models(
            configs, out, retrain=retrain, budget=budget, jobs=jobs, fixed=_user_settings(configs, overrides)
        )
        classical_folders, classical_failed = _classical(data, table, out, not_run, classical, jobs)
        if not folders and not classical_folders:
            raise ValueError(
                "no row of the board could be scored: "
                + "; ".join(f"{name}: {reason}" for name, reason in {**failed, **classical_failed}.items())
            )
        same = same_rows(classical_folders)
        classical_folders = {name: folder for name, folder in classical_folders.items() if name not in same}
        rows = flag_rows(
            tuned_rows(leaderboard_rows(folders), out, budget)
            + [
                classical_forecaster_row(name, folder, tuple(n for n, (other, _) in same.items() if other == name))
                for name, folder in classical_folders.items()
            ]
            + [_failed_row(model, "collection", reason) for model, reason in failed.items()]
            + [_failed_row(name, "classical", reason) for name, reason in classical_failed.items()]
        )
        warnings, same = board_warnings(data), {name: why for name, (_, why) in same.items()}
        ranking = ranking_note(rows)
        all_folders, section = {**folders, **classical_folders}, None
        if multistep:
            section = multistep_board.judge_rows(out, data, all_folders, rows, *multistep, device, table.get("season"))
        write_json(
            out / "leaderboard.json",
            {
                "data": str(path),
                "overrides": list(overrides),
                "rows": rows,
                "ranking": ranking,
                "not_run": not_run,
                "same": same,
                "warnings": warnings,
                **({"multistep": section} if section else {}),
            },
        )
        markdown = board_markdown(rows, path, not_run, warnings, same, ranking)
        write_text(out / "leaderboard.md", markdown + (multistep_markdown(section) if section else ""))
        _draw_figures(out, folders, all_folders, device or "cpu")
    return rows


def _draw_figures(out: Path, folders: dict[str, Path], all_folders: dict[str, Path], device: str) -> None:
    """``calibration.png`` (every row) and ``fan_chart.png`` (the collection's rows), each drawn again only where its
    rows' folders changed since it was drawn (:data:`FIGURES_RECORD`): a rerun that kept every row keeps them."""
    record = out / FIGURES_RECORD
    try:
        drawn = json.loads(record.read_text()) if record.is_file() else {}
    except (OSError, ValueError):  # unreadable: drawn again
        drawn = {}
    inputs = {"calibration.png": _folder_files(all_folders), "fan_chart.png": {**_folder_files(folders), "": device}}
    draw = {
        "calibration.png": lambda path: board_plots.calibration_figure(all_folders, path),
        "fan_chart.png": lambda path: board_plots.fan_chart(folders, path, device),
    }
    record.unlink(missing_ok=True)  # no record while a figure may be half redrawn
    for name, made in draw.items():
        if name == "fan_chart.png" and not folders:  # every model failed: an earlier chart would show what this has not
            (out / name).unlink(missing_ok=True)
        elif drawn.get(name) == inputs[name] and (out / name).is_file():
            print(f"{name}: drawn earlier from the same rows, kept")
        else:
            made(out / name)
    write_json(record, inputs)


def _folder_files(folders: dict[str, Path]) -> dict[str, list]:
    """``{row: [[file, size, modification time in ns], ...]}`` of the files directly in each row's folder: a row
    trained, resumed or fitted again rewrites some of them."""
    return {
        name: [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(Path(folder).iterdir()) if p.is_file()]
        for name, folder in sorted(folders.items())
    }


def _classical(
    data, table: dict, out: Path, not_run: dict[str, str], named: list[str] | None, jobs: int
) -> tuple[dict[str, Path], dict[str, str]]:
    """Fit and judge the classical forecasters ``named`` (``None``: those that suit ``data``, read from the
    ``[data]`` section ``table``) into ``out/classical/<name>``, keeping each row finished there from the same
    :func:`~ppl_models.experiments.classical_rows.row_key`; ``({name: folder}, {name: why it failed, one line})``.
    Those that do not suit the data join ``not_run`` with the reason (one that was named is refused instead)."""
    names, refused = applicable_classical(data)
    if named is not None:
        refused = {**refused, **named_row_refusals(data)}
        unknown = sorted(set(named) - set(CLASSICAL_ROWS))
        if unknown or set(named) & set(refused):
            bad = unknown[0] if unknown else sorted(set(named) & set(refused))[0]
            raise ValueError(
                f"classical: {bad!r} "
                + (f"is not one of {list(CLASSICAL_ROWS)}" if unknown else f"cannot take the data: {refused[bad]}")
            )
        names, refused = [name for name in CLASSICAL_ROWS if name in named], {}
    not_run.update({name: f"{name}: {why}" for name, why in refused.items()})
    folders, failed = {}, {}
    season = table.get("season")
    keys = {name: row_key(name, table, season=season) for name in names}
    todo = [name for name in names if not kept_row(out / "classical" / name, keys[name])]
    with series_map(jobs if set(todo) & set(PARALLEL_ROWS) else 1) as parallel:
        for name in names:
            folder = out / "classical" / name
            if name not in todo:
                print(f"{name}: fitted earlier on the same data with the same settings, kept ({folder})")
                folders[name] = folder
                continue
            print(f"{name}: fitting (classical)", flush=True)
            row_map = parallel if name in PARALLEL_ROWS else map
            fit = partial(
                run_classical,
                name,
                data,
                folder,
                season=season,
                key=keys[name],
                row_map=row_map,
                progress=ProgressLine(name),
            )
            reason = attempt(name, fit)
            if reason is None:
                folders[name] = folder
            else:
                failed[name] = reason
    return folders, failed


def _configs(path, models: list[str] | None, overrides, device) -> tuple[dict[str, dict], dict[str, str]]:
    """``({model: its checked configuration}, {model: why it is not run})``; ``models`` ``None`` is the default list,
    whose models that cannot represent the data are left out (a model named in ``models`` raises instead)."""
    named = models is not None
    models = list(DEFAULT_MODELS if models is None else models)
    if not models:
        raise ValueError(
            f"models: expected at least one model name, got none (leave --models out to compare all of "
            f"{list(DEFAULT_MODELS)})"
        )
    unknown = [m for m in models if m not in RECIPES]
    if unknown:
        raise ValueError(
            f"models: {unknown} are not density models of the collection; expected names from "
            f"{list(RECIPES)} (pf-lstm and pf-gru predict targets: train them with ppl-models train)"
        )
    if len(set(models)) != len(models):
        raise ValueError(f"models: each model once, got {models}")
    own = [item.split(":", 1) for item in overrides if item.split(":", 1)[0] in RECIPES]
    unknown = sorted({name for name, _ in own} - set(models))
    if unknown:
        raise ValueError(f"--set {unknown[0]}:...: {unknown[0]!r} is not among the models {models}")
    shared = [item for item in overrides if item.split(":", 1)[0] not in RECIPES]
    configs, not_run = {}, {}
    for model in models:
        try:
            config = own_data.model_config(model, path, [*shared, *(item for name, item in own if name == model)])
        except DataNotRepresentable as error:
            if named:
                raise
            not_run[model] = " ".join(str(error).split())
            print(f"not run: {not_run[model]}")  # the reason starts with the model's name
            continue
        except CovariatesRefused:  # named or not: the board runs the others with the covariates, never without
            not_run[model] = f"{model}: cannot read covariates: {COVARIATE_REFUSAL}"
            print(f"not run: {not_run[model]}")
            continue
        config["name"] = f"{model} (leaderboard)"
        if device:
            config["device"] = device
        configs[model] = config
    if not configs:
        raise ValueError(f"data {path}: none of the models can represent it ({next(iter(not_run.values()))})")
    return configs, not_run


def _user_settings(configs: dict[str, dict], overrides) -> dict[str, set[str]]:
    """``{model: the section.key settings the user gave it}`` (shared ``--set`` items and its own
    ``MODEL:section.key=value`` ones): a search leaves them as given."""
    keys = {model: set() for model in configs}
    for item in overrides:
        name, setting = item.split(":", 1) if item.split(":", 1)[0] in RECIPES else ("", item)
        key = setting.split("=", 1)[0].strip()
        for model in [name] if name else configs:
            keys.setdefault(model, set()).add(key)
    return keys


def _check_board_folder(out: Path) -> None:
    """Refuse an ``out`` that holds anything but a board's files (a run folder of ``train``, an evaluation, ...)."""
    if not out.is_dir():
        return  # missing (made anew) or a file (refused by run_folder.check_writable)
    other = sorted(p.name for p in out.iterdir() if p.name not in ("runs", *BOARD_FILES) and p.name[0] != ".")
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise ValueError(
            f"out {out} is not a leaderboard folder (it holds {shown}; a run or evaluation folder?): "
            "pick a new or empty --out"
        )


def leaderboard_rows(folders: dict[str, Path]) -> list[dict]:
    """One row per finished run folder, from its ``metrics.json`` and training log, best held-out fit first; a
    folder without ``finished.json`` (its outputs incomplete) is a ``ValueError``."""
    rows = []
    for model, folder in folders.items():
        if not is_finished(folder):
            raise ValueError(f"run {folder} is not finished (no {FINISHED}): rerun the leaderboard to finish it")
        metrics = json.loads((folder / "metrics.json").read_text())
        estimator, loglik = _held_out(metrics["loglik"])
        calibration = metrics.get("calibration", {})
        log = [r for r in read_jsonl(folder / "metrics.jsonl") if "epoch" in r]
        validated = [r for r in log if r.get("valid_bound_per_step") is not None]
        best = compare.best_epoch(validated) if validated else None
        config = json.loads((folder / "config.json").read_text())
        rows.append(
            {
                "model": model,
                "kind": "collection",
                "estimator": estimator,
                "nats_per_step": loglik,
                **{key: calibration.get(key) for key in CALIBRATION_KEYS},
                "mse": metrics.get("mse"),
                "train_seconds": _wall_time(folder, log),
                "best_epoch": best,
                "epochs_run": log[-1]["epoch"] if log else 0,
                "epochs_cap": config["train"]["epochs"],
                "patience": config["train"].get("patience"),
                "num_parameters": metrics["num_parameters"],
                "validation": metrics.get("validation"),
                **_run_form(folder, config),
                "run": str(folder),
            }
        )
    return sorted(rows, key=lambda row: -row["nats_per_step"])


def _run_form(folder: Path, config: dict) -> dict:
    """A run's transform (its ``data_split.json``), the season its transform used (where it differences at one or
    removes a seasonal profile) and its model's form: its name and the likelihood its file was read with (``gru,
    negbin`` for counts)."""
    path = folder / "data_split.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    transform = record.get("transform") or {}
    lag = transform.get("lag", 0)
    likelihood = (record.get("likelihood") or {}).get("name")
    return {
        "transform": transform.get("name", "none"),
        "season": lag if lag > 1 else (transform.get("profile") or None),
        "form": config["model"]["name"] + (f", {likelihood}" if likelihood else ""),
    }


def _failed_row(name: str, kind: str, reason: str) -> dict:
    """The row of a model (``kind`` ``collection``) or forecaster (``classical``) that failed: its one-line reason
    (``failed``) and no figures."""
    return {
        "model": name,
        "kind": kind,
        "failed": reason,
        "estimator": None,
        "nats_per_step": None,
        **dict.fromkeys(CALIBRATION_KEYS),
        "mse": None,
        "train_seconds": None,
        "best_epoch": None,
        "epochs_run": None,
        "num_parameters": None,
        "trials": None,
    }


def _wall_time(folder: Path, log: list[dict]) -> float:
    """Seconds of training and evaluation as the board measured them, else the training log's epoch times."""
    clock = folder / "wall_time.json"
    return json.loads(clock.read_text())["seconds"] if clock.is_file() else sum(r.get("seconds", 0.0) for r in log)


def _held_out(loglik: dict) -> tuple[str, float]:
    """The estimate a row shows: the exact log-likelihood where there is one, else the tightest (largest) bound."""
    if "exact" in loglik:
        return "exact", loglik["exact"]["per_step"]
    bounds = {name: v["per_step"] for name, v in loglik.items() if name.split("-")[0] in ("smc", "iwae", "elbo")}
    name = max(bounds, key=bounds.get)
    return name, bounds[name]

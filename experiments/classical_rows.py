"""The classical rows of a leaderboard: last value, seasonal naive, ARIMA, ETS, Croston and VAR on the board's own
splits, and ARIMAX where the data has future-known covariates.

Each forecaster (:mod:`ppl_models.classical`) is fitted on the training split in the data's own units (on ``log x``
where the collection's transform takes logs), wrapped as a sequence model
(:class:`~ppl_models.classical.sequence_model.ClassicalSequenceModel`) and judged by the same
:func:`ppl_models.inference.evaluate` as the collection's models: the same scored validation and test steps (each
given its series' history), the same figures, in the data's units; the validation figures feed the board's flags.
Its files go to ``OUT/classical/<name>``
(``metrics.json``, ``pit.pt``, ``classical.json``: what was chosen), where the board's figures read them, and
``key.json`` last (:func:`row_key`: what they were computed from); a rerun of the board keeps a row whose key is the
one it would compute (:func:`kept_row`) and fits again one whose file, data settings or own settings changed.

With future-known covariates (and no past-only ones) the board adds ``arimax``
(:class:`~ppl_models.classical.exogenous.ArimaxForecaster`: ARIMA of each target with the known covariates of each
step as regressors, scored on the targets alone); with past-only covariates it is left out, with the reason
(:func:`arimax_refusal`).

Two forecasters that are one (seasonal naive whose season is 1 is the last value) are one row of the board, which
says why (:func:`same_rows`).

Such a folder is no run folder (it has no ``config.json`` or checkpoint): :func:`classical_row` reads the board's data
again (as the board's runs read it) and :func:`fitted_classical` fits its forecaster again, which is how
``ppl-models backtest`` takes it; the commands that need a run refuse it by :func:`refuse_classical_folder`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from ppl_models.classical import CLASSICAL, DEFAULT_CLASSICAL, classical_model
from ppl_models.classical.base import Progress, RowMap
from ppl_models.classical.exogenous import PAST_REFUSAL, ArimaxForecaster
from ppl_models.classical.logistic_ar import LogisticAR
from ppl_models.classical.sequence_model import ClassicalCovariateModel, ClassicalSequenceModel
from ppl_models.inference import calibration, evaluation
from ppl_models.inference.atomic_files import save_torch, write_json

from .board_plots import write_reliability
from .registry import DATASETS, build
from .run_folder import read_config_json
from .run_identity import data_fingerprint

__all__ = [
    "CLASSICAL_SAMPLES",
    "CLASSICAL_ROWS",
    "applicable_classical",
    "named_row_refusals",
    "arimax_refusal",
    "data_units",
    "collection_log",
    "model_form",
    "covariate_use",
    "fit_issues",
    "KEY_FILE",
    "row_key",
    "kept_row",
    "run_classical",
    "classical_forecaster_row",
    "same_rows",
    "fitted_classical",
    "classical_row",
    "is_classical_folder",
    "refuse_classical_folder",
]

#: one-step draws per step of a classical row's predictive (its coverage, CRPS and PIT)
CLASSICAL_SAMPLES = 200
#: the file of a classical row written after its others: what they were computed from (:func:`row_key`)
KEY_FILE = "key.json"
#: the definition of the classical rows, in their keys: a row computed under an earlier one is fitted again
ROW_VERSION = 2
#: the files of a finished classical row besides :data:`KEY_FILE`
ROW_FILES = ("metrics.json", "pit.pt", "classical.json")
#: the classical rows a board can have: the forecasters of :data:`~ppl_models.classical.CLASSICAL` and ``arimax``
#: (data with future-known covariates only)
CLASSICAL_ROWS = (*CLASSICAL, ArimaxForecaster.name)


def applicable_classical(data) -> tuple[list[str], dict[str, str]]:
    """``(names, {name: why not})`` of the classical forecasters of
    :data:`~ppl_models.classical.DEFAULT_CLASSICAL` that suit ``data``
    (:class:`~ppl_models.experiments.data.ExperimentData`): on real-valued data all but ``var`` with one feature and
    ``croston`` unless every feature is non-negative with zeros on the training split (counts of intermittent
    demand); on binary data only ``logistic-ar`` (the others' predictives are Gaussian). Data read with covariates
    adds ``arimax``, or its reason (:func:`arimax_refusal`)."""
    layout = getattr(data, "covariates", None)
    candidates = DEFAULT_CLASSICAL + ((ArimaxForecaster.name,) if layout is not None else ())
    if data.binary:
        why = "the data is binary (0/1) and this row's predictive is Gaussian; logistic-ar is the binary row"
        return [LogisticAR.name], dict.fromkeys(candidates, why)
    refused = {}
    if layout is not None and arimax_refusal(layout):
        refused[ArimaxForecaster.name] = arimax_refusal(layout)
    if data.obs_dim < 2:
        refused["var"] = "a VAR needs two features or more; the data has one"
    x, mask = data_units(data.levels, "train")
    values = x[mask]
    if not ((values >= 0).all() and (values == 0).any(0).all()):
        refused["croston"] = "Croston's method is for counts with zeros; a feature has a negative value or no zero"
    return [n for n in candidates if n not in refused], refused


def named_row_refusals(data) -> dict[str, str]:
    """Why rows a board adds only to some data cannot take ``data`` when named: ``arimax`` without future-known
    covariates, ``logistic-ar`` on data that is not binary."""
    refused = {}
    arimax = arimax_refusal(getattr(data, "covariates", None))
    if arimax:
        refused[ArimaxForecaster.name] = arimax
    if not data.binary:
        refused[LogisticAR.name] = "logistic-ar is the row of binary (0/1) data; this data is not binary"
    return refused


def arimax_refusal(layout) -> str | None:
    """Why the ``arimax`` row cannot take data read with the covariate ``layout`` (``None``: no covariates), or
    ``None`` where it can: it needs future-known covariates and takes no past-only one."""
    if layout is not None and layout.past:
        return PAST_REFUSAL
    if layout is None or not layout.known:
        return "arimax needs future-known covariates (--covariates); the data has none"
    return None


#: the round off of the standardisation's round trip (float32 standardised values), relative to a feature's scale
ROUND_TRIP_TOLERANCE = 1e-6


def data_units(levels, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [N, T, D] float64 in the data's own units, mask [N, T])`` of ``split`` of ``levels`` (the data as read,
    :class:`~ppl_models.experiments.data.LevelData`). The standardisation's round trip moves values by about 1e-7 of
    their feature's scale (its largest absolute value): a feature whose observed values all lie that close to integers
    (counts) gets those integers back, and in any other, a value that close to 0 is 0, so that a 0 of the file is 0
    (Croston's method and the count rows need the zeros)."""
    x, mask = getattr(levels, split)
    x = levels.standardizer.inverse(x, dtype=torch.float64)
    observed = mask.unsqueeze(-1).expand_as(x)
    scale = torch.where(observed, x.abs(), torch.zeros_like(x)).amax(dim=(0, 1))  # [D]
    tolerance = ROUND_TRIP_TOLERANCE * scale
    rounded = x.round()
    integers = torch.where(observed, (x - rounded).abs() <= tolerance, True).all(dim=0).all(dim=0)  # [D]
    snapped = torch.where(integers, rounded, torch.where(x.abs() <= tolerance, torch.zeros_like(x), x))
    return torch.where(observed, snapped, x), mask


def collection_log(data) -> bool:
    """Whether the transform of the collection's models (chosen on the validation split, or given) takes logs: the
    classical rows then model ``log x`` too (their own differencing does the rest)."""
    return bool(((data.split_record or {}).get("transform") or {}).get("log"))


def row_key(name: str, table: dict, *, season: int | None = None, seed: int = 0) -> dict:
    """What the figures of classical row ``name`` are computed from, JSON-ready: its settings (``season``, ``seed``,
    :data:`CLASSICAL_SAMPLES`), the board's ``[data]`` section ``table`` but its path, and the data's content
    (:func:`~ppl_models.experiments.run_identity.data_fingerprint`: a file is matched by content, not by path)."""
    if not isinstance(table, dict):
        raise TypeError(f"table must be a [data] section (a dict), got {type(table).__name__}")
    key = {
        "name": name,
        "version": ROW_VERSION,
        "season": season,
        "seed": seed,
        "samples": CLASSICAL_SAMPLES,
        "data": {k: v for k, v in table.items() if k != "path"},
        "data_fingerprint": data_fingerprint({"data": table}),
    }
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def kept_row(folder: Path, key: dict) -> bool:
    """Whether ``folder`` holds a finished classical row computed from ``key`` (:func:`row_key`)."""
    path = folder / KEY_FILE
    try:
        saved = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):  # unreadable: fitted again
        return False
    return saved == key and all((folder / name).is_file() for name in ROW_FILES)


def run_classical(
    name: str,
    data,
    folder: Path,
    *,
    season: int | None = None,
    seed: int = 0,
    key: dict | None = None,
    row_map: RowMap = map,
    progress: Progress | None = None,
) -> dict:
    """Fit classical forecaster ``name`` on ``data``'s training split and judge it on its test split; write its
    files into ``folder`` (``key``, :func:`row_key`, last where given) and return its metrics (``metrics.json``,
    with ``train_seconds``). ``row_map`` and ``progress``: the forecaster's
    (:class:`~ppl_models.classical.ClassicalForecaster`; :mod:`~ppl_models.experiments.classical_work`)."""
    started = time.perf_counter()
    (folder / KEY_FILE).unlink(missing_ok=True)  # the row is unfinished until its files are all written again
    model = fitted_classical(name, data, season=season, progress=progress)
    model.forecaster.row_map = row_map
    options = evaluation.EvaluationOptions(estimators=("exact",), predictive_samples=CLASSICAL_SAMPLES, seed=seed)
    validation = _validation(model, data, options)
    test_x, test_mask = data_units(data.levels, "test")
    result = evaluation.evaluate(
        model,
        test_x,
        test_mask,
        options,
        scored=data.levels.scored["test"],
        binary=bool(data.binary),
        description=data.description,
        covariates=getattr(data, "covariates", None),
    )
    metrics = {**result.metrics, "validation": validation, "train_seconds": time.perf_counter() - started}
    scored = result.mask if result.scored is None else result.scored
    if isinstance(result.probabilities, torch.Tensor):  # binary data: the reliability curve, as a model's run has
        write_reliability(calibration.reliability_curve(result.probabilities, result.x, scored), folder)
    save_torch(folder / "pit.pt", _pit(result, scored))
    record = {"name": name, **model.forecaster.describe()}
    if getattr(data, "covariates", None) is not None:
        record["covariates"] = covariate_use(name, data.covariates)
    write_json(folder / "classical.json", record)
    write_json(folder / "metrics.json", metrics)
    if key is not None:
        write_json(folder / KEY_FILE, key)
    return metrics


def _pit(result, scored: torch.Tensor) -> torch.Tensor:
    """The PIT values of the scored entries (none for binary data, whose evaluation keeps probabilities instead)."""
    if not isinstance(result.predictive, torch.Tensor):
        return torch.zeros(0, dtype=torch.float64)
    return calibration.pit(result.predictive, result.x, scored)[scored]


def _validation(model, data, options) -> dict | None:
    """The row's figures on the validation split's scored steps (the same as a model's, which a board's flags read:
    coverage at 80 %, CRPS, the log-likelihood), ``None`` where the split has no scored step."""
    x, mask = data_units(data.levels, "valid")
    scored = data.levels.scored.get("valid")
    if not mask.any() or (scored is not None and not scored.any()):
        return None
    metrics = evaluation.evaluate(
        model,
        x,
        mask,
        options,
        scored=scored,
        binary=bool(data.binary),
        description="validation split",
        covariates=getattr(data, "covariates", None),
    ).metrics
    return {
        "coverage_0.8": metrics["calibration"].get("coverage_0.8"),
        "crps": metrics["calibration"].get("crps"),
        "loglik": metrics["loglik"],
        "mse": metrics.get("mse"),
        "steps": metrics["test_steps"],
    }


def same_rows(folders: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """``{name: (other, "name = other: why")}`` of the forecasters among ``folders`` (``{name: folder}``,
    :func:`run_classical`'s) that are another of them: ``seasonal-naive`` with season 1 (none detected, or given) is
    ``last-value``."""
    if "seasonal-naive" not in folders or "last-value" not in folders:
        return {}
    record = json.loads((folders["seasonal-naive"] / "classical.json").read_text())
    if record.get("season") != 1:
        return {}
    source = record.get("season_source", "")
    if source == "given":
        why = "the season given is 1"
    elif source.startswith("detected: "):
        why = f"no season detected ({source.removeprefix('detected: ')})"
    else:
        why = "no season looked for (the training rows are too short)"
    return {"seasonal-naive": ("last-value", f"seasonal-naive = last-value: {why}")}


def classical_forecaster_row(name: str, folder: Path, same_as: tuple[str, ...] = ()) -> dict:
    """The board's row of a classical forecaster from the files :func:`run_classical` wrote into ``folder``;
    ``same_as``: the forecasters this row stands for too (:func:`same_rows`)."""
    metrics = json.loads((folder / "metrics.json").read_text())
    record = json.loads((folder / "classical.json").read_text())
    calibration_figures = metrics.get("calibration", {})
    return {
        "model": name,
        "same_as": list(same_as),
        "kind": "classical",
        "estimator": "exact",
        "nats_per_step": metrics["loglik"]["exact"]["per_step"],
        **{
            key: calibration_figures.get(key)
            for key in ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95", "pit_ks", "brier", "ece")
        },
        "mse": metrics.get("mse"),
        "train_seconds": metrics["train_seconds"],
        "best_epoch": None,
        "epochs_run": None,
        "epochs_cap": None,
        "num_parameters": metrics["num_parameters"],
        "validation": metrics.get("validation"),
        "transform": record.get("transform", "none"),
        "season": record.get("season"),
        "form": model_form(record),
        "fit_issues": fit_issues(record),
        "run": str(folder),
    }


def covariate_use(name: str, layout) -> str:
    """How classical forecaster ``name`` uses the covariate columns of data read with the covariate ``layout``: ARIMAX
    reads the known covariates of each step as regressors, the VAR reads each step's covariates through its lags (the
    columns are series of its joint model, the targets alone scored), the univariate forecasters ignore them (their
    forecasts of the targets read the targets' own history only)."""
    if name == ArimaxForecaster.name:
        return f"covariates {', '.join(layout.known)} as regressors"
    if name == "var":
        return "covariates as lagged series"
    return "no covariates"


def model_form(record: dict) -> str:
    """The model forms a classical row's ``classical.json`` names, most used first (``ARIMA(0,1,1)(0,1,1)12 x3,
    ARIMA(1,1,0) x1``): those chosen on the rows' own histories, else the pooled fit's; with how it uses the data's
    covariates where it has some (``ETS(A,N,N) x6; no covariates``)."""
    form = _forms(record)
    return f"{form}; {record['covariates']}" if record.get("covariates") else form


def _forms(record: dict) -> str:
    counts = record.get("rows_since_fit") or {}
    forms = {k: v for k, v in counts.items() if k[:1].isupper()}  # the other counts start in lower case
    if forms:
        return ", ".join(f"{k} x{v}" for k, v in sorted(forms.items(), key=lambda item: (-item[1], item[0])))
    pooled = record.get("pooled")
    if isinstance(pooled, list):
        return ", ".join(dict.fromkeys(str(p) for p in pooled))
    return str(pooled) if pooled is not None else record.get("model", "")


def fit_issues(record: dict) -> list[str]:
    """What went wrong in a classical row's fits, in words, from its ``classical.json``: statsmodels' optimiser
    that did not converge with any method tried."""
    counts = record.get("rows_since_fit") or {}
    stalled = counts.get("optimiser: not converged", 0)
    if not stalled:
        return []
    return [
        f"optimiser did not converge on {stalled} fits (of {counts.get('optimiser: retried', stalled)} retried with "
        "Powell and Nelder-Mead after L-BFGS; the highest likelihood kept)"
    ]


def fitted_classical(
    name: str, data, *, season: int | None = None, progress: Progress | None = None
) -> ClassicalSequenceModel:
    """Classical forecaster ``name`` fitted on the training split of ``data`` in the data's own units
    (:func:`data_units` of ``data.levels``: the classical models take their own differences), modelling ``log x``
    where the collection's transform does (:func:`collection_log`), as a sequence model of the data's units;
    ``progress`` is told how far the fit is (and, kept as the forecaster's, how far its predictions are). ``arimax``
    takes the data's covariates (:func:`arimax_refusal` where it cannot)."""
    x, mask = data_units(data.levels, "train")
    if name == ArimaxForecaster.name:
        layout = getattr(data, "covariates", None)
        if arimax_refusal(layout):
            raise ValueError(f"classical: {arimax_refusal(layout)}")
        arimax = ArimaxForecaster(layout, season=season, log=collection_log(data))
        arimax.progress = progress
        arimax.fit(x, mask)
        return ClassicalCovariateModel(arimax)
    forecaster = classical_model(name, season=season, log=collection_log(data))
    forecaster.progress = progress
    layout = getattr(data, "covariates", None)
    if layout is not None:  # its density of the targets only, the covariates held as read: nats compare across rows
        forecaster.modelled_features = layout.modelled
    return ClassicalSequenceModel(forecaster.fit(x, mask))


def is_classical_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a board's classical row (``OUT/classical/<name>``: ``classical.json``, no
    ``config.json``)."""
    folder = Path(folder)
    return (folder / "classical.json").is_file() and not (folder / "config.json").is_file()


def refuse_classical_folder(folder: str | Path, name: str, python: str) -> None:
    """One ``ValueError`` where ``folder`` (the argument ``name``) is a board's classical row; ``python`` says how
    Python does what was asked."""
    if is_classical_folder(folder):
        raise ValueError(
            f"{name} {folder} is a leaderboard's classical row (classical.json), not a run folder: {python}"
        )


def classical_row(folder: str | Path) -> tuple[str, object]:
    """``(name, data)`` of the board's classical row in ``folder``: its forecaster's name (``classical.json``) and the
    board's :class:`~ppl_models.experiments.data.ExperimentData`, read with the data settings of the board's runs."""
    folder = Path(folder)
    name = read_config_json(folder / "classical.json").get("name")
    if name not in CLASSICAL_ROWS:
        raise ValueError(f"{folder / 'classical.json'}: name must be one of {list(CLASSICAL_ROWS)}, got {name!r}")
    return name, build(_board_data(folder), DATASETS, "data")


def _board_data(folder: Path) -> dict:
    """The ``[data]`` section that the runs of the board holding classical row ``folder`` share."""
    board = folder.resolve().parent.parent
    configs = [
        path for pattern in ("runs/*/config.json", "tuning/*/trials/*/config.json") for path in board.glob(pattern)
    ]
    sections = {json.dumps(read_config_json(path).get("data"), sort_keys=True) for path in configs}
    if len(sections) != 1:
        why = "holds no run of a model" if not sections else "holds runs read with different data settings"
        raise ValueError(
            f"classical row {folder}: its leaderboard folder {board} {why} (runs/*/config.json), so "
            "the board's data cannot be read again"
        )
    return json.loads(sections.pop())

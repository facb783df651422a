"""Train and evaluate from a configuration, writing a run folder.

A run folder holds:

* ``config.json``: the resolved configuration (every default filled in);
* ``metrics.jsonl`` and ``checkpoints/{last,best}.pt``: from the training loop;
* ``metrics.json`` and ``metrics.md``: the final table, each log-likelihood estimate
  named (``exact``, ``elbo``, ``iwae-K``, ``smc-K``) per time step and per sequence, in
  nats, beside the calibration metrics of the one-step-ahead predictive distribution;
* ``predictive.nc``: ArviZ ``InferenceData`` with observations and predictive samples, and
  ``pit.pt``, the probability integral transform of every valid test entry (real-valued data);
* ``data_split.json`` (a user's file): what went where, how it was cut, and the standardisation;
* ``predictions.json`` (real-valued data, models with an exact predictive distribution):
  the first test sequence with its one-step predictions before and after training, and the
  held-out MSE before training; the training log then carries the held-out MSE per epoch;
* ``plots/``: learning curve, PIT ECDF, coverage, predictive bands, particle cloud;
* ``resume.jsonl``: one line per ``--resume`` (its time, the epoch it resumed from, the number of
  epochs it trains to, the device, and any change of ``train.epochs``); ``config.json`` keeps the
  first run's settings and is never rewritten;
* ``finished.json``: written last, once every output above is in place (its time and the data's
  content hash); a run folder without it is unfinished, whatever else it holds;
* ``.lock``: locked (:func:`ppl_models.inference.io.folder_lock`) while a process trains or evaluates the run, so
  that a second process on the same folder is refused instead of writing beside the first;
* ``evaluations/evaluate-<time>-<pid>/``: each later ``evaluate`` of the run, with its own
  ``config.json`` (the run's, with the ``[evaluate]`` settings used), metrics, ``predictive.nc``
  and plots, written to a hidden folder beside it and renamed into place whole; the run's own
  outputs are never overwritten.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import os
import time
from pathlib import Path

import pyro
import torch

from ppl_models.inference import ParticleFilter, calibration, evaluation
from ppl_models.inference.evaluation import format_table
from ppl_models.inference.io import (
    append_jsonl,
    folder_lock,
    read_jsonl,
    recover_staged,
    remove_stale_temporaries,
    save_torch,
    staged_folder,
    write_json,
    write_text,
)
from ppl_models.inference.training import (
    RESUMABLE_CHANGES,
    TrainConfig,
    Trainer,
    check_experiment,
    length_batches,
    load_best,
    load_checkpoint,
    trim_padding,
)
from ppl_models.inference.validation import check_sequences

from . import board_figures, plots, recipes
from .config import EvaluateConfig, check_config
from .memory import check_memory, evaluation_memory
from .registry import DATASETS, MODELS, OBJECTIVES, build, build_objective

__all__ = ["resolve_device", "train", "evaluate", "evaluate_model", "format_table", "run_epochs", "timestamped",
           "data_fingerprint", "run_differences", "config_differences", "is_finished", "FINISHED"]

#: what a resumption may change without changing the run: where and how fast it runs, whether it prints progress
RUNTIME_KEYS = ("device", "train.progress", "train.cuda_graph")

#: the file a run folder gets last, once every output is in place
FINISHED = "finished.json"


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available here")
    device = torch.device(name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r} requested but there are {torch.cuda.device_count()} CUDA devices")
    return device


def _setup(config: dict):
    data = build(config["data"], DATASETS, "data")
    model = build(config["model"], MODELS, "model", obs_dim=data.obs_dim)
    return data, model, build_objective(config["objective"], model)


def prepare_run_dir(run_dir: str | Path, config: dict, *, resume: bool = False, change_epochs: bool = False,
                    experiment: dict | None = None) -> Path:  # fmt: skip
    """Check ``run_dir`` against ``resume``, write ``config.json`` (a new run) or ``resume.jsonl`` (a resumed one).

    A fresh run refuses a folder that already holds checkpoints. A resumed one never rewrites the
    saved ``config.json``: ``config`` must equal it except for :data:`RUNTIME_KEYS` (recorded) and, with
    ``change_epochs``, ``train.epochs`` (the run's current number, :func:`run_epochs`, otherwise);
    the checkpoint's saved experiment must match too, so a run cannot silently go on with other
    data (a user's file whose content hash, :func:`data_fingerprint`, changed is refused naming
    it), another model, objective or evaluation. Each resumption appends its record to
    ``resume.jsonl``. Stale temporary files of a killed writer are removed first: call it where
    no other process writes to ``run_dir`` (:func:`train` holds the folder's lock).
    """
    run_dir = check_writable(run_dir, "run_dir")
    remove_stale_temporaries(run_dir)
    if not resume and (run_dir / "checkpoints").exists():
        raise ValueError(f"run_dir {run_dir} already holds a run: pass --resume to continue it or pick a new folder")
    saved_path, last = run_dir / "config.json", run_dir / "checkpoints" / "last.pt"
    given = json.loads(json.dumps(config))
    if not resume or not (saved_path.is_file() or last.is_file()):  # a new run (--resume of nothing starts one)
        write_json(saved_path, config)
        return run_dir
    epochs = run_epochs(run_dir)
    saved = read_config_json(saved_path) if saved_path.is_file() else None
    if saved is not None:
        _check_unchanged(saved, given, saved_path)
    start = load_checkpoint(last) if last.is_file() else {}  # the checkpoint is the truth, even without config.json
    experiment = _fixed_part(given) if experiment is None else experiment  # what the checkpoints must hold
    changed = _data_change(start.get("experiment"), experiment, given, last)
    if changed:
        raise ValueError(f"resume: {changed}; train a new run on it (another --run-dir)")
    check_experiment(start.get("experiment"), experiment, last)
    best = run_dir / "checkpoints" / "best.pt"
    if best.is_file():  # e.g. copied from another run
        check_experiment(load_checkpoint(best).get("experiment"), experiment, best)
    wanted = given["train"]["epochs"]
    if epochs is not None and wanted != epochs:
        if not change_epochs:
            raise ValueError(f"resume: train.epochs={wanted} differs from the run's {epochs} ({saved_path} is never "
                             f"rewritten): resume without it, or pass --epochs {wanted} to change the run's length")
        if given["train"].get("lr_schedule") == "cosine":
            raise ValueError(f"resume: train.epochs cannot change on a run with lr_schedule='cosine' (its length is "
                             f"the schedule's); the run trains to {epochs} epochs")  # fmt: skip
    if not saved_path.is_file():
        write_json(saved_path, config)  # restored from the experiment the checkpoint confirmed
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "from_epoch": start.get("epoch", 0), "epochs": wanted,
              "device": given.get("device")}  # fmt: skip
    if epochs is not None and wanted != epochs:
        record["changed"] = {"train.epochs": [epochs, wanted]}
    runtime = {key: list(pair) for key, pair in config_differences(saved or {}, given).items() if key in RUNTIME_KEYS}
    if saved and runtime:
        record["runtime"] = runtime  # differs from config.json, for this resumption only
    append_jsonl(run_dir / "resume.jsonl", record)
    return run_dir


def run_epochs(run_dir: str | Path) -> int | None:
    """The number of epochs a run in ``run_dir`` trains to: its ``config.json``'s ``train.epochs``, or the last
    change of it recorded in ``resume.jsonl``; ``None`` where the folder holds no run."""
    run_dir = Path(run_dir)
    log = run_dir / "resume.jsonl"
    changes = [r["epochs"] for r in read_jsonl(log) if "epochs" in r] if log.is_file() else []
    if changes:
        return changes[-1]
    if not (run_dir / "config.json").is_file():
        return None
    return read_config_json(run_dir / "config.json").get("train", {}).get("epochs")


def _check_unchanged(saved: dict, given: dict, path: Path) -> None:
    """Raise ``ValueError`` naming each setting of ``given`` that differs from ``saved`` (:data:`RUNTIME_KEYS` and
    ``train.epochs`` aside)."""
    changed = {key: values for key, values in config_differences(saved, given).items()
               if key not in (*RUNTIME_KEYS, "train.epochs")}  # fmt: skip
    if changed:
        sections = sorted({key.split(".")[0] for key in changed})
        shown = ", ".join(f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changed.items())[:4])
        raise ValueError(f"resume: the configuration differs from the one saved in {path} (in {sections}): {shown}; "
                         "pass the same experiment and --set overrides as the first run (config.json is never "
                         "rewritten; only --device and --epochs may change)")  # fmt: skip


def run_differences(run_dir: str | Path, config: dict, experiment: dict | None) -> list[str]:
    """What differs between the run in ``run_dir`` and a run of ``config`` on its data as it is now, one line each.

    ``experiment`` is the one saved in the run's checkpoint. Each setting of ``config.json`` (or of
    the checkpoint's experiment, without ``config.json``) that differs gives ``'key: old -> new'``
    (:data:`RUNTIME_KEYS` aside); a user's file whose content is not the one the run was trained on
    (:func:`data_fingerprint`) gives a line naming it. Empty where the run is ``config``'s.
    """
    run_dir, given = Path(run_dir), _with_defaults(config)
    if (run_dir / "config.json").is_file():
        changes = config_differences(_with_defaults(read_config_json(run_dir / "config.json")), given)
    else:
        recorded = {k: v for k, v in (experiment or {}).items() if not k.startswith("data_")}
        changes = config_differences(_with_defaults(recorded), _fixed_part(given))
    found = [f"{key}: {a!r} -> {b!r}" for key, (a, b) in sorted(changes.items()) if key not in RUNTIME_KEYS]
    data = None if any(line.startswith("data.") for line in found) else _data_change(
        experiment, {"data_fingerprint": data_fingerprint(config)}, given, run_dir / "checkpoints" / "last.pt")
    return found + ([data] if data else [])


def _with_defaults(config: dict) -> dict:
    """A copy of ``config`` whose ``data``, ``model`` and ``objective`` sections hold their builders' defaults too (a
    setting given at its default is then no change)."""
    config = json.loads(json.dumps(config))
    for section, registry in (("data", DATASETS), ("model", MODELS), ("objective", OBJECTIVES)):
        table = config.get(section)
        entry = registry.get(table.get("name")) if isinstance(table, dict) else None
        if entry is None:
            continue
        for key, parameter in inspect.signature(entry.build).parameters.items():
            if parameter.default is not inspect.Parameter.empty and key not in table:
                table[key] = json.loads(json.dumps(parameter.default, default=str))
    return config


def _data_change(saved: dict | None, given: dict, config: dict, checkpoint: Path) -> str | None:
    """Why the data of ``config`` (its experiment's ``data_*`` records ``given``) is not the data of the experiment
    ``saved`` in ``checkpoint``; ``None`` where it is, or where either records no content hash (a registered data
    set, an old checkpoint)."""
    fingerprint = given.get("data_fingerprint")
    if fingerprint is None or saved is None or saved.get("data_fingerprint") == fingerprint:
        return None
    path = config["data"]["path"]
    if "data_fingerprint" not in saved:
        return (f"{checkpoint} holds no record of its data's content (an earlier version wrote it), so the data "
                f"{path} cannot be checked against it")
    also = sorted(k for k in given if k.startswith("data_") and k != "data_fingerprint" and saved.get(k) != given[k])
    return (f"the data {path} is not the data the run was trained on (its content changed"
            f"{'; so did ' + ', '.join(also) if also else ''})")


def data_fingerprint(config: dict) -> str | None:
    """``'sha256:<hex>'`` of a user's data (``data.name = "file"``): the file's bytes, or the names and bytes of
    every file of a folder (MIDI), in name order; ``None`` for a registered data set."""
    data = config.get("data", {})
    if data.get("name") != "file":
        return None
    path = Path(data["path"])
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) if path.is_dir() \
        else [path]  # fmt: skip
    digest = hashlib.sha256()
    for file in files:
        if file != path:
            digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def is_finished(run_dir: str | Path) -> bool:
    """Whether the run in ``run_dir`` wrote every output (its :data:`FINISHED` file is written last)."""
    return (Path(run_dir) / FINISHED).is_file()


def config_differences(saved, given, prefix: str = "") -> dict[str, tuple]:
    """``{dotted key: (saved value, given value)}`` of the leaves where two nested dicts differ."""
    if not (isinstance(saved, dict) and isinstance(given, dict)):
        return {} if saved == given else {prefix: (saved, given)}
    found = {}
    for key in {*saved, *given}:
        found.update(config_differences(saved.get(key), given.get(key), f"{prefix}.{key}" if prefix else key))
    return found


def check_writable(folder: str | Path, name: str) -> Path:
    """Create ``folder`` if needed and check that files can be written there, before any work is done."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / ".write-test", "")
        (folder / ".write-test").unlink(missing_ok=True)  # another process may test the same folder
    except OSError as error:
        raise ValueError(f"{name} {folder} cannot be written to ({error.strerror or error})") from None
    return folder


def check_run_folder(folder: Path, *, name: str = "run_dir") -> Path:
    """``folder`` if it is a finished run's folder (it holds ``config.json``); else one ``ValueError``."""
    folder = Path(folder)
    if not folder.exists():
        raise ValueError(f"{name} {folder} does not exist")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{name} {folder} has no config.json: is it a run folder?")
    return folder


def read_config_json(path: Path) -> dict:
    """A run folder's ``config.json`` as a dict; one ``ValueError`` naming the file if it is unreadable."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable run configuration: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a run configuration (a JSON object), got {type(config).__name__}")
    return config


def _experiment(config: dict, data) -> dict:
    """What a run's checkpoints record and a resumption must match: :func:`_fixed_part` of ``config`` and, for a
    user's file, the standardisation of its training split and :func:`data_fingerprint` (a file changed in any
    split is refused on resume)."""
    experiment = _fixed_part(config)
    if data.split_record is not None:
        experiment["data_standardizer"] = data.split_record["standardizer"]
    fingerprint = data_fingerprint(config)
    if fingerprint is not None:
        experiment["data_fingerprint"] = fingerprint
    return experiment


def _fixed_part(config: dict) -> dict:
    """``config`` without what a resumption may change: device, ``[evaluate]``, ``train.epochs``, ``train.progress``."""
    train = {k: v for k, v in config.get("train", {}).items() if k not in RESUMABLE_CHANGES}
    return {**{k: v for k, v in config.items() if k not in ("device", "evaluate")}, "train": train}


def train(config: dict, run_dir: str | Path, *, resume: bool = False, change_epochs: bool = False) -> dict:
    """Train the configured model, then evaluate its best checkpoint on the test split.

    ``resume`` continues the run in ``run_dir`` (see :func:`prepare_run_dir`; ``change_epochs``
    lets ``config``'s ``train.epochs`` differ from the run's). The folder is locked for the whole
    session (:func:`ppl_models.inference.io.folder_lock`: a second process on it is refused) and gets
    :data:`FINISHED` last. Returns the final metrics table (also written to the run folder).
    """
    pyro.set_rng_seed(config["seed"])
    device = resolve_device(config["device"])
    data, model, objective = _setup(config)  # bad settings and data files fail before the folder is touched
    check_finite(data)
    check_model_takes(model, data, config)
    check_memory(evaluation_memory(model, data, EvaluateConfig.from_dict(config["evaluate"])))
    experiment = _experiment(config, data)
    with folder_lock(check_writable(run_dir, "run_dir"), "run_dir"):
        run_dir = prepare_run_dir(run_dir, config, resume=resume, change_epochs=change_epochs, experiment=experiment)
        (run_dir / FINISHED).unlink(missing_ok=True)  # unfinished again until this session's outputs are all written
        metrics = _fit_and_evaluate(config, run_dir, data, model, objective, device, resume, experiment)
        write_json(run_dir / FINISHED, {"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                        "data_fingerprint": experiment.get("data_fingerprint")})  # fmt: skip
    return metrics


def _fit_and_evaluate(config, run_dir, data, model, objective, device, resume, experiment) -> dict:
    """The training loop of :func:`train` in the prepared ``run_dir``, then the evaluation of its best checkpoint."""
    fresh = not (run_dir / "checkpoints" / "last.pt").exists()
    if fresh:
        model.initialize(*data.train)
    monitor = None
    if not data.binary and model.supports("exact"):
        monitor = _held_out_mse(model, data)
        if fresh:
            write_json(run_dir / "predictions.json", {"initial": _first_test_prediction(model, data),
                                                      "initial_mse": monitor()})  # fmt: skip
    trainer = Trainer(objective, data.train, data.valid, TrainConfig.from_dict(config["train"]), run_dir, device,
                      monitor=monitor, experiment=experiment)  # fmt: skip
    trainer.fit(resume=resume)
    if (run_dir / "checkpoints" / "best.pt").exists():
        load_run_checkpoint(run_dir, objective, config)
    return evaluate_model(model, data, EvaluateConfig.from_dict(config["evaluate"]), run_dir, config["seed"])


def evaluate(run_dir: str | Path, overrides: dict | None = None, device: str | None = None, *,
             out: str | Path | None = None, force: bool = False) -> dict:
    """Re-evaluate a finished run folder's best checkpoint (``overrides`` update ``[evaluate]``).

    The outputs go to ``out`` (default ``run_dir/evaluations/evaluate-<time>-<pid>``), with a
    ``config.json`` holding the settings used. They are written to a hidden folder beside ``out``
    and renamed into place whole (:func:`ppl_models.inference.io.staged_folder`), so a failed or interrupted
    evaluation leaves ``out`` as it was; a folder that already holds an evaluation is refused
    unless ``force`` (then replaced whole), and so is a run folder or one holding other files.
    """
    run_dir = check_run_folder(run_dir)
    config = read_config_json(run_dir / "config.json")
    if config.get("kind") == "supervised":
        raise ValueError(f"run_dir {run_dir} is a supervised run: its test metrics are in metrics.json; "
                         "evaluate re-evaluates likelihood runs only")
    config = check_config(config)
    evaluate_config = EvaluateConfig.from_dict({**config["evaluate"], **(overrides or {})})
    out = Path(out) if out is not None else run_dir / "evaluations" / timestamped("evaluate").name
    recover_staged(out)  # an evaluation killed in its last step leaves out whole again
    _check_evaluation_folder(out, run_dir, force)
    device = resolve_device(device or config["device"])
    data, model, objective = _setup(config)
    load_run_checkpoint(run_dir, objective, config)
    check_memory(evaluation_memory(model, data, evaluate_config))
    model.to(device)
    try:
        with staged_folder(out, replace=force) as staging:
            metrics = evaluate_model(model, data, evaluate_config, staging, config["seed"], records_from=run_dir)
            write_json(staging / "config.json", {**config, "evaluate": evaluate_config.to_dict()})
    except PermissionError as error:
        raise ValueError(f"evaluation folder {out} cannot be written to ({error.strerror or error})") from None
    return metrics


def _check_evaluation_folder(out: Path, run_dir: Path, force: bool) -> None:
    """Refuse an ``out`` that is a file, a run folder (or holds ``run_dir``), a folder of other files, or (without
    ``force``) an evaluation already."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"evaluation folder {out} is a file, not a folder")
    if out.resolve() == run_dir.resolve() or out.resolve() in run_dir.resolve().parents or (
            out / "checkpoints").exists():
        raise ValueError(f"evaluation folder {out} is (or holds) a run folder: evaluate writes beside a run, "
                         "never over it; pick another --out")  # fmt: skip
    if (out / "metrics.json").exists() and not force:
        raise ValueError(f"{out} already holds an evaluation (metrics.json): pass --force to replace it "
                         "or --out to write elsewhere")
    if out.is_dir() and any(out.iterdir()) and not (out / "metrics.json").exists():
        raise ValueError(f"evaluation folder {out} holds other files, not an evaluation: pick a new or empty --out")


def load_run_checkpoint(run_dir: Path, objective, config: dict) -> dict:
    """:func:`~ppl_models.inference.training.load_best` of a run for the experiment ``config``; a ``best.pt`` of another
    experiment (another model, other data: a file copied from another run) is a ``ValueError`` naming both."""
    path = Path(run_dir) / "checkpoints" / "best.pt"
    if not path.exists():
        raise ValueError(f"{path} does not exist: is the run finished (best.pt is written after a validation)?")
    checkpoint = load_checkpoint(path)
    saved = checkpoint.get("experiment") or {}
    for section in ("model", "data"):
        expected = json.loads(json.dumps(config[section]))
        if section in saved and saved[section] != expected:
            ours, theirs = _describe(saved[section], expected), _describe(expected, saved[section])
            raise ValueError(f"{path} is for {section} {ours} but {Path(run_dir) / 'config.json'} expects {section} "
                             f"{theirs}: the two files come from different runs")  # fmt: skip
    try:
        return load_best(run_dir, objective)
    except RuntimeError as error:  # no saved experiment (an older run), and parameters of another shape or name
        first = str(error).split("\n")[1].strip() if "\n" in str(error) else str(error)
        raise ValueError(f"{path} does not fit model {config['model'].get('name')!r} of "
                         f"{Path(run_dir) / 'config.json'} (the two files come from different runs): {first}") from None


def _describe(section: dict, other: dict) -> str:
    """``'name'`` of a config section, with the settings where it differs from ``other`` in brackets."""
    differ = [f"{k}={section[k]!r}" for k in section if k != "name" and other.get(k, object()) != section[k]]
    return repr(section.get("name")) + (f" ({', '.join(differ[:4])})" if differ else "")


def check_model_takes(model, data, config: dict) -> None:
    """One ``ValueError`` before any run folder is written if ``model`` cannot read ``data`` (its feature size,
    or values its emission cannot take: non-binary data for a Bernoulli model, binary data for a Gaussian one)."""
    name = config["model"].get("name")
    if data.binary and name in recipes.EMISSIONS and getattr(model, "emission_kind", "gaussian") != "bernoulli":
        raise recipes.DataNotRepresentable(recipes.binary_refusal(name, getattr(model, "emission_kind", "gaussian")))
    for split in ("train", "valid", "test"):
        try:
            check_sequences(*getattr(data, split), model=model, name=f"the {split} split")
        except (ValueError, TypeError) as error:
            raise ValueError(f"model {config['model'].get('name')!r} cannot take data {data.description!r}: "
                             f"{error}") from None


def check_finite(data) -> None:
    """Raise ``ValueError`` if a valid step of a split of ``data`` holds NaN or inf (padding may hold anything)."""
    for split in ("train", "valid", "test"):
        x, mask = getattr(data, split)
        bad = ~torch.isfinite(x) & (mask.unsqueeze(-1) if mask is not None else True)
        if bool(bad.any()):
            sequence, step, feature = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"data {data.description!r}: the {split} split holds {int(bad.sum())} NaN or inf values "
                             f"at valid steps, the first at sequence {sequence}, step {step}, feature {feature}")


def _held_out_mse(model, data):
    """A monitor of the training loop: one-step MSE of the exact predictive mean on validation and test.

    For models with an exact likelihood, whose ``predictive`` is exact.
    """

    @torch.no_grad()
    def monitor() -> dict:
        model.eval()
        return {f"{name}_mse": one_step_mse(model, *split, standardizer=data.standardizer)
                for name, split in (("valid", data.valid), ("test", data.test))}  # fmt: skip

    return monitor


@torch.no_grad()
def one_step_mse(model, x: torch.Tensor, mask: torch.Tensor, *, batch_size: int = 256, standardizer=None) -> float:
    """Mean squared error of ``E[x_t | x_<t]`` over valid steps and features (exact predictive), in the data's
    units under a ``standardizer`` (:class:`~ppl_models.inference.data.datasets.Standardizer`)."""
    device = next(model.parameters()).device
    total = 0.0
    for _, xb, mb in _batches(x, mask, batch_size, device):
        error = model.predictive(xb, mb, 0).mean - xb
        if standardizer is not None:
            error = standardizer.inverse_scale(error)
        total += float((error[mb] ** 2).sum())
    return total / (float(mask.sum()) * x.shape[-1])


@torch.no_grad()
def _first_test_prediction(model, data) -> list:
    x, mask = data.test
    device = next(model.parameters()).device
    first = x[:1][:, mask[0]].to(device)
    mean = model.predictive(first, None, 0).mean[0].cpu()
    return (mean if data.standardizer is None else data.standardizer.inverse(mean, dtype=torch.float64)).tolist()


def _batches(x, mask, size, device):
    """``(index, x, mask)`` batches of similar lengths, cut to their longest sequence, on ``device``."""
    for index in length_batches(mask, size):
        xb, mb = trim_padding(x[index], mask[index])
        yield index, xb.to(device), mb.to(device)


@torch.no_grad()
def evaluate_model(model, data, config: EvaluateConfig, run_dir: str | Path | None = None, seed: int = 0, *,
                   records_from: str | Path | None = None) -> dict:
    """:func:`ppl_models.inference.evaluate` of ``model`` on ``data``'s test split with the ``[evaluate]`` settings;
    writes the
    run folder.

    The noise of a one-step predictor is first refit on the validation split (``noise_refit``,
    kept only where it improves held-out NLPD); a user's file is judged in its own units. The
    outputs go to ``run_dir``; the training records (``metrics.jsonl``, ``predictions.json``) are
    read from ``records_from`` (default ``run_dir``). Returns the metrics (``metrics.json``).
    """
    x, mask = data.test
    result = evaluation.evaluate(
        model, x, mask, estimators=config.estimators, num_particles=config.num_particles,
        iwae_particles=config.iwae_particles, predictive_samples=config.predictive_samples,
        posterior_draws=config.posterior_draws, batch_size=config.batch_size, particle_chunk=config.particle_chunk,
        noise_refit=config.noise_refit, valid=data.valid, binary=data.binary, truth=data.truth,
        truth_metrics=data.truth_metrics, description=data.description, seed=seed, standardizer=data.standardizer)
    if run_dir is not None:
        _write_outputs(Path(run_dir), model, data, config, result, seed, Path(records_from or run_dir))
    return result.metrics


def _write_outputs(run_dir, model, data, config, result, seed, records):
    metrics, predictive, probabilities = result.metrics, result.predictive, result.probabilities
    write_json(run_dir / "metrics.json", metrics)
    if result.posterior is not None:
        calibration.save_inference_data(result.posterior, run_dir / "posterior.nc")
    if data.split_record is not None:
        write_json(run_dir / "data_split.json", data.split_record)
    if (records / "predictions.json").is_file() and model.supports("exact"):
        record = json.loads((records / "predictions.json").read_text())
        record.update(observed=result.x[0][result.mask[0]].tolist(), final=_first_test_prediction(model, data),
                      final_mse=metrics["mse"])  # fmt: skip
        write_json(run_dir / "predictions.json", record)
    write_text(run_dir / "metrics.md", format_table(metrics, markdown=True))
    figures = run_dir / "plots"
    plots.learning_curve(records / "metrics.jsonl", figures / "learning_curve.png")
    x, mask = result.x, result.mask  # in the data's own units
    if isinstance(predictive, torch.Tensor):
        idata = calibration.to_inference_data(predictive, x, mask=mask)
        calibration.save_inference_data(idata, run_dir / "predictive.nc")
        pit_values = calibration.pit(predictive, x, mask)[mask]
        save_torch(run_dir / "pit.pt", pit_values)  # every valid entry's PIT, for comparisons (leaderboard)
        calibration.plot_pit_ecdf(pit_values, figures / "pit_ecdf.png")
        calibration.plot_coverage(metrics_coverage(metrics["calibration"]), figures / "coverage.png")
        calibration.plot_predictive_bands(predictive, x, mask=mask, path=figures / "predictive_bands.png")
    if isinstance(probabilities, torch.Tensor):
        curve = calibration.reliability_curve(probabilities, x, mask)
        board_figures.write_reliability(curve, run_dir)  # the leaderboard's reliability curves
        calibration.plot_reliability(curve, figures / "reliability.png")
        plots.piano_roll_outputs(model, x[0][mask[0]], probabilities[0][mask[0]], run_dir, seed=seed)
    if "smc" in config.estimators and model.supports("particles") and not data.binary:
        device = next(model.parameters()).device
        first = data.test[0][:1].to(device), mask[:1].to(device)
        result = ParticleFilter(min(config.num_particles, 500)).run(model, *first, keep_ancestry=True)
        plots.particle_cloud(result, first[0], figures / "particles.png")


def metrics_coverage(summary: dict) -> dict[float, float]:
    """``{level: empirical coverage}`` from a calibration summary's ``coverage_<level>`` entries."""
    return {float(k.split("_", 1)[1]): v for k, v in summary.items() if k.startswith("coverage_")}


_NAMES = itertools.count()


def timestamped(prefix: str) -> Path:
    """``runs/<prefix>-YYYYmmdd-HHMMSS-<pid>`` under the working directory, with ``-<n>`` from a process's second
    call on: unique across processes started in the same second and across calls in one process."""
    count = next(_NAMES)
    return Path("runs") / (f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" + (f"-{count}" if count else ""))

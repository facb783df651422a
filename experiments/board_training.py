"""How a leaderboard brings its models' runs up to date: one run per model at its recipe, or a search of ``budget``
trials per model (:mod:`~ppl_models.experiments.tuning`), in this process or ``jobs`` child processes at a time.

With ``budget == 1`` a model's run is ``OUT/runs/<model>``: a finished run made on the same data with the same
settings is kept, an interrupted one resumes, one that has not trained an epoch starts again, and one made on other
data or with other settings is refused by name (or trained again with ``retrain``). With ``budget > 1`` each model
gets the same number of trials on the validation split in ``OUT/tuning/<model>`` (trial 0 its recipe), and its row
is its best trial's run. With ``jobs > 1`` each model that trains (one whose run is kept needs none) trains in a child
process (``python -m ppl_models.experiments.board_training SPEC``), its output in ``OUT/logs/<model>.log``; the
children are handed the board's reads of the file (``OUT/logs/reads.pkl``) rather than reading it again.

A model that fails (a user error, :data:`~ppl_models.experiments.processes.USER_ERRORS`: bad settings, a run that
diverges, a full disk; or a child process that ends otherwise than with exit status 0) is reported with its one-line
reason and the others train on; a rerun tries it again.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

from ppl_models.inference.atomic_files import folder_lock, write_json
from ppl_models.inference.training import load_checkpoint
from ppl_models.inference.validation import check_positive_int

from . import runner
from .processes import USER_ERRORS, one_line, run_processes
from .run_folder import FINISHED, is_finished, read_config_json, run_differences
from .tasks.own_file import load_reads, save_reads

__all__ = ["DEFAULT_BUDGET", "MAX_BUDGET", "train_models", "tuned_rows", "attempt"]

#: trials per model of a board when ``--budget`` is not given (trial 0: the recipe)
DEFAULT_BUDGET = 1
#: the most trials per model a board searches (each a full training run)
MAX_BUDGET = 1000


def train_models(
    configs: dict[str, dict],
    out: Path,
    *,
    retrain: bool = False,
    budget: int = DEFAULT_BUDGET,
    jobs: int = 1,
    fixed: dict[str, set[str]] | None = None,
) -> tuple[dict[str, Path], dict[str, str]]:
    """Bring every model of ``configs`` (``{model: checked configuration}``) up to date under ``out``; return
    ``({model: the run folder of its row}, {model: why it failed, one line})``, each model in one of the two.
    ``fixed``: per model, the ``section.key`` settings the user gave (never searched). ``budget`` is at most
    :data:`MAX_BUDGET`; a model's folder that another process holds (a child of a board killed where the OS lets
    children live on) is one ``ValueError`` naming it, before anything trains."""
    budget = check_positive_int(budget, name="budget")
    if budget > MAX_BUDGET:
        raise ValueError(f"budget must be <= {MAX_BUDGET} (trials per model, each a training run), got {budget}")
    jobs = check_positive_int(jobs, name="jobs")
    specs = {
        model: {
            "model": model,
            "config": config,
            "budget": budget,
            "retrain": retrain,
            "fixed": sorted((fixed or {}).get(model, ())),
            "folder": str(out / ("runs" if budget == 1 else "tuning") / model),
        }
        for model, config in configs.items()
    }
    _check_not_in_use([Path(spec["folder"]) for spec in specs.values()])
    if budget == 1:
        plans = _plans({model: Path(spec["folder"]) for model, spec in specs.items()}, configs, retrain)
        for model, spec in specs.items():
            spec["plan"] = plans[model]
    pending = {model: spec for model, spec in specs.items() if spec.get("plan") != "kept"}
    for model, spec in specs.items():
        if model not in pending:  # kept: said so here, no child process started for it
            bring_up_to_date(spec)
    if jobs == 1 or len(pending) <= 1:
        failed = {
            model: reason
            for model, spec in pending.items()
            if (reason := attempt(model, partial(bring_up_to_date, spec))) is not None
        }
    else:
        failed = _in_child_processes(pending, out, jobs)
    done = {model: Path(spec["folder"]) for model, spec in specs.items() if model not in failed}
    if budget > 1:
        done = {model: Path(_tuning_record(folder)["best"]["run"]) for model, folder in done.items()}
    return done, failed


def attempt(name: str, work: Callable[[], object]) -> str | None:
    """Run ``work()``; ``None``, or where it raised a user error (:data:`~ppl_models.experiments.processes.USER_ERRORS`)
    its one-line reason, printed as ``NAME: failed: reason``. Any other error is a bug and goes on up."""
    try:
        work()
    except USER_ERRORS as error:
        reason = one_line(error)
        print(f"{name}: failed: {reason}", flush=True)
        return reason
    return None


def tuned_rows(rows: list[dict], out: Path, budget: int) -> list[dict]:
    """Board ``rows`` with each collection model's ``trials``: with ``budget`` 1 it ran once (``trials`` 1, its run's
    ``train_seconds``); else ``trials`` and ``train_seconds`` (all its trials together) are those of the search
    ``out/tuning/<model>/tuning.json`` holds, the one this board made. Classical rows get ``trials`` ``None``."""
    tuned = []
    for row in rows:
        if row.get("kind") != "collection" or budget == 1:
            tuned.append({**row, "trials": 1 if row.get("kind") == "collection" else None})
            continue
        trials = _tuning_record(out / "tuning" / row["model"])["trials"]
        tuned.append({**row, "trials": len(trials), "train_seconds": sum(t.get("seconds") or 0.0 for t in trials)})
    return tuned


def bring_up_to_date(spec: dict) -> None:
    """Carry out one model's ``spec`` (:func:`train_models`): its plan for its run, or its search."""
    model, folder = spec["model"], Path(spec["folder"])
    if spec["budget"] == 1:
        _run_once(model, folder, spec["config"], spec["plan"])
        return
    from .tuning import tune  # optuna's import is paid by boards that search only

    print(f"{model}: searching {spec['budget']} trials ({folder})", flush=True)
    tune(
        spec["config"],
        folder,
        budget=spec["budget"],
        seed=spec["config"]["seed"],
        fixed=spec["fixed"],
        retrain=spec["retrain"],
    )


def _in_child_processes(specs: dict[str, dict], out: Path, jobs: int) -> dict[str, str]:
    """Each model's spec in a child process, ``jobs`` at a time; ``{model: why it failed}`` of those whose child
    did not end with exit status 0."""
    folder = out / "logs"
    reads = str(save_reads(folder / "reads.pkl"))  # the file as this process read it: no child reads it again
    commands = []
    for model, spec in specs.items():
        path = folder / f"{model}.spec.json"
        write_json(path, {**spec, "reads": reads})
        _failure_file(path).unlink(missing_ok=True)  # an earlier board's
        commands.append((model, [sys.executable, "-m", "ppl_models.experiments.board_training", str(path)]))
    try:
        codes = run_processes(commands, folder, jobs=jobs)
    finally:
        Path(reads).unlink(missing_ok=True)
    return {
        model: _child_failure(code, folder / f"{model}.spec.json", folder / f"{model}.log")
        for model, code in codes.items()
        if code != 0
    }


def _child_failure(code: int, spec: Path, log: Path) -> str:
    """Why a child failed, one line: the reason it wrote (a user error), else its exit status and its log's last
    line (a bug's exception, a kill)."""
    failure = _failure_file(spec)
    if failure.is_file():
        return json.loads(failure.read_text())["reason"]
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.is_file() else []
    last = f": {' '.join(lines[-1].split())}" if lines else ""
    return f"its process ended with exit status {code}{last} (log {log})"


def _failure_file(spec: Path) -> Path:
    """Where a child writes why it failed (``{"reason": ...}``), beside its ``<model>.spec.json``."""
    return spec.with_name(spec.name.removesuffix(".spec.json") + ".failure.json")


def _check_not_in_use(folders: list[Path]) -> None:
    """One ``ValueError`` naming the first of ``folders`` that another process holds (:func:`folder_lock`)."""
    for folder in folders:
        if folder.is_dir():
            with folder_lock(folder, "run folder"):
                pass


def _tuning_record(folder: Path) -> dict:
    return json.loads((folder / "tuning.json").read_text())


def _plans(folders: dict[str, Path], configs: dict[str, dict], retrain: bool) -> dict[str, str]:
    """``{model: "kept" | "resume" | "start" | "retrain"}`` for the run folders; a run made on other data or with
    other settings is one ``ValueError`` naming its folder and what differs, unless ``retrain``."""
    plans, refused = {}, {}
    for model, folder in folders.items():
        checkpoint = _last_checkpoint(folder)
        differences = (
            [] if checkpoint is None else run_differences(folder, configs[model], checkpoint.get("experiment"))
        )
        if differences:
            refused[model] = differences
        plans[model] = (
            "start" if checkpoint is None else "retrain" if differences else "kept" if is_finished(folder) else "resume"
        )
    if refused and not retrain:
        model, differences = next(iter(refused.items()))
        others = [folders[m].name for m in refused if m != model]
        also = f" (and {', '.join(others)} likewise)" if others else ""
        raise ValueError(
            f"{folders[model]} holds a run made on other data or with other settings "
            f"({'; '.join(differences[:3])}){also}: pick another --out, or pass --retrain to train "
            f"{'them' if others else 'it'} again (the old results are deleted)"
        )
    return plans


def _last_checkpoint(folder: Path) -> dict | None:
    """The run's ``checkpoints/last.pt``, or ``None`` where there is no complete one (it has not trained an epoch)."""
    path = folder / "checkpoints" / "last.pt"
    try:
        return load_checkpoint(path) if path.is_file() else None
    except ValueError:  # cut short (a full disk, a lost write): as good as none
        return None


def _run_once(model: str, folder: Path, config: dict, plan: str) -> None:
    """Carry out ``plan`` (:func:`_plans`) for ``model``'s run folder: keep it, resume it, or train it from scratch."""
    if plan == "kept":
        print(f"{model}: finished earlier, kept ({folder})")
        return
    if plan == "retrain":
        shutil.rmtree(folder)
    if plan == "start":  # no complete last.pt: what a new run would refuse or trip over goes, the wall time stays
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
        for name in ("config.json", "resume.jsonl", FINISHED):
            (folder / name).unlink(missing_ok=True)
    if plan == "resume" and (folder / "config.json").is_file():  # the run's own settings (the same, defaults aside)
        config = {**read_config_json(folder / "config.json"), "device": config["device"]}
    print(f"{model}: {'resuming' if plan == 'resume' else 'training'} ({folder})")
    with _wall_clock(folder / "wall_time.json") as seconds:
        runner.train(config, folder, resume=plan == "resume")
    print(f"{model}: done in {seconds():.0f} s")


@contextmanager
def _wall_clock(path: Path, every: float = 1.0) -> Iterator[Callable[[], float]]:
    """Count the block's wall time into ``path`` (``seconds``, all sessions together), rewritten every ``every``
    seconds while the block runs and at its end, so that a session killed on the way counts too (all but the
    last ``every`` seconds). Yields a function that gives the seconds so far."""
    earlier = json.loads(path.read_text())["seconds"] if path.is_file() else 0.0
    started, stop = time.perf_counter(), threading.Event()

    def seconds() -> float:
        return earlier + time.perf_counter() - started

    def record() -> None:
        if path.parent.is_dir():  # written by the run's own start
            write_json(path, {"seconds": seconds(), "what": "wall time of training and evaluation, all sessions"})

    def beat() -> None:
        while not stop.wait(every):
            with suppress(OSError):  # a full disk, a temporary file swept by the run's start: the next beat writes
                record()

    thread = threading.Thread(target=beat, name=f"wall clock of {path.parent.name}", daemon=True)
    thread.start()
    try:
        yield seconds
    finally:
        stop.set()
        thread.join()
        record()


def main(argv: list[str] | None = None) -> int:
    """A child process of a board: ``python -m ppl_models.experiments.board_training SPEC.json``. Exit status 0, or
    2 on a user error (its one-line reason printed and written beside the spec); a bug keeps its traceback."""
    path = Path((sys.argv[1:] if argv is None else argv)[0])
    spec = json.loads(path.read_text())
    if "reads" in spec:
        load_reads(spec["reads"])
    reason = attempt(spec["model"], partial(bring_up_to_date, spec))
    if reason is None:
        return 0
    write_json(_failure_file(path), {"reason": reason})
    return 2


if __name__ == "__main__":
    sys.exit(main())

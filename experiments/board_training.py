"""How a leaderboard brings its models' runs up to date: one run per model at its recipe, or a search of ``budget``
trials per model (:mod:`~ppl_models.experiments.tuning`), in this process or ``jobs`` child processes at a time.

With ``budget == 1`` a model's run is ``OUT/runs/<model>``: a finished run made on the same data with the same
settings is kept, an interrupted one resumes, one that has not trained an epoch starts again, and one made on other
data or with other settings is refused by name (or trained again with ``retrain``). With ``budget > 1`` each model
gets the same number of trials on the validation split in ``OUT/tuning/<model>`` (trial 0 its recipe), and its row
is its best trial's run. With ``jobs > 1`` each model trains in a child process
(``python -m ppl_models.experiments.board_training SPEC``), its output in ``OUT/logs/<model>.log``.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ppl_models.inference.io import write_json
from ppl_models.inference.training import load_checkpoint
from ppl_models.inference.validation import check_positive_int

from . import runner
from .processes import run_processes
from .run_folder import FINISHED, is_finished, read_config_json, run_differences

__all__ = ["DEFAULT_BUDGET", "train_models", "tuned_rows"]

#: trials per model of a board when ``--budget`` is not given (trial 0: the recipe)
DEFAULT_BUDGET = 1


def train_models(configs: dict[str, dict], out: Path, *, retrain: bool = False, budget: int = DEFAULT_BUDGET,
                 jobs: int = 1, fixed: dict[str, set[str]] | None = None) -> dict[str, Path]:  # fmt: skip
    """Bring every model of ``configs`` (``{model: checked configuration}``) up to date under ``out``; return
    ``{model: the run folder of its row}``. ``fixed``: per model, the ``section.key`` settings the user gave (never
    searched)."""
    budget = check_positive_int(budget, name="budget")
    jobs = check_positive_int(jobs, name="jobs")
    specs = {model: {"model": model, "config": config, "budget": budget, "retrain": retrain,
                     "fixed": sorted((fixed or {}).get(model, ()))} for model, config in configs.items()}  # fmt: skip
    if budget == 1:
        folders = {model: out / "runs" / model for model in configs}
        plans = _plans(folders, configs, retrain)
        for model, spec in specs.items():
            spec.update(folder=str(folders[model]), plan=plans[model])
    else:
        for model, spec in specs.items():
            spec["folder"] = str(out / "tuning" / model)
    if jobs == 1 or len(specs) == 1:
        for spec in specs.values():
            bring_up_to_date(spec)
    else:
        _in_child_processes(specs, out, jobs)
    if budget == 1:
        return {model: Path(spec["folder"]) for model, spec in specs.items()}
    return {model: Path(_tuning_record(Path(spec["folder"]))["best"]["run"]) for model, spec in specs.items()}


def tuned_rows(rows: list[dict], out: Path) -> list[dict]:
    """Board ``rows`` with each tuned model's ``trials`` and ``train_seconds`` (all its trials together) from
    ``out/tuning/<model>/tuning.json``; rows of models run once get ``trials`` 1."""
    tuned = []
    for row in rows:
        record = out / "tuning" / row["model"] / "tuning.json"
        if row.get("kind") != "collection" or not record.is_file():
            tuned.append({**row, "trials": 1 if row.get("kind") == "collection" else None})
            continue
        trials = json.loads(record.read_text())["trials"]
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
    tune(spec["config"], folder, budget=spec["budget"], seed=spec["config"]["seed"], fixed=spec["fixed"],
         retrain=spec["retrain"])


def _in_child_processes(specs: dict[str, dict], out: Path, jobs: int) -> None:
    """Each model's spec in a child process, ``jobs`` at a time; one ``ValueError`` naming those that failed."""
    folder = out / "logs"
    commands = []
    for model, spec in specs.items():
        path = folder / f"{model}.spec.json"
        write_json(path, spec)
        commands.append((model, [sys.executable, "-m", "ppl_models.experiments.board_training", str(path)]))
    codes = run_processes(commands, folder, jobs=jobs)
    failed = [model for model, code in codes.items() if code != 0]
    if failed:
        raise ValueError(f"models {failed} failed (their logs: {', '.join(str(folder / f'{m}.log') for m in failed)})"
                         "; run the same command again: finished runs are kept")  # fmt: skip


def _tuning_record(folder: Path) -> dict:
    return json.loads((folder / "tuning.json").read_text())


def _plans(folders: dict[str, Path], configs: dict[str, dict], retrain: bool) -> dict[str, str]:
    """``{model: "kept" | "resume" | "start" | "retrain"}`` for the run folders; a run made on other data or with
    other settings is one ``ValueError`` naming its folder and what differs, unless ``retrain``."""
    plans, refused = {}, {}
    for model, folder in folders.items():
        checkpoint = _last_checkpoint(folder)
        differences = [] if checkpoint is None else run_differences(folder, configs[model],
                                                                   checkpoint.get("experiment"))
        if differences:
            refused[model] = differences
        plans[model] = ("start" if checkpoint is None else "retrain" if differences else
                        "kept" if is_finished(folder) else "resume")  # fmt: skip
    if refused and not retrain:
        model, differences = next(iter(refused.items()))
        others = [folders[m].name for m in refused if m != model]
        also = f" (and {', '.join(others)} likewise)" if others else ""
        raise ValueError(f"{folders[model]} holds a run made on other data or with other settings "
                         f"({'; '.join(differences[:3])}){also}: pick another --out, or pass --retrain to train "
                         f"{'them' if others else 'it'} again (the old results are deleted)")  # fmt: skip
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
    """A child process of a board: ``python -m ppl_models.experiments.board_training SPEC.json``."""
    arguments = sys.argv[1:] if argv is None else argv
    bring_up_to_date(json.loads(Path(arguments[0]).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

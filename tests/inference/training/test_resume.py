"""Run folders that cannot lie: writes killed between checkpoints, stale temporaries, divergence, saved experiments,
resumptions that never rewrite config.json, evaluations written whole under names of their own."""

import itertools
import json
import math
import re
import subprocess
import sys

import pytest
import torch

import ppl_models.inference.training.trainer_state as training_loop
from ppl_models.experiments import cli, outputs, run_folder
from ppl_models.inference import ParticleFilter
from ppl_models.inference.atomic_files import read_jsonl, staged_folder
from ppl_models.inference.objectives import ExactLikelihood, SMCBound
from ppl_models.inference.training import TrainConfig, Trainer, TrainingDiverged, load_checkpoint
from ppl_models.lgssm import LinearGaussianSSM


def _model(seed=3):
    return LinearGaussianSSM.random(
        2,
        2,
        spectral_radius=0.3,
        transition_noise=1.0,
        observation_noise=1.0,
        generator=torch.Generator().manual_seed(seed),
    )


@pytest.fixture(scope="module")
def data():
    truth = LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(0))
    train = truth.sample(16, 10, generator=torch.Generator().manual_seed(1))[0]
    valid = truth.sample(8, 10, generator=torch.Generator().manual_seed(2))[0]
    return (train, None), (valid, None)


CONFIG = TrainConfig(epochs=3, batch_size=8, lr=0.05, progress=False)


def _fit(data, run_dir, resume=False, objective=None, config=CONFIG, experiment=None):
    objective = ExactLikelihood(_model()) if objective is None else objective
    trainer = Trainer(objective, *data, config, run_dir=run_dir, experiment=experiment)
    trainer.fit(resume=resume)
    return trainer


class Killed(Exception):
    """Stands for the process dying."""


def _killing_save(kill_at, real_save):
    """``save_torch`` that dies at its ``kill_at``-th call (1-based), leaving a partial temporary file."""
    calls = {"n": 0}

    def save(path, obj):
        calls["n"] += 1
        if calls["n"] == kill_at:
            # a kill in the middle of the write: a temporary file of the atomic write stays behind
            (path.parent / f".{path.name}.killed.tmp").write_bytes(b"partial")
            raise Killed
        return real_save(path, obj)

    return save


def _same_checkpoint(a, b):
    ca, cb = load_checkpoint(a), load_checkpoint(b)
    assert (ca["epoch"], ca["best_metric"]) == (cb["epoch"], cb["best_metric"])
    assert all(torch.equal(v, cb["objective"][k]) for k, v in ca["objective"].items())


# save_torch calls: epoch 1 best, last; epoch 2 best, last; ... (every epoch improves here). A kill
# in the last epoch is the telling one: had last.pt been written first, nothing would rewrite best.pt.
@pytest.mark.parametrize(
    "kill_at",
    [3, 4, 5, 6],
    ids=["during-best-2", "between-best-and-last-2", "during-best-3", "between-best-and-last-3"],
)
def test_kill_between_checkpoint_writes_then_resume_matches_an_uninterrupted_run(data, tmp_path, kill_at, monkeypatch):
    straight = _fit(data, tmp_path / "straight")
    bounds = [r["valid_bound_per_step"] for r in straight.history]
    assert bounds == sorted(bounds) and len(set(bounds)) == 3  # every epoch writes best.pt

    run_dir = tmp_path / "killed"
    monkeypatch.setattr(training_loop, "save_torch", _killing_save(kill_at, training_loop.save_torch))
    with pytest.raises(Killed):
        _fit(data, run_dir)
    monkeypatch.undo()
    checkpoints = run_dir / "checkpoints"
    assert load_checkpoint(checkpoints / "last.pt")["epoch"] == (kill_at - 1) // 2  # the kill's epoch is redone
    assert list(checkpoints.glob(".*.tmp"))

    _fit(data, run_dir, resume=True, objective=ExactLikelihood(_model(seed=7)))
    assert not list(checkpoints.glob(".*.tmp"))  # stale temporaries removed at the start
    for which in ("best", "last"):
        _same_checkpoint(checkpoints / f"{which}.pt", tmp_path / "straight" / "checkpoints" / f"{which}.pt")


def test_resume_refuses_a_checkpoint_of_another_experiment(data, tmp_path):
    experiment = {"data": {"name": "lgssm", "seed": 1}, "model": {"name": "lgssm"}}
    config = TrainConfig(epochs=1, progress=False)
    _fit(data, tmp_path, config=config, experiment=experiment)
    other = {**experiment, "data": {"name": "lgssm", "seed": 5}}
    with pytest.raises(ValueError, match=r"experiment differs .*last\.pt \(in \['data'\]\)"):
        _fit(data, tmp_path, resume=True, config=config, experiment=other)
    _fit(data, tmp_path, resume=True, config=config, experiment=experiment)  # the same one resumes


@pytest.mark.parametrize("content", [b"", b"garbage" * 50, b"print('hello')\n", "truncated"])
def test_unreadable_checkpoint_is_one_value_error_naming_the_file(data, tmp_path, content):
    path = tmp_path / "bad.pt"
    if content == "truncated":
        _fit(data, tmp_path / "run", config=TrainConfig(epochs=1, progress=False))
        whole = (tmp_path / "run" / "checkpoints" / "last.pt").read_bytes()
        content = whole[: len(whole) // 2]
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"bad\.pt is not a readable checkpoint") as caught:
        load_checkpoint(path)
    assert "\n" not in str(caught.value) and "weights_only" not in str(caught.value)


class _NaNAfter(ExactLikelihood):
    """Exact likelihood whose loss turns NaN from optimizer step ``at`` (1-based) on."""

    def __init__(self, model, at):
        super().__init__(model)
        self.at, self.calls = at, 0

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        if self.training:
            self.calls += 1
            if self.calls >= self.at:
                out.loss = out.loss * math.nan
        return out


def test_nan_loss_stops_training_naming_epoch_step_and_cause_and_keeps_the_last_good_checkpoint(data, tmp_path):
    objective = _NaNAfter(_model(), at=4)  # 2 batches an epoch: epoch 2, its step 2
    with pytest.raises(
        TrainingDiverged,
        match=r"epoch 2, step 2 of the epoch: the loss was NaN or inf; likely "
        r"causes: a learning rate too high \(lr=0\.05\).*last\.pt of epoch 1 "
        r"is kept",
    ):
        _fit(data, tmp_path, objective=objective)
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert checkpoint["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in checkpoint["objective"].values())


@pytest.mark.parametrize("field", ["lr", "clip_norm", "weight_decay", "momentum", "kl_start", "lr_gamma"])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_train_config_refuses_non_finite_numbers(field, value):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be a finite number"):
        TrainConfig(**{field: value})


class _BlowsUp:
    """An objective (mixed into a real one) whose training loss has gradient -1 in every parameter, so that one SGD
    step adds ``lr`` to each, and which then fails, as a Cholesky factorisation or a filter does, on parameters
    beyond 1e3: the blow-up and the failure do not depend on how a machine rounds."""

    def forward(self, x, mask=None):
        if max(float(p.detach().abs().max()) for p in self.parameters()) > 1e3:
            raise RuntimeError(
                "linalg.cholesky: The factorization could not be completed because the input is not positive-definite"
            )
        out = super().forward(x, mask)
        if self.training:
            out.loss = out.loss.detach() - sum(p.sum() for p in self.parameters())
        return out


class _ExactBlowsUp(_BlowsUp, ExactLikelihood):
    pass


class _SMCBlowsUp(_BlowsUp, SMCBound):
    pass


@pytest.mark.parametrize("objective", ["exact", "smc"])
@pytest.mark.parametrize(("batch_size", "where"), [(8, "step 2 of the epoch"), (16, "validation")])
def test_a_learning_rate_that_blows_up_the_parameters_is_a_divergence_not_a_model_error(
    data, tmp_path, objective, batch_size, where
):
    """lr=1e6 blows the parameters up at the first step; whether the next step or the validation then fails, the
    error names the epoch, where, the parameters' norm before and after, and the learning rate."""
    model = _model()
    start = float(torch.linalg.vector_norm(torch.stack([p.detach().norm() for p in model.parameters()])))
    count = sum(p.numel() for p in model.parameters())
    loss = _ExactBlowsUp(model) if objective == "exact" else _SMCBlowsUp(model, ParticleFilter(8))
    config = TrainConfig(epochs=2, batch_size=batch_size, optimizer="sgd", lr=1e6, progress=False)
    norms = rf"from {re.escape(f'{start:.3g}')} \(start of fit\) to {re.escape(f'{1e6 * math.sqrt(count):.3g}')}"
    with pytest.raises(
        TrainingDiverged,
        match=f"training diverged at epoch 1, {where}: the parameters' norm went "
        rf"{norms} and this failed \(RuntimeError: linalg.cholesky.*lr=1e\+06",
    ):
        _fit(data, tmp_path, objective=loss, config=config)
    assert not (tmp_path / "checkpoints" / "last.pt").exists()


# --- the command line: a resumption never rewrites config.json; evaluations are never lost ------------------
TINY = """
name = "tiny"
seed = 0
device = "cpu"
[data]
name = "lgssm-synthetic"
num_train = 8
num_valid = 4
num_test = 4
num_steps = 6
[model]
name = "lgssm"
[objective]
name = "exact"
[train]
epochs = 1
batch_size = 8
progress = false
[evaluate]
estimators = ["exact"]
predictive_samples = 4
"""


@pytest.fixture
def tiny_run(tmp_path):
    """``(config file, run folder)`` of a finished one-epoch run trained by the command line."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    run = tmp_path / "run"
    assert cli.main(["train", str(config), "--run-dir", str(run)]) == 0
    return config, run


def test_resume_never_rewrites_config_json_and_records_each_resumption(tiny_run, capsys):
    config, run = tiny_run
    saved = (run / "config.json").read_bytes()
    resume = ["train", str(config), "--run-dir", str(run), "--resume"]
    assert cli.main([*resume, "--epochs", "3"]) == 0  # the run's length changes by --epochs only
    assert [r["epoch"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3]
    assert cli.main(resume) == 0  # resumes to the run's own 3 epochs, not the experiment's 1
    assert [r["epoch"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3]
    # the run's own number is no change; how it runs (device, cuda_graph, progress) may differ, and is recorded
    assert cli.main([*resume, "--set", "train.epochs=3", "--set", "train.cuda_graph=true"]) == 0
    capsys.readouterr()
    assert cli.main([*resume, "--set", "train.epochs=2"]) == 2  # a --set that would change it is refused
    assert "train.epochs=2 differs from the run's 3" in capsys.readouterr().err
    assert (run / "config.json").read_bytes() == saved
    records = read_jsonl(run / "resume.jsonl")
    assert [(r["from_epoch"], r["epochs"], r.get("changed")) for r in records] == [
        (1, 3, {"train.epochs": [1, 3]}),
        (3, 3, None),
        (3, 3, None),
    ]
    assert [r.get("runtime") for r in records] == [None, None, {"train.cuda_graph": [False, True]}]
    assert run_folder.run_epochs(run) == 3


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_interrupted_evaluate_force_leaves_the_old_evaluation_whole(tiny_run, monkeypatch):
    _, run = tiny_run
    out = run.parent / "eval"
    assert cli.main(["evaluate", str(run), "--out", str(out)]) == 0
    before = _snapshot(out)
    written = []

    def dies_after_metrics_json(path, text):  # metrics.json is written, metrics.md is not: then the process dies
        written.append(path.name)
        raise Killed

    monkeypatch.setattr(outputs, "write_text", dies_after_metrics_json)
    with pytest.raises(Killed):
        cli.main(["evaluate", str(run), "--out", str(out), "--force", "--set", "predictive_samples=6"])
    monkeypatch.undo()
    assert written == ["metrics.md"]
    assert _snapshot(out) == before  # the old evaluation, whole: its metrics.json beside its own config.json
    assert sorted(p.name for p in out.parent.iterdir()) == ["eval", "run", "tiny.toml"]  # no staging folder left
    assert cli.main(["evaluate", str(run), "--out", str(out), "--force", "--set", "predictive_samples=6"]) == 0
    assert json.loads((out / "config.json").read_text())["evaluate"]["predictive_samples"] == 6


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_kill_between_the_renames_of_evaluate_force_is_undone_by_the_next_evaluate(tiny_run, capsys):
    _, run = tiny_run
    out = run.parent / "eval"
    assert cli.main(["evaluate", str(run), "--out", str(out)]) == 0
    before = _snapshot(out)
    pid = _dead_pid()
    out.rename(run.parent / f".eval.replaced-{pid}-x1")  # the old evaluation moved aside, the new one not yet in
    (run.parent / f".eval.partial-{pid}-x2").mkdir()  # and a half-written one of a killed process
    capsys.readouterr()
    assert cli.main(["evaluate", str(run), "--out", str(out)]) == 2  # restored, then refused without --force
    assert "already holds an evaluation" in capsys.readouterr().err
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["eval", "run", "tiny.toml"]


def test_evaluations_started_in_the_same_second_each_keep_their_result(tiny_run, monkeypatch):
    _, run = tiny_run
    monkeypatch.setattr(run_folder.time, "strftime", lambda *args: "20250101-120000")
    for pid in (101, 102, 103):  # three processes, one second: each its own folder
        monkeypatch.setattr(run_folder.os, "getpid", lambda pid=pid: pid)
        monkeypatch.setattr(run_folder, "_NAMES", itertools.count())
        assert cli.main(["evaluate", str(run)]) == 0
    for _ in range(2):  # and two calls in one process
        assert cli.main(["evaluate", str(run)]) == 0
    folders = sorted(p.name for p in (run / "evaluations").iterdir())
    assert folders == [
        "evaluate-20250101-120000-101",
        "evaluate-20250101-120000-102",
        "evaluate-20250101-120000-103",
        "evaluate-20250101-120000-103-1",
        "evaluate-20250101-120000-103-2",
    ]
    assert all((run / "evaluations" / name / "metrics.json").is_file() for name in folders)


def test_a_staged_folder_never_overwrites_what_another_writer_put_in_place(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(FileExistsError, match="another writer filled it meanwhile; these results are in") as caught:
        with staged_folder(target) as staging:
            (staging / "mine.txt").write_text("mine")
            target.mkdir()
            (target / "theirs.txt").write_text("theirs")  # another process finished first
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith("out-")]
    assert str(kept) in str(caught.value)
    assert (target / "theirs.txt").read_text() == "theirs" and (kept / "mine.txt").read_text() == "mine"
    with staged_folder(target, replace=True) as staging:  # replace: the new folder takes the place whole
        (staging / "mine.txt").write_text("again")
    assert sorted(p.name for p in target.iterdir()) == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", kept.name])

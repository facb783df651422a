"""Tests of the shared training loop, on the linear-Gaussian SSM (whose exact likelihood is the oracle); a fit ends with
the parameters of its best validation epoch."""

import io
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ppl_models.inference.atomic_files import read_jsonl
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import (
    TrainConfig,
    Trainer,
    epoch_batches,
    length_batches,
    load_best,
    load_checkpoint,
    trim_padding,
)
from ppl_models.inference.training.progress import Progress, training_progress
from ppl_models.inference.training.settings import make_optimizer
from ppl_models.lgssm import LinearGaussianSSM


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _data(model, num_sequences, num_steps, seed):
    """Sequences of ``model`` with lengths between ``num_steps // 2`` and ``num_steps``: ``(x, mask)``."""
    x, _ = model.sample(num_sequences, num_steps, generator=_generator(seed))
    lengths = torch.randint(num_steps // 2, num_steps + 1, (num_sequences, 1), generator=_generator(seed + 1))
    return x, torch.arange(num_steps) < lengths


def _per_step(model, data):
    with torch.no_grad():
        return (model.log_likelihood(*data).sum() / data[1].sum()).item()


def _wrong_model(seed=3):
    return LinearGaussianSSM.random(
        2, 2, spectral_radius=0.3, transition_noise=1.0, observation_noise=1.0, generator=_generator(seed)
    )


@pytest.fixture(scope="module")
def lgssm_data():
    """The true model and its train / validation / test sets."""
    truth = LinearGaussianSSM.random(2, 2, generator=_generator(0))
    return truth, _data(truth, 48, 16, 10), _data(truth, 32, 16, 20), _data(truth, 64, 16, 30)


def _without_time(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


class NoisyLikelihood(ExactLikelihood):
    """Exact likelihood of jittered data: its gradients depend on torch's, numpy's and ``random``'s RNGs."""

    def forward(self, x, mask=None):
        scale = 0.1 * (1 + random.random() + float(np.random.rand()))
        return super().forward(x + scale * torch.randn_like(x), mask)


class Crash(Exception):
    pass


class CrashingLikelihood(NoisyLikelihood):
    """Raises :class:`Crash` at its ``crash_at``-th training minibatch, as a killed job would stop."""

    def __init__(self, model, crash_at):
        super().__init__(model)
        self.crash_at, self.calls = crash_at, 0

    def forward(self, x, mask=None):
        if self.training:
            self.calls += 1
            if self.calls == self.crash_at:
                raise Crash
        return super().forward(x, mask)


class RecordingLikelihood(ExactLikelihood):
    """Records ``(training, kl_factor)`` at every call."""

    def __init__(self, model):
        super().__init__(model)
        self.calls = []

    def forward(self, x, mask=None):
        self.calls.append((self.training, self.kl_factor))
        return super().forward(x, mask)


# --- learning --------------------------------------------------------------------------------------
def test_training_approaches_the_true_likelihood_and_writes_the_run_folder(lgssm_data, tmp_path):
    truth, train, valid, test = lgssm_data
    model = _wrong_model()
    before, best_possible = _per_step(model, test), _per_step(truth, test)
    config = TrainConfig(epochs=10, batch_size=12, lr=0.08, progress=False)
    history = Trainer(ExactLikelihood(model), train, valid, config, run_dir=tmp_path).fit()
    after = _per_step(model, test)
    assert after > before + 0.3
    assert best_possible - after < 0.1 * (best_possible - before)

    # metrics.jsonl holds the history; the bound of an exact objective is the log-likelihood
    assert read_jsonl(tmp_path / "metrics.jsonl") == history
    assert [r["epoch"] for r in history] == list(range(1, 11)) and history[-1]["step"] == 40
    assert history[-1]["valid_bound_per_step"] == pytest.approx(_per_step(model, valid), abs=1e-5)
    assert {r["bound_kind"] for r in history} == {"exact"}

    # checkpoints are complete files (no temporary left) that load into fresh modules
    checkpoints = tmp_path / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best.pt", "last.pt"]
    last = ExactLikelihood(_wrong_model(seed=4))
    checkpoint = load_checkpoint(checkpoints / "last.pt", last)
    assert checkpoint["epoch"] == 10 and checkpoint["step"] == 40 and checkpoint["history"] == history
    assert all(torch.equal(v, model.state_dict()[k.removeprefix("model.")]) for k, v in last.state_dict().items())
    best_model = _wrong_model(seed=4)
    best = load_best(tmp_path, best_model)  # a bare model takes the objective's model.* entries
    best_epoch = max(history, key=lambda r: r["valid_bound_per_step"])
    assert best["epoch"] == best_epoch["epoch"] and best["best_metric"] == best_epoch["valid_bound_per_step"]
    assert _per_step(best_model, valid) == pytest.approx(best["best_metric"], abs=1e-5)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_shows_the_running_loss_on_a_terminal(lgssm_data, monkeypatch):
    _, train, _, _ = lgssm_data
    monkeypatch.setattr(sys, "stderr", _Terminal())
    Trainer(ExactLikelihood(_wrong_model()), train, config=TrainConfig(epochs=1, batch_size=24)).fit()
    err = sys.stderr.getvalue()
    assert "epoch 1/1" in err and "loss=" in err and "\r" in err  # redrawn in place


def test_progress_in_a_log_is_a_line_at_the_interval_only(lgssm_data, capsys):
    _, train, _, _ = lgssm_data
    Trainer(ExactLikelihood(_wrong_model()), train, config=TrainConfig(epochs=1, batch_size=24)).fit()
    assert capsys.readouterr().err == ""  # a run shorter than LINE_INTERVAL prints no progress to a pipe
    clock = iter([0.0, 3.0, 9.0, 10.0, 12.0, 21.0, 25.0]).__next__  # the start, then one reading per step
    stream = io.StringIO()
    with training_progress(12, 6, stream=stream, clock=clock) as progress:
        progress.start_epoch(2, 2)
        progress.end_epoch(1.5, -2.25)
        for _ in range(6):
            progress.advance(lambda: 1.25)
    assert stream.getvalue().splitlines() == [
        "epoch 2/2, step 9/12, loss 1.25, valid -2.25, 10 s",
        "epoch 2/2, step 11/12, loss 1.25, valid -2.25, 21 s",
    ]
    assert training_progress(12, show=False, stream=_Terminal()).__class__ is Progress  # shows nothing


def test_early_stopping_stops_when_validation_cannot_improve(lgssm_data, tmp_path):
    _, train, valid, _ = lgssm_data
    config = TrainConfig(epochs=20, batch_size=24, lr=0.0, patience=2, progress=False)
    trainer = Trainer(ExactLikelihood(_wrong_model()), train, valid, config, run_dir=tmp_path)
    history = trainer.fit()
    assert len(history) == 3 and trainer.stopped_early and trainer.bad_validations == 2
    assert load_best(tmp_path)["epoch"] == 1
    resumed = Trainer(ExactLikelihood(_wrong_model()), train, valid, config, run_dir=tmp_path)
    assert len(resumed.fit(resume=True)) == 3  # a stopped run stays stopped
    fresh = TrainConfig(epochs=1, batch_size=24, progress=False)
    Trainer(ExactLikelihood(_wrong_model()), train, config=fresh, run_dir=tmp_path).fit()  # a new run, no validation
    assert len(read_jsonl(tmp_path / "metrics.jsonl")) == 1 and not (tmp_path / "checkpoints" / "best.pt").exists()


def test_min_delta_counts_only_rises_beyond_it_as_new_bests(lgssm_data, tmp_path):
    from ppl_models.experiments.compare import best_epoch

    _, train, valid, _ = lgssm_data
    plain = TrainConfig(epochs=4, batch_size=24, lr=0.01, progress=False)
    rising = Trainer(ExactLikelihood(_wrong_model()), train, valid, plain).fit()
    bounds = [r["valid_bound_per_step"] for r in rising]
    assert bounds == sorted(bounds) and bounds[0] < bounds[-1]  # the bound rises at every epoch here
    assert [r["best"] for r in rising] == [True] * 4 and best_epoch(rising) == 4
    gap = min(b - a for a, b in zip(bounds, bounds[1:]))
    config = TrainConfig(epochs=4, batch_size=24, lr=0.01, patience=2, min_delta=bounds[-1] - bounds[0], progress=False)
    history = Trainer(ExactLikelihood(_wrong_model()), train, valid, config, run_dir=tmp_path).fit()
    assert [r["best"] for r in history] == [True, False, False] and best_epoch(history) == 1
    assert [r["valid_bound_per_step"] for r in history] == bounds[:3] and gap > 0  # the same run, judged otherwise
    assert load_best(tmp_path)["epoch"] == 1
    assert best_epoch([{"epoch": 1, "valid_bound_per_step": -2.0}, {"epoch": 2, "valid_bound_per_step": -1.0}]) == 2


def test_clip_norm_bounds_the_gradient_step(lgssm_data):
    _, train, _, _ = lgssm_data
    lr, clip = 0.01, 0.05

    def displacement(clip_norm):
        model = _wrong_model()
        start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        config = TrainConfig(
            epochs=1, batch_size=len(train[0]), optimizer="sgd", lr=lr, clip_norm=clip_norm, progress=False
        )
        Trainer(ExactLikelihood(model), train, config=config).fit()  # one SGD step: lr * clipped gradient
        return (torch.cat([p.detach().flatten() for p in model.parameters()]) - start).norm().item()

    assert displacement(None) > 10 * lr * clip
    assert displacement(clip) == pytest.approx(lr * clip, rel=1e-3)


def test_kl_factor_follows_the_linear_schedule_and_validation_uses_one(lgssm_data):
    config = TrainConfig(kl_start=0.2, kl_anneal_steps=10)
    assert [config.kl_factor(s) for s in (0, 5, 10, 25)] == pytest.approx([0.2, 0.6, 1.0, 1.0])
    assert TrainConfig().kl_factor(0) == 1.0

    _, train, valid, _ = lgssm_data
    objective = RecordingLikelihood(_wrong_model())
    config = TrainConfig(epochs=3, batch_size=8, kl_start=0.1, kl_anneal_steps=7, progress=False)
    history = Trainer(objective, train, valid, config).fit()
    training = [kl for is_training, kl in objective.calls if is_training]
    assert training == pytest.approx([0.1 + 0.9 * min(1, s / 7) for s in range(18)])
    assert {kl for is_training, kl in objective.calls if not is_training} == {1.0}
    assert [r["kl_factor"] for r in history] == pytest.approx([config.kl_factor(s) for s in (5, 11, 17)])


# --- resuming --------------------------------------------------------------------------------------
def _resume_run(objective, data, config, run_dir, resume=False):
    train, valid = data
    return Trainer(objective, train, valid, config, run_dir=run_dir).fit(resume=resume)


@pytest.mark.parametrize(
    "interruption, schedule", [("crash", "cosine"), ("crash", "transformer"), ("extend", "exponential")]
)
def test_resume_repeats_an_uninterrupted_run_exactly(lgssm_data, tmp_path, interruption, schedule):
    _, train, valid, _ = lgssm_data
    data = ((train[0][:24], train[1][:24]), (valid[0][:8], valid[1][:8]))
    config = TrainConfig(
        epochs=4,
        batch_size=8,
        lr=0.05,
        lr_schedule=schedule,
        warmup_steps=4,
        clip_norm=1.0,
        kl_start=0.5,
        kl_anneal_steps=5,
        patience=10,
        progress=False,
    )
    straight = NoisyLikelihood(_wrong_model())
    expected = _resume_run(straight, data, config, tmp_path / "straight")

    run_dir = tmp_path / "interrupted"
    if interruption == "crash":  # killed in the middle of epoch 3 (3 batches per epoch)
        with pytest.raises(Crash):
            _resume_run(CrashingLikelihood(_wrong_model(), crash_at=8), data, config, run_dir)
    else:  # a finished 2-epoch run, extended to 4
        _resume_run(NoisyLikelihood(_wrong_model()), data, TrainConfig(**{**config.to_dict(), "epochs": 2}), run_dir)
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]

    resumed = NoisyLikelihood(_wrong_model(seed=5))  # another start: the checkpoint must overwrite it
    history = _resume_run(resumed, data, config, run_dir, resume=True)
    assert _without_time(history) == _without_time(expected)
    assert _without_time(read_jsonl(run_dir / "metrics.jsonl")) == _without_time(expected)
    assert _without_time(read_jsonl(tmp_path / "straight" / "metrics.jsonl")) == _without_time(expected)
    reference = straight.state_dict()
    assert all(torch.equal(value, reference[key]) for key, value in resumed.state_dict().items())


def test_resume_rejects_a_changed_config(lgssm_data, tmp_path):
    _, train, _, _ = lgssm_data
    _resume_run(ExactLikelihood(_wrong_model()), (train, None), TrainConfig(epochs=1, progress=False), tmp_path)
    with pytest.raises(ValueError, match="lr"):
        _resume_run(
            ExactLikelihood(_wrong_model()),
            (train, None),
            TrainConfig(epochs=2, lr=0.5, progress=False),
            tmp_path,
            resume=True,
        )


# --- arguments ------------------------------------------------------------------------------------
def test_config_rejects_unknown_keys_and_round_trips():
    with pytest.raises(ValueError, match=r"\['bogus', 'learning_rate'\]"):
        TrainConfig.from_dict({"epochs": 3, "learning_rate": 0.1, "bogus": 1})
    config = TrainConfig.from_dict({"epochs": 3, "lr": 1, "clip_norm": 2})
    assert config.lr == 1.0 and isinstance(config.lr, float) and config.clip_norm == 2.0
    assert TrainConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "field, value",
    [
        ("epochs", 0),
        ("epochs", 2.5),
        ("batch_size", True),
        ("optimizer", "lbfgs"),
        ("lr", -0.1),
        ("lr", float("nan")),
        ("weight_decay", -1),
        ("lr_schedule", "linear"),
        ("lr_gamma", 0.0),
        ("lr_gamma", 1.5),
        ("lr_step_epochs", 0),
        ("clip_norm", 0.0),
        ("kl_start", 1.5),
        ("kl_anneal_steps", -1),
        ("valid_every", 0),
        ("patience", 0),
        ("min_delta", -1.0),
        ("seed", -1),
        ("progress", "yes"),
        ("momentum", 2.0),
        ("optimizer_eps", 0.0),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig.from_dict({field: value})


def test_optimizer_eps_reaches_adam_and_rmsprop_and_is_refused_for_sgd():
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    for name in ("adam", "adamw", "rmsprop"):
        config = TrainConfig(optimizer=name, optimizer_eps=1e-4)
        assert make_optimizer(parameters, config).defaults["eps"] == 1e-4
        assert make_optimizer(parameters, TrainConfig(optimizer=name)).defaults["eps"] == 1e-8  # torch's default
    assert "optimizer_eps" not in TrainConfig().to_dict()  # runs without it record what they did before
    with pytest.raises(ValueError, match="optimizer_eps is an Adam, AdamW or RMSprop setting; SGD has none"):
        TrainConfig(optimizer="sgd", optimizer_eps=1e-4)


def test_trainer_rejects_bad_arguments(lgssm_data):
    _, train, valid, _ = lgssm_data
    objective = ExactLikelihood(_wrong_model())
    with pytest.raises(ValueError, match="patience"):
        Trainer(objective, train, config=TrainConfig(patience=2))
    with pytest.raises(ValueError, match="run_dir"):
        Trainer(objective, train, valid).fit(resume=True)
    with pytest.raises(ValueError, match="train_data"):
        Trainer(objective, train[0])
    with pytest.raises(ValueError, match="mask"):
        Trainer(objective, (train[0], train[1][:, :-1]))
    with pytest.raises(ValueError, match="device"):
        Trainer(objective, train, device="tpu:x")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            Trainer(objective, train, device="cuda")
    with pytest.raises(FileNotFoundError, match="best.pt"):
        load_best("/nonexistent")


def test_device_follows_the_objective_or_the_argument(lgssm_data):
    _, train, _, _ = lgssm_data
    objective = ExactLikelihood(_wrong_model())
    assert Trainer(objective, train).device == torch.device("cpu")
    assert Trainer(objective, train, device="cpu").device == torch.device("cpu")
    assert Trainer(objective, train, device=torch.device("cpu")).device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_from_cpu_data(lgssm_data, tmp_path):
    truth, train, valid, test = lgssm_data
    model = _wrong_model()
    before = _per_step(model, test)
    config = TrainConfig(epochs=3, batch_size=12, lr=0.08, progress=False)
    trainer = Trainer(ExactLikelihood(model), train, valid, config, run_dir=tmp_path, device="cuda")
    trainer.fit()
    assert model.A.device.type == "cuda"
    assert _per_step(model.cpu(), test) > before
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["objective"]["model.A"].device.type == "cpu"


# --- sharding and distributed training --------------------------------------------------------------
def test_transformer_schedule_warms_up_then_decays_per_step(lgssm_data):
    _, train, valid, _ = lgssm_data
    config = TrainConfig(epochs=5, batch_size=8, lr=0.01, lr_schedule="transformer", warmup_steps=6, progress=False)
    history = Trainer(ExactLikelihood(_wrong_model()), (train[0][:24], train[1][:24]), None, config).fit()
    # an epoch's record holds the rate of its first step; 3 steps per epoch, so epoch e starts at step 3e + 1
    expected = [0.01 * min(s / 6, (6 / s) ** 0.5) for s in (1, 4, 7, 10, 13)]
    assert [r["lr"] for r in history] == pytest.approx(expected)


def test_epoch_batches_shard_a_reproducible_permutation():
    first = epoch_batches(10, 3, seed=7, epoch=0)
    assert torch.equal(torch.cat(first).sort().values, torch.arange(10)) and [len(b) for b in first] == [3, 3, 3, 1]
    assert all(torch.equal(a, b) for a, b in zip(first, epoch_batches(10, 3, seed=7, epoch=0)))
    assert not torch.equal(torch.cat(first), torch.cat(epoch_batches(10, 3, seed=7, epoch=1)))
    shards = [epoch_batches(10, 2, seed=7, epoch=0, rank=r, world_size=3) for r in range(3)]
    assert {len(s) for s in shards} == {2}  # 10 items padded to 12, 4 per rank
    dealt = torch.cat([torch.cat(s) for s in shards])
    assert len(dealt) == 12 and set(dealt.tolist()) == set(range(10))


def test_length_batches_group_similar_lengths_and_trim_padding_cuts_to_the_longest():
    mask = torch.arange(6) < torch.tensor([[2], [6], [1], [4], [5], [3]])
    assert [b.tolist() for b in length_batches(mask, 4)] == [[1, 4, 3, 5], [0, 2]]
    shards = [length_batches(mask, 2, rank=r, world_size=2) for r in range(2)]
    assert [[b.tolist() for b in s] for s in shards] == [[[1, 3], [0]], [[4, 5], [2]]]
    x = torch.randn(6, 6, 3)
    short, short_mask = trim_padding(x[[0, 2]], mask[[0, 2]])
    assert short.shape == (2, 2, 3) and torch.equal(short, x[[0, 2], :2])
    assert short_mask.all(1).tolist() == [True, False]
    assert trim_padding(x[:1], torch.zeros(1, 6, dtype=torch.bool))[0].shape == (1, 1, 3)


def test_batches_are_cut_to_their_longest_sequence_and_validation_pools_every_step(lgssm_data):
    truth, train, valid, _ = lgssm_data
    objective = RecordingShapes(truth)
    config = TrainConfig(epochs=1, batch_size=8, lr=1e-9, optimizer="sgd", patience=None, progress=False)
    history = Trainer(objective, train, valid, config).fit()
    assert all(steps == max(lengths) for _, lengths, steps in objective.batches)
    valid_batches = [lengths for training, lengths, _ in objective.batches if not training]
    assert sorted(sum(valid_batches, [])) == sorted(valid[1].sum(1).tolist())
    assert all(min(a) >= max(b) for a, b in zip(valid_batches, valid_batches[1:]))  # longest first
    assert history[-1]["valid_bound_per_step"] == pytest.approx(_per_step(truth, valid), rel=1e-6)


class RecordingShapes(ExactLikelihood):
    """Records ``(training, sequence lengths, batch steps T)`` of every batch."""

    def __init__(self, model):
        super().__init__(model)
        self.batches = []

    def forward(self, x, mask=None):
        self.batches.append((self.training, mask.sum(1).tolist(), x.shape[1]))
        return super().forward(x, mask)


def test_two_process_ddp_training_keeps_ranks_identical(tmp_path):
    worker = Path(__file__).with_name("ddp_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(worker),
        str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    first, second = ranks
    assert any(not torch.equal(first["start"][k], second["start"][k]) for k in first["start"])
    assert all(torch.equal(first["final"][k], second["final"][k]) for k in first["final"])
    assert not torch.equal(first["final"]["A"], first["start"]["A"])
    assert _without_time(first["history"]) == _without_time(second["history"])  # metrics summed over ranks
    assert _without_time(read_jsonl(tmp_path / "run" / "metrics.jsonl")) == _without_time(first["history"])
    assert first["history"][-1]["valid_bound_per_step"] > first["history"][0]["valid_bound_per_step"]


# --- fit ends with the best validation epoch's parameters ---------------------------------------------------------
class _ScriptedValidation(ExactLikelihood):
    """Exact likelihood whose validation bounds per step are ``bounds``, one per validation (one batch each)."""

    def __init__(self, model, bounds):
        super().__init__(model)
        self.bounds, self.validations = bounds, 0

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        if not self.training:
            out.bound = self.bounds[self.validations] * out.num_steps.to(out.bound)
            self.validations += 1
        return out


BOUNDS = [-2.0, -1.0, -3.0, -4.0]  # the best epoch is the 2nd of 4
FOUR_EPOCHS = TrainConfig(epochs=4, batch_size=8, lr=0.05, progress=False)


@pytest.fixture(scope="module")
def splits():
    truth = LinearGaussianSSM.random(2, 3, generator=_generator(5))
    train = truth.sample(16, 8, generator=torch.Generator().manual_seed(1))[0]
    valid = truth.sample(8, 8, generator=torch.Generator().manual_seed(2))[0]
    return (train, None), (valid, None)


def _state(module):
    return {k: v.clone() for k, v in module.state_dict().items()}


def _equal(state, checkpoint):
    return set(state) == set(checkpoint) and all(torch.equal(v, checkpoint[k]) for k, v in state.items())


def _trained(splits, run_dir=None, resume=False, **options):
    objective = _ScriptedValidation(LinearGaussianSSM.random(2, 3, generator=_generator(3)), BOUNDS)
    trainer = Trainer(objective, *splits, FOUR_EPOCHS, run_dir=run_dir)
    trainer.fit(resume=resume, **options)
    return trainer


def test_fit_ends_with_the_parameters_of_best_pt_not_of_last_pt(splits, tmp_path):
    trainer = _trained(splits, tmp_path)
    best, last = (load_checkpoint(tmp_path / "checkpoints" / f"{w}.pt") for w in ("best", "last"))
    assert (best["epoch"], last["epoch"], trainer.epoch) == (2, 4, 4)
    assert _equal(_state(trainer.objective), best["objective"])
    assert not _equal(best["objective"], last["objective"])  # training moved on after the best epoch

    kept = _trained(splits, tmp_path / "last", restore_best=False)
    assert _equal(_state(kept.objective), last["objective"])

    in_memory = _trained(splits)  # no run folder: the best epoch's parameters are kept in memory
    assert _equal(_state(in_memory.objective), best["objective"])

    resumed = _trained(splits, tmp_path, resume=True)  # a finished run: nothing to train, best.pt restored
    assert resumed.epoch == 4 and _equal(_state(resumed.objective), best["objective"])
    with pytest.raises(TypeError, match=r"^restore_best must be True or False, got str 'no'"):
        resumed.fit(restore_best="no")


def test_a_second_fit_continues_from_the_last_parameters_not_the_best(splits, tmp_path):
    """Two fits of 3 and then 4 epochs end as one fit of 4: the second starts from epoch 3's parameters, not from the
    best (epoch 2's) that the first fit ended with."""
    objective = _ScriptedValidation(LinearGaussianSSM.random(2, 3, generator=_generator(3)), BOUNDS)
    trainer = Trainer(objective, *splits, TrainConfig(epochs=3, batch_size=8, lr=0.05, progress=False))
    trainer.fit()
    trainer.config.epochs = 4
    trainer.fit()
    straight = _trained(splits, tmp_path, restore_best=False)
    trainer.fit(restore_best=False)  # nothing left to train: the last parameters come back
    assert _equal(_state(trainer.objective), _state(straight.objective))

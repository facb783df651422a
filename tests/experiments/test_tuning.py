"""Tuning a recipe on the validation split: trial 0 is the given configuration, the search finds the better region,
an interrupted search resumes where it stopped, failed trials are recorded, the user's settings stay fixed."""

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ppl_models.experiments import own_data, registry, runner
from ppl_models.experiments.recipes import RECIPES, recipe
from ppl_models.experiments.registry import MODELS
from ppl_models.experiments.tuning import SEARCH_SPACES, search_space, tune
from ppl_models.inference.atomic_files import save_torch
from ppl_models.inference.training import TrainConfig, TrainingDiverged

#: a small run: one epoch, few predictive samples
TINY = ['data.series="site"', "train.epochs=1", "train.batch_size=4", "evaluate.predictive_samples=10"]


def sites(path: Path, *, seed=0, series=8, steps=12) -> Path:
    """A long-format CSV of ``series`` AR(1) series of ``steps`` values (columns ``site``, ``value``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(series):
        level = 0.0
        for _ in range(steps):
            level = 0.7 * level + rng.normal()
            rows.append(f"s{s},{level:.5f}")
    path.write_text("site,value\n" + "\n".join(rows) + "\n")
    return path


def gru_config(**train) -> dict:
    """The ``gru`` recipe (rnn_dim 64, hidden_dim 64, lr 0.003) on a registered data set (no file to hash)."""
    config = {**recipe("gru", binary=False), "data": {"name": "lgssm-synthetic"}}
    config["train"].update(train)
    return config


def figure(config: dict) -> float:
    """The validation bound the fake training reports: highest at ``lr = 1e-3``, ``rnn_dim = 112``."""
    return -((math.log10(config["train"]["lr"]) + 3) ** 2) - ((config["model"]["rnn_dim"] - 112) / 64) ** 2


class FakeTrain:
    """``train(config, run_dir, resume=...)`` that writes a three-epoch ``metrics.jsonl`` (the validation figure
    ``figure(config)`` at epoch 2, below it at epochs 1 and 3) and a finished marker; it records its calls and
    raises ``fail[n]`` on its call number ``n`` (after writing a checkpoint there if ``checkpoint``)."""

    def __init__(self, fail=None, checkpoint=False):
        self.calls, self.fail, self.checkpoint = [], fail or {}, checkpoint

    def __call__(self, config, run_dir, *, resume=False):
        self.calls.append((json.loads(json.dumps(config)), Path(run_dir), resume))
        run_dir.mkdir(parents=True, exist_ok=True)
        error = self.fail.get(len(self.calls) - 1)
        if error is not None:
            if self.checkpoint:
                save_torch(run_dir / "checkpoints" / "last.pt", {"objective": {}, "epoch": 1})
            raise error
        value = figure(config)
        lines = [{"epoch": e, "valid_bound_per_step": value - d} for e, d in ((1, 1.0), (2, 0.0), (3, 0.5))]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        (run_dir / "finished.json").write_text("{}")
        return {}


def drawn(call) -> tuple:
    config = call[0]
    return config["model"]["rnn_dim"], config["model"]["hidden_dim"], config["train"]["lr"]


def test_trial_zero_is_the_given_configuration_and_the_search_finds_the_better_region(tmp_path):
    train = FakeTrain()
    tuning = tune(gru_config(), tmp_path / "t", budget=20, train=train)
    assert len(train.calls) == 20
    first, run, resume = train.calls[0]
    assert first == json.loads(json.dumps(gru_config())) and run == tmp_path / "t" / "trials" / "000" and not resume
    assert tuning.trials[0]["params"] == {"model.rnn_dim": 64, "model.hidden_dim": 64, "train.lr": 0.003}
    values = [figure(config) for config, _, _ in train.calls]
    assert [t["valid_bound_per_step"] for t in tuning.trials] == pytest.approx(values)
    assert all(t["best_epoch"] == 2 and t["state"] == "complete" for t in tuning.trials)
    best = max(range(20), key=values.__getitem__)
    assert tuning.best.number == best and tuning.best.valid_bound_per_step == pytest.approx(values[best])
    assert tuning.best.config == train.calls[best][0] and tuning.best.run == tmp_path / "t" / "trials" / f"{best:03d}"
    assert values[best] > figure(gru_config()) + 0.5  # trial 0 is at -(0.477^2 + 0.75^2) = -0.79
    rnn_dim, _, lr = drawn(train.calls[best])
    assert abs(math.log10(lr) + 3) < 0.4 and rnn_dim >= 80
    assert sum(values[10:]) / 10 > sum(values[1:6]) / 5  # the TPE draws beat the first random ones
    assert json.loads((tmp_path / "t" / "tuning.json").read_text()) == json.loads(json.dumps(tuning.to_dict()))


def test_a_budget_of_one_trains_the_given_configuration_only(tmp_path):
    train = FakeTrain()
    tuning = tune(gru_config(), tmp_path / "t", budget=1, train=train)
    assert [(config, run.name, resume) for config, run, resume in train.calls] == [
        (json.loads(json.dumps(gru_config())), "000", False)
    ]
    assert [t["number"] for t in tuning.trials] == [0] and tuning.best.number == 0


def test_an_interrupted_search_resumes_keeping_its_finished_trials(tmp_path):
    folder, reference = tmp_path / "t", FakeTrain()
    tune(gru_config(), tmp_path / "whole", budget=6, seed=3, train=reference)
    first = FakeTrain(fail={2: KeyboardInterrupt()}, checkpoint=True)  # killed in trial 2, after its first epoch
    with pytest.raises(KeyboardInterrupt):
        tune(gru_config(), folder, budget=4, seed=3, train=first)
    again = FakeTrain()
    tuning = tune(gru_config(), folder, budget=4, seed=3, train=again)
    assert [(run.name, resume) for _, run, resume in again.calls] == [("002", True), ("003", False)]
    assert drawn(again.calls[0]) == drawn(first.calls[2])  # the interrupted trial goes on with its own settings
    assert [t["number"] for t in tuning.trials] == [0, 1, 2, 3]
    more = FakeTrain()
    final = tune(gru_config(), folder, budget=6, seed=3, train=more)
    assert [run.name for _, run, _ in more.calls] == ["004", "005"] and len(final.trials) == 6
    resumed = [*first.calls[:2], *again.calls, *more.calls]
    assert [drawn(call) for call in resumed] == [drawn(call) for call in reference.calls]  # as if never stopped
    rerun = FakeTrain()
    assert tune(gru_config(), folder, budget=6, seed=3, train=rerun).to_dict() == final.to_dict()
    assert rerun.calls == []


def test_a_trial_interrupted_before_its_first_epoch_starts_again(tmp_path):
    folder = tmp_path / "t"
    with pytest.raises(KeyboardInterrupt):
        tune(gru_config(), folder, budget=2, train=FakeTrain(fail={1: KeyboardInterrupt()}))
    assert (folder / "trials" / "001").is_dir()
    again = FakeTrain()
    tune(gru_config(), folder, budget=2, train=again)
    assert [(run.name, resume) for _, run, resume in again.calls] == [("001", False)]


def test_a_search_killed_while_writing_its_journal_goes_on(tmp_path):
    folder = tmp_path / "t"
    tune(gru_config(), folder, budget=2, train=FakeTrain())
    with open(folder / "study.log", "ab") as journal:
        journal.write(b'{"op_code": 5, "worker_id": "x", "trial_id": 1')  # a line cut short, no newline
    (folder / "study.log.lock").symlink_to(folder / "study.log")  # the journal's lock, left behind
    more = FakeTrain()
    tuning = tune(gru_config(), folder, budget=3, train=more)
    assert [run.name for _, run, _ in more.calls] == ["002"] and [t["state"] for t in tuning.trials] == ["complete"] * 3


def test_a_failed_trial_is_recorded_and_the_search_goes_on(tmp_path):
    train = FakeTrain(fail={1: TrainingDiverged("loss is nan at epoch 3"), 2: ValueError("model.rnn_dim: too big")})
    tuning = tune(gru_config(), tmp_path / "t", budget=4, train=train)
    assert len(train.calls) == 4
    assert [t["state"] for t in tuning.trials] == ["complete", "failed", "failed", "complete"]
    assert tuning.trials[1]["error"] == "loss is nan at epoch 3" and tuning.trials[1]["valid_bound_per_step"] is None
    assert tuning.trials[2]["error"] == "model.rnn_dim: too big"
    assert tuning.best.number == max((0, 3), key=lambda n: figure(train.calls[n][0]))
    with pytest.raises(ValueError, match=r"all 2 trials failed \(trial 0: no data\)"):
        tune(
            gru_config(),
            tmp_path / "u",
            budget=2,
            train=FakeTrain(fail={0: ValueError("no data"), 1: ValueError("no data")}),
        )


def test_the_keys_the_user_set_are_never_drawn(tmp_path):
    train = FakeTrain()
    config = gru_config(lr=0.05)
    config["model"]["hidden_dim"] = 40
    tuning = tune(config, tmp_path / "t", budget=6, fixed={"train.lr", "model.hidden_dim", "data.series"}, train=train)
    assert [(c["train"]["lr"], c["model"]["hidden_dim"]) for c, _, _ in train.calls] == [(0.05, 40)] * 6
    assert all(set(t["params"]) == {"model.rnn_dim"} for t in tuning.trials)
    assert len({c["model"]["rnn_dim"] for c, _, _ in train.calls}) > 1


def test_a_value_outside_its_range_stays_as_given():
    config = gru_config(lr=0.5)  # above the range's 3e-2: held, as a key the user fixed
    assert set(search_space(config)) == {"model.rnn_dim", "model.hidden_dim"}
    config["model"]["rnn_dim"] = 50  # off the 16-step grid
    assert set(search_space(config)) == {"model.hidden_dim"}


def test_the_sizes_fitted_to_the_data_are_searched_up_to_their_value():
    kf = recipe("kf", binary=False)
    kf["model"]["state_dim"] = 3
    assert search_space(kf)["model.state_dim"] == ("int", 1, 3)
    kf["model"]["state_dim"] = 1  # one value: nothing to draw
    assert "model.state_dim" not in search_space(kf)


def test_a_model_with_nothing_to_draw_trains_its_configuration_once(tmp_path):
    train = FakeTrain()
    tuning = tune(
        gru_config(), tmp_path / "t", budget=5, fixed={"model.rnn_dim", "model.hidden_dim", "train.lr"}, train=train
    )
    assert len(train.calls) == 1 and [t["params"] for t in tuning.trials] == [{}]


def test_a_search_of_other_settings_is_refused_unless_retrain(tmp_path):
    folder = tmp_path / "t"
    tune(gru_config(), folder, budget=2, train=FakeTrain())
    with pytest.raises(ValueError, match=r"holds a search made with other settings .*config\.train\.epochs: 200 -> 50"):
        tune(gru_config(epochs=50), folder, budget=2, train=FakeTrain())
    with pytest.raises(ValueError, match=r"seed: 0 -> 1"):
        tune(gru_config(), folder, budget=2, seed=1, train=FakeTrain())
    with pytest.raises(ValueError, match=r"fixed: \[\] -> \['train.lr'\]"):
        tune(gru_config(), folder, budget=2, fixed={"train.lr"}, train=FakeTrain())
    moved = FakeTrain()
    tune({**gru_config(), "device": "cpu"}, folder, budget=2, train=moved)  # where it runs is no other search
    assert moved.calls == []
    again = FakeTrain()
    tuning = tune(gru_config(epochs=50), folder, budget=2, train=again, retrain=True)
    assert [run.name for _, run, _ in again.calls] == ["000", "001"] and tuning.best.config["train"]["epochs"] == 50


def test_a_changed_data_file_is_another_search(tmp_path):
    data = sites(tmp_path / "a.csv")
    config = {**recipe("gru", binary=False), "data": {"name": "file", "path": str(data)}}
    tune(config, tmp_path / "t", budget=1, train=FakeTrain())
    sites(data, seed=1)
    with pytest.raises(ValueError, match="data_fingerprint: 'sha256:"):
        tune(config, tmp_path / "t", budget=1, train=FakeTrain())


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"budget": 0}, r"budget: expected an int >= 1"),
        ({"budget": 1.5}, r"budget: expected an int >= 1"),
        ({"budget": True}, r"budget: expected an int >= 1"),
        ({"seed": -1}, r"seed: expected an int in \[0, 2\*\*32\)"),
        ({"fixed": "train.lr"}, r"fixed: expected a collection of 'section.key' names"),
        ({"fixed": ["lr"]}, r"fixed: expected a collection of 'section.key' names"),
    ],
)
def test_bad_arguments_are_one_line_naming_them(tmp_path, arguments, message):
    with pytest.raises(ValueError, match=message):
        tune(gru_config(), tmp_path / "t", **{"budget": 2, **arguments}, train=FakeTrain())
    assert not (tmp_path / "t").exists()


def test_a_model_without_a_search_space_and_a_foreign_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"config: model.name must be one of .*'lgssm'.*got 'pf-lstm'"):
        tune({"model": {"name": "pf-lstm"}}, tmp_path / "t", budget=2, train=FakeTrain())
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text("{}")
    with pytest.raises(ValueError, match=r"folder .*run is not a tuning folder \(it holds metrics.json\)"):
        tune(gru_config(), tmp_path / "run", budget=2, train=FakeTrain())


def test_every_recipe_has_a_search_space_over_real_settings_that_holds_the_recipe():
    assert set(SEARCH_SPACES) == set(RECIPES)
    train_keys = set(TrainConfig().to_dict())
    for model, space in SEARCH_SPACES.items():
        builder = inspect.signature(MODELS[model].build).parameters
        for key in space:
            section, name = key.split(".")
            assert name in (builder if section == "model" else train_keys), (model, key)
        assert set(search_space(recipe(model, binary=False))) == set(space), model  # every recipe value in range


def test_every_corner_of_every_search_space_builds():
    for model, space in SEARCH_SPACES.items():
        config = recipe(model, binary=False)
        space = search_space(config)
        corners = [
            {key: spec[1][0] if spec[0] == "categorical" else spec[1] for key, spec in space.items()},
            {key: spec[1][-1] if spec[0] == "categorical" else spec[2] for key, spec in space.items()},
        ]
        for corner in corners:
            built = json.loads(json.dumps(config))
            for key, value in corner.items():
                section, name = key.split(".")
                built[section][name] = value
            registry.build_objective(
                built["objective"], registry.build(built["model"], registry.MODELS, "model", obs_dim=2)
            )
            TrainConfig.from_dict(built["train"])


def test_a_validation_figure_that_is_not_finite_fails_the_trial(tmp_path):
    def train(config, run_dir, *, resume=False):
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.jsonl").write_text('{"epoch": 1, "valid_bound_per_step": NaN}\n')

    with pytest.raises(ValueError, match=r"trial 0: .*metrics.jsonl: no epoch with a finite validation bound"):
        tune(gru_config(), tmp_path / "t", budget=1, train=train)


def test_a_small_real_search_on_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sites(tmp_path / "a.csv")
    config = own_data.model_config("lgssm", "a.csv", TINY)
    calls = []

    def train(config, run_dir, *, resume=False):
        calls.append(run_dir.name)
        return runner.train(config, run_dir, resume=resume)

    tuning = tune(config, "search", budget=2, train=train)
    assert calls == ["000", "001"]
    assert json.loads((tmp_path / "search" / "trials" / "000" / "config.json").read_text()) == config
    log = [json.loads(line) for line in (tmp_path / tuning.best.run / "metrics.jsonl").read_text().splitlines()]
    assert tuning.best.valid_bound_per_step == max(r["valid_bound_per_step"] for r in log if "epoch" in r)
    assert (tmp_path / tuning.best.run / "metrics.json").is_file()
    assert tune(config, "search", budget=2, train=train).to_dict() == tuning.to_dict() and len(calls) == 2

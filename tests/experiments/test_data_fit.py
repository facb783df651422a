"""Models on the data they are offered: binary data only to models with a Bernoulli emission, and the settings
that depend on the sequences' lengths fitted to them (or the model refused) before any run folder is written."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments.cli import main
from ppl_models.experiments.own_data import MODEL_NAMES, model_config
from ppl_models.experiments.recipes import EMISSION_MODELS, EMISSIONS, RECIPES, DataNotRepresentable
from ppl_models.experiments.registry import MODELS, build

#: the models of the collection with a Bernoulli emission (the first test checks it against their constructors)
BERNOULLI = ("gru", "vrnn", "srnn")
TINY = [
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
    "evaluate.batch_size=8",
    "model.rnn_dim=8",
    "model.hidden_dim=8",
]


def sets(*items):
    return [a for item in items for a in ("--set", item)]


@pytest.fixture
def rolls(tmp_path):
    """Binary rolls: 12 sequences of 10 to 16 steps over 6 keys, as ``.npz`` with a mask."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 17, size=12)
    x = np.zeros((12, 16, 6))
    for i, length in enumerate(lengths):
        x[i, :length] = rng.random((length, 6)) < 0.3
    np.savez(tmp_path / "rolls.npz", x=x, mask=np.arange(16) < lengths[:, None])
    return tmp_path / "rolls.npz"


def split_table(path, lengths: dict, *, features=2, seed=0):
    """A CSV of real values whose series ``{name: (split, steps)}`` go to the split the ``part`` column says."""
    rng = np.random.default_rng(seed)
    rows = [
        {"id": name, "t": t, "part": part, **{f"v{k}": rng.normal() for k in range(features)}}
        for name, (part, steps) in lengths.items()
        for t in range(steps)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


COLUMNS = ['data.series="id"', 'data.time="t"', 'data.split="part"']


def held_out(steps):
    return {"v0": ("valid", steps), "v1": ("valid", steps), "s0": ("test", steps), "s1": ("test", steps)}


def test_the_table_of_emissions_is_what_the_models_offer():
    """A recipe model takes ``emission="bernoulli"`` exactly when the table says it has a Bernoulli emission."""
    assert set(EMISSIONS) == set(MODEL_NAMES) and EMISSION_MODELS == BERNOULLI
    for model in RECIPES:
        table = {"name": model, **RECIPES[model]["model"], "emission": "bernoulli"}
        try:
            build(table, MODELS, "model", obs_dim=3)
            takes = True
        except ValueError:
            takes = False
        assert takes == (model in BERNOULLI), model


@pytest.mark.parametrize("model", [m for m in MODEL_NAMES if m not in BERNOULLI])
def test_a_gaussian_only_model_is_refused_on_binary_data_before_any_folder(tmp_path, rolls, model, capsys):
    run = tmp_path / "run"
    assert main(["train", model, "--data", str(rolls), "--run-dir", str(run), *sets("train.epochs=1")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0, error
    for words in (f"error: {model}:", "binary (0/1)", "Gaussian-only", "gru, vrnn, srnn"):
        assert words in error, (words, error)
    assert not run.exists()
    with pytest.raises(DataNotRepresentable):
        model_config(model, rolls)


def test_a_gaussian_emission_set_on_binary_data_is_refused(tmp_path, rolls, capsys):
    run = tmp_path / "run"
    args = ["train", "gru", "--data", str(rolls), "--run-dir", str(run), *sets('model.emission="gaussian"')]
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    assert "binary (0/1)" in error and 'model.emission="bernoulli"' in error and not run.exists()


def test_a_pf_rnn_is_refused_on_binary_targets_and_takes_real_ones(tmp_path, rolls):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": np.repeat(np.arange(10), 8),
            "t": np.tile(np.arange(8), 10),
            "u": rng.normal(size=80),
            "on": (rng.random(80) < 0.4).astype(float),
        }
    )
    frame.to_csv(tmp_path / "table.csv", index=False)
    columns = ['data.series="id"', 'data.time="t"', 'data.targets=["on"]']
    for cell in ("pf-lstm", "pf-gru"):
        with pytest.raises(DataNotRepresentable, match=f"^{cell}: the data is binary"):
            model_config(cell, tmp_path / "table.csv", columns)
        with pytest.raises(DataNotRepresentable, match="binary"):
            model_config(cell, rolls)
    frame["on"] += 0.5 * rng.normal(size=80)
    frame.to_csv(tmp_path / "table.csv", index=False)
    assert model_config("pf-lstm", tmp_path / "table.csv", columns)["data"]["targets"] == ["on"]


@pytest.mark.slow
def test_every_model_not_refused_trains_one_epoch_to_finite_figures_on_binary_data(tmp_path, rolls, capsys):
    for model in BERNOULLI:
        run = tmp_path / model
        extra = ["model.latent_dim=4"] if model != "gru" else []
        assert main(["train", model, "--data", str(rolls), "--run-dir", str(run), *sets(*TINY, *extra)]) == 0
        metrics = json.loads((run / "metrics.json").read_text())
        assert all(math.isfinite(v["per_step"]) for v in metrics["loglik"].values()), model
        assert 0 <= metrics["calibration"]["brier"] <= 1, model


def test_psrnn_and_kf_fit_the_horizon_to_the_shortest_training_sequence(tmp_path):
    """28 training sequences of 9 steps (v0, v1 features): horizon 4 keeps every sequence (2 * 4 + 1 = 9) with 28
    windows, over psrnn's 20; kf's state is then at most 4 * 2 = 8."""
    path = split_table(tmp_path / "d.csv", {**{f"a{i}": ("train", 9) for i in range(28)}, **held_out(12)})
    psrnn = model_config("psrnn", path, COLUMNS)["model"]
    kf = model_config("kf", path, COLUMNS)["model"]
    assert psrnn["horizon"] == 4 and (kf["horizon"], kf["state_dim"]) == (4, 8)


def test_a_horizon_is_shortened_until_there_are_enough_windows(tmp_path):
    """7 training sequences of 5 steps: horizon 2 gives 7 * 1 windows, under psrnn's 20; horizon 1 gives 7 * 3."""
    path = split_table(tmp_path / "d.csv", {**{f"a{i}": ("train", 5) for i in range(7)}, **held_out(5)})
    assert model_config("psrnn", path, COLUMNS)["model"]["horizon"] == 1
    assert model_config("kf", path, COLUMNS)["model"]["horizon"] == 2  # kf keeps min(10, 2 * 2) = 4 <= 7 windows


def test_data_too_short_for_two_stage_regression_is_refused_before_any_folder(tmp_path, capsys):
    """3 training sequences of 4 steps (untransformed: a difference would leave 3): at most 3 * 2 = 6 windows
    (horizon 1), under psrnn's 20."""
    path = split_table(tmp_path / "d.csv", {**{f"a{i}": ("train", 4) for i in range(3)}, **held_out(4)})
    run = tmp_path / "run"
    assert (
        main(["train", "psrnn", "--data", str(path), "--run-dir", str(run), *sets(*COLUMNS, 'data.transform="none"')])
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "needs at least 20 windows" in error and "gives 6" in error, error
    assert not run.exists()
    with pytest.raises(DataNotRepresentable):
        model_config("psrnn", path, COLUMNS)


def test_a_horizon_set_beyond_the_data_is_refused_before_any_folder(tmp_path, capsys):
    path = split_table(tmp_path / "d.csv", {**{f"a{i}": ("train", 9) for i in range(28)}, **held_out(12)})
    run = tmp_path / "run"
    assert main(["train", "kf", "--data", str(path), "--run-dir", str(run), *sets(*COLUMNS, "model.horizon=5")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("ppl-models: error: model.horizon=5:") and "gives 0" in error, error
    assert not run.exists()


def test_the_attention_window_and_position_table_follow_the_sequences(tmp_path):
    """Sequences of at most 9 steps: a window of 8 past steps; a test sequence of 600 steps: 600 positions; the
    Transformer forecaster's context: the longest training sequence (9, then 30)."""
    short = split_table(tmp_path / "short.csv", {**{f"a{i}": ("train", 9) for i in range(6)}, **held_out(7)})
    assert model_config("smc-transformer", short, COLUMNS)["model"]["window"] == 8
    assert model_config("transformer-forecaster", short, COLUMNS)["model"]["max_len"] == 512
    assert model_config("transformer-forecaster", short, COLUMNS)["model"]["context"] == 9
    long = split_table(
        tmp_path / "long.csv", {**{f"a{i}": ("train", 30) for i in range(6)}, **held_out(20), "s2": ("test", 600)}
    )
    assert model_config("transformer-forecaster", long, COLUMNS)["model"]["max_len"] == 600
    assert model_config("transformer-forecaster", long, COLUMNS)["model"]["context"] == 30
    assert model_config("smc-transformer", long, COLUMNS)["model"]["window"] == 24


@pytest.mark.slow
def test_psrnn_and_kf_train_on_short_sequences_at_their_fitted_horizon(tmp_path, capsys):
    path = split_table(tmp_path / "d.csv", {**{f"a{i}": ("train", 9) for i in range(28)}, **held_out(12)})
    for model, extra in (("psrnn", ["model.num_features=50"]), ("kf", [])):
        run = tmp_path / model
        args = [
            "train",
            model,
            "--data",
            str(path),
            "--run-dir",
            str(run),
            *sets(*COLUMNS, "train.epochs=1", "evaluate.predictive_samples=10", *extra),
        ]
        assert main(args) == 0
        metrics = json.loads((run / "metrics.json").read_text())
        assert math.isfinite(metrics["loglik"]["exact"]["per_step"]), model

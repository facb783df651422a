"""Covariates from the command line (--covariates, --past-covariates): a GRU that reads them, refusals in one line,
a board that leaves out the models that cannot read them and scores every row on the targets only."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments.cli import main

#: a small GRU that learns y = 3 c in a few epochs
FAST = [
    "train.epochs=8",
    "train.batch_size=1",
    "train.lr=0.03",
    "evaluate.predictive_samples=10",
    'data.transform="none"',
]
SMALL = ["model.rnn_dim=8", "model.hidden_dim=8"]
COLUMNS = ["--series", "site", "--time", "t", "--split-column", "part"]


def sets(items):
    return [a for item in items for a in ("--set", item)]


def _panel(folder, name: str, seed: int, target) -> None:
    """Write ``folder/name.csv``: six series of 40 steps of a white-noise covariate ``c`` and ``y = target(c, rng)``;
    rows 34 to 39 of each are the test split (a ``part`` column)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(6):
        for t in range(40):
            c = rng.normal()
            part = "train" if t < 28 else "valid" if t < 34 else "test"
            rows.append({"site": f"s{s}", "t": t, "c": c, "y": target(c, rng), "part": part})
    pd.DataFrame(rows).to_csv(folder / f"{name}.csv", index=False)


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    """``y_t = 3 c_t + noise`` (:func:`_panel`)."""
    folder = tmp_path_factory.mktemp("priced")
    _panel(folder, "priced", 0, lambda c, rng: 3 * c + 0.1 * rng.normal())
    return folder


def _error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("ppl-models: error:") and "Traceback" not in out + err, err
    return err


def test_a_gru_that_reads_the_covariate_cuts_its_test_error_far_below_the_best_without_it(priced, monkeypatch):
    monkeypatch.chdir(priced)
    argv = ["train", "gru", "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--run-dir", "with"]
    assert main([*argv, *sets(FAST + SMALL)]) == 0
    metrics = json.loads((priced / "with" / "metrics.json").read_text())
    frame = pd.read_csv(priced / "priced.csv")
    # c is white noise, so without it no forecast of y beats y's own spread on the test rows
    spread = float(frame.y[frame.part == "test"].var(ddof=0))
    assert spread > 5.0
    assert metrics["mse"] < 0.15 * spread
    assert "the first 1 of 2 columns" in metrics["scored_columns"]


def test_a_model_that_cannot_read_covariates_is_refused_with_the_reason(priced, monkeypatch, capsys):
    monkeypatch.chdir(priced)
    assert main(["train", "kf", "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--run-dir", "kf"]) == 2
    err = _error_line(capsys)
    assert "--covariates: model 'kf' cannot read covariates" in err and "weighs every column" in err


def test_a_covariate_the_file_lacks_is_refused_naming_the_flag(priced, monkeypatch, capsys):
    monkeypatch.chdir(priced)
    assert main(["train", "gru", "--data", "priced.csv", *COLUMNS, "--past-covariates", "price", "--run-dir", "x"]) == 2
    assert "'price' (given as --past-covariates) not found" in _error_line(capsys)


def test_the_board_leaves_out_the_models_that_cannot_read_covariates_and_scores_the_targets_only(priced, monkeypatch):
    monkeypatch.chdir(priced)
    board = ["leaderboard", "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--out", "board"]
    assert (
        main(
            [
                *board,
                "--models",
                "gru,kf",
                "--classical",
                "last-value",
                "--budget",
                "1",
                *sets(FAST + [f"gru:{item}" for item in SMALL]),
            ]
        )
        == 0
    )
    record = json.loads((priced / "board" / "leaderboard.json").read_text())
    rows = {row["model"]: row for row in record["rows"]}
    assert set(rows) == {"gru", "last-value"} and "cannot read covariates" in record["not_run"]["kf"]
    assert rows["last-value"]["form"].endswith("; no covariates")
    frame = pd.read_csv(priced / "priced.csv")
    y = frame.pivot(index="site", columns="t", values="y").to_numpy()
    by_hand = float(((y[:, 34:] - y[:, 33:-1]) ** 2).mean())  # the last value's one-step error, y only
    assert rows["last-value"]["mse"] == pytest.approx(by_hand, rel=1e-6)
    # its nats are of y alone: N(y_t; y_{t-1}, v) with v the mean square of the series' earlier lag-1 differences
    variance = ((y[:, 1:34] - y[:, :33]) ** 2).mean(1, keepdims=True)
    errors = y[:, 34:] - y[:, 33:-1]
    nats = -0.5 * (np.log(2 * np.pi * variance) + errors**2 / variance)
    assert rows["last-value"]["nats_per_step"] == pytest.approx(float(nats.mean()), rel=1e-6)
    assert rows["gru"]["mse"] < 0.1 * rows["last-value"]["mse"]
    assert rows["gru"]["nats_per_step"] > rows["last-value"]["nats_per_step"] + 2.0
    assert "kf: cannot read covariates" in (priced / "board" / "leaderboard.md").read_text()


def test_the_multistep_table_refuses_past_only_covariates_beyond_one_step_in_one_line(priced, monkeypatch, capsys):
    monkeypatch.chdir(priced)
    board = ["leaderboard", "--data", "priced.csv", *COLUMNS, "--past-covariates", "c", "--out", "steps"]
    assert main([*board, "--models", "gru", "--horizon", "2", "--origins", "1"]) == 2
    assert "--horizon 2: with past_covariates ['c']: their values after the forecast origin" in _error_line(capsys)


def test_the_multistep_table_gives_the_covariate_readers_the_covariates_ahead(priced, monkeypatch):
    monkeypatch.chdir(priced)
    board = ["leaderboard", "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--out", "ahead", "--jobs", "1"]
    fast = [item for item in FAST if not item.startswith("train.epochs")] + ["train.epochs=1"]
    settings = sets(fast + [f"gru:{item}" for item in SMALL])
    argv = [*board, "--models", "gru", "--classical", "last-value,arimax", "--budget", "1", *settings]
    assert main([*argv, "--horizon", "2", "--origins", "2"]) == 0
    section = json.loads((priced / "ahead" / "leaderboard.json").read_text())["multistep"]
    rows = {row["model"]: row for row in section["rows"]}
    assert set(rows) == {"gru", "last-value", "arimax"} and not any(row.get("failed") for row in rows.values())
    # 6 series x 2 origins (steps 34 and 39, the last: no target 2 ahead), one value each: y alone
    assert all(row["per_horizon"]["targets"] == [12, 6] for row in rows.values())
    # y = 3 c + small noise, c white noise: ARIMAX given c ahead is far closer than the last value at every step
    assert all(
        a < 0.2 * b for a, b in zip(rows["arimax"]["per_horizon"]["crps"], rows["last-value"]["per_horizon"]["crps"])
    )


@pytest.fixture(scope="module")
def visits(tmp_path_factory):
    """Counts ``y_t ~ Poisson(exp(1.5 + 0.9 c_t))``, ``c`` a real-valued white noise, a price say (:func:`_panel`)."""
    folder = tmp_path_factory.mktemp("visits")
    _panel(folder, "visits", 3, lambda c, rng: int(rng.poisson(np.exp(1.5 + 0.9 * c))))
    return folder


def test_counts_beside_a_real_valued_covariate_are_counts_that_read_it(visits, monkeypatch, capsys):
    """The covariate is an input, never scored: the counts keep a count likelihood, the covariate is standardised,
    and the GRU that reads it scores the test counts far better than one that does not."""
    monkeypatch.chdir(visits)
    fast = [item for item in FAST if item != 'data.transform="none"']
    base = ["train", "gru", "--data", "visits.csv", *COLUMNS, *sets(fast + SMALL)]
    assert main([*base, "--features", "y,c", "--covariates", "c", "--run-dir", "with"]) == 0
    assert main([*base, "--features", "y", "--run-dir", "without"]) == 0
    split = json.loads((visits / "with" / "data_split.json").read_text())
    chosen = split["likelihood"]["name"]  # the covariate moves the rate step to step: negbin by the dispersion index
    assert chosen in ("poisson", "negbin") and f"gru: likelihood {chosen}: counts" in capsys.readouterr().out
    assert split["likelihood"]["count_scale"][1] == 1.0
    model = json.loads((visits / "with" / "config.json").read_text())["model"]
    assert model["emission"] == chosen and model["count_scale"] == split["likelihood"]["count_scale"]
    frame = pd.read_csv(visits / "visits.csv")
    assert model["count_scale"][0] == pytest.approx(1.0 + frame.y[frame.part == "train"].mean())
    with_c, without = (json.loads((visits / run / "metrics.json").read_text()) for run in ("with", "without"))
    assert "the first 1 of 2 columns" in with_c["scored_columns"]
    nats = [run["loglik"]["exact"]["per_step"] for run in (with_c, without)]
    assert nats[0] > nats[1] + 0.2


@pytest.mark.parametrize("model", ["srnn", "vrnn"])
def test_a_recurrent_latent_model_that_reads_the_covariate_cuts_its_test_error_far_below_its_spread(
    priced, monkeypatch, model
):
    monkeypatch.chdir(priced)
    argv = ["train", model, "--data", "priced.csv", *COLUMNS, "--covariates", "c", "--run-dir", f"{model}-with"]
    assert main([*argv, *sets([*FAST, *SMALL, "model.latent_dim=4"])]) == 0
    metrics = json.loads((priced / f"{model}-with" / "metrics.json").read_text())
    frame = pd.read_csv(priced / "priced.csv")
    spread = float(frame.y[frame.part == "test"].var(ddof=0))  # c is white noise: nothing else predicts y
    assert metrics["mse"] < 0.3 * spread
    assert (
        "the first 1 of 2 columns" in metrics["scored_columns"] and "of every column" not in metrics["scored_columns"]
    )

"""The classical rows of a leaderboard are judged on the same scored steps as the collection's models, in the
data's units; the board flags what is wrong (a constant column is left out of every row, so that it decides no
score) and shows two forecasters that are one as one row; a run forecasts past the end of its file."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from factories import site_walks
from scipy.stats import norm

from ppl_models.experiments import leaderboard
from ppl_models.experiments.board_flags import flag_rows, ranking_note, row_flags
from ppl_models.experiments.classical_rows import fit_issues, same_rows
from ppl_models.experiments.cli import main

SETS = [
    "--series",
    "id",
    "--time",
    "t",
    "--split",
    "time",
    "--set",
    'data.transform="none"',
    "--set",
    "train.epochs=2",
    "--set",
    "model.latent_dim=2",
    "--set",
    "evaluate.predictive_samples=20",
]


#: a one-epoch board on a :func:`~factories.site_walks` file
WALK_SETTINGS = [
    'data.series="site"',
    'data.time="t"',
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
    "evaluate.batch_size=8",
]


@pytest.fixture(scope="module")
def walks(tmp_path_factory):
    """Three random walks of 60 steps with drift, a long-format CSV."""
    folder = tmp_path_factory.mktemp("walks")
    rng = np.random.default_rng(0)
    rows = [
        {"id": s, "t": t, "v": float(v)}
        for s in "abc"
        for t, v in enumerate(100 + np.cumsum(rng.normal(0.5, 1.0, size=60)))
    ]
    pd.DataFrame(rows).to_csv(folder / "walks.csv", index=False)
    return folder


def test_the_last_value_row_is_the_hand_computed_random_walk_density(walks, monkeypatch):
    monkeypatch.chdir(walks)
    assert (
        main(
            [
                "leaderboard",
                "--data",
                "walks.csv",
                "--models",
                "lgssm",
                "--out",
                "board",
                "--jobs",
                "1",
                "--classical",
                "last-value",
                *SETS,
            ]
        )
        == 0
    )
    board = json.loads((walks / "board" / "leaderboard.json").read_text())
    rows = {row["model"]: row for row in board["rows"]}
    assert set(rows) == {"lgssm", "last-value"} and rows["last-value"]["kind"] == "classical"
    # by hand, from the file: 60 steps split 42 / 9 / 9; each test step given every step before it, the noise the
    # mean square of the one-step differences of the 51 steps before the test segment
    frame = pd.read_csv(walks / "walks.csv")
    total, steps, squared = 0.0, 0, 0.0
    for _, series in frame.groupby("id"):
        values = series.sort_values("t")["v"].to_numpy()
        sigma = np.sqrt(np.mean(np.diff(values[:51]) ** 2))
        total += norm.logpdf(values[51:], loc=values[50:-1], scale=sigma).sum()
        squared += ((values[51:] - values[50:-1]) ** 2).sum()
        steps += 9
    assert rows["last-value"]["nats_per_step"] == pytest.approx(total / steps, rel=1e-6)
    assert rows["last-value"]["mse"] == pytest.approx(squared / steps, rel=1e-6)
    lgssm = json.loads((walks / "board" / "runs" / "lgssm" / "metrics.json").read_text())
    assert lgssm["test_steps"] == steps  # the same scored steps
    assert any(flag.startswith("still improving") for flag in rows["lgssm"]["flags"])  # 2 epochs of a cap of 2


def test_rows_far_below_the_last_value_or_miscalibrated_are_flagged():
    reference = {"model": "last-value", "nats_per_step": -1.0, "mse": 1.0}
    bad = {
        "model": "gru",
        "nats_per_step": -2.5,
        "mse": 5.0,
        "validation": {"coverage_0.8": 0.3},
        "best_epoch": 40,
        "epochs_run": 50,
        "patience": 10,
    }
    flags = row_flags(bad, reference)
    assert flags == [
        "1.50 nats/step below the last value",
        "one-step MSE 5.0x the last value's",
        "validation coverage at 80 % is 0.30",
    ]
    still = {**bad, "nats_per_step": -1.2, "mse": 1.1, "validation": {"coverage_0.8": 0.8}, "best_epoch": 45}
    assert row_flags(still, reference) == ["still improving (best epoch 45 of 50)"]
    assert row_flags({**still, "nats_per_step": float("nan")}, reference)[0] == "non-finite held-out figure"


def test_a_run_forecasts_past_the_end_of_its_file(walks, monkeypatch):
    monkeypatch.chdir(walks)
    assert main(["train", "lgssm", "--data", "walks.csv", "--run-dir", "run", *SETS]) == 0
    assert main(["forecast", "lgssm=run", "--beyond", "5", "--samples", "50", "--out", "ahead"]) == 0
    table = pd.read_csv(walks / "ahead" / "beyond.csv")
    assert len(table) == 3 * 5 and set(table["series"]) == {"a", "b", "c"} and set(table["feature"]) == {"v"}
    assert (table["q05"] <= table["q50"]).all() and (table["q50"] <= table["q95"]).all()
    assert np.isfinite(table[["mean", "q05", "q25", "q50", "q75", "q95"]].to_numpy()).all()
    assert main(["forecast", "lgssm=run", "lgssm2=run", "--beyond", "5", "--out", "ahead"]) == 2


def test_seasonal_naive_without_a_season_is_the_last_value_row_with_the_reason_on_the_board(walks, monkeypatch):
    monkeypatch.chdir(walks)
    args = ["leaderboard", "--data", "walks.csv", "--models", "lgssm", "--out", "same", "--jobs", "1"]
    assert main([*args, "--classical", "last-value,seasonal-naive", *SETS]) == 0
    board = json.loads((walks / "same" / "leaderboard.json").read_text())
    classical = [row for row in board["rows"] if row["kind"] == "classical"]
    assert [(row["model"], row["same_as"]) for row in classical] == [("last-value", ["seasonal-naive"])]
    why = board["same"]["seasonal-naive"]
    assert why.startswith("seasonal-naive = last-value: no season detected (autocorrelation of first differences")
    page = (walks / "same" / "leaderboard.md").read_text()
    assert "| last-value = seasonal-naive | classical |" in page and f"- {why}" in page


@pytest.mark.parametrize(
    "record, why",
    [
        ({"season": 1, "season_source": "given"}, "seasonal-naive = last-value: the season given is 1"),
        ({"season": 1, "season_source": "none: the training rows are too short to look for one"}, "too short"),
        ({"season": 7, "season_source": "given"}, None),
    ],
)
def test_same_rows_names_seasonal_naive_as_the_last_value_where_its_season_is_1(tmp_path, record, why):
    folders = {name: tmp_path / name for name in ("last-value", "seasonal-naive")}
    for name, folder in folders.items():
        folder.mkdir()
        (folder / "classical.json").write_text(json.dumps({"name": name, **record}))
    same = same_rows(folders)
    if why is None:
        assert same == {}
    else:
        assert same["seasonal-naive"][0] == "last-value" and why in same["seasonal-naive"][1]
    assert same_rows({"seasonal-naive": folders["seasonal-naive"]}) == {}  # alone, it is a row of its own


def test_a_constant_column_no_longer_decides_the_board(tmp_path):
    path = site_walks(tmp_path / "c.csv", const=lambda f: 3.0)
    out = tmp_path / "board"
    rows = leaderboard.run_leaderboard(path, out, ["lgssm"], WALK_SETTINGS, classical=["last-value"])
    nats = {row["model"]: row["nats_per_step"] for row in rows}
    # one standard-normal-ish random walk: a step's density is a few nats below 0 for every row, not +11
    assert all(-5 < value < 1 for value in nats.values())
    board = json.loads((out / "leaderboard.json").read_text())
    assert any(w.startswith("const: left out of every row") for w in board["warnings"])
    assert "const: left out of every row" in (out / "leaderboard.md").read_text()


def test_a_flagged_row_is_never_ranked_first_and_the_board_says_why():
    rows = [
        {"model": "last-value", "nats_per_step": -1.0, "mse": 1.0},
        {"model": "mc-dropout-lstm", "nats_per_step": -0.2, "mse": 0.5, "validation": {"coverage_0.8": 0.23}},
        {"model": "arima", "nats_per_step": -0.5, "mse": 0.6, "validation": {"coverage_0.8": 0.79}},
        {"model": "ets", "nats_per_step": -0.1, "mse": 0.4, "fit_issues": ["optimiser did not converge on 2 fits"]},
    ]
    ranked = flag_rows(rows)
    assert [row["model"] for row in ranked] == ["arima", "ets", "mc-dropout-lstm", "last-value"]
    assert ranked[1]["flags"] == ["fit: optimiser did not converge on 2 fits"]
    note = ranking_note(ranked)
    assert note.startswith("arima is ranked first as the best row without a flag")
    assert "mc-dropout-lstm: validation coverage at 80 % is 0.23" in note and "ets: fit: optimiser" in note
    assert ranking_note(flag_rows(rows[:1] + rows[2:3])) is None


def test_a_classical_rows_record_of_unconverged_fits_is_its_fit_issue():
    record = {"rows_since_fit": {"optimiser: retried": 3, "optimiser: not converged": 2, "rows": 4}}
    assert fit_issues(record) == [
        "optimiser did not converge on 2 fits (of 3 retried with Powell and Nelder-Mead after L-BFGS; the highest "
        "likelihood kept)"
    ]
    assert fit_issues({"rows_since_fit": {"optimiser: retried": 3}}) == []

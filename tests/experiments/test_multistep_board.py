"""``ppl-models leaderboard ... --horizon H --origins N`` end to end on a tiny file: the same origins for every row,
spaced as by hand, each forecast given only the steps before its origin; the last-value row's CRPS per step ahead
against the Gaussian closed form of its h-step predictive, computed from the file; a rerun keeps the figures; bad
values refused in one line; the origins every row can reach where a model's transform differences."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import norm

from ppl_models.experiments import multistep_board
from ppl_models.experiments.cli import main

#: 4 series of 40 steps split by time (fractions 0.7, 0.15, 0.15): steps 0-27 train, 28-33 validation, 34-39 test
SERIES, STEPS, FIRST_TEST = 4, 40, 34
FLAGS = ["--series", "station", "--time", "hour", "--split", "time", "--jobs", "1", "--classical", "last-value,var"]
SETTINGS = [
    'data.transform="none"',
    "train.epochs=1",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
]


@pytest.fixture(scope="module")
def walks(tmp_path_factory):
    """``(folder, values [SERIES, STEPS, 2])``: two random walks per series in ``walks.csv``."""
    folder = tmp_path_factory.mktemp("multistep")
    values = 10 + np.cumsum(np.random.default_rng(1).normal(size=(SERIES, STEPS, 2)), axis=1)
    rows = [
        {"station": f"s{i}", "hour": t, "a": values[i, t, 0], "b": values[i, t, 1]}
        for i in range(SERIES)
        for t in range(STEPS)
    ]
    pd.DataFrame(rows).to_csv(folder / "walks.csv", index=False)
    return folder, values


def _board(folder, out, *flags):
    args = ["leaderboard", "--data", str(folder / "walks.csv"), "--models", "gru", "--out", str(folder / out)]
    return main([*args, *FLAGS, *(a for item in SETTINGS for a in ("--set", item)), *flags])


@pytest.fixture(scope="module")
def board(walks):
    """The board with ``--horizon 3 --origins 3``, every history given to a row's forecasts recorded."""
    folder, _ = walks
    histories = []
    original = multistep_board._Counted.forecast

    def spy(self, x, mask, horizon, num_samples, **options):
        histories.append((type(self.model).__name__, mask.sum(1).tolist(), bool((x[~mask] == 0).all())))
        return original(self, x, mask, horizon, num_samples, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(multistep_board._Counted, "forecast", spy)
        assert _board(folder, "board", "--horizon", "3", "--origins", "3") == 0
    return json.loads((folder / "board" / "leaderboard.json").read_text())["multistep"], histories


def test_every_row_forecasts_from_the_same_origins_given_only_the_steps_before_them(board):
    section, histories = board
    # 3 origins evenly spaced over the 6 test steps 34..39, first to last: 34, 34 + round(2.5) = 37, 39
    assert section["origin_steps"] == [[34, 37, 39]] * SERIES
    rows = {row["model"]: row for row in section["rows"]}
    assert set(rows) == {"gru", "last-value", "var"} and not any(row.get("failed") for row in rows.values())
    # each of the three rows had three calls, one per origin, each given exactly the origin's steps of history
    # with every later value zeroed
    assert sorted(histories) == sorted(
        (kind, [origin] * SERIES, True)
        for kind in ("GRUBaseline", "ClassicalSequenceModel", "ClassicalSequenceModel")
        for origin in (34, 37, 39)
    )
    assert all(row["per_horizon"]["targets"] == [12, 8, 8] for row in rows.values())


def test_the_last_value_rows_crps_is_the_closed_form_of_its_h_step_predictive(board, walks):
    section, _ = board
    _, values = walks
    row = next(row for row in section["rows"] if row["model"] == "last-value")
    # by hand: at origin o the last value's h-step predictive is N(x[o - 1], h v), v the mean square of the one-step
    # differences of x[0 .. o - 1], per feature; CRPS of N(mu, s^2) at y is s [z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi)]
    totals, counts = np.zeros(3), np.zeros(3)
    for series in values:
        for origin in (34, 37, 39):
            v = np.mean(np.diff(series[:origin], axis=0) ** 2, axis=0)
            for h in range(1, 4):
                if origin + h - 1 < STEPS:
                    s, z = np.sqrt(h * v), (series[origin + h - 1] - series[origin - 1]) / np.sqrt(h * v)
                    crps = s * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))
                    totals[h - 1] += crps.mean()
                    counts[h - 1] += 1
    expected = totals / counts
    # 200 draws per forecast: a few per cent of Monte-Carlo error
    assert row["per_horizon"]["crps"] == pytest.approx(expected.tolist(), rel=0.08)
    assert row["crps_mean"] == pytest.approx(expected.mean(), rel=0.05)


def test_rows_are_compared_with_the_best_classical_row_and_ranked_by_mean_crps(board, walks):
    section, _ = board
    rows = {row["model"]: row for row in section["rows"]}
    best = min(("last-value", "var"), key=lambda name: rows[name]["crps_mean"])
    assert section["reference"] == best and rows[best]["versus"]["verdict"] == "reference"
    for name, row in rows.items():
        assert row["crps_mean"] == pytest.approx(np.mean(row["per_horizon"]["crps"]))
        if name != best:
            versus = row["versus"]
            assert versus["difference"] == pytest.approx(row["crps_mean"] - rows[best]["crps_mean"])
            assert versus["low"] <= versus["difference"] <= versus["high"]
            assert versus["verdict"] == ("beats" if versus["high"] < 0 else "behind" if versus["low"] > 0 else "tie")
    unflagged = [row for row in section["rows"] if not row["flags"]]
    if unflagged:
        assert section["rows"][0] is unflagged[0] or not section["rows"][0]["flags"]
        assert unflagged[0]["crps_mean"] == min(row["crps_mean"] for row in unflagged)
    table = (walks[0] / "board" / "leaderboard.md").read_text()
    assert "## Multi-step forecasts: 3 steps ahead" in table and f"vs {best}: difference" in table


def test_a_rerun_keeps_the_multistep_figures(board, walks, capsys):
    folder, _ = walks
    assert _board(folder, "board", "--horizon", "3", "--origins", "3") == 0
    printed = capsys.readouterr().out
    assert all(f"{name}: multi-step figures computed earlier" in printed for name in ("gru", "last-value", "var"))
    again = json.loads((folder / "board" / "leaderboard.json").read_text())["multistep"]
    assert [row["per_horizon"] for row in again["rows"]] == [row["per_horizon"] for row in board[0]["rows"]]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--horizon", "0", "--origins", "3"], "--horizon: must be an integer >= 1, got 0"),
        (["--horizon", "3", "--origins", "x"], "--origins: must be an integer >= 1"),
        (["--horizon", "3"], "--horizon asks for the multi-step table, which needs --origins too"),
        (["--horizon", "7", "--origins", "3"], "choose --horizon 6 or less"),
    ],
)
def test_bad_horizon_or_origins_are_refused_in_one_line_before_training(walks, capsys, flags, words):
    folder, _ = walks
    try:
        status = _board(folder, "refused", *flags)
    except SystemExit as stopped:  # the parser's refusal
        status = stopped.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and words in lines[0]
    assert not (folder / "refused" / "runs").exists()


def test_the_origins_leave_every_row_the_history_its_transform_differences_take(tmp_path):
    # a run whose transform differences at lag 2 reads step 2 of the data as its first: an origin needs 3 steps
    run = tmp_path / "gru"
    run.mkdir()
    (run / "data_split.json").write_text(json.dumps({"transform": {"name": "difference", "lag": 2}}))
    mask = torch.ones(2, 8, dtype=torch.bool)
    scored = mask.clone()
    scored[1, :5] = False  # series 1: a held-out segment from step 5
    data = SimpleNamespace(levels=SimpleNamespace(test=(torch.zeros(2, 8, 1), mask), scored={"test": scored}))
    assert multistep_board.common_origins(data, {"gru": run}, 3) == [[3, 5, 7], [5, 6, 7]]
    assert multistep_board.common_origins(data, {}, 2) == [[1, 7], [5, 7]]


def _result(kind: str, value: float, coverage: float) -> dict:
    """A row's figures: CRPS ``value`` at both steps ahead of two (series, origin) pairs, 80 % coverage ``coverage``."""
    per_horizon = {"h": [1, 2], "targets": [2, 2], "crps": [value, value], "coverage_80": [coverage, coverage]}
    pairs = {"series": [0, 1], "origins": [5, 5], "crps": [[value, value], [value, value]]}
    return {
        "kind": kind,
        "per_horizon": per_horizon,
        "crps_mean": value,
        "coverage_80_mean": coverage,
        "forecasts": 2,
        "seconds": 0.0,
        "pairs": pairs,
    }


def test_a_row_flagged_for_coverage_is_not_ranked_first_and_each_row_is_judged_against_the_best_classical_row():
    results = {
        "gru": _result("collection", 1.0, 0.3),  # the lowest CRPS, but its 80 % intervals hold 30 % of the targets
        "arima": _result("classical", 2.0, 0.8),
        "last-value": _result("classical", 3.0, 0.8),
        "vrnn": _result("collection", 2.5, 0.8),
    }
    one_step = [
        {"model": "vrnn", "flags": ["validation coverage at 80 % is 0.99", "still improving (best epoch 3 of 3)"]}
    ]
    section = multistep_board.multistep_section(
        results, {"srnn": ("collection", "diverged")}, one_step, horizon=2, origins=1, starts=[[5], [5]]
    )
    rows = {row["model"]: row for row in section["rows"]}
    assert [row["model"] for row in section["rows"]] == ["arima", "gru", "vrnn", "last-value", "srnn"]
    assert section["reference"] == "arima" and "gru: multi-step coverage at 80 % is 0.30" in section["ranking"]
    assert rows["vrnn"]["flags"] == ["validation coverage at 80 % is 0.99"]  # the one-step coverage flag only
    # every pair differs by the same amount, so the interval is that amount and excludes 0
    assert rows["gru"]["versus"] == {
        "reference": "arima",
        "difference": -1.0,
        "low": -1.0,
        "high": -1.0,
        "verdict": "beats",
    }
    assert rows["last-value"]["versus"]["verdict"] == "behind" and rows["arima"]["versus"]["verdict"] == "reference"
    assert (
        rows["srnn"]["flags"] == ["failed: diverged"] and section["interval"]["resampled"] == "(series, origin) pairs"
    )

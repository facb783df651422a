"""``--likelihood``: counts get a count emission by default, a model without one reads them as real values or is
refused when one is asked for, positive data gets positive forecasts under a log-normal."""

import csv
import json
import re

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments.cli import main
from ppl_models.experiments.own_data import model_config
from ppl_models.experiments.recipes import DataNotRepresentable

TINY = [
    "--set",
    "train.epochs=1",
    "--set",
    "model.rnn_dim=4",
    "--set",
    "model.hidden_dim=4",
    "--set",
    "evaluate.predictive_samples=5",
]
COLUMNS = ["--series", "id", "--time", "t"]


def _table(path, values):
    rows = [{"id": s, "t": t, "v": v} for s, row in enumerate(values) for t, v in enumerate(row)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def counts(tmp_path):
    rng = np.random.default_rng(0)
    return _table(tmp_path / "counts.csv", rng.negative_binomial(1, 1 / 4, size=(10, 12)))


def test_a_count_file_trains_with_a_count_emission_and_forecasts_integers(tmp_path, counts, capsys):
    run = tmp_path / "run"
    assert main(["train", "gru", "--data", str(counts), *COLUMNS, "--run-dir", str(run), *TINY]) == 0
    out = capsys.readouterr().out
    chosen = json.loads((run / "data_split.json").read_text())["likelihood"]
    assert chosen["name"] in ("poisson", "negbin") and f"gru: likelihood {chosen['name']}: counts" in out
    model = json.loads((run / "config.json").read_text())["model"]
    assert model["emission"] == chosen["name"]
    with open(counts) as handle:  # the scale: one plus the training split's mean, a part of every series' steps
        values = [float(row["v"]) for row in csv.DictReader(handle)]
    assert model["count_scale"] == chosen["count_scale"] and 1 + min(values) <= chosen["count_scale"][0] <= 1 + max(
        values
    )
    assert main(["forecast", f"gru={run}", "--beyond", "3", "--out", str(tmp_path / "next")]) == 0
    with open(tmp_path / "next" / "beyond.csv") as handle:
        rows = list(csv.DictReader(handle))
    quantiles = np.array([[float(row[q]) for q in ("q05", "q25", "q50", "q75", "q95")] for row in rows])
    assert len(rows) % 3 == 0 and rows and (quantiles >= 0).all() and np.array_equal(quantiles, quantiles.round())


def test_the_likelihood_flag_overrides_the_choice(counts, capsys):
    config = model_config("gru", counts, ['data.series="id"', 'data.time="t"', 'data.likelihood="gaussian"'])
    assert config["model"]["emission"] == "gaussian"
    assert "gru: likelihood gaussian: given by the likelihood setting" in capsys.readouterr().out


def test_a_model_without_a_count_emission_reads_counts_as_real_values_or_is_refused(tmp_path, counts, capsys):
    config = model_config("lgssm", counts, ['data.series="id"', 'data.time="t"'])
    assert config["data"]["likelihood"] == "real"  # a Gaussian here (zeros: no log), or a log-normal of logs
    assert "lgssm has no count emission (linear-Gaussian" in capsys.readouterr().out
    with pytest.raises(DataNotRepresentable, match="lgssm has none"):
        model_config("lgssm", counts, ['data.series="id"', 'data.time="t"', 'data.likelihood="poisson"'])
    run = tmp_path / "run"
    assert main(["train", "kf", "--data", str(counts), *COLUMNS, "--likelihood", "negbin", "--run-dir", str(run)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "needs a count emission" in error and "gru, vrnn, srnn" in error
    assert not run.exists()


def test_a_log_normal_run_forecasts_positive_quantiles(tmp_path, capsys):
    rng = np.random.default_rng(1)
    walks = np.exp(np.cumsum(rng.normal(0, 0.4, size=(10, 12)), 1)) * 0.05  # positive, near 0
    data, run = _table(tmp_path / "wind.csv", walks), tmp_path / "run"
    args = ["train", "gru", "--data", str(data), *COLUMNS, "--likelihood", "lognormal", "--run-dir", str(run)]
    assert main([*args, *TINY]) == 0
    assert "gru: likelihood lognormal" in capsys.readouterr().out
    assert main(["forecast", f"gru={run}", "--beyond", "4", "--out", str(tmp_path / "next")]) == 0
    with open(tmp_path / "next" / "beyond.csv") as handle:
        assert all(float(row["q05"]) > 0 for row in csv.DictReader(handle))


def test_a_board_on_counts_says_which_likelihood_each_model_took(tmp_path, counts):
    """The negative binomial draws (mean 3, variance 12) are overdispersed: the board's gru row reads them as
    negative binomial counts, and says so in its form."""
    out = tmp_path / "board"
    argv = ["leaderboard", "--data", str(counts), *COLUMNS, "--models", "gru", "--classical", "last-value"]
    assert main([*argv, "--out", str(out), *TINY]) == 0
    rows = {row["model"]: row for row in json.loads((out / "leaderboard.json").read_text())["rows"]}
    assert rows["gru"]["form"] == "gru, negbin"
    assert "| gru, negbin |" in (out / "leaderboard.md").read_text()


def test_a_run_on_large_counts_reads_a_new_file_of_small_ones_as_real_values_too(tmp_path, capsys):
    """Large counts (none below 20) are real values, and the run pins it in its configuration: a file of small
    counts forecast past its end by that run is read as real values (its Gaussian), not as counts, whatever
    transform the run recorded."""
    rng = np.random.default_rng(3)
    large = np.round(200 * np.exp(np.cumsum(rng.normal(0, 0.05, size=(10, 12)), 1)))
    data, run = _table(tmp_path / "large.csv", large), tmp_path / "run"
    argv = ["train", "gru", "--data", str(data), *COLUMNS, "--run-dir", str(run), "--set", 'data.transform="none"']
    assert main([*argv, *TINY]) == 0
    assert re.search(r"gru: likelihood gaussian: integers, but large counts", capsys.readouterr().out)
    config = json.loads((run / "config.json").read_text())
    assert config["data"]["likelihood"] == "real" and config["model"]["emission"] == "gaussian"
    small = _table(tmp_path / "small.csv", rng.poisson(3.0, size=(4, 12)) + 1)
    out = tmp_path / "next"
    assert main(["forecast", f"gru={run}", "--beyond", "2", "--data", str(small), "--out", str(out)]) == 0
    with open(out / "beyond.csv") as handle:
        quantiles = [float(row["q50"]) for row in csv.DictReader(handle)]
    assert len(quantiles) == 8 and any(q != round(q) for q in quantiles)  # real values, not integer draws


def test_large_counts_beside_a_month_covariate_are_real_values(tmp_path):
    """The rule reads the forecast columns only: a month's number (0 to 11) beside large counts leaves them real."""
    rng = np.random.default_rng(4)
    rows = [
        {"id": s, "t": t, "v": float(round(300 + 50 * np.sin(t / 2) + rng.normal(0, 5))), "month": t % 12}
        for s in range(4)
        for t in range(24)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "monthly.csv", index=False)
    covariates = ['data.series="id"', 'data.time="t"', 'data.features=["v", "month"]', 'data.covariates=["month"]']
    config = model_config("gru", tmp_path / "monthly.csv", covariates)
    assert config["data"]["likelihood"] == "real" and config["model"]["emission"] == "gaussian"


def test_a_log_normal_of_the_targets_takes_a_zero_one_covariate(tmp_path):
    """Log is the targets' own: a 0/1 holiday column beside positive values does not refuse a log-normal."""
    rng = np.random.default_rng(6)
    rows = [
        {"id": s, "t": t, "v": float(np.exp(rng.normal(0, 0.3))) + 0.5, "holiday": int(t % 7 == 0)}
        for s in range(4)
        for t in range(24)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "sales.csv", index=False)
    settings = ['data.series="id"', 'data.time="t"', 'data.features=["v", "holiday"]', 'data.covariates=["holiday"]']
    config = model_config("gru", tmp_path / "sales.csv", [*settings, 'data.likelihood="lognormal"'])
    assert config["data"]["likelihood"] == "lognormal"

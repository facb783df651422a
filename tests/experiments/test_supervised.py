"""The printed table of a supervised run (``ppl_models.experiments.supervised``): every figure says what it is, and
the reference figure is the one computed from the file."""

import json

import numpy as np
import pandas as pd
import pytest
from factories import SITE_COLUMNS, set_args, sites_file

from ppl_models.experiments.cli import main
from ppl_models.experiments.supervised import describe_metric


def _described_rows(printed: str) -> dict[str, tuple[str, str]]:
    """``{metric: (value, what it is)}`` of a printed supervised table (columns found from its header)."""
    lines = printed.split("\n\nrun folder:")[0].strip().splitlines()
    header = lines[0]
    value_at, what_at = header.index("value"), header.index("what it is")
    return {line[:value_at].strip(): (line[value_at:what_at].strip(), line[what_at:].strip()) for line in lines[1:]}


def test_every_figure_a_pf_lstm_run_on_a_file_prints_says_what_it_is(tmp_path, capsys):
    data, run = sites_file(tmp_path / "sites.csv"), tmp_path / "run"
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "pf-lstm",
                "--data",
                str(data),
                "--run-dir",
                str(run),
                *SITE_COLUMNS,
                *set_args(
                    [
                        'data.targets=["y"]',
                        "train.epochs=1",
                        "train.batch_size=4",
                        "model.num_particles=4",
                        "model.hidden_size=8",
                    ]
                ),
            ]
        )
        == 0
    )
    rows = _described_rows(capsys.readouterr().out)
    assert "mean_rmse" in rows and all(what for _, what in rows.values()), rows
    value, what = rows["mean_rmse"]
    assert what == "RMSE of predicting the training mean (reference)"
    # its value: the test targets about the training series' mean target, from the file
    frame, split = pd.read_csv(data), json.loads((run / "data_split.json").read_text())
    train_mean = frame[frame["site"].isin(split["train"]["ids"])]["y"].mean()
    test = frame[frame["site"].isin(split["test"]["ids"])]["y"]
    assert float(value) == pytest.approx(float(np.sqrt(((test - train_mean) ** 2).mean())), rel=1e-3)


def test_figures_of_nested_tables_say_whose_they_are():
    assert describe_metric("by_target.y.mean_rmse") == (
        "RMSE of predicting the training mean (reference), of target y alone"
    )
    assert describe_metric("truth.nlpd").endswith("of the true predictive law (reference)")
    assert describe_metric("sigma.load") == "learned noise scale of target load, in its units"
    assert describe_metric("coverage_0.8").startswith("share of outcomes inside the central 0.8 predictive interval")

"""Your own data from the command line: every model by name, the leaderboard, bad files, the docs example."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments.cli import main
from ppl_models.experiments.own_data import MODEL_NAMES
from ppl_models.experiments.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["train.epochs=1", "train.batch_size=8"]
TINY = [
    *TRAIN,
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
    "evaluate.batch_size=8",
]
#: what each model needs beyond TINY to stay small on a 30-step file
SMALL = {
    "psrnn": ["model.num_features=50", "model.horizon=3", "model.state_dim=4", "model.obs_features=4"],
    "kf": ["model.horizon=3", "model.state_dim=4"],
    "smc-transformer": ["objective.num_particles=4"],
    "srnn": ["model.latent_dim=4", "model.rnn_dim=8", "model.hidden_dim=8"],
    "vrnn": ["model.latent_dim=4", "model.rnn_dim=8", "model.hidden_dim=8"],
    "pf-lstm": ['data.targets=["load"]', "model.num_particles=4", "model.hidden_size=8"],
    "pf-gru": ['data.targets=["load"]', "model.num_particles=4", "model.hidden_size=8"],
}


def station_file(path: Path, *, series=10, steps=30, seed=0) -> Path:
    """Long format, several series and features, rows shuffled; written as CSV or Parquet by suffix."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(series):
        level = rng.normal()
        for t in range(steps):
            level = 0.8 * level + 0.3 * rng.normal()
            rows.append(
                {
                    "site": f"site-{s}",
                    "when": t,
                    "temp": 15 + 4 * level,
                    "wind": 3 + rng.gamma(2.0),
                    "load": 100 + 20 * level + rng.normal(),
                }
            )
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=seed)
    frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False)
    return path


def columns(*extra):
    return ["--set", 'data.series="site"', "--set", 'data.time="when"', *(a for e in extra for a in ("--set", e))]


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_train_every_model_by_its_name_on_a_file(tmp_path, model, capsys):
    data = station_file(tmp_path / ("stations.parquet" if model in ("gru", "srnn") else "stations.csv"))
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                model,
                "--data",
                str(data),
                "--run-dir",
                str(run),
                *columns(*(TINY if model in RECIPES else TRAIN), *SMALL.get(model, [])),
            ]
        )
        == 0
    )
    metrics = json.loads((run / "metrics.json").read_text())
    if model in RECIPES:
        assert all(math.isfinite(v["per_step"]) for v in metrics["loglik"].values())
        assert 0 <= metrics["calibration"]["coverage_0.8"] <= 1
        split = json.loads((run / "data_split.json").read_text())
        assert split["standardizer"]["features"] == ["temp", "wind", "load"]
        assert sorted(split["train"]["ids"] + split["valid"]["ids"] + split["test"]["ids"]) == sorted(
            f"site-{s}" for s in range(10)
        )
    else:
        assert math.isfinite(metrics["rmse"]) and 0 <= metrics["coverage_0.8"] <= 1


def test_the_leaderboard_ranks_models_with_the_figures_of_their_runs(tmp_path, capsys):
    data = station_file(tmp_path / "stations.csv")
    out = tmp_path / "board"
    args = [
        "leaderboard",
        "--data",
        str(data),
        "--models",
        "gru,lgssm,vrnn",
        "--out",
        str(out),
        "--classical",
        "last-value",
        *columns(*TINY, *(f"vrnn:{item}" for item in SMALL["vrnn"])),
    ]
    assert main(args) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert {row["model"] for row in board["rows"]} == {"gru", "lgssm", "vrnn", "last-value"}
    classical = next(row for row in board["rows"] if row["kind"] == "classical")
    steps = {json.loads((Path(row["run"]) / "metrics.json").read_text())["test_steps"] for row in board["rows"]}
    assert len(steps) == 1 and classical["model"] == "last-value"  # every row judged on the same scored steps
    for row in (row for row in board["rows"] if row["kind"] == "collection"):
        metrics = json.loads((out / "runs" / row["model"] / "metrics.json").read_text())
        assert row["nats_per_step"] == metrics["loglik"][row["estimator"]]["per_step"]
        assert row["crps"] == metrics["calibration"]["crps"] and row["num_parameters"] == metrics["num_parameters"]
        assert all(0 <= row[f"coverage_{level}"] <= 1 for level in ("0.5", "0.8", "0.95"))
        assert math.isfinite(row["pit_ks"]) and row["train_seconds"] > 0
    assert [row["nats_per_step"] for row in board["rows"]] == sorted(
        (r["nats_per_step"] for r in board["rows"]), reverse=True
    )
    assert board["rows"][0]["estimator"] in ("exact", "smc-10", "iwae-4", "elbo")
    for figure in ("calibration.png", "fan_chart.png", "leaderboard.md"):
        assert (out / figure).is_file()
    before = (out / "runs" / "gru" / "metrics.json").stat().st_mtime_ns
    assert main(args) == 0  # a rerun keeps the finished runs
    assert (out / "runs" / "gru" / "metrics.json").stat().st_mtime_ns == before


BAD = [  # (file name, its text or None for absent, extra --set, words the one line must hold)
    ("absent.csv", None, [], ["absent.csv", "no such file"]),
    ("empty.csv", "", [], ["empty.csv", "empty"]),
    ("table.xlsx", "site,when,temp\n", [], ["table.xlsx", "unknown suffix"]),
    ("col.csv", "site,when,temp\na,0,1\na,1,2\n", ['data.features=["rain"]'], ["col.csv", "'rain'", "not found"]),
    ("cell.csv", "site,when,temp\na,0,1\na,1,x1\na,2,2\n", [], ["cell.csv", "'temp'", "row 3", "not a number"]),
    ("nan.csv", "site,when,temp\na,0,1\na,1,\na,2,2\n", [], ["nan.csv", "'temp'", "row 3", "drop-series"]),
    ("dup.csv", "site,when,temp\na,0,1\na,0,2\na,1,2\n", [], ["dup.csv", "rows 2 and 3", "duplicate"]),
    ("short.csv", "site,when,temp\na,0,1\na,1,2\nb,0,2\n", [], ["short.csv", "series 'b'", "at least 2 steps"]),
    (
        "window.csv",
        "site,when,temp\n" + "".join(f"{s},{t},{t % 3}\n" for s in "abcdef" for t in range(5)),
        ["data.window=8"],
        ["window.csv", "window 8 is longer than series"],
    ),
    (
        "real.csv",
        "site,when,temp\n" + "".join(f"{s},{t},{t * 0.5}\n" for s in "abcdef" for t in range(5)),
        ['model.emission="bernoulli"'],
        ["real.csv", "cannot take data", "binary"],
    ),
]


@pytest.mark.parametrize("name, text, extra, words", BAD, ids=[row[0] for row in BAD])
def test_a_bad_file_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, name, text, extra, words):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    run = tmp_path / "run"
    assert main(["train", "gru", "--data", str(path), "--run-dir", str(run), *columns(*TINY, *extra)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith("ppl-models: error:"), error
    for word in words:
        assert word in error, (word, error)
    assert not run.exists()


def test_the_standardisation_is_kept_in_the_checkpoint_and_a_changed_file_is_not_resumed(tmp_path, capsys):
    from ppl_models.inference.training import load_checkpoint

    data, run = station_file(tmp_path / "stations.csv"), tmp_path / "run"
    assert main(["train", "gru", "--data", str(data), "--run-dir", str(run), *columns(*TINY)]) == 0
    split = json.loads((run / "data_split.json").read_text())
    for name in ("best.pt", "last.pt"):
        assert load_checkpoint(run / "checkpoints" / name)["experiment"]["data_standardizer"] == split["standardizer"]
    again = [*columns(*(item for item in TINY if not item.startswith("train.epochs")))]
    assert main(["train", "gru", "--data", str(data), "--run-dir", str(run), "--resume", "--epochs", "2", *again]) == 0
    frame = pd.read_csv(data)
    frame["temp"] = frame["temp"] * 10  # the same layout, other values: another standardisation
    frame.to_csv(data, index=False)
    assert main(["train", "gru", "--data", str(data), "--run-dir", str(run), "--resume", "--epochs", "3", *again]) == 2
    assert "data_standardizer" in capsys.readouterr().err


def test_a_model_name_without_data_is_refused(capsys):
    assert main(["train", "srnn"]) == 2
    assert "needs --data PATH" in capsys.readouterr().err


def test_the_own_data_page_runs_as_written(tmp_path):
    """Every block of docs/own_data.md, in order, in a fresh folder: Python blocks in one namespace, bash lines
    in a shell (``ppl-models`` as this interpreter's console script)."""
    text = (ROOT / "docs" / "own_data.md").read_text()
    blocks = re.findall(r"```(python|bash)\n(.*?)```", text, re.S)
    assert [kind for kind, _ in blocks].count("bash") >= 2 and blocks[0][0] == "python"
    env = {**os.environ, "PPL_MODELS_DATA": str(ROOT.parent / "shared" / "data"), "OMP_NUM_THREADS": "1"}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    namespace, cwd = {}, os.getcwd()
    os.chdir(tmp_path)
    try:
        os.environ["PPL_MODELS_DATA"] = env["PPL_MODELS_DATA"]
        for kind, code in blocks:
            if kind == "python":
                exec(compile(code, "docs/own_data.md", "exec"), namespace)
                continue
            for line in code.strip().splitlines():
                done = subprocess.run(line, shell=True, env=env, capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, (line, done.stderr[-2000:])
    finally:
        os.chdir(cwd)
    board = json.loads((tmp_path / "runs" / "air-board" / "leaderboard.json").read_text())
    assert sorted(row["model"] for row in board["rows"]) == ["gru", "kf", "last-value", "lgssm", "var"]
    assert all(math.isfinite(row["nats_per_step"]) for row in board["rows"])
    assert math.isfinite(namespace["result"]["loglik"]["exact"]["per_step"])

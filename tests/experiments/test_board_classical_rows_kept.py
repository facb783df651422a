"""A board's classical rows are kept on a rerun made on the same file with the same settings and fitted again when
either changed; a slow row says how far it is every few seconds; its series predicted in processes give the figures
of the serial fit."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.classical import classical_model
from ppl_models.experiments import classical_rows
from ppl_models.experiments.classical_work import ProgressLine, series_map
from ppl_models.experiments.cli import main

SETS = ["--series", "id", "--time", "t", "--split", "time", "--set", "train.epochs=1", "--set", "model.latent_dim=2"]


def _walks(path, drift: float = 0.5) -> None:
    """Three random walks of 60 steps, a long-format CSV."""
    rng = np.random.default_rng(0)
    rows = [
        {"id": s, "t": t, "v": float(v)}
        for s in "abc"
        for t, v in enumerate(100 + np.cumsum(rng.normal(drift, 1.0, size=60)))
    ]
    pd.DataFrame(rows).to_csv(path, index=False)


def _board(*extra: str) -> int:
    args = ["leaderboard", "--data", "walks.csv", "--models", "lgssm", "--out", "board", "--jobs", "2"]
    return main([*args, "--classical", "last-value,arima", *SETS, *extra])


def test_a_rerun_fits_no_classical_row_and_a_changed_file_or_setting_fits_them_again(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _walks(tmp_path / "walks.csv")
    fitted, fit = [], classical_rows.fitted_classical

    def counted(name, *args, **kwargs):
        fitted.append(name)
        return fit(name, *args, **kwargs)

    monkeypatch.setattr(classical_rows, "fitted_classical", counted)
    assert _board() == 0 and fitted == ["last-value", "arima"]
    first = {path.name: path.read_bytes() for path in (tmp_path / "board" / "classical").rglob("*") if path.is_file()}
    rows = json.loads((tmp_path / "board" / "leaderboard.json").read_text())["rows"]
    capsys.readouterr()
    assert _board() == 0 and fitted == ["last-value", "arima"]  # nothing fitted again
    assert "arima: fitted earlier on the same data with the same settings, kept" in capsys.readouterr().out
    assert json.loads((tmp_path / "board" / "leaderboard.json").read_text())["rows"] == rows
    again = {path.name: path.read_bytes() for path in (tmp_path / "board" / "classical").rglob("*") if path.is_file()}
    assert again == first
    assert _board("--set", "data.fractions=[0.6,0.2,0.2]", "--retrain") == 0  # a data setting changed
    assert fitted == ["last-value", "arima"] * 2
    _walks(tmp_path / "walks.csv", drift=0.4)  # the file's content changed
    assert _board("--set", "data.fractions=[0.6,0.2,0.2]", "--retrain") == 0 and fitted == ["last-value", "arima"] * 3


def test_a_row_key_names_the_data_by_content_and_its_settings(tmp_path):
    _walks(tmp_path / "a.csv")
    _walks(tmp_path / "b.csv")
    table = {"name": "file", "path": str(tmp_path / "a.csv"), "series": "id"}
    key = classical_rows.row_key("arima", table)
    assert key == classical_rows.row_key("arima", {**table, "path": str(tmp_path / "b.csv")})  # the same content
    assert key["data_fingerprint"].startswith("sha256:") and "path" not in key["data"]
    assert key != classical_rows.row_key("ets", table)
    assert key != classical_rows.row_key("arima", {**table, "fractions": [0.6, 0.2, 0.2]})
    assert key != classical_rows.row_key("arima", table, season=7)
    with pytest.raises(TypeError, match="table must be a"):
        classical_rows.row_key("arima", "a.csv")


def _series(rows: int = 4, steps: int = 40) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x [rows, steps, 1]`` random walks, the full mask and the last 8 steps of each row scored."""
    x = torch.from_numpy(np.cumsum(np.random.default_rng(1).normal(0.2, 1.0, size=(rows, steps, 1)), 1))
    mask = torch.ones(rows, steps, dtype=torch.bool)
    scored = mask.clone()
    scored[:, :-8] = False
    return x, mask, scored


def test_a_slow_row_prints_how_far_it_is_every_few_seconds_of_its_clock():
    ticks, lines = itertools.count(0, 3.0), []  # every call of the clock 3 s later
    progress = ProgressLine("arima", every=5.0, clock=lambda: next(ticks), write=lines.append)
    x, mask, scored = _series()
    forecaster = classical_model("arima")
    forecaster.progress = progress
    forecaster.fit(x, mask).one_step(x, mask, scored)
    fitting = [line for line in lines if "fitting on the training split" in line]
    series = [line for line in lines if " series, " in line]
    assert fitting and series and len(lines) == len(fitting) + len(series)
    assert series[-1].startswith("arima: 4 of 4 series, ") or series[-1].startswith("arima: 3 of 4 series, ")
    seconds = [int(line.rsplit(", ", 1)[1].removesuffix(" s")) for line in lines]
    assert seconds == sorted(seconds) and all(b - a >= 5 for a, b in zip(seconds, seconds[1:]))


def test_progress_lines_wait_for_their_interval():
    times, lines = iter([0.0, 1.0, 4.9, 5.0, 7.0, 10.5]), []
    progress = ProgressLine("ets", every=5.0, clock=lambda: next(times), write=lines.append)
    for done in range(1, 6):
        progress("series", done, 5)
    assert lines == ["ets: 3 of 5 series, 5 s", "ets: 5 of 5 series, 10 s"]
    progress = ProgressLine("ets", every=5.0, clock=iter([0.0, 6.0]).__next__, write=lines.append)
    progress("fits", 12, None)
    assert lines[-1] == "ets: fitting on the training split, 12 fits, 6 s"


def test_series_predicted_in_processes_give_the_figures_of_the_serial_fit():
    x, mask, scored = _series()
    forecaster = classical_model("arima").fit(x, mask)
    serial = forecaster.one_step(x, mask, scored, 5, torch.Generator().manual_seed(0))
    told = forecaster.describe()
    forecaster = classical_model("arima").fit(x, mask)
    with series_map(2) as row_map:
        forecaster.row_map = row_map
        parallel = forecaster.one_step(x, mask, scored, 5, torch.Generator().manual_seed(0))
    assert serial.source == parallel.source
    assert all(torch.equal(getattr(serial, n), getattr(parallel, n)) for n in ("samples", "mean", "log_density"))
    assert json.dumps(forecaster.describe()) == json.dumps(told)  # the counts too, in the same order

"""A board finishes: a model that fails is a row with its reason while the others are ranked, children die with the
board, a locked run folder is one line, and the trials a board reports are the ones it used."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from factories import board_args, stations

from ppl_models.experiments import board_plots, board_training, leaderboard, processes
from ppl_models.experiments.cli import main

DIVERGES = "--set=gru:train.lr=1e6"  # the GRU's first epoch blows up: TrainingDiverged


@pytest.fixture
def drawn(tmp_path, monkeypatch):
    """``tmp_path`` (the working directory, holding ``a.csv``); ``{figure: [the models it was drawn with]}``, the
    figures themselves left out (they cost seconds)."""
    monkeypatch.chdir(tmp_path)
    stations(tmp_path / "a.csv")
    figures = {}
    monkeypatch.setattr(
        board_plots, "calibration_figure", lambda folders, path: figures.update(calibration=list(folders))
    )
    monkeypatch.setattr(board_plots, "fan_chart", lambda folders, path, device: figures.update(fan=list(folders)))
    return figures


def _rows(out="out") -> dict[str, dict]:
    return {row["model"]: row for row in json.loads(open(os.path.join(out, "leaderboard.json")).read())["rows"]}


def _one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("ppl-models: error:") and "Traceback" not in out + err, err
    return err


# --- a model that fails ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_model_that_fails_is_a_row_with_its_reason_and_the_others_are_ranked(drawn, capsys, jobs):
    assert main(board_args(DIVERGES, "--jobs", jobs, models="lgssm,gru")) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and out.count("gru: failed: training diverged") == 1, out + err
    rows = _rows()
    assert list(rows) == ["lgssm", "gru"] and math.isfinite(rows["lgssm"]["nats_per_step"])
    assert rows["lgssm"].get("failed") is None and rows["lgssm"]["trials"] == 1
    assert rows["gru"]["failed"].startswith("training diverged at epoch 1") and "lr=1e+06" in rows["gru"]["failed"]
    assert rows["gru"]["nats_per_step"] is None and rows["gru"]["flags"] == [f"failed: {rows['gru']['failed']}"]
    (line,) = [line for line in open("out/leaderboard.md") if line.startswith("| gru |")]
    assert f"| failed: {rows['gru']['failed']} |" in line
    assert "\nFailed: gru (the reason in the flags); run the same command again" in open("out/leaderboard.md").read()
    assert drawn == {"calibration": ["lgssm"], "fan": ["lgssm"]}
    if jobs == "2":  # the child printed its one line, no traceback, and wrote why it failed
        assert "Traceback" not in open("out/logs/gru.log").read()
        assert json.loads(open("out/logs/gru.failure.json").read()) == {"reason": rows["gru"]["failed"]}


def test_a_rerun_keeps_the_finished_rows_and_tries_the_failed_model_again(drawn, capsys):
    assert main(board_args(DIVERGES, "--jobs", "1", models="lgssm,gru")) == 0
    first = _rows()
    capsys.readouterr()
    assert main(board_args(DIVERGES, "--jobs", "1", models="lgssm,gru")) == 0
    out = capsys.readouterr().out
    assert "lgssm: finished earlier, kept" in out and "gru: training" in out and "gru: failed: " in out
    assert _rows() == first  # failed the same way again, reported the same way


def test_a_board_none_of_whose_rows_can_be_scored_is_one_line(drawn, capsys):
    assert main(board_args(DIVERGES, models="gru")) == 2
    assert "no row of the board could be scored: gru: training diverged at epoch 1" in _one_line_error(capsys)
    assert not os.path.exists("out/leaderboard.json") and drawn == {}


def test_a_classical_forecaster_that_fails_is_a_row_with_its_reason(drawn, capsys, monkeypatch):
    fit = leaderboard.run_classical

    def run_classical(name, *args, **kwargs):
        if name == "arima":
            raise ValueError("arima: the fit found no stationary order (a stand-in for a statsmodels failure)")
        return fit(name, *args, **kwargs)

    monkeypatch.setattr(leaderboard, "run_classical", run_classical)
    assert main(board_args("--classical", "last-value,arima")) == 0
    assert "arima: failed: arima: the fit found no stationary order" in capsys.readouterr().out
    rows = _rows()
    assert set(rows) == {"lgssm", "last-value", "arima"} and list(rows)[-1] == "arima"
    assert rows["arima"]["kind"] == "classical" and rows["arima"]["failed"].startswith("arima: the fit found no")
    assert math.isfinite(rows["last-value"]["nats_per_step"]) and math.isfinite(rows["lgssm"]["nats_per_step"])
    assert drawn == {"calibration": ["lgssm", "last-value"], "fan": ["lgssm"]}


def test_a_child_that_crashes_is_a_row_naming_its_exception_and_its_traceback_is_printed_once(tmp_path, capsys):
    crash = [sys.executable, "-c", "import sys; print('gru: training'); sys.stdout.flush(); raise KeyError('config')"]
    assert processes.run_processes([("gru", crash)], tmp_path, jobs=2) == {"gru": 1}  # a bug in the child
    out, err = capsys.readouterr()
    log = tmp_path / "gru.log"
    assert (out + err).count("Traceback") == 1 and "Traceback" in log.read_text()  # its log, echoed as it ended
    assert err == f"gru: failed with exit status 1 (log {log})\n"
    reason = board_training._child_failure(1, tmp_path / "gru.spec.json", log)  # it wrote no reason of its own
    assert reason == f"its process ended with exit status 1: KeyError: 'config' (log {log})"


# --- children die with the board; a run folder still held ---------------------------------------------------------


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children die with their parent on Linux only")
def test_a_child_dies_when_its_parent_is_killed(tmp_path):
    script = (
        "import sys\nfrom ppl_models.experiments.processes import run_processes\n"
        "run_processes([('sleeper', [sys.executable, '-c', 'import os, time; print(os.getpid(), flush=True); "
        "time.sleep(60)'])], sys.argv[1], jobs=1)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.DEVNULL)
    log, child = tmp_path / "sleeper.log", None
    try:
        deadline = time.monotonic() + 60
        while not (log.is_file() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(log.read_text())  # the sleeper's pid: it runs
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        parent.kill()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)


def test_a_run_folder_another_process_holds_is_one_line_naming_it(drawn, capsys):
    os.makedirs("out/runs/gru")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)",
            "out/runs/gru/.lock",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert main(board_args("--jobs", "2", models="lgssm,gru")) == 2
        assert "run folder out/runs/gru is in use by another process" in _one_line_error(capsys)
        assert not os.path.exists("out/runs/lgssm")  # refused before anything trained
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


# --- the trials a board reports --------------------------------------------------------------------------------------


def test_a_budget_1_board_after_a_search_reports_its_own_run(drawn, capsys):
    assert main(board_args("--budget", "2")) == 0
    assert _rows()["lgssm"]["trials"] == 2
    assert main(board_args("--budget", "1")) == 0
    row = _rows()["lgssm"]
    assert row["trials"] == 1 and row["run"] == os.path.join("out", "runs", "lgssm")
    assert row["train_seconds"] == json.loads(open("out/runs/lgssm/wall_time.json").read())["seconds"]


def test_a_budget_beyond_the_maximum_is_refused_naming_the_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["leaderboard", "--data", "a.csv", "--out", str(tmp_path / "out"), "--budget", "99999999999999999999"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --budget: must be an integer from 1 to 1000" in err, err
    with pytest.raises(SystemExit):
        main(["leaderboard", "--help"])
    assert f"at most {board_training.MAX_BUDGET}" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ValueError, match="budget must be <= 1000"):
        board_training.train_models({"lgssm": {}}, tmp_path, budget=1001)
    assert not (tmp_path / "out").exists()

"""A leaderboard's runs: kept only when made on the same data (by content) with the same settings, restarted or
re-evaluated after a kill, locked against a second process, every second of training counted; a model that fails is a
row with its reason while the others are ranked, and the trials a board reports are the ones it used."""

import argparse
import hashlib
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from factories import board_args, drawn_figures, stations

from ppl_models.experiments import board_training, leaderboard, own_data, run_folder, runner
from ppl_models.experiments.cli import build_parser, main
from ppl_models.experiments.recipes import DataNotRepresentable
from ppl_models.inference.atomic_files import folder_lock, write_json
from ppl_models.inference.training import load_checkpoint

RUN = os.path.join("out", "runs", "lgssm")
DIVERGES = "--set=gru:train.lr=1e6"  # the GRU's first epoch blows up: TrainingDiverged


@pytest.fixture(scope="module")
def finished_board(tmp_path_factory):
    """A folder holding ``a.csv`` and ``out/``, the finished one-model board on it (paths relative to the folder)."""
    root = tmp_path_factory.mktemp("board")
    stations(root / "a.csv")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        drawn_figures(patch)
        assert main(board_args()) == 0
    return root


@pytest.fixture
def board(finished_board, tmp_path, monkeypatch, capsys):
    """A copy of the finished board in ``tmp_path``, the working directory."""
    shutil.copytree(finished_board, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    drawn_figures(monkeypatch)
    capsys.readouterr()
    return tmp_path


@pytest.fixture
def drawn(tmp_path, monkeypatch):
    """``tmp_path`` (the working directory, holding ``a.csv`` and no board yet); ``{figure: [the models it was drawn
    with]}``, the figures themselves left out."""
    monkeypatch.chdir(tmp_path)
    stations(tmp_path / "a.csv")
    return drawn_figures(monkeypatch)


def _rows(out="out") -> dict[str, dict]:
    return {row["model"]: row for row in json.loads(open(os.path.join(out, "leaderboard.json")).read())["rows"]}


def _one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("ppl-models: error:") and "Traceback" not in out + err, err
    return err


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _epochs(run):
    return [json.loads(line)["epoch"] for line in open(os.path.join(run, "metrics.jsonl"))]


# --- a kept run is checked against the data and every setting -----------------------------------------------------


def test_a_rerun_on_another_file_is_refused_by_name_and_trained_again_with_retrain(board, capsys):
    stations(board / "b.csv", seed=1)
    before = _files(board / "out")
    assert main(board_args(data="b.csv")) == 2
    out, err = capsys.readouterr()
    assert "kept" not in out and err.count("\n") == 1, err
    assert RUN in err and "the data b.csv is not the data the run was trained on" in err and "--retrain" in err, err
    assert _files(board / "out") == before
    assert main(board_args("--retrain", data="b.csv")) == 0
    assert json.loads((board / RUN / "config.json").read_text())["data"]["path"] == "b.csv"
    assert (board / "out" / "leaderboard.md").read_text().startswith("# Leaderboard: b.csv\n")
    assert _epochs(board / RUN) == [1]


@pytest.mark.parametrize(
    "change, words",
    [
        ("content", ["a.csv", "content changed"]),
        ('--set=data.split_by="time"', ["data.split_by: 'series' -> 'time'"]),
        ("--set=data.fractions=[0.6, 0.2, 0.2]", ["data.fractions"]),
        ("--set=train.lr=0.5", ["train.lr: 0.01 -> 0.5"]),
        ("--set=evaluate.predictive_samples=12", ["evaluate.predictive_samples: 10 -> 12"]),
    ],
)
def test_a_rerun_on_changed_data_or_settings_is_refused_naming_the_run_and_what_differs(board, capsys, change, words):
    if change == "content":  # the same file, one value of it changed
        frame = pd.read_csv(board / "a.csv")
        frame.loc[frame.index[-1], "load"] += 1.0
        frame.to_csv(board / "a.csv", index=False)
    before = _files(board / "out")
    assert main(board_args(*([] if change == "content" else [change]))) == 2
    err = _one_line_error(capsys)
    for word in [RUN, *words]:
        assert word in err, (word, err)
    assert _files(board / "out") == before


def test_a_setting_given_at_its_default_is_no_change(board, capsys):
    assert main(board_args('--set=data.split_by="series"', '--set=model.name="lgssm"')) == 0
    assert "lgssm: finished earlier, kept" in capsys.readouterr().out


def test_a_rerun_that_keeps_every_row_keeps_the_figures_and_one_that_trains_again_redraws_them(
    board, capsys, monkeypatch
):
    from ppl_models.experiments import board_plots

    drawn = []

    def drawing(kind):
        def draw(folders, path, *device):
            drawn.append(kind)
            open(path, "wb").close()

        return draw

    monkeypatch.setattr(board_plots, "calibration_figure", drawing("calibration"))
    monkeypatch.setattr(board_plots, "fan_chart", drawing("fan"))
    assert main(board_args()) == 0  # the finished board's figures were never written: drawn
    assert drawn == ["calibration", "fan"]
    assert main(board_args()) == 0
    assert drawn == ["calibration", "fan"] and "fan_chart.png: drawn earlier from the same rows, kept" in (
        capsys.readouterr().out
    )
    assert main(board_args("--set=train.lr=0.02", "--retrain")) == 0  # trained again: its figures are new
    assert drawn == ["calibration", "fan"] * 2


def test_a_rerun_matches_the_file_by_its_content_not_by_its_path(board, capsys):
    assert main(board_args(data=str(board / "a.csv"))) == 0
    assert "lgssm: finished earlier, kept" in capsys.readouterr().out
    (board / "copy.csv").write_bytes((board / "a.csv").read_bytes())
    assert main(board_args(data="copy.csv")) == 0
    assert "lgssm: finished earlier, kept" in capsys.readouterr().out
    stations(board / "copy.csv", seed=1)  # other content under the same name
    assert main(board_args(data="copy.csv")) == 2
    assert "not the data the run was trained on" in capsys.readouterr().err


# --- a run killed in its first checkpoint starts again ------------------------------------------------------------


def _killed_in_first_checkpoint(run, how):
    """Leave ``run`` as a kill (or a full disk) in epoch 1's checkpoint writes leaves it."""
    checkpoints = run / "checkpoints"
    for name in ("metrics.json", "metrics.md", "predictive.nc", "pit.pt", "data_split.json", "finished.json"):
        (run / name).unlink()
    shutil.rmtree(run / "plots")
    if how == "best.pt half written":  # kill -9 inside the first save_torch
        (checkpoints / "last.pt").unlink()
        (checkpoints / ".best.pt.x1y2z3.tmp").write_bytes((checkpoints / "best.pt").read_bytes()[:100])
        (checkpoints / "best.pt").unlink()
    elif how == "disk full writing last.pt":  # best.pt written, last.pt's temporary file removed by the failure
        (checkpoints / "last.pt").unlink()
    else:  # a last.pt cut short (a file system that lost the end of it)
        (checkpoints / "last.pt").write_bytes((checkpoints / "last.pt").read_bytes()[:100])


@pytest.mark.parametrize("how", ["best.pt half written", "disk full writing last.pt", "last.pt cut short"])
def test_a_run_killed_in_its_first_checkpoint_is_started_again(board, capsys, how):
    _killed_in_first_checkpoint(board / RUN, how)
    assert main(board_args()) == 0, capsys.readouterr().err
    assert "lgssm: training" in capsys.readouterr().out
    assert _epochs(board / RUN) == [1]  # one epoch, not the lost one twice
    assert load_checkpoint(board / RUN / "checkpoints" / "last.pt")["epoch"] == 1
    assert not list((board / RUN / "checkpoints").glob(".*.tmp"))
    assert (board / RUN / "predictive.nc").is_file() and (board / RUN / "finished.json").is_file()


def _options(command):
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {option for action in commands.choices[command]._actions for option in action.option_strings}


def test_ctrl_c_in_a_leaderboard_names_no_option_the_command_does_not_have(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(leaderboard, "run_leaderboard", interrupted)
    assert main(board_args()) == 130
    err = capsys.readouterr().err
    assert err.startswith("ppl-models: interrupted") and err.count("\n") == 1, err
    assert set(re.findall(r"--[a-z][a-z-]*", err)) <= _options("leaderboard"), err


# --- a run is finished only once every output is written ----------------------------------------------------------


def test_a_run_killed_after_metrics_json_is_evaluated_again_not_retrained(board, capsys):
    run = board / RUN
    for name in ("predictive.nc", "pit.pt", "data_split.json", "finished.json", "metrics.md"):
        (run / name).unlink()
    shutil.rmtree(run / "plots")
    best = (run / "checkpoints" / "best.pt").read_bytes()
    assert main(board_args()) == 0
    assert "kept" not in capsys.readouterr().out
    for name in ("predictive.nc", "pit.pt", "data_split.json", "finished.json", "metrics.md", "plots/pit_ecdf.png"):
        assert (run / name).is_file(), name
    assert (run / "checkpoints" / "best.pt").read_bytes() == best  # evaluated from it, not trained again
    assert _epochs(run) == [1]


# --- one process at a time on a folder ----------------------------------------------------------------------------


def test_a_second_board_on_the_same_out_is_refused_while_the_first_holds_it(board, capsys):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)",
            str(board / "out" / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        before = _files(board / "out")
        assert main(board_args("--retrain")) == 2
        assert "out out is in use by another process" in _one_line_error(capsys)
        assert _files(board / "out") == before
    finally:
        holder.send_signal(signal.SIGKILL)  # a crash: the OS releases its lock
        holder.wait()
    assert main(board_args()) == 0
    assert "lgssm: finished earlier, kept" in capsys.readouterr().out


def test_train_refuses_a_run_folder_another_process_holds(board):
    config = json.loads((board / RUN / "config.json").read_text())
    before = _files(board / RUN)
    with folder_lock(board / RUN):
        with pytest.raises(ValueError, match="run_dir out/runs/lgssm is in use by another process"):
            runner.train(config, RUN, resume=True)
    assert _files(board / RUN) == before


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


# --- a resumption refuses any change of the data ------------------------------------------------------------------


@pytest.mark.parametrize("split", ["valid", "test"])
def test_resume_refuses_a_file_whose_held_out_series_changed(board, split):
    config = json.loads((board / RUN / "config.json").read_text())
    ids = json.loads((board / RUN / "data_split.json").read_text())[split]["ids"]
    frame = pd.read_csv(board / "a.csv")
    frame.loc[frame["site"].isin(ids), "temp"] += 3.0  # the training split, so its standardisation, unchanged
    frame.to_csv(board / "a.csv", index=False)
    with pytest.raises(ValueError, match=r"resume: the data a\.csv is not the data the run was trained on"):
        runner.train(config, RUN, resume=True)
    assert _epochs(board / RUN) == [1]


def test_the_data_fingerprint_is_the_files_content_hash(tmp_path):
    path = stations(tmp_path / "a.csv")
    config = {"data": {"name": "file", "path": str(path)}}
    assert run_folder.data_fingerprint(config) == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert run_folder.data_fingerprint({"data": {"name": "jsb"}}) is None  # a registered data set
    folder = tmp_path / "midi"
    folder.mkdir()
    (folder / "one.mid").write_bytes(b"MThd one")
    (folder / "two.mid").write_bytes(b"MThd two")
    config = {"data": {"name": "file", "path": str(folder)}}
    first = run_folder.data_fingerprint(config)
    (folder / ".DS_Store").write_bytes(b"finder")  # hidden files are not data
    assert run_folder.data_fingerprint(config) == first
    (folder / "two.mid").write_bytes(b"MThd 2wo")
    assert run_folder.data_fingerprint(config) != first
    (folder / "two.mid").write_bytes(b"MThd two")
    assert run_folder.data_fingerprint(config) == first
    (folder / "three.mid").write_bytes(b"MThd three")
    assert run_folder.data_fingerprint(config) != first


# --- the wall time of a killed session counts ---------------------------------------------------------------------


class _Clock:
    """A clock that moves only when the test moves it: ``perf_counter()`` is ``now``."""

    def __init__(self, now=100.0):
        self.now = now

    def perf_counter(self):
        return self.now


def test_the_wall_clock_is_on_disk_while_the_session_runs(tmp_path, monkeypatch):
    """The seconds a beat writes (what a kill -9 would leave) and the end's total, on a clock the test moves: exact
    whatever the machine's speed."""
    clock, beats = _Clock(), queue.Queue()
    monkeypatch.setattr(board_training, "time", clock)

    def write_and_tell(path, record):
        write_json(path, record)
        beats.put(record["seconds"])

    monkeypatch.setattr(board_training, "write_json", write_and_tell)
    path = tmp_path / "wall_time.json"
    write_json(path, {"seconds": 5.0})  # an earlier session's
    with board_training._wall_clock(path, every=0.01) as seconds:
        clock.now += 0.5
        while (beat := beats.get(timeout=60)) != 5.5:
            assert beat == 5.0, beat  # a beat before the clock moved
        assert json.loads(path.read_text())["seconds"] == 5.5 == seconds()  # on disk while the session runs
        clock.now += 0.75
    assert json.loads(path.read_text())["seconds"] == 6.25  # the end writes the total


@pytest.mark.slow
def test_a_board_killed_while_training_counts_the_time_before_the_kill(board, capsys):
    """A session killed after 4 s of training (on its wall clock, which the stuck training moves) leaves those 4 s on
    disk; the session that finishes the run adds its own."""
    shutil.rmtree(board / "out")
    script = (
        "import sys, time\nfrom ppl_models.experiments import board_training, cli, runner\n"
        "class Clock:\n"
        "    now = 100.0\n"
        "    def perf_counter(self):\n"
        "        return Clock.now\n"
        "board_training.time = Clock()\n"
        "def stuck(config, folder, **kwargs):\n"
        "    folder.mkdir(parents=True, exist_ok=True)\n"
        "    Clock.now += 4.0\n"
        "    print('stuck', flush=True)\n"
        "    time.sleep(60)\n"
        "runner.train = stuck\ncli.main(sys.argv[1:])\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, *board_args()],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    wall_time = board / RUN / "wall_time.json"
    try:
        while "stuck" not in process.stdout.readline():
            pass
        for _ in range(1200):  # the next beat of the wall clock writes the 4 s (a bound on waiting, not a speed)
            if wall_time.is_file() and json.loads(wall_time.read_text())["seconds"] == 4.0:
                break
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert json.loads(wall_time.read_text())["seconds"] == 4.0
    assert main(board_args()) == 0
    row = json.loads((board / "out" / "leaderboard.json").read_text())["rows"][0]
    assert row["train_seconds"] > 4.0  # the killed session and the one that finished


# --- what --out and --models must be ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "out, words",
    [
        (RUN, ["not a leaderboard folder", "checkpoints", "config.json"]),  # a train run folder
        ("evaluation", ["not a leaderboard folder", "config.json", "metrics.json"]),
        (".", ["not a leaderboard folder", "a.csv"]),  # the folder of the user's own files
    ],
)
def test_an_out_of_another_kind_is_refused(board, capsys, out, words):
    (board / "evaluation").mkdir()
    for name in ("config.json", "metrics.json", "metrics.md"):  # what ppl-models evaluate writes
        shutil.copy(board / RUN / name, board / "evaluation" / name)
    before = _files(board)
    assert main(board_args(out=out)) == 2
    err = _one_line_error(capsys)
    for word in words:
        assert word in err, (word, err)
    assert _files(board) == before


@pytest.mark.parametrize("models", ["", " ", " , "])
def test_an_empty_models_list_is_refused(tmp_path, monkeypatch, capsys, models):
    monkeypatch.chdir(tmp_path)
    stations(tmp_path / "a.csv")

    def train(*args, **kwargs):
        raise AssertionError("nothing may train")

    monkeypatch.setattr(runner, "train", train)
    assert main(board_args(models=models)) == 2
    assert "models: expected at least one model name" in _one_line_error(capsys)
    assert not (tmp_path / "out").exists()


# --- models that cannot represent the data ------------------------------------------------------------------------


def test_default_models_that_cannot_represent_the_data_are_listed_and_named_ones_refused(board, monkeypatch, capsys):
    build = own_data.model_config

    def model_config(model, *args, **kwargs):
        if model == "gru":
            raise DataNotRepresentable("gru: its Gaussian emission cannot represent binary data")
        return build(model, *args, **kwargs)

    monkeypatch.setattr(own_data, "model_config", model_config)
    monkeypatch.setattr(leaderboard, "DEFAULT_MODELS", ("lgssm", "gru"))
    assert main(board_args(models=None)) == 0
    out = capsys.readouterr().out
    assert "not run: gru: its Gaussian emission cannot represent binary data\n" in out
    saved = json.loads((board / "out" / "leaderboard.json").read_text())
    assert [row["model"] for row in saved["rows"]] == ["lgssm"]
    assert saved["not_run"] == {"gru": "gru: its Gaussian emission cannot represent binary data"}
    assert (
        "not run: gru: its Gaussian emission cannot represent binary data"
        in (board / "out" / "leaderboard.md").read_text()
    )
    assert main(board_args(models="lgssm,gru")) == 2
    assert "its Gaussian emission cannot represent binary data" in _one_line_error(capsys)


# --- a model that fails ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_model_that_fails_is_a_row_with_its_reason_and_the_others_are_ranked(drawn, capsys, jobs):
    assert main(board_args(DIVERGES, "--jobs", jobs, models="lgssm,gru")) == 0
    out, err = capsys.readouterr()
    said = "\n".join(line for line in out.splitlines() if not line.startswith("running: "))  # progress quotes logs
    assert "Traceback" not in out + err and said.count("gru: failed: training diverged") == 1, out + err
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


def test_a_rerun_starts_no_child_process_for_a_kept_run(drawn, capsys, monkeypatch):
    assert main(board_args(DIVERGES, "--jobs", "1", models="lgssm,gru")) == 0
    started, real = [], board_training.run_processes

    def recorded(commands, *args, **options):
        started.append([label for label, _ in commands])
        return real(commands, *args, **options)

    monkeypatch.setattr(board_training, "run_processes", recorded)
    capsys.readouterr()
    assert main(board_args(DIVERGES, "--jobs", "2", models="lgssm,gru")) == 0
    out = capsys.readouterr().out
    assert "lgssm: finished earlier, kept" in out and "gru: training" in out and "gru: failed: " in out
    assert started == []  # the kept lgssm needs no process; gru, the one model left to train, trains in this one


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

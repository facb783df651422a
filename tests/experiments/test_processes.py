"""Child processes side by side (``ppl_models.experiments.processes``): their threads and logs, the costliest first, a
failing or crashing child reported by its label, and children that die with their parent."""

import os
import signal
import subprocess
import sys
import time

import pytest

from ppl_models.experiments import board_training, processes


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_two_children_run_with_their_threads_and_logs(tmp_path, capsys):
    code = "import os, time; time.sleep(1); print('threads', os.environ['OMP_NUM_THREADS'])"
    status = processes.run_processes([("first", child(code)), ("second", child(code))], tmp_path / "logs", jobs=2)
    assert status == {"first": 0, "second": 0}
    threads = max(1, (os.cpu_count() or 1) // 2)
    for label in ("first", "second"):
        assert (tmp_path / "logs" / f"{label}.log").read_text() == f"threads {threads}\n"
    assert capsys.readouterr().out.count(f"threads {threads}\n") == 2  # each log printed when its child ends


def test_the_costliest_children_start_first(tmp_path, capsys):
    trace = tmp_path / "order.txt"
    commands = [(label, child(f"open({str(trace)!r}, 'a').write({label!r} + ' ')")) for label in ("a", "b", "c", "d")]
    status = processes.run_processes(commands, tmp_path / "logs", jobs=1, cost={"a": 1, "b": 3, "c": 2}, echo=False)
    assert list(status) == ["a", "b", "c", "d"] and trace.read_text().split() == ["d", "b", "c", "a"]


def test_a_failing_child_is_reported_by_its_label_with_the_end_of_its_log(tmp_path, capsys):
    failing = "import sys; print('\\n'.join(f'line {i}' for i in range(30))); sys.exit(3)"
    status = processes.run_processes(
        [("good one", child("print('fine')")), ("bad one", child(failing))], tmp_path / "logs", jobs=2, echo=False
    )
    assert status == {"good one": 0, "bad one": 3}
    err = capsys.readouterr().err
    assert "bad one: failed with exit status 3" in err and "good one" not in err
    assert "line 29" in err and f"line {29 - processes.LOG_TAIL}\n" not in err
    assert (tmp_path / "logs" / "bad_one.log").is_file()


def test_labels_that_share_a_log_file_are_refused(tmp_path):
    with pytest.raises(ValueError, match="distinct log files"):
        processes.run_processes([("a/b", child("")), ("a b", child(""))], tmp_path / "logs", jobs=2)


def test_a_child_that_crashes_is_a_row_naming_its_exception_and_its_traceback_is_printed_once(tmp_path, capsys):
    crash = [sys.executable, "-c", "import sys; print('gru: training'); sys.stdout.flush(); raise KeyError('config')"]
    assert processes.run_processes([("gru", crash)], tmp_path, jobs=2) == {"gru": 1}  # a bug in the child
    out, err = capsys.readouterr()
    log = tmp_path / "gru.log"
    assert (out + err).count("Traceback") == 1 and "Traceback" in log.read_text()  # its log, echoed as it ended
    assert err == f"gru: failed with exit status 1 (log {log})\n"
    reason = board_training._child_failure(1, tmp_path / "gru.spec.json", log)  # it wrote no reason of its own
    assert reason == f"its process ended with exit status 1: KeyError: 'config' (log {log})"


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
        "time.sleep(600)'])], sys.argv[1], jobs=1)\n"
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
        deadline = time.monotonic() + 60  # a bound on a hang, far below the sleeper's own end
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        parent.kill()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)


def test_while_children_run_a_line_says_which_for_how_long_and_what_each_log_says_last(tmp_path, capsys):
    code = (
        "import sys, time; print('epoch 1', flush=True); sys.stdout.write('\\repoch 2 of 5'); sys.stdout.flush(); "
        "time.sleep(1.5)"
    )
    quick = "print('done')"
    status = processes.run_processes(
        [("slow", child(code)), ("quick", child(quick))], tmp_path / "logs", jobs=2, echo=False, progress_every=0.4
    )
    assert status == {"slow": 0, "quick": 0}
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("running: ")]
    assert lines and all(line.endswith("of 2 ended") for line in lines)
    assert any("slow " in line and "(epoch 2 of 5)" in line for line in lines)  # the progress bar's last update
    assert lines[-1].endswith("1 of 2 ended") and "quick" not in lines[-1]

"""The pure helpers of the official-code studies (official_code, psrnn_official); no TensorFlow is run here."""

import json
import math
import subprocess

import pytest

from ppl_models.experiments.studies import psrnn_official
from ppl_models.experiments.studies.official_code import apply_edits, edits_record, extract_snapshot, portable
from ppl_models.experiments.studies.psrnn_official import (
    DECAY_EDITS,
    EARLY_STOP_EDITS,
    EDITS,
    bpc,
    official_curve,
    official_edits,
    official_test,
)


def _fake_psrnn(root):
    """The lines of the official files that the edits touch, each once, in a tiny fake snapshot."""
    texts = {}
    for name, old, _, _ in EDITS + EARLY_STOP_EDITS + DECAY_EDITS:
        texts.setdefault(name, []).append(old)
    for name, olds in texts.items():
        (root / name).write_text("# fake\n" + "\n# --\n".join(olds) + "\n")


def test_every_recorded_edit_applies_once_to_a_fake_snapshot(tmp_path):
    _fake_psrnn(tmp_path)
    apply_edits(tmp_path, EDITS)
    text = (tmp_path / "ptb_word_lm.py").read_text()
    assert "tf.contrib" not in text and "import tensorflow.compat.v1 as tf" in text
    assert (
        "int(os.environ['PSRNN_EPOCHS'])" in text
        and "normalize=True" not in (tmp_path / "two_stage_regression.py").read_text()
    )
    assert "best_saver" not in text and official_edits({"patience": None, "lr_gamma": None}) == EDITS


def test_early_stop_edits_apply_after_the_others_to_a_fake_snapshot(tmp_path):
    _fake_psrnn(tmp_path)
    apply_edits(tmp_path, official_edits({"patience": 3, "lr_gamma": 0.8, "lr_delay": 10}))
    text = (tmp_path / "ptb_word_lm.py").read_text()
    assert "int(os.environ['PSRNN_PATIENCE'])" in text and "PSRNN_LR_GAMMA" in text
    assert text.index("best_saver.restore(") < text.index("run_epoch(session, mtest")
    assert "if bad_epochs >= patience:" in text


def test_a_missing_edit_is_one_line_naming_file_and_edit(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 1\n")
    apply_edits(tmp_path, [("a.py", "x = 1", "x = 2", "why")])
    assert (tmp_path / "a.py").read_text() == "x = 2\ny = 1\n"
    with pytest.raises(
        ValueError,
        match=r"a\.py: edit 1 \(second\): expected the text to edit once, found it 0 "
        r"times",
    ) as error:
        apply_edits(tmp_path, [("a.py", "y = 1", "y = 3", "first"), ("a.py", "z = 1", "z = 2", "second")])
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="found it 2 times"):
        apply_edits(tmp_path, [("a.py", " = ", " == ", "why")])
    with pytest.raises(ValueError, match=r"b\.py: no such file for edit 0 \(why\)"):
        apply_edits(tmp_path, [("b.py", "x", "y", "why")])


def test_extract_snapshot_of_a_tiny_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("print(1)\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "b.py").write_text("print(2)\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "c"]):
        subprocess.run(git + args, check=True)
    extract_snapshot(repo / ".git", tmp_path / "out", "HEAD", ("sub",))
    assert (tmp_path / "out" / "sub" / "b.py").read_text() == "print(2)\n"
    assert not (tmp_path / "out" / "a.py").exists()
    with pytest.raises(ValueError, match="git archive nope failed"):
        extract_snapshot(repo / ".git", tmp_path / "out2", "nope")


def test_bpc_is_nats_over_ln2():
    assert bpc(math.log(2)) == pytest.approx(1.0)
    assert bpc(2 * math.log(2)) == pytest.approx(2.0)


def test_official_curve_and_test_from_printed_lines():
    lines = [
        (1.0, "('seed', 0)"),
        (50.0, "Epoch: 0 Valid Perplexity: 9.000 Valid BPC: 3.170 Valid Accuracy: 0.200"),
        (51.0, "Epoch: 1 Learning rate: 1.000"),
        (80.0, "0.104 perplexity: 8.0 bpc: 3.0 accuracy: 0.2 speed: 1 wps"),
        (90.5, "Epoch: 1 Valid Perplexity: 4.000 Valid BPC: 2.000 Valid Accuracy: 0.400"),
        (130.5, "Epoch: 2 Valid Perplexity: 3.000 Valid BPC: 1.585 Valid Accuracy: 0.450"),
        (200.0, "Test Perplexity: 3.100 Test BPC: 1.632 Test Accuracy: 0.440"),
    ]
    curve = official_curve(lines)
    assert [(r["epoch"], r["valid_bpc"], r["valid_accuracy"], r["seconds"]) for r in curve] == [
        (0, 3.17, 0.2, None),
        (1, 2.0, 0.4, 40.5),
        (2, 1.585, 0.45, 40.0),
    ]
    assert official_test(lines) == {"test_perplexity": 3.1, "test_bpc": 1.632, "test_accuracy": 0.44}
    with pytest.raises(ValueError, match="no 'Test Perplexity"):
        official_test(lines[:-1])
    with pytest.raises(ValueError, match="epochs 0, 1"):
        official_curve(lines[2:])


def test_portable_hides_the_machines_path():
    assert portable(["--official-git-dir", "/x/.git", "--out", "f"]) == [
        "--official-git-dir",
        "OFFICIAL_GIT_DIR",
        "--out",
        "f",
    ]
    assert portable(["--official-git-dir=/x"]) == ["--official-git-dir=OFFICIAL_GIT_DIR"]
    assert portable(["--python", "/v/bin/python", "--epochs", "2"]) == ["--python", "TF_PYTHON", "--epochs", "2"]
    assert portable(["--work-dir", "/x/runs"]) == ["--work-dir", "WORK_DIR"]


def test_results_file_shape_from_stubbed_runs(tmp_path, monkeypatch):
    def fake_official(git_dir, folder, seed, budget, python, data_dir):
        curve = [{"epoch": e, "valid_bpc": 3.0 - e, "valid_accuracy": 0.1 * e, "seconds": 10.0} for e in (1, 2)]
        return {
            "seed": seed,
            "train_wall_seconds": 30.0,
            "curve": curve,
            "best_epoch": 2,
            "test_final": {"test_bpc": 1.5 + seed, "test_accuracy": 0.5},
        }

    monkeypatch.setattr(psrnn_official, "run_official", fake_official)
    monkeypatch.setattr(psrnn_official, "snapshot_commit", lambda git_dir: "abc")
    (tmp_path / "HEAD").write_text("ref: x\n")
    out = tmp_path / "r.json"
    psrnn_official.main(
        [
            "--official-git-dir",
            str(tmp_path),
            "--python",
            "py",
            "--out",
            str(out),
            "--epochs",
            "2",
            "--seeds",
            "2",
            "--sides",
            "official",
            "--work-dir",
            str(tmp_path / "w"),
        ]
    )
    result = json.loads(out.read_text())
    assert result["official_commit"] == "abc" and result["seeds"] == [0, 1]
    assert result["official_edits"] == edits_record(EDITS)
    summary = result["summary"]["official"]
    assert summary["test_bpc"] == {"mean": 2.0, "sd": pytest.approx(math.sqrt(0.5)), "n": 2}
    assert [s["mean"] for s in summary["valid_bpc_by_epoch"]] == [2.0, 1.0]
    assert summary["seconds_per_epoch"]["mean"] == 10.0
    assert "OFFICIAL_GIT_DIR" in result["commands"]["study"]


def test_patience_records_the_early_stop_edits_and_the_budget(tmp_path, monkeypatch):
    budgets = []

    def fake_official(git_dir, folder, seed, budget, python, data_dir):
        budgets.append(budget)
        curve = [{"epoch": e, "valid_bpc": [2.0, 1.5, 1.7][e - 1], "seconds": 1.0} for e in (1, 2, 3)]
        return {"seed": seed, "train_wall_seconds": 3.0, "curve": curve, "best_epoch": 2, "test_final": {}}

    monkeypatch.setattr(psrnn_official, "run_official", fake_official)
    monkeypatch.setattr(psrnn_official, "snapshot_commit", lambda git_dir: "abc")
    (tmp_path / "HEAD").write_text("ref: x\n")
    out = tmp_path / "r.json"
    argv = ["--official-git-dir", str(tmp_path), "--python", "py", "--out", str(out), "--epochs", "60"]
    psrnn_official.main([*argv, "--patience", "1", "--seeds", "1", "--sides", "official", "--work-dir", str(tmp_path)])
    result = json.loads(out.read_text())
    budget = {"epochs": 60, "patience": 1, "min_delta": None, "lr_gamma": None, "lr_delay": None}
    assert budgets == [budget]
    assert result["budget"] == {**budget, "paper_epochs": 10}
    assert result["official_edits"] == edits_record(EDITS + EARLY_STOP_EDITS)
    with pytest.raises(SystemExit):
        psrnn_official.main([*argv, "--patience", "0"])
    with pytest.raises(SystemExit):
        psrnn_official.main([*argv, "--min-delta", "0.001"])  # needs --patience


def test_the_best_epoch_is_read_from_the_early_stop_edits_line():
    lines = [(1.0, "Epoch: 3 Valid Perplexity: 3.000 Valid BPC: 1.585 Valid Accuracy: 0.450"), (2.0, "Best epoch: 2")]
    assert psrnn_official.official_best_epoch(lines) == 2
    assert psrnn_official.official_best_epoch(lines[:1]) is None


def test_the_decay_edit_gives_our_exponential_schedules_learning_rates():
    ((_, _, new, _),) = DECAY_EDITS
    config = type("Config", (), {"learning_rate": 1.0, "lr_decay": 1.0})
    rates = []
    for i in range(14):
        env = {"PSRNN_LR_GAMMA": "0.5", "PSRNN_LR_DELAY": "10"}
        session = None
        m = type("M", (), {"assign_lr": staticmethod(lambda session, lr: rates.append(lr))})
        exec(
            new.strip(), {"os": type("os", (), {"environ": env}), "config": config, "m": m, "i": i, "session": session}
        )
    assert rates == [1.0] * 11 + [0.5, 0.25, 0.125]  # ours: gamma ** max(0, e - delay) at 0-based epoch e
    command = psrnn_official.our_command("x", {"epochs": 5, "patience": 2, "lr_gamma": 0.5, "lr_delay": 10}, 0, "R", [])
    assert command[-10:-4] == [
        "--set",
        'train.lr_schedule="exponential"',
        "--set",
        "train.lr_gamma=0.5",
        "--set",
        "train.lr_delay_epochs=10",
    ]


def test_a_finished_run_of_ours_is_reused_only_with_the_same_experiment_and_settings(tmp_path, monkeypatch):
    trained = []

    def fake_ours(folder, seed, experiment, budget, sets):
        trained.append((experiment, tuple(sets)))
        command = psrnn_official.our_command(experiment, budget, seed, folder / "run", sets)
        record = {"command": " ".join(command), "seed": seed, "budget": budget, "train_wall_seconds": 1.0}
        record |= {"curve": [{"epoch": 1, "valid_bpc": 2.0, "seconds": 1.0}], "best_epoch": 1, "test_final": {}}
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "result.json").write_text(json.dumps(record))
        return record

    monkeypatch.setattr(psrnn_official, "run_ours", fake_ours)
    monkeypatch.setattr(psrnn_official, "snapshot_commit", lambda git_dir: "abc")
    (tmp_path / "HEAD").write_text("ref: x\n")
    argv = ["--official-git-dir", str(tmp_path), "--python", "py", "--out", str(tmp_path / "r.json"), "--epochs", "1"]
    argv += ["--seeds", "1", "--sides", "ours", "--work-dir", str(tmp_path / "w"), "--experiment", "psrnn-ptb-authors"]
    psrnn_official.main(argv)
    psrnn_official.main(argv)  # the same: kept
    psrnn_official.main([*argv, "--set", "model.encoder_bias=true"])  # another setting: trained again
    assert trained == [("psrnn-ptb-authors", ()), ("psrnn-ptb-authors", ("model.encoder_bias=true",))]

"""The pure helpers of ppl_models.experiments.studies.smct_official (the official code itself is not run here)."""

import ast
import json

import numpy as np
import pytest
import torch

from ppl_models.experiments.studies import smct_official
from ppl_models.experiments.studies.official_code import apply_edits, edits_record
from ppl_models.experiments.studies.smct_official import EDITS, official_command, official_figures, write_official_data


def test_every_recorded_edit_applies_once_to_a_fake_snapshot(tmp_path):
    for name, old, _, _ in EDITS:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + old + "\n# --\n")
    apply_edits(tmp_path, EDITS)
    edited = {name: (tmp_path / name).read_text() for name, _, _, _ in EDITS}
    assert "BayesianRNNAlgo = None" in edited["src/scripts/run.py"] and "SMCT_SEED" in edited["src/scripts/run.py"]
    assert "legacy.Adam(self.lr," in edited["src/algos/run_SMC_T.py"]
    model = edited["src/models/SMC_Transformer/SMC_Transformer.py"]
    assert "tf.keras.backend.rnn(" not in model and "tf.shape(inputs)[1] == 1" not in model
    assert ".numpy()" not in edited["src/models/SMC_Transformer/SMC_TransformerCell.py"]
    assert "for m in range(num_particles)" not in edited["src/models/SMC_Transformer/transformer_utils.py"]
    steps = edited["src/train/train_step_functions.py"]
    assert steps.count("@tf.function\n") == 2 and "it ** (-0.6) * err" not in steps
    loop = edited["src/train/train_functions.py"]
    assert "= train_step_SMC_T_compiled(" in loop and "= val_step_SMC_T(inp, tar, smc_transformer)" in loop


def test_compiled_steps_edit_is_valid_python():
    name, old, new, _ = next(edit for edit in EDITS if "def val_step_SMC_T" in edit[2])
    assert name == "src/train/train_step_functions.py"
    ast.parse(new[new.index("def _noise_variances") :])


def test_missing_edit_names_the_file(tmp_path):
    (tmp_path / "src/scripts").mkdir(parents=True)
    (tmp_path / "src/scripts/run.py").write_text("nothing\n")
    with pytest.raises(ValueError, match=r"run\.py: edit 0 .*found it 0 times"):
        apply_edits(tmp_path, EDITS[:1])


def test_official_data_layout_holds_the_numbers(tmp_path):
    x = torch.tensor([[[0.5], [-1.0], [2.0]], [[1.5], [0.25], [0.0]]])
    path = write_official_data(x, tmp_path, "val")
    assert path == tmp_path / "val" / "synthetic.npy"
    back = np.load(path)
    assert back.dtype == np.float32 and back.shape == (2, 3, 1)
    assert back[:, :, 0].tolist() == [[0.5, -1.0, 2.0], [1.5, 0.25, 0.0]]
    with pytest.raises(ValueError, match=r"x must be a \[N, T, F\] tensor"):
        write_official_data(x[0], tmp_path, "val")


def test_official_figures_from_log_lines():
    lines = [
        "2026-01-01 10:00:00;INFO;Epoch 1/2",
        "sigma_obs:1.1 - sigma_k:0.4",
        "2026-01-01 10:00:09;INFO;train loss: 0.75 - val loss: 0.5",
        "2026-01-01 10:00:09;INFO;train mse metric from avg particule: 0.6 - val mse metric from avg particule: 0.55",
        "2026-01-01 10:00:09;INFO;Time taken for 1 epoch: 9.5 secs",
        "2026-01-01 10:00:10;INFO;Epoch 2/2",
        "2026-01-01 10:00:19;INFO;train loss: 0.5 - val loss: 0.625",
        "2026-01-01 10:00:19;INFO;Time taken for 1 epoch: 8.25 secs",
        "2026-01-01 10:00:30;INFO;test loss at the end of training: 0.5125",
        "2026-01-01 10:00:40;INFO;mse of predictive distribution: 5.1e-01",
    ]
    figures = official_figures(lines)
    assert figures["curve"] == [
        {
            "epoch": 1,
            "train_loss": 0.75,
            "val_loss": 0.5,
            "train_mse_avg_particle": 0.6,
            "val_mse_avg_particle": 0.55,
            "seconds": 9.5,
        },
        {"epoch": 2, "train_loss": 0.5, "val_loss": 0.625, "seconds": 8.25},
    ]
    assert figures["test"] == {"test_loss": 0.5125, "predictive_mse": 0.51}


def test_model_two_command_passes_the_true_coefficients():
    command = official_command(2, 3, 10, "data", "out")
    assert command[command.index("-alpha") + 1] == "0.9" and command[command.index("-beta") + 1] == "0.54"
    assert command[command.index("-ep") + 1] == "3" and command[command.index("-particles") + 1] == "10"


def test_results_file_shape_from_stubbed_runs(tmp_path, monkeypatch):
    seen = {}

    def fake_official(git_dir, folder, splits, model, seed, epochs, particles, python):
        seen["shapes"] = {k: tuple(v.shape) for k, v in splits.items()}
        return {
            "seed": seed,
            "train_wall_seconds": 5.0,
            "curve": [{"epoch": 1, "val_loss": 0.5, "seconds": 4.0}],
            "test": {"test_loss": 0.5, "predictive_mse": 0.5 + seed},
            "best_epoch": 1,
        }

    monkeypatch.setattr(smct_official, "run_official", fake_official)
    monkeypatch.setattr(smct_official, "snapshot_commit", lambda git_dir, rev: rev)
    (tmp_path / "HEAD").write_text("ref: x\n")
    out = tmp_path / "r.json"
    smct_official.main(
        [
            "--official-git-dir",
            str(tmp_path),
            "--python",
            "py",
            "--out",
            str(out),
            "--model",
            "1",
            "--epochs",
            "1",
            "--seeds",
            "2",
            "--sides",
            "official",
            "--work-dir",
            str(tmp_path / "w"),
        ]
    )
    result = json.loads(out.read_text())
    assert seen["shapes"] == {"train": (800, 25, 1), "val": (100, 25, 1), "test": (100, 25, 1)}
    assert result["official_edits"] == edits_record(EDITS)
    assert result["summary"]["official"]["predictive_mse"]["mean"] == 1.0
    assert result["summary"]["official"]["seconds_per_epoch"] == {"mean": 4.0, "sd": 0.0, "n": 2}
    assert len(result["runs"]["official"]) == 2

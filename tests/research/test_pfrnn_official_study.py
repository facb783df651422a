"""The pure helpers of ppl_models.experiments.studies.pfrnn_official (the official code itself is not run here)."""

import json
import os
import pickle
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ppl_models.experiments.claims import CLAIMS
from ppl_models.experiments.claims.evidence_readers import official_side_by_side
from ppl_models.experiments.studies.official_code import apply_edits, mean_sd
from ppl_models.experiments.studies.pfrnn_official import (
    EDITS,
    constant_last_step_mse,
    convergence,
    from_official,
    official_curve,
    official_dataset,
    resumable_folder,
    seed_record,
)


def _tiny():
    """One 2-step trajectory: inputs (dx, dy, dheading, 5 distances), normalised poses (x/10, y/10, heading/2pi)."""
    x = torch.tensor([[[0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [0.2, -0.1, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5]]])
    y = torch.tensor([[[0.25, 0.5, 0.25], [0.27, 0.49, 0.75]]])
    return x, y


def test_official_rows_hold_pose_in_cells_and_degrees_then_inputs():
    x, y = _tiny()
    data = official_dataset(x, y, 10)
    assert len(data["trajs"]) == 1 and data["trajs"][0].shape == (2, 11)
    first, second = data["trajs"][0]
    # by hand: (0.25, 0.5) of a 10-cell maze is (2.5, 5.0) cells; a quarter turn is 90 degrees
    assert first.tolist() == pytest.approx([2.5, 5.0, 90.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert second.tolist() == pytest.approx([2.7, 4.9, 270.0, 0.2, -0.1, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5])


def test_official_map_is_the_paper_layout_top_row_first():
    data = official_dataset(*_tiny(), 10)
    assert data["map"].shape == (10, 10)
    assert data["map"][0].tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 2, 0]
    assert data["map"][3].tolist() == [0, 1, 1, 2, 0, 0, 2, 1, 1, 0]


def test_official_format_round_trips_through_pickle():
    x, y = _tiny()
    back_x, back_y = from_official(pickle.loads(pickle.dumps(official_dataset(x, y, 10))), 10)
    torch.testing.assert_close(back_x, x)
    torch.testing.assert_close(back_y, y)


def test_official_dataset_refuses_wrong_shapes():
    x, y = _tiny()
    with pytest.raises(ValueError, match=r"x must be \[n, T, 8\]"):
        official_dataset(x[..., :5], y, 10)
    with pytest.raises(ValueError, match=r"y \[n, T, 3\]"):
        official_dataset(x, y[..., :2], 10)


def test_apply_edits_replaces_once_and_refuses_missing_or_repeated_text(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 1\n")
    apply_edits(tmp_path, [("a.py", "x = 1", "x = 2", "why")])
    assert (tmp_path / "a.py").read_text() == "x = 2\ny = 1\n"
    with pytest.raises(ValueError, match="found it 0 times"):
        apply_edits(tmp_path, [("a.py", "z = 1", "z = 2", "why")])
    with pytest.raises(ValueError, match="found it 2 times"):
        apply_edits(tmp_path, [("a.py", " = ", " == ", "why")])


def test_official_curve_pairs_each_epochs_validation_scalars():
    records = [
        {"tag": "start", "value": 0.0, "step": 0, "time": 100.0},
        {"tag": "train/loss", "value": 30.0, "step": 2, "time": 105.0},
        {"tag": "eval/loss_last", "value": 3.0, "step": 2, "time": 110.0},
        {"tag": "eval/loss", "value": 20.0, "step": 2, "time": 110.5},
        {"tag": "eval/loss_last", "value": 2.0, "step": 4, "time": 130.0},
        {"tag": "eval/loss", "value": 18.0, "step": 4, "time": 130.25},
    ]
    assert official_curve(records) == [
        {"epoch": 1, "valid_last_step_mse": 3.0, "valid_loss": 20.0, "seconds": 10.5},
        {"epoch": 2, "valid_last_step_mse": 2.0, "valid_loss": 18.0, "seconds": 19.75},
    ]


def test_mean_sd_is_the_sample_mean_and_sd():
    assert mean_sd([1.0, 2.0, 3.0]) == {"mean": 2.0, "sd": 1.0, "n": 3}
    assert mean_sd([4.0]) == {"mean": 4.0, "sd": 0.0, "n": 1}


def test_constant_predictor_error_by_hand():
    train_y = torch.tensor([[[0.0, 0.0, 0.0], [0.1, 0.2, 0.0]], [[0.0, 0.0, 0.0], [0.3, 0.4, 0.0]]])
    y = torch.tensor([[[0.9, 0.9, 0.5], [0.4, 0.3, 0.5]]])
    # training mean last position (2, 3) cells; truth (4, 3): squared errors 4 and 0, mean 2
    assert constant_last_step_mse(train_y, y, 10) == pytest.approx(2.0)


# ---- early stopping: the bookkeeping, the official loop's edit, the claim's reader and rule ----------------------


def _curve(mse, loss):
    return [
        {"epoch": i + 1, "valid_last_step_mse": m, "valid_loss": v, "seconds": 1.0}
        for i, (m, v) in enumerate(zip(mse, loss))
    ]


def test_convergence_takes_the_first_lowest_epoch_and_counts_the_epochs_run():
    # by hand: the lowest, 3.0, first at epoch 3 (again at 5); 6 epochs under a cap of 10 is an early stop
    assert convergence([5.0, 4.0, 3.0, 3.5, 3.0, 4.0], cap=10) == {
        "best_epoch": 3,
        "epochs_run": 6,
        "stopped_early": True,
    }
    assert convergence([5.0, 4.0], cap=2) == {"best_epoch": 2, "epochs_run": 2, "stopped_early": False}
    with pytest.raises(ValueError, match="values must hold 1 to cap=2"):
        convergence([5.0, 4.0, 3.0], cap=2)
    with pytest.raises(ValueError, match="values must hold 1 to cap=2"):
        convergence([], cap=2)


def test_seed_record_reads_each_sides_own_stopping_figure():
    result = {"curve": _curve([9.0, 8.0, 8.5, 8.7], [4.0, 4.1, 3.9, 4.2]), "train_wall_seconds": 12.5}
    official = seed_record(result, "official", cap=50, constant=9.69)
    ours = seed_record(result, "ours", cap=50, constant=9.69)
    assert (official["best_epoch"], ours["best_epoch"]) == (2, 3)  # lowest MSE at 2, lowest loss at 3
    assert official["epochs_run"] == ours["epochs_run"] == 4 and official["stopped_early"]
    assert official["seconds"] == 12.5 and official["constant_predictor_test"] == 9.69


def test_the_official_loops_edit_stops_after_patience_epochs_without_a_lower_mse(tmp_path, monkeypatch):
    """The two early-stopping edits of EDITS applied to a stand-in of the official loop (same lines), run on a
    stubbed validation curve."""
    stub = (
        "import os\n"
        "def train(curve):\n"
        "    seen, saved = [], []\n"
        "    best_eval = 1000\n"
        "    for log_eval_last in curve:\n"
        "        seen.append(log_eval_last)\n"
        "        if log_eval_last < best_eval:\n"
        "            best_eval = log_eval_last\n"
        "            saved.append(len(seen))\n"
        "    return len(seen), saved[-1]\n"
    )
    (tmp_path / "main.py").write_text(stub)
    apply_edits(tmp_path, [edit for edit in EDITS if edit[0] == "main.py" and "early stopping" in edit[3]])
    namespace = {}
    exec((tmp_path / "main.py").read_text(), namespace)
    curve = [5.0, 4.0, 3.0, 3.5, 3.0, 4.0, 2.0]
    # by hand: best 3.0 at epoch 3; epochs 4 (3.5) and 5 (3.0, not lower) make 2 without improving: stop at 5
    monkeypatch.setenv("PFRNN_PATIENCE", "2")
    assert namespace["train"](curve) == (5, 3)
    assert convergence(curve[:5], cap=len(curve))["best_epoch"] == 3
    monkeypatch.setenv("PFRNN_PATIENCE", str(len(curve)))  # no patience: every epoch runs
    assert namespace["train"](curve) == (7, 7)


#: a stand-in of the official main.py: the lines the logger, early-stopping and resumption edits change, around a
#: tiny model whose every step draws from Python's, NumPy's and torch's RNGs; CRASH_AT stops it inside an epoch
_LOOP = """\
import os
import random
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
if not os.path.isdir('logs'):
    os.mkdir('logs')


def get_logger():
    root = './logs'
    existings = os.listdir(root)
    cnt = str(len(existings))
    logger = SummaryWriter(os.path.join(root, cnt, 'tflogs'))

    return logger, cnt


def train(args, logger, run_id):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.05)
    os.mkdir(os.path.join('logs', run_id, 'models'))

    cnt = 0
    best_eval = 1000
    from tqdm import tqdm

    for epoch in tqdm(range(args.epochs)):
        for iteration in range(3):
            cnt = cnt + 1
            if cnt == int(os.environ.get('CRASH_AT', -1)):
                raise KeyboardInterrupt
            x = torch.randn(8, 2) + random.random() + float(np.random.rand())
            loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            model.zero_grad()
            loss.backward()
            optimizer.step()
            logger.add_scalar('train/loss', loss.item(), cnt)
        log_eval_last = (model(torch.ones(1, 2)) - 2.0).pow(2).item()
        logger.add_scalar('eval/loss_last', log_eval_last, cnt)
        logger.add_scalar('eval/loss', 2 * log_eval_last, cnt)

        if log_eval_last < best_eval:
            best_eval = log_eval_last
            torch.save(model.state_dict(), os.path.join(
                'logs', run_id, 'models', 'model_best'))
            torch.save(optimizer.state_dict(), os.path.join(
                'logs', run_id, 'models', 'optim_best'))

    torch.save(model.state_dict(), os.path.join('logs', run_id, 'models', 'model_final'))
"""


def _run_loop(folder, epochs, crash_at=None):
    """One process of the edited stand-in in ``folder``: seeded as the seed edit does, trained ``epochs`` epochs or
    stopped at step ``crash_at``. Returns the logged scalars without their times and the final weights (or None)."""
    namespace = {}
    env = {"PFRNN_PATIENCE": "100", "CRASH_AT": str(crash_at or -1)}
    old = os.getcwd()
    os.chdir(folder)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        exec((folder / "main.py").read_text(), namespace)
        random.seed(0), np.random.seed(0), torch.manual_seed(0)
        logger, run_id = namespace["get_logger"]()
        try:
            namespace["train"](SimpleNamespace(epochs=epochs), logger, run_id)
        except KeyboardInterrupt:
            pass
        final = folder / "logs" / "0" / "models" / "model_final"
        weights = torch.load(final) if final.is_file() else None
        records = [json.loads(line) for line in (folder / "logs" / "0" / "tflogs" / "scalars.jsonl").open()]
    finally:
        os.chdir(old)
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return records, weights


def test_the_official_loops_resumption_edits_go_on_as_if_never_stopped(tmp_path):
    """The logger, early-stopping and resumption edits applied to a stand-in of the official loop: a process
    stopped inside its third epoch and a second process give the uninterrupted run's weights and scalars."""
    edits = [e for e in EDITS if e[0] == "main.py" and e[3].startswith(("tensorboard", "early stopping", "resumption"))]
    assert len(edits) == 7  # the logger, the two early-stopping and the four resumption edits
    for name in ("whole", "stopped"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.py").write_text(_LOOP)
        apply_edits(tmp_path / name, edits)
    whole, whole_weights = _run_loop(tmp_path / "whole", epochs=4)
    first, first_weights = _run_loop(tmp_path / "stopped", epochs=4, crash_at=8)  # inside epoch 3 (steps 7-9)
    assert first_weights is None and [r["tag"] for r in first].count("eval/loss") == 2
    resumed, resumed_weights = _run_loop(tmp_path / "stopped", epochs=4)
    runs = {"whole": whole, "resumed": resumed}
    assert [r["tag"] for r in resumed].count("resume") == 1 and [r["tag"] for r in resumed].count("start") == 1
    shown = {k: [(r["tag"], r["step"], r["value"]) for r in v if r["tag"] != "resume"] for k, v in runs.items()}
    assert shown["resumed"] == shown["whole"]
    for key, value in whole_weights.items():
        assert torch.equal(resumed_weights[key], value)
    assert [e["valid_last_step_mse"] for e in official_curve(resumed)] == [
        e["valid_last_step_mse"] for e in official_curve(whole)
    ]


def test_official_curve_times_a_resumed_epoch_from_the_resumption():
    records = [
        {"tag": "start", "value": 0.0, "step": 0, "time": 100.0},
        {"tag": "eval/loss_last", "value": 3.0, "step": 2, "time": 110.0},
        {"tag": "eval/loss", "value": 20.0, "step": 2, "time": 110.5},
        {"tag": "resume", "value": 0.0, "step": 2, "time": 500.0},
        {"tag": "eval/loss_last", "value": 2.0, "step": 4, "time": 520.0},
        {"tag": "eval/loss", "value": 18.0, "step": 4, "time": 521.0},
    ]
    assert [(e["epoch"], e["seconds"]) for e in official_curve(records)] == [(1, 10.5), (2, 21.0)]


def test_a_folder_goes_on_only_with_the_same_budget_and_a_finished_preparation(tmp_path):
    folder = tmp_path / "official-s0"
    budget = {"epochs": 200, "patience": 10}
    prepared = []
    assert not resumable_folder(folder, budget, prepared.append)  # fresh: prepared, then the budget recorded
    (folder / "state").write_text("epoch 7")
    assert resumable_folder(folder, budget, prepared.append) and (folder / "state").is_file()
    assert not resumable_folder(folder, {**budget, "patience": 5}, prepared.append)  # another budget: afresh
    assert not (folder / "state").exists() and prepared == [folder, folder]

    def interrupted(folder):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        resumable_folder(folder, budget, interrupted)
    assert not (folder / "budget.json").exists()  # an unfinished preparation is not gone on with


def _side_by_side(ours, official, constant=9.7):
    """A stubbed new-format results file: per side and seed the best-validation test MSE, best epoch, epochs run."""

    def runs(values):
        return [
            {
                "test_best_valid": {"last_step_mse": v},
                "test_final": {"last_step_mse": v + 1.0},
                "best_epoch": 20 + i,
                "epochs_run": 30 + i,
                "train_wall_seconds": 100.0,
            }
            for i, v in enumerate(values)
        ]

    return {
        "runs": {"ours": runs(ours), "official": runs(official)},
        "budget": {"epochs": 200},
        "constant_predictor": {"test": constant},
    }


def test_reader_takes_the_best_validation_models_and_the_constant_predictor():
    reading = official_side_by_side(_side_by_side([2.0, 2.2, 2.4], [2.1, 2.3, 2.5]))
    assert reading.figures["ours"].values == (2.0, 2.2, 2.4)  # test_best_valid, not test_final
    assert reading.figures["constant predictor"].values == (9.7, 9.7, 9.7)
    budget = {b.model: b for b in reading.budgets}["official code"]
    assert (budget.epochs, budget.best_epochs, budget.wall_s) == ((30, 31, 32), (20, 21, 22), 300.0)


def test_rule_asks_both_sides_clearly_below_the_constant_predictor():
    rule = CLAIMS["pfrnn-official"].rule
    assert rule.decide(official_side_by_side(_side_by_side([2.0, 2.2, 2.4], [2.1, 2.3, 2.5]))) == "met"
    # matching, but both means, 9.5, lie within the larger sd (0.2) of 9.7
    near = official_side_by_side(_side_by_side([9.3, 9.5, 9.7], [9.3, 9.5, 9.7]))
    assert rule.decide(near) == "not met: near the constant predictor (ours, official code)"


def test_reader_keeps_reading_the_fixed_epoch_file_and_its_curves_best_epochs():
    old = {
        "runs": {
            code: [
                {
                    "test_final": {"last_step_mse": 9.0 + i},
                    "test_best_valid": {"last_step_mse": 0.0},
                    "train_wall_seconds": 10.0,
                    "curve": [{"epoch": e, "valid_last_step_mse": m} for e, m in ((1, 9.5), (2, 9.1 - i), (3, 9.2))],
                }
                for i in range(3)
            ]
            for code in ("ours", "official")
        },
        "budget": {"epochs": 8},
        "constant_predictor": {"test": 9.69},
    }
    reading = official_side_by_side(old)
    assert reading.figures["official code"].values == (9.0, 10.0, 11.0)
    ours = {b.model: b for b in reading.budgets}["ours"]
    assert ours.epochs == (8, 8, 8) and ours.best_epochs == (2, 2, 2)  # the lowest validation MSE of each curve


def test_the_sides_flag_names_official_or_ours(tmp_path, capsys):
    from ppl_models.experiments.studies.pfrnn_official import main

    with pytest.raises(SystemExit) as stop:
        main(["--official-git-dir", str(tmp_path), "--out", str(tmp_path / "o.json"), "--sides", "ours,theirs"])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "--sides must name official and/or ours, got 'ours,theirs'" in error

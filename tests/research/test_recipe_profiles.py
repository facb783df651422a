"""The recipe profile benchmark: its quick configuration writes a complete file whose categories account for the
profiled step's wall time, and its rules and FLOP counts agree with hand-computed values (timings are not checked)."""

import json
import math

import pytest
import torch

from ppl_models.experiments.benchmarks import recipe_profiles
from ppl_models.experiments.benchmarks.recipe_profiles import BATCH_LABEL, CATEGORIES, OVERHEAD, categorize


def test_quick_profiles_account_for_the_profiled_step_and_extrapolate_from_the_recipe_shapes(tmp_path):
    out = tmp_path / "profiles.json"
    argv = ["--quick", "--steps", "2", "--valid-batches", "1", "--valid-step-cap", "50"]
    argv += ["--recipes", "psrnn-ptb-authors", "pfrnn-paper-maze10", "--out", str(out)]
    assert recipe_profiles.main(argv) == 0
    results = json.loads(out.read_text())
    assert results["commands"] == [f"python -m ppl_models.experiments.benchmarks.recipe_profiles {' '.join(argv)}"]
    assert results["settings"]["threads"] == 1 and len(results["load_average_start"]) == 3
    assert set(results["recipes"]) == {"psrnn-ptb-authors", "pfrnn-paper-maze10"}
    for row in results["recipes"].values():
        profile = row["profile"]
        assert set(profile["categories_s"]) == {*CATEGORIES, OVERHEAD}
        assert all(profile["categories_s"][name] >= 0 for name in CATEGORIES)
        assert math.isclose(sum(profile["categories_s"].values()), profile["wall_s"], rel_tol=1e-9)
        # every event counted once: the categories' self time is the profiler's own total over its operations
        assert math.isclose(sum(profile["categories_s"][n] for n in CATEGORIES), profile["profiler_self_total_s"])
        assert math.isclose(sum(profile["shares"].values()), 1.0)
        # the floor: the step's matrix-product FLOPs at the run's peak (2 n^3 FLOPs of its best [n, n] product)
        peak = results["matmul_peak"]
        best = min(run["best_s"] for run in (peak["start"], peak["end"]))
        size = peak["start"]["size"]
        assert math.isclose(profile["matmul_floor_s"], profile["matmul_gflop"] * 1e9 * best / (2 * size**3))
        assert len(row["train_step"]["times_s"]) == len(row["limit"]["times_s"]) == 2
        epoch = row["epoch"]
        assert epoch["train_s_extrapolated"] == row["train_step"]["median_s"] * row["steps_per_epoch"]
        validation = row["validation"]
        assert validation["pass_s_extrapolated"] == pytest.approx(
            validation["seconds_timed"] * validation["cells_total"] / validation["cells_timed"]
        )
    streams = results["recipes"]["psrnn-ptb-authors"]
    assert streams["steps_per_epoch"] == streams["train_rows"] // 20  # 20 streams of consecutive chunks
    expected = {"layer": "nn.GRU", "rows": 20, "steps": 20, "input_size": 44, "hidden_size": 4, "particles": 1}
    assert streams["limit"].items() >= expected.items()  # batch 20 x 20 characters, 44 symbols, quick state size
    # one held-out text of 117,425 characters, timed on its first 50
    assert streams["validation"]["cells_total"] == 117_425 and streams["validation"]["cells_timed"] == 50
    pfrnn = results["recipes"]["pfrnn-paper-maze10"]
    assert pfrnn["steps_per_epoch"] == 3  # 24 trajectories in batches of 8
    assert pfrnn["limit"]["layer"] == "nn.LSTM" and pfrnn["limit"]["rows"] == 8 * 30  # B K rows, K = 30 particles
    assert pfrnn["validation"]["cells_total"] == 16 * 12  # 16 validation trajectories of 12 steps


def test_categories_follow_the_documented_rules():
    assert categorize("aten::mm", ["AddmmBackward0"]) == "matrix products"
    assert categorize("aten::add", ["aten::gru"]) == "recurrent-cell elementwise"
    assert categorize("aten::sigmoid", []) == "recurrent-cell elementwise"
    assert categorize("aten::add", []) == "other elementwise"
    assert categorize("aten::_foreach_mul_", []) == "optimizer"
    assert categorize("aten::mul", ["Optimizer.step#Adam.step"]) == "optimizer"
    assert categorize("aten::index", [BATCH_LABEL]) == "data handling"
    assert categorize("aten::index", ["aten::something"]) == "particle ops"
    assert categorize("aten::multinomial", []) == "random draws"
    assert categorize("autograd::engine::evaluate_function: MmBackward0", []) == "autograd engine"
    assert categorize("MmBackward0", []) == "autograd engine"
    assert categorize("aten::view", []) == "tensor creation and views"


def test_a_profiled_matrix_product_counts_its_flops():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    profile = recipe_profiles.step_profile(lambda: a @ b)
    assert profile["matmul_gflop"] == pytest.approx(2 * 64 * 32 * 16 / 1e9)
    assert profile["categories_s"]["matrix products"] > 0


def test_bad_settings_exit_with_status_2():
    with pytest.raises(SystemExit) as stop:
        recipe_profiles.main(["--steps", "0"])
    assert stop.value.code == 2

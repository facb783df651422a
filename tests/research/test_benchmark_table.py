"""Benchmark timings on docs pages (``<!-- speed:NAME -->`` blocks): rendered from the results file, never typed."""

from ppl_models.experiments.claims.benchmark_table import benchmark_table
from ppl_models.experiments.claims.reproductions import fill_blocks

FILES = {
    "ab_cpu.json": {
        "command": "python -m ppl_models.experiments.benchmarks.compile_ab --out ab.json",
        "machine": {"git_commit": "0123456789abcdef", "logical_cpus": 2},
        "threads": 2,
        "load_average_start": [0.5, 0.4, 0.3],
        "load_average_end": [1.25, 0.9, 0.5],
        "rows": {
            "eager step": {"median_s": 1.5, "best_s": 1.25, "times_s": [1.25, 1.5, 2.0]},
            "compiled step": {"median_s": 1.0, "best_s": 0.875, "times_s": [0.875, 1.0, 1.5]},
        },
        "comparisons": {"pf-lstm": {"speed_up": 1.5, "steps_to_repay_compile": None}},
    }
}


def test_the_table_gives_each_rows_median_best_and_runs_and_the_comparisons():
    lines = benchmark_table("ab_cpu", FILES)
    assert "| eager step | 1.5 s | 1.25 s | 3 |" in lines and "| compiled step | 1 s | 0.875 s | 3 |" in lines
    assert "| pf-lstm | 1.5 | - |" in lines and "| | speed up | steps to repay compile |" in lines
    assert lines[-1] == (
        "`python -m ppl_models.experiments.benchmarks.compile_ab --out ab.json`; commit 0123456, 2 thread(s), "
        "2 logical CPUs; load average 0.5 -> 1.2. File: [ab_cpu.json](results/ab_cpu.json)."
    )


def test_a_speed_block_is_filled_from_its_file_and_a_missing_file_says_so():
    page = "Before.\n<!-- speed:ab_cpu -->\nstale\n<!-- /speed -->\nAfter.\n"
    filled = fill_blocks(page, FILES)
    assert "stale" not in filled and "| eager step | 1.5 s | 1.25 s | 3 |" in filled and filled.endswith("After.\n")
    assert "Not measured yet: no docs/results/nope.json." in fill_blocks(page.replace("ab_cpu", "nope"), FILES)


def test_the_results_files_named_by_speed_blocks_are_loaded(tmp_path):
    import json

    from ppl_models.experiments.claims.reproductions import load_results

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ab_cpu.json").write_text(json.dumps(FILES["ab_cpu.json"]))
    (tmp_path / "results" / "other.json").write_text("{}")
    (tmp_path / "page.md").write_text("<!-- speed:ab_cpu -->\n<!-- /speed -->\n")
    files = load_results(tmp_path / "results")
    assert "ab_cpu.json" in files and "other.json" not in files


def test_a_speed_targets_file_gives_its_ratios_beside_their_targets_and_its_timed_sections():
    record = {
        "ratios": {"pf-lstm layer / lstmcell loop": 1.65, "bootstrap speed-up": 7.0, "other": 1.2},
        "targets": {
            "pf-lstm layer / lstmcell loop": {"bound": 1.5, "kind": "max", "met": False},
            "bootstrap speed-up": {"bound": 6.0, "kind": "min", "met": True},
        },
        "pf_rnn": {
            "threads": 2,
            "rows": {"pf-lstm layer": {"median_s": 0.8, "best_s": 0.7, "times_s": [0.8] * 3}},
            "memory": {"pf-lstm layer": {"peak_growth_mb": 512.4}},
        },
        "srnn_step": {"threads": 1, "methods": {"ours": {"median_s": 0.5, "best_s": 0.4, "times_s": [0.5]}}},
        "command": "python -m x",
        "machine": {"git_commit": "abcdef0123", "logical_cpus": 2},
    }
    lines = benchmark_table("t", {"t.json": record})
    assert "| pf-lstm layer / lstmcell loop | 1.65x | ≤ 1.5x | **missed** |" in lines
    assert "| bootstrap speed-up | 7.00x | ≥ 6x | met |" in lines
    assert "| other | 1.20x | - |  |" in lines
    assert "| PF-RNN layers and steps (2 thread(s)): pf-lstm layer | 0.8 s | 0.7 s | 3 |" in lines
    assert "| SRNN training step (1 thread(s)): ours | 0.5 s | 0.4 s | 1 |" in lines
    assert "Peak memory growth: pf-lstm layer 512 MB" in lines
    assert lines[-1].startswith("`python -m x`; commit abcdef0")


def test_a_paired_run_of_whole_commands_says_whether_both_trees_gave_the_same_figures():
    for same, said in ((True, "yes"), (False, "**no**")):
        record = {**FILES["ab_cpu.json"], "same_metrics_every_round": same}
        lines = benchmark_table("t", {"t.json": record})
        assert f"Both trees wrote the same `metrics.json` in every round: {said}." in lines
    assert not any("Both trees" in line for line in benchmark_table("ab_cpu", FILES))


def test_a_goals_file_gives_each_measurement_beside_its_goal():
    goals = {
        "fast": {"bound": 90.0, "measured": 61.25, "met": True, "label": "the board", "unit": "s"},
        "slow": {"bound": 5.0, "measured": 7.5, "met": False, "label": "the rerun", "unit": "s"},
        "count": {"bound": 1, "measured": 4, "met": False},
        "broken": {"bound": 120.0, "measured": 300.0, "met": False, "unit": "s", "failed": "timed out"},
    }
    record = {"goals": goals, "command": "python -m x", "machine": {"git_commit": "abcdef0123", "logical_cpus": 2}}
    lines = benchmark_table("g", {"g.json": record})
    assert lines[:2] == ["| measurement | measured | goal | |", "|---|---:|---|---|"]
    assert "| the board | 61.2 s | ≤ 90 s | met |" in lines
    assert "| the rerun | 7.5 s | ≤ 5 s | **missed by 2.5 s** |" in lines
    assert "| count | 4 | ≤ 1 | **missed by 3** |" in lines
    assert "| broken | 300 s | ≤ 120 s | **failed: timed out** |" in lines
    assert not any("rerun wrote" in line for line in lines)
    lines = benchmark_table("g", {"g.json": {**record, "same_leaderboard_on_rerun": False}})
    assert "The rerun wrote the same `leaderboard.md`: **no**." in lines

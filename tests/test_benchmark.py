"""The benchmark script still runs (its quick configuration; timings are not checked)."""

import json

from experiments.benchmarks import bootstrap_filter


def test_quick_benchmark_runs_and_reports_errors_against_the_kalman_value(tmp_path, capsys):
    out = tmp_path / "bench.json"
    bootstrap_filter.main(["--quick", "--skip-particles", "--skip-pyro", "--skip-memory", "--out", str(out)])
    result = json.loads(out.read_text())
    rows = result["compare"]
    assert set(rows) == {"ours float32", "ours float64"}
    for row in rows.values():
        assert row["best_s"] > 0 and abs(row["error_mean"]) < 5.0  # T = 50, K = 100: a few nats at most
    assert "Scaling with K" in capsys.readouterr().out

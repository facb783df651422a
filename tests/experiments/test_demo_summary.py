"""The demo's summary: each demo's headline figures with their units, read from its run folder's files, the pictures
to open and the wall time, on one screen; the README's demo figures are those of the summary's results file."""

import json
import re
from pathlib import Path

import numpy as np

from ppl_models.experiments.demo_summary import PICTURES, demo_summary, format_summary, readme_figures
from ppl_models.experiments.registry import DEMOS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "demo_summary_cpu.json"

CALIBRATION = {"coverage_0.5": 0.52, "coverage_0.8": 0.81, "coverage_0.95": 0.94, "pit_ks": 0.031}
METRICS = {
    "lgssm-demo": {"loglik": {"exact": {"per_step": -1.9174}, "smc-1000": {"per_step": -1.9176}}},
    "srnn-demo": {"loglik": {n: {"per_step": v} for n, v in [("elbo", -9.5), ("iwae-50", -9.3), ("smc-100", -9.2)]}},
    "psrnn-demo": {"mse": 0.055, "calibration": CALIBRATION},
    "pfrnn-demo": {"last_step_mse": 1.9, "last_step_mirror_share": 0.33, "position_mse_by_step": [22.0, 3.8]},
    "smct-demo": {
        "truth_metrics": {"predictive_mse": 0.58, "true_predictive_mse": 0.5, "share_in_80": 0.77, "share_in_95": 0.93}
    },
}


def _runs(root: Path, names=DEMOS) -> None:
    for name in names:
        folder = root / name
        (folder / "plots").mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(METRICS[name]))
        (folder / PICTURES[name][0]).write_bytes(b"")
    (root / "psrnn-demo" / "predictions.json").write_text(json.dumps({"initial_mse": {"test_mse": 0.33}}))


def test_the_summary_gives_each_demos_figures_with_units_its_pictures_and_the_wall_time(tmp_path):
    _runs(tmp_path, [name for name in DEMOS if name != "smct-demo"])
    summary = demo_summary(tmp_path, DEMOS, 155.04)
    text = format_summary(summary)
    assert len(text.splitlines()) <= 20 and max(map(len, text.splitlines())) <= 118  # one screen
    flat = " ".join(text.split())
    assert "Summary: 2 min 35 s of wall time" in flat
    assert "final position error 3.8 cells² (squared distance at the last step)" in flat
    assert "per coordinate (the paper's last-step MSE) 1.9 cells²" in flat
    assert "log-likelihood by SMC-1000 -1.918 nats/step; exact -1.917 nats/step" in flat
    assert "coverage at 80% 0.81" in flat and "PIT KS 0.031" in flat
    assert f"open pfrnn-demo/{PICTURES['pfrnn-demo'][0]} " in flat and PICTURES["pfrnn-demo"][1] not in flat
    assert re.search(r"smct-demo failed: no figures in .*smct-demo", flat)
    assert summary["wall_seconds"] == 155.0 and json.loads(json.dumps(summary)) == summary


def test_the_readme_states_the_demo_figures_of_its_results_file():
    """The README's demo paragraph: the figures of docs/results/demo_summary_cpu.json (a full ``ppl-models demo``
    on 2 CPU cores, its ``summary.json``), as the summary prints them."""
    readme = (ROOT / "README.md").read_text()
    paragraph = " ".join(readme[readme.index("## Set-up") : readme.index("```bash")].split())
    record = json.loads(RESULTS.read_text())
    for what, value in readme_figures(record).items():
        assert value in paragraph, f"README: {what} should read {value} ({RESULTS.name})"
    seeds = json.loads((RESULTS.parent / "pfrnn_demo_seeds.json").read_text())["seeds"]
    errors = [seed["final_squared_distance"] for seed in seeds.values()]
    assert len(errors) == 3 and f"over 3 seeds {np.mean(errors):.1f} ± {np.std(errors, ddof=1):.1f} cells²" in paragraph

"""Re-evaluate a trained PF-RNN regression run under other evaluation settings, without retraining.

The particle count and the evaluation randomness do not change a PF layer's parameters, so the
best checkpoint of a run can be scored again with, e.g., more particles or no noise at test time:

    python -m ppl_models.experiments.studies.pfrnn_eval_variants RUN_DIR --set model.num_particles=100 \
        --set 'model.eval_randomness="off"'

prints the test metrics (the run's own ``metrics.json`` is left untouched) as JSON. Only
``model.num_particles``, ``model.eval_randomness`` and ``model.eval_seed`` may change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ppl_models.inference.training import load_best

from ..config import apply_overrides
from ..run_folder import config_differences
from ..supervised import build_supervised
from ..tasks.regime_switching import RegimeSwitchingData, evaluate_regime_switching
from ..tasks.uci_regression import RegressionData, evaluate_regression

__all__ = ["EVALUATION_OPTIONS", "reevaluate"]

#: the model options an evaluation may change (they leave the parameters as they are)
EVALUATION_OPTIONS = ("num_particles", "eval_randomness", "eval_seed")


def reevaluate(run_dir: str | Path, overrides: list[str] = (), *, seed: int | None = None) -> dict:
    """Test metrics of ``run_dir``'s best checkpoint with ``model.<option>=value`` overrides applied."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise ValueError(f"run_dir must be a supervised run folder with config.json, got {str(run_dir)!r}")
    config = json.loads((run_dir / "config.json").read_text())
    changed = apply_overrides(config, list(overrides))
    allowed = {f"model.{option}" for option in EVALUATION_OPTIONS}
    bad = sorted(set(config_differences(config, changed)) - allowed)
    if bad:
        raise ValueError(f"overrides may change only {sorted(allowed)}, got changes to {bad}")
    context, splits, predictor, objective = build_supervised(changed)
    load_best(run_dir, objective)
    seed = changed["seed"] if seed is None else seed
    if isinstance(context, RegressionData):
        return evaluate_regression(predictor, context, "test", seed=seed)
    if isinstance(context, RegimeSwitchingData):
        return evaluate_regime_switching(predictor, context, "test", seed=seed)
    raise ValueError(
        f"run_dir must hold a regression run (air, pm25, regime-switching), got {config['data']['name']!r}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        metrics = reevaluate(args.run_dir, args.set)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in metrics.items() if not isinstance(v, list)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

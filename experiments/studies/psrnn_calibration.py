"""Closed-form calibration of one-step predictors' best checkpoints, under each refit of their noise.

For each finished run folder of a :class:`~ppl_models.predictors.OneStepPredictor` (PSRNN,
RNN / GRU / LSTM, ...), the best checkpoint's one-step predictive (Normal, Student-t or the
smoothed empirical shape, with a scale per step) is judged on the test split in closed form:
its PIT ``F_t(x_t)``, the coverage of the central intervals at 50 / 80 / 95% (``|PIT - 1/2| <= a / 2``), the
Kolmogorov-Smirnov distance of the PIT from uniform, and the one-step MSE. Each ``--refit``
first refits the noise to the residuals of the trained means on ``--split``
(:meth:`~ppl_models.predictors.OneStepPredictor.calibrate`; ``none`` keeps the trained
scale; the test split is never used to fit).

Usage::

    python -m ppl_models.experiments.studies.psrnn_calibration RNN=runs/x/rnn PSRNN=runs/x/psrnn --refit none \\
        --refit student-t+state --out cal.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import scipy.stats
import torch

from ppl_models.experiments.build import build_experiment
from ppl_models.experiments.claims.results_files import write_results
from ppl_models.experiments.run_folder import read_config_json
from ppl_models.inference.protocol import NOISE_REFITS
from ppl_models.inference.training import load_best

__all__ = ["LEVELS", "pit", "calibration_from_pit", "calibrate_run", "main"]

LEVELS = (0.5, 0.8, 0.95)
REFITS = ("none", *NOISE_REFITS)


def pit(predictive, x: torch.Tensor) -> torch.Tensor:
    """``F(x)`` elementwise for a ``predictive`` of the batch shape of ``x`` (Student-t by scipy, else its cdf)."""
    if isinstance(predictive, torch.distributions.StudentT):
        z = ((x - predictive.loc) / predictive.scale).double()
        return torch.from_numpy(scipy.stats.t.cdf(z.numpy(), predictive.df.double().numpy()))
    try:
        return predictive.cdf(x).double()
    except NotImplementedError:
        raise TypeError(
            f"predictive must have a cdf (Normal, StudentT, a mixture of them), got {type(predictive).__name__}"
        ) from None


def calibration_from_pit(u: torch.Tensor, errors: torch.Tensor) -> dict:
    """Coverage at :data:`LEVELS` and PIT KS of PIT values ``u [N]``; MSE of ``errors [N]``."""
    out = {f"coverage_{a:g}": float(((u - 0.5).abs() <= a / 2).double().mean()) for a in LEVELS}
    out["pit_ks"] = float(scipy.stats.kstest(u.numpy(), "uniform").statistic)
    out["mse"] = float(errors.double().pow(2).mean())
    return out


@torch.no_grad()
def calibrate_run(run_dir: str | Path, refit: str, split: str = "valid") -> dict:
    """Test-split calibration of the best checkpoint of ``run_dir`` after the ``refit`` of its noise on ``split``."""
    config = read_config_json(Path(run_dir) / "config.json")
    data, model, objective = build_experiment(config)
    load_best(run_dir, objective)
    model.eval()
    if refit != "none":
        model.calibrate(*getattr(data, split), refit)
    x, mask = data.test
    predictive = model.predictive_distribution(x, mask).base_dist
    result = calibration_from_pit(pit(predictive, x)[mask].flatten(), (x - model.predict(x, mask))[mask].flatten())
    return {**result, "df": model.noise_df.tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_DIR of finished OneStepPredictor runs")
    parser.add_argument(
        "--refit", choices=REFITS, action="append", help="noise refit before judging (repeatable; default none)"
    )
    parser.add_argument("--split", choices=("train", "valid"), default="valid", help="split whose residuals refit")
    parser.add_argument("--out", help="JSON file for the results")
    args = parser.parse_args(argv)
    runs = {}
    for item in args.runs:
        label, sep, run_dir = item.partition("=")
        if not sep or not label or not Path(run_dir, "config.json").is_file():
            parser.error(f"runs: expected LABEL=RUN_DIR of a finished run folder, got {item!r}")
        runs[label] = run_dir
    results = {}
    for refit in args.refit or ["none"]:
        for label, run_dir in runs.items():
            row = results.setdefault(refit, {})[label] = calibrate_run(run_dir, refit, args.split)
            print(
                f"{refit:>16} {label:>12}  mse {row['mse']:.4f}  "
                + "  ".join(f"{k} {row[k]:.3f}" for k in row if k.startswith(("coverage", "pit")))
            )
    if args.out:
        command = "python -m ppl_models.experiments.studies.psrnn_calibration " + " ".join(sys.argv[1:])
        write_results(args.out, {"command": command, "split": args.split, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())

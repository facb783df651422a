"""Exact calibration of Gaussian one-step predictors' best checkpoints, before and after a noise-scale refit.

For each finished run folder of a :class:`~ppl_models.predictors.OneStepPredictor` (PSRNN,
RNN / GRU / LSTM), the best checkpoint's Gaussian predictive ``N(mu_t, diag(sigma^2))`` is
judged on the test split in closed form: coverage of the central intervals
``|x - mu| <= z_{(1+a)/2} sigma`` at 50 / 80 / 95%, the PIT ``Phi((x - mu) / sigma)`` and its
Kolmogorov-Smirnov distance from uniform, and the one-step MSE. ``--refit`` first sets the
noise scale to the residuals of the trained means on another split
(:meth:`~ppl_models.predictors.OneStepPredictor.fit_noise_scale`; the test split is never
used to fit).

Usage::

    python -m experiments.psrnn_calibration RNN=runs/x/rnn PSRNN=runs/x/psrnn --refit valid --out cal.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import scipy.stats
import torch

from experiments.runner import _setup, read_config_json
from inference.io import write_json
from inference.training import load_best

__all__ = ["LEVELS", "gaussian_calibration", "main"]

LEVELS = (0.5, 0.8, 0.95)
REFITS = ("none", "train", "valid")


def gaussian_calibration(mean: torch.Tensor, scale: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> dict:
    """Coverage at :data:`LEVELS`, PIT KS and MSE of ``N(mean [B, T, D], scale [D])`` for ``x`` on ``mask [B, T]``."""
    z = ((x - mean) / scale)[mask]
    normal = torch.distributions.Normal(0.0, 1.0)
    out = {f"coverage_{a:g}": float((z.abs() <= normal.icdf(torch.tensor((1 + a) / 2))).double().mean())
           for a in LEVELS}  # fmt: skip
    out["pit_ks"] = float(scipy.stats.kstest(normal.cdf(z).flatten().numpy(), "uniform").statistic)
    out["mse"] = float(((x - mean)[mask] ** 2).mean())
    return out


@torch.no_grad()
def calibrate_run(run_dir: str | Path, refit: str) -> dict:
    """Test-split calibration of the best checkpoint of ``run_dir``, after the ``refit`` of its noise scale."""
    config = read_config_json(Path(run_dir) / "config.json")
    data, model, objective = _setup(config)
    load_best(run_dir, objective)
    model.eval()
    if refit != "none":
        model.fit_noise_scale(*getattr(data, refit))
    x, mask = data.test
    result = gaussian_calibration(model.predict(x, mask), model.log_noise_scale.exp(), x, mask)
    return {**result, "noise_scale": model.log_noise_scale.exp().tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_DIR of finished OneStepPredictor runs")
    parser.add_argument("--refit", choices=REFITS, default="none", help="split whose residuals set the noise scale")
    parser.add_argument("--out", help="JSON file for the results")
    args = parser.parse_args(argv)
    results = {}
    for item in args.runs:
        label, sep, run_dir = item.partition("=")
        if not sep or not label or not Path(run_dir, "config.json").is_file():
            parser.error(f"runs: expected LABEL=RUN_DIR of a finished run folder, got {item!r}")
        results[label] = calibrate_run(run_dir, args.refit)
        row = results[label]
        print(f"{label:>12}  mse {row['mse']:.4f}  " + "  ".join(f"{k} {row[k]:.3f}" for k in row
                                                                  if k.startswith(("coverage", "pit"))))  # fmt: skip
    if args.out:
        write_json(args.out, {"command": "python -m experiments.psrnn_calibration " + " ".join(sys.argv[1:]),
                              "refit": args.refit, "results": results})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which part of the PSRNN authors' protocol moves our PTB figure: one factor at a time, at the authors' 10 epochs.

``python -m ppl_models.experiments.studies.psrnn_factors --seeds N --run-dir DIR --out FILE [--only NAME ...]``

Each factor is ``psrnn-ptb`` with one of the authors' options switched on (:data:`FACTORS`), all at 10 epochs
without early stopping, beside ``psrnn-ptb-authors`` (every option at once) and ``psrnn-ptb-authors`` with each of
the three things their code has beyond those options (an encoder bias, trained random features, an update bias
linear in the observation). Runs are kept in ``DIR/<factor>/seed-<s>`` (a finished one is not rerun, an interrupted
one resumes). The results file gives, per factor and seed, the test bits per character and accuracy of the
best-validation checkpoint, the validation bits per character after each epoch, the best epoch, the epochs, the
training updates and seconds, with the commands, seeds, commit and machine; the authors' own code's figures are in
``psrnn_official_10_epochs.json`` (at the same 10 epochs) and ``psrnn_official.json`` (to convergence).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import torch

from .. import compare
from ..claims.provenance import commit_label
from ..claims.results_files import write_results

__all__ = ["FACTORS", "main"]

#: the authors' budget: 10 epochs, no early stop (patience beyond the epochs)
_BUDGET = ("train.epochs=10", "train.patience=10")
#: factor -> (experiment, overrides)
FACTORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ours": ("psrnn-ptb", _BUDGET),
    "streams": (
        "psrnn-ptb",
        (*_BUDGET, "train.streams=20", "data.train_chunk=20", "train.lr=20.0", "train.clip_norm=0.0125"),
    ),
    "one-stream scoring": ("psrnn-ptb", (*_BUDGET, "data.eval_chunk=0", "data.context=0")),
    "their start": (
        "psrnn-ptb",
        (
            *_BUDGET,
            "model.bandwidths=[0.5,1.5811388300841898,1.5811388300841898]",
            "model.horizon=5",
            'model.projections="whitened"',
            "model.decoder_ridge=4.148e-6",
        ),
    ),
    "all": ("psrnn-ptb-authors", ()),
    # what the authors' code has beyond every option above, each added to all of them
    "all + encoder bias": ("psrnn-ptb-authors", ("model.encoder_bias=true",)),
    "all + trained features": ("psrnn-ptb-authors", ("model.train_features=true",)),
    "all + observation bias": ("psrnn-ptb-authors", ("model.observation_bias=true",)),
    "all + the three": (
        "psrnn-ptb-authors",
        ("model.encoder_bias=true", "model.train_features=true", "model.observation_bias=true"),
    ),
}


def _row(folder: Path) -> dict:
    """One finished run's figures; ``valid_bpc_curve``: its validation bits per character after each epoch."""
    metrics = json.loads((folder / "metrics.json").read_text())
    budget = compare.run_budget(folder)
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line]
    steps = [record["step"] for record in records]
    return {
        "test_bpc": metrics.get("test_bpc"),
        "test_accuracy": metrics.get("test_accuracy"),
        "valid_bpc_curve": [-record["valid_bound_per_step"] / math.log(2) for record in records],
        "updates": steps[-1] if steps else None,
        **budget,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="training seeds 0 .. N-1")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/psrnn-factors"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", action="append", choices=list(FACTORS), help="run only these factors")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    chosen = args.only or list(FACTORS)
    start, commands, results = time.perf_counter(), [], {}
    for name in chosen:
        experiment, overrides = FACTORS[name]
        runs = []
        for seed in range(args.seeds):
            seeded = (*overrides, f"seed={seed}", f"train.seed={seed}")
            folder = args.run_dir / name.replace(" ", "-") / f"seed-{seed}"
            members = ((name, experiment, seeded),)
            commands.append(compare.member_command(experiment, seeded, compare.member_folder(folder, name)))
            compare.run_suite(members, folder)
            runs.append({"seed": seed, **_row(compare.member_folder(folder, name))})
        results[name] = {"experiment": experiment, "overrides": list(overrides), "runs": runs}
    record = {
        "what": "test bits per character of psrnn-ptb with one of the PSRNN authors' protocol options at a time, "
        "10 epochs, best-validation checkpoint",
        "commands": commands,
        "seeds": list(range(args.seeds)),
        "factors": chosen,
        "commit": commit_label(),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__},
        "threads": torch.get_num_threads(),
        "wall_seconds": time.perf_counter() - start,
        "results": results,
    }
    if args.out:
        write_results(args.out, record, args.run_dir / args.out.name)


if __name__ == "__main__":
    main()

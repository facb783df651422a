"""Why a PF-RNN localization checkpoint scores worse in evaluation mode than in training mode.

``python -m ppl_models.experiments.studies.pfrnn_norm_check RUN_DIR [--checkpoint best.pt ...] [--sequences 300]
[--out FILE]``
scores the first validation trajectories of a ``localization-paper`` run (the paper's last-step
(x, y) MSE in cells, the same noise seed for every row) with the batch norms' statistics taken
five ways, one cause at a time:

* ``running``: the running averages saved in the checkpoint (evaluation as trained);
* ``batch 250`` / ``batch 10``: each batch's own statistics (training-mode norms), over 250 or
  10 trajectories at a time: does the model need batch-level statistics?
* ``refreshed``: :func:`~ppl_models.inference.training.refresh_norm_statistics` at the checkpoint's fixed
  weights, from 8 training batches of 128;
* ``ema at fixed weights``: from the refreshed statistics, 30 more training batches averaged
  with the training momentum (0.1) at the fixed weights: the running average's own noise, with
  no lag behind moving weights.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

from ppl_models.experiments.claims.results_files import write_results
from ppl_models.inference.training import load_checkpoint, refresh_norm_statistics

from ..supervised import build_supervised

REFRESH_BATCHES, EMA_BATCHES, BATCH = 8, 30, 128


def _norms(predictor) -> list[torch.nn.Module]:
    return [m for m in predictor.modules() if callable(getattr(m, "reset_running_stats", None))]


@torch.no_grad()
def _score(predictor, maze, x, y, *, batch: int, batch_statistics: bool) -> float:
    """Last-step (x, y) MSE in cells; with ``batch_statistics`` the norms use each batch's own."""
    saved = copy.deepcopy(predictor.state_dict())
    predictor.eval()
    for norm in _norms(predictor):
        norm.train(batch_statistics)
    generator = torch.Generator().manual_seed(0)
    outputs = [
        predictor.head(predictor.belief(x[s : s + batch], generator=generator).mean) for s in range(0, len(x), batch)
    ]
    predictor.load_state_dict(saved)
    predictor.eval()
    return ((torch.cat(outputs)[:, -1, :2] - y[:, -1, :2]) * maze.size).square().mean().item()


def check(run_dir: Path, checkpoint: str = "best.pt", sequences: int = 300) -> dict:
    """The five scores of the module docstring for ``run_dir/checkpoints/checkpoint``."""
    config = json.loads((run_dir / "config.json").read_text())
    if config["data"]["name"] != "localization-paper":
        raise ValueError(f"run_dir must hold a localization-paper run, got data.name={config['data']['name']!r}")
    maze, splits, predictor, objective = build_supervised(config)
    epoch = load_checkpoint(run_dir / "checkpoints" / checkpoint, objective).get("epoch")
    if not _norms(predictor):
        raise ValueError(f"{run_dir} holds a model without batch norm ({predictor.cell_name})")
    x, _, y = (t[:sequences] if t is not None else None for t in splits["valid"])
    train_x = splits["train"][0]
    scores = {
        "running": _score(predictor, maze, x, y, batch=250, batch_statistics=False),
        "batch 250": _score(predictor, maze, x, y, batch=250, batch_statistics=True),
        "batch 10": _score(predictor, maze, x, y, batch=10, batch_statistics=True),
    }
    order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(1))
    batches = [(train_x[index],) for index in order.split(BATCH)]
    refresh_norm_statistics(predictor, batches[:REFRESH_BATCHES], seed=1)
    scores["refreshed"] = _score(predictor, maze, x, y, batch=250, batch_statistics=False)
    predictor.train()
    torch.manual_seed(2)
    with torch.no_grad():
        for (batch,) in batches[REFRESH_BATCHES : REFRESH_BATCHES + EMA_BATCHES]:
            predictor(batch)
    scores["ema at fixed weights"] = _score(predictor, maze, x, y, batch=250, batch_statistics=False)
    return {
        "run_dir": str(run_dir),
        "checkpoint": checkpoint,
        "epoch": epoch,
        "valid_sequences": len(x),
        "noise_seed": 0,
        "last_step_mse": scores,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.pfrnn_norm_check", description=__doc__.split("\n")[0]
    )
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--checkpoint", nargs="+", default=["best.pt"])
    parser.add_argument("--sequences", type=int, default=300)
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    results = []
    for checkpoint in args.checkpoint:
        result = check(args.run_dir, checkpoint, args.sequences)
        print(
            f"{args.run_dir} {checkpoint} (epoch {result['epoch']}), {result['valid_sequences']} validation "
            "trajectories, last-step (x, y) MSE in cells^2:"
        )
        for name, value in result["last_step_mse"].items():
            print(f"  {name:<22} {value:8.3f}")
        results.append(result)
    if args.out:
        command = "python -m ppl_models.experiments.studies.pfrnn_norm_check " + " ".join(argv or sys.argv[1:])
        write_results(args.out, {"command": command, "results": results})


if __name__ == "__main__":
    main()

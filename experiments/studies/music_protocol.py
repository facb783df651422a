"""Protocol check of a polyphonic music set and of a trained run's test figure.

``python -m ppl_models.experiments.studies.music_protocol RUN_DIR OUT.json`` writes, for the run's data set:

* per split: sequences, steps, length range and the MIDI keys that ever sound;
* for the run's best checkpoint, from one guide draw per test piece (seeded): the test ELBO per
  step normalised two ways, ``sum_i L_i / sum_i T_i`` (ours, Boulanger-Lewandowski et al.'s)
  and ``mean_i (L_i / T_i)`` (an average of per-piece figures), and the nats per step that
  the keys never sounding in training contribute to the emission term (what a model that
  reads only the sounding keys would not pay).
"""

from __future__ import annotations

import argparse
import sys

import pyro
import torch
from pyro import poutine

from ppl_models.experiments.claims.results_files import write_results
from ppl_models.inference.objectives import ELBO
from ppl_models.inference.training import length_batches, load_best, trim_padding

from ..build import build_experiment
from ..config import check_config
from ..run_folder import check_run_folder, read_config_json
from ..tasks.music import LOWEST_PITCH

__all__ = ["split_summary", "normalisations", "main"]


def split_summary(x: torch.Tensor, mask: torch.Tensor) -> dict:
    """Sequences, steps, length range and sounding MIDI keys of one split ``x [N, T, 88]``, ``mask [N, T]``."""
    lengths = mask.sum(1)
    keys = torch.nonzero(x[mask].sum(0)).flatten() + LOWEST_PITCH
    return {
        "sequences": int(x.shape[0]),
        "steps": int(lengths.sum()),
        "length_min": int(lengths.min()),
        "length_max": int(lengths.max()),
        "midi_key_low": int(keys.min()),
        "midi_key_high": int(keys.max()),
        "keys_sounding": int(keys.numel()),
    }


@torch.no_grad()
def normalisations(
    model, x_all: torch.Tensor, mask_all: torch.Tensor, silent_keys: torch.Tensor, *, batch_size: int = 16
) -> dict:
    """Test ELBO per step both ways, and the silent keys' share of it (nats per step), one guide draw each.

    ``silent_keys [88]`` bool marks the keys that never sound in training.
    """
    model.eval()
    bounds, lengths, silent_total = [], [], 0.0
    for index in length_batches(mask_all, batch_size):
        x, mask = trim_padding(x_all[index], mask_all[index])
        guide = poutine.trace(model.guide).get_trace(x, mask)
        replayed = poutine.trace(poutine.replay(model.model, trace=guide)).get_trace(x, mask)
        for t in range(x.shape[1]):
            site = replayed.nodes[f"x_{t}"]
            per_key = site["fn"].base_dist.log_prob(site["value"])  # [B, 88]
            silent_total += float((per_key[:, silent_keys].sum(-1) * mask[:, t]).sum())
        bounds.append(ELBO(model, mean_field=True)(x, mask).bound)
        lengths.append(mask.sum(1))
    bounds, lengths = torch.cat(bounds), torch.cat(lengths).double()
    return {
        "elbo_total_over_steps": float(bounds.sum() / lengths.sum()),
        "elbo_mean_of_per_piece": float((bounds / lengths).mean()),
        "silent_keys_nats_per_step": silent_total / float(lengths.sum()),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.music_protocol", description=__doc__.split("\n")[0]
    )
    parser.add_argument("run_dir", help="a finished run folder of a polyphonic music experiment")
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    run_dir = check_run_folder(args.run_dir)
    config = check_config(read_config_json(run_dir / "config.json"))
    data, model, objective = build_experiment(config)
    if not data.binary or data.obs_dim != 88:
        raise ValueError(f"run_dir {run_dir} is not a run on an 88-key music set (data: {data.description})")
    load_best(run_dir, objective)
    pyro.set_rng_seed(args.seed)
    silent = data.train[0][data.train[1]].sum(0) == 0
    result = {
        "command": "python -m ppl_models.experiments.studies.music_protocol "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "run_dir": str(run_dir),
        "seed": args.seed,
        "data": data.description,
        "splits": {
            name: split_summary(*split)
            for name, split in (("train", data.train), ("valid", data.valid), ("test", data.test))
        },
        "silent_keys_in_training": int(silent.sum()),
        "test": normalisations(model, *data.test, silent),
    }
    write_results(args.out, result)
    print(result)
    return result


if __name__ == "__main__":
    main()

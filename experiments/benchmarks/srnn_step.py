"""Benchmark of one SRNN training step: ours through Pyro vs the same ELBO written directly in torch.

Shapes: batch 20, T = 100, 88 binary keys (piano rolls), smoothing guide with Res_q, at two
sizes: Pyro's ``examples/dmm.py`` defaults mapped onto SRNN (``z`` 100, RNNs 600, nets of 200
units) and the SRNN paper's music sizes (``z`` 100, GRUs 300, nets of 500 units).

Every method computes the same analytic-KL ELBO (one sample) over the *same* modules and then
takes one Adam step:

* ``torch``: a hand-written loop over time calling the model's nets directly (no Pyro);
* ``ours``: :class:`ppl_models.inference.objectives.ELBO` (``mean_field=True``), what the training loop runs;
* ``ours graphed`` (CUDA only): the same step recorded as a CUDA graph
  (:meth:`ppl_models.inference.training.GraphedCall.training_step`, Adam with ``capturable=True``);
* ``pyro svi``: ``pyro.infer.SVI(model.model, model.guide, Adam, TraceMeanField_ELBO())``.

Methods run round-robin after warm-up; best and median of ``--repeats`` are reported, with the
ratio of each median to the torch median. One CPU thread (set before torch loads).

Usage::

    python -m ppl_models.experiments.benchmarks.srnn_step                 # both sizes (a minute or two)
    python -m ppl_models.experiments.benchmarks.srnn_step --quick         # smoke configuration
    python -m ppl_models.experiments.benchmarks.srnn_step --device cuda --out srnn_step.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import pyro
import torch
from pyro.infer import SVI, TraceMeanField_ELBO
from torch.nn import functional as F

from ppl_models import SRNN
from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats, time_repeats
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.objectives import ELBO
from ppl_models.inference.training import GraphedCall

__all__ = ["SIZES", "direct_elbo", "main"]

SIZES = {
    "dmm defaults": {"latent_dim": 100, "rnn_dim": 600, "hidden_dim": 200},
    "srnn paper": {"latent_dim": 100, "rnn_dim": 300, "hidden_dim": 500},
}


def _gaussian_kl(mean_q, log_var_q, mean_p, log_var_p) -> torch.Tensor:
    """``KL(N(mean_q, e^log_var_q) || N(mean_p, e^log_var_p))`` summed over the last dim."""
    return 0.5 * (log_var_p - log_var_q + (log_var_q.exp() + (mean_q - mean_p) ** 2) / log_var_p.exp() - 1).sum(-1)


def direct_elbo(model: SRNN, x: torch.Tensor) -> torch.Tensor:
    """The per-sequence analytic-KL ELBO ``[B]`` of a Bernoulli SRNN with all steps valid, in plain torch."""
    batch, steps, _ = x.shape
    mask = torch.ones(batch, steps, dtype=torch.bool, device=x.device)
    d, _ = model.rnn(F.pad(x, (0, 0, 1, 0))[:, :-1])
    a = model.inference_features(d, x, mask)
    d, a, xt = d.transpose(0, 1), a.transpose(0, 1), x.transpose(0, 1)
    prior_in, emission_in = model.prior_net.project(d), model.emission_net.project(d)
    posterior_in = model.posterior_net.project(a)
    z = x.new_zeros(batch, model.latent_dim)
    elbo = x.new_zeros(batch)
    for t in range(steps):
        mean_p, log_var_p = model.prior_net(z, prior_in[t]).chunk(2, -1)
        mean_q, log_var_q = model.posterior_net(z, posterior_in[t]).chunk(2, -1)
        if model.residual:
            mean_q = mean_q + mean_p
        z = mean_q + (0.5 * log_var_q).exp() * torch.randn_like(mean_q)
        logits = model.emission_net(z, emission_in[t])
        log_lik = -F.binary_cross_entropy_with_logits(logits, xt[t], reduction="none").sum(-1)
        elbo = elbo + log_lik - _gaussian_kl(mean_q, log_var_q, mean_p, log_var_p)
    return elbo


def _steps(model, x):
    """``{method: zero-argument callable taking one training step}`` over the same model."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    objective = ELBO(model, mean_field=True)
    pyro.clear_param_store()
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 1e-4}), TraceMeanField_ELBO(max_plate_nesting=1))
    steps_total = x.shape[0] * x.shape[1]

    def torch_step():
        optimizer.zero_grad(set_to_none=True)
        loss = -direct_elbo(model, x).sum() / steps_total
        loss.backward()
        optimizer.step()

    def ours_step():
        optimizer.zero_grad(set_to_none=True)
        objective(x).loss.backward()
        optimizer.step()

    methods = {"torch": torch_step, "ours": ours_step, "pyro svi": lambda: svi.step(x)}
    if x.is_cuda:  # the same step recorded once as a CUDA graph and replayed
        graph_optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True)
        graphed = GraphedCall.training_step(lambda x: objective(x).loss, graph_optimizer, (x,))
        methods["ours graphed"] = lambda: graphed(x)
    return methods


def run(size: dict, *, batch: int, steps: int, repeats: int, device: str, seed: int = 0) -> dict:
    """Round-robin timings of the three methods for one model size."""
    torch.manual_seed(seed)
    pyro.set_rng_seed(seed)
    model = SRNN(88, **size).to(device)
    x = (torch.rand(batch, steps, 88, device=device) < 0.1).float()
    methods = _steps(model, x)
    for fn in methods.values():  # warm-up
        time_repeats(fn, 2, device)
    times = {name: [] for name in methods}
    for _ in range(repeats):
        for name, fn in methods.items():
            times[name] += time_repeats(fn, 1, device)[0]
    reference = statistics.median(times["torch"])
    rows = {name: {**stats(t), "ratio_to_torch": statistics.median(t) / reference} for name, t in times.items()}
    return {"size": size, "batch": batch, "steps": steps, "device": device, "methods": rows}


def print_report(results: dict) -> None:
    for name, res in results["sizes"].items():
        print(f"\n{name} {res['size']}: batch {res['batch']}, T={res['steps']}, 88 keys, {res['device']}")
        print(f"  {'method':<10}{'best s':>10}{'median s':>11}{'median / torch':>16}")
        for method, row in res["methods"].items():
            print(f"  {method:<10}{row['best_s']:>10.4f}{row['median_s']:>11.4f}{row['ratio_to_torch']:>16.3f}")
    print(f"\nload average {results['load_average']}, torch threads {results['machine']['torch_threads']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps per method (round-robin)")
    parser.add_argument("--quick", action="store_true", help="tiny configuration that finishes in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    torch.set_num_threads(1)
    sizes = {"quick": {"latent_dim": 8, "rnn_dim": 16, "hidden_dim": 16}} if args.quick else SIZES
    batch, steps, repeats = (4, 10, 2) if args.quick else (20, 100, args.repeats)
    results = {
        "machine": machine_info(args.device),
        "sizes": {
            name: run(size, batch=batch, steps=steps, repeats=repeats, device=args.device)
            for name, size in sizes.items()
        },
        "load_average": load_average(),
    }
    print_report(results)
    if args.out is not None:
        module = "ppl_models.experiments.benchmarks.srnn_step"
        write_json(args.out, {**results, **script_provenance(module, argv, (0,))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

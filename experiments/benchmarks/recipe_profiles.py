"""A profile of each paper recipe's training epoch: seconds per epoch, where a step's time goes, and a fused-RNN limit.

Each recipe of :data:`RECIPES` is built as training builds it: its TOML file, ``build_experiment`` (or
``build_supervised``) after the recipe's seed, and a :class:`~ppl_models.inference.training.Trainer` on its training
and validation splits with its ``[train]`` settings, on the CPU, with no run folder. Measured, in one process:

* ``--steps`` training steps, each the trainer's own (``Trainer._batch`` and ``Trainer._train_step``, in the epoch's
  batch order; with ``[train] streams`` each batch starts from the state the previous one ended in, as the trainer
  does), after one warm-up step, timed round-robin with the *limit*: one forward and backward pass (no optimizer) of
  a fused ``nn.GRU`` (``nn.LSTM`` for the PF-LSTM) over the first batch, input size the observation size, hidden size
  the recipe's recurrent size, at ``B K`` rows where the objective carries ``K`` particles;
* :data:`PROFILED_STEPS` more steps under ``torch.profiler``, the fastest kept (the least disturbed by other
  processes): every operation's self CPU time, grouped into :data:`CATEGORIES`, and the FLOPs of the matrix
  products; the rest of that step's wall time is "Python and dispatch overhead";
* one more step under ``cProfile``, where Pyro is on the path: the self time of Pyro's own functions and the
  cumulative time of its outermost poutine call (cProfile slows Python, so both read high);
* the trainer's validation pass (``validation_bound``) on ``--valid-batches`` of its length-sorted batches, spread
  over the order, each row cut to its first ``--valid-step-cap`` steps, once each, with no warm-up;
* a ``[2048, 2048]`` matrix product, best of 10 before the recipes and 10 after: the peak the matrix products'
  GFLOP/s are read against (where other processes slowed all 20, the peak reads low and a fraction above 1 is possible),
  and the step's *floor*, its matrix products' FLOPs at that peak (``matmul_floor_s``).

Extrapolated, not run: the training part of an epoch (median step x batches per epoch), the full validation pass
(measured seconds x the validation set's padded cells, rows x longest steps of each batch, over those measured) and
the epoch (training + validation / ``valid_every``). Not counted: checkpoints, the monitor, the PF-RNN's BatchNorm
refresh before a validation, and the model's ``initialize`` (PSRNN's two-stage regression), which is not run: the
parameters' values do not change a step's cost.

Usage::

    python -m ppl_models.experiments.benchmarks.recipe_profiles --out docs/results/recipe_profiles_cpu.json
    python -m ppl_models.experiments.benchmarks.recipe_profiles --quick      # smoke configuration (tiny shapes)
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyro
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from ppl_models.experiments.benchmarks.timing import load_average, machine_info, stats, time_repeats
from ppl_models.experiments.build import build_experiment
from ppl_models.experiments.claims.provenance import script_provenance
from ppl_models.experiments.config import load_config
from ppl_models.experiments.registry import experiment_config
from ppl_models.experiments.supervised import build_supervised, is_supervised, load_supervised_config
from ppl_models.inference.atomic_files import write_json
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.inference.training.batches import length_batches
from ppl_models.inference.training.carried_state import detached
from ppl_models.inference.training.validation_pass import validation_bound

__all__ = ["RECIPES", "CATEGORIES", "OVERHEAD", "categorize", "main"]


@dataclass(frozen=True)
class Recipe:
    """What the limit of a registered experiment is: its fused cell, where its config gives the recurrent size and the
    particles (``(section, key)``), and the ``--set`` overrides of the smoke configuration (space-separated)."""

    cell: str
    hidden: tuple[str, str]
    particles: tuple[str, str] | None = None
    quick: str = ""


_SRNN_QUICK = "model.latent_dim=4 model.rnn_dim=8 model.hidden_dim=8 model.feature_dim=8"
_PSRNN_QUICK = "model.num_features=40 model.state_dim=4 model.obs_features=4"
_PFRNN_QUICK = "data.num_train=24 data.num_valid=16 data.num_test=8 data.steps=12 train.batch_size=8"
RECIPES = {
    "srnn-authors-jsb": Recipe("gru", ("model", "rnn_dim"), quick=_SRNN_QUICK),
    "srnn-authors-nottingham": Recipe("gru", ("model", "rnn_dim"), quick=_SRNN_QUICK),
    "psrnn-ptb": Recipe("gru", ("model", "state_dim"), quick=_PSRNN_QUICK),
    "psrnn-ptb-authors": Recipe("gru", ("model", "state_dim"), quick=_PSRNN_QUICK),
    "smct-ar1": Recipe("gru", ("model", "d_model"), ("objective", "num_particles"), "model.d_model=4"),
    "pfrnn-paper-maze10": Recipe(
        "lstm", ("model", "hidden_size"), ("model", "num_particles"), _PFRNN_QUICK + " model.hidden_size=8"
    ),
}

#: steps profiled per recipe (the fastest is kept; one in the smoke configuration)
PROFILED_STEPS = 3
#: the label of the trainer's batch building (indexing, trimming) inside a profiled step
BATCH_LABEL = "recipe_profiles: batch"
OVERHEAD = "Python and dispatch overhead"
_RANDOM = {"normal_", "uniform_", "multinomial", "bernoulli_", "bernoulli", "randn", "rand", "randint", "randperm"}
_RANDOM |= {"exponential_", "random_", "normal", "randn_like", "rand_like", "_standard_gamma", "poisson"}
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "mv", "addmv", "dot", "tensordot"}
_MATMUL |= {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu", "_addmm_activation"}
_RNN_OPS = {"gru", "lstm", "rnn_tanh", "rnn_relu", "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"}
_CELL_ELEMENTWISE = {"sigmoid", "sigmoid_", "tanh", "tanh_", "sigmoid_backward", "tanh_backward"}
_PARTICLE = {"gather", "index_select", "index", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_add_"}
_PARTICLE |= {"index_put_", "_index_put_impl_", "cumsum", "searchsorted", "take_along_dim", "masked_select"}
_PARTICLE |= {"index_select_backward", "gather_backward", "index_add", "scatter_reduce", "masked_scatter"}
_DATA = {"copy_", "to", "_to_copy", "clone", "contiguous", "cat", "stack", "_copy_from", "_copy_from_and_resize"}
_VIEWS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like"}
_VIEWS |= {"view", "reshape", "_reshape_alias", "as_strided", "transpose", "permute", "expand", "expand_as", "select"}
_VIEWS |= {"slice", "unsqueeze", "squeeze", "t", "detach", "detach_", "alias", "resize_", "narrow", "split", "chunk"}
_VIEWS |= {"unbind", "flatten", "unflatten", "new_zeros", "new_empty", "new_ones", "new_full", "view_as", "lift_fresh"}
_VIEWS |= {"split_with_sizes", "unsafe_split", "arange", "scalar_tensor", "item", "_local_scalar_dense", "zero_"}
_VIEWS |= {"fill_", "movedim", "diagonal", "_unsafe_view", "numpy_T", "unfold", "result_type", "is_nonzero"}
#: the categories of a profiled step's self CPU time, in the order :func:`categorize` tries them
CATEGORIES: tuple[str, ...] = ("optimizer", "data handling", "autograd engine", "random draws", "matrix products")
CATEGORIES += ("recurrent-cell elementwise", "particle ops", "tensor creation and views", "other elementwise", "other")
_BACKWARD_NODE = re.compile(r"^(autograd::|torch::autograd::|\w+Backward\d*$)")


def categorize(name: str, ancestors: list[str]) -> str:
    """The category of an operation ``name`` (``aten::mm``, a record label) whose enclosing events are ``ancestors``.

    Optimizer: inside ``Optimizer.*`` or a ``_foreach_`` kernel (gradient clipping's too). Data handling: inside the
    trainer's batch building, or copies, ``cat``/``stack`` anywhere. Autograd engine: the backward nodes' own time.
    Random draws before matrix products before the recurrent cells (``sigmoid``/``tanh`` and their backward anywhere,
    and every other operation inside a torch RNN op) before particle ops (gathers, indexing, scatters, cumulative
    sums, ``searchsorted``); ``multinomial`` counts as a random draw.
    """
    op = name.removeprefix("aten::")
    if any(a.startswith("Optimizer.") for a in (name, *ancestors)) or op.startswith("_foreach_"):
        return "optimizer"
    if BATCH_LABEL in (name, *ancestors):
        return "data handling"
    if _BACKWARD_NODE.match(name):
        return "autograd engine"
    if not name.startswith("aten::"):
        return "other"
    if op in _RANDOM:
        return "random draws"
    if op in _MATMUL:
        return "matrix products"
    if op in _RNN_OPS or op in _CELL_ELEMENTWISE or any(a.removeprefix("aten::") in _RNN_OPS for a in ancestors):
        return "recurrent-cell elementwise"
    if op in _PARTICLE:
        return "particle ops"
    if op in _DATA:
        return "data handling"
    return "tensor creation and views" if op in _VIEWS else "other elementwise"


def _ancestors(event) -> list[str]:
    names, parent = [], event.cpu_parent
    while parent is not None:
        names.append(parent.name)
        parent = parent.cpu_parent
    return names


def step_profile(step) -> dict:
    """One call of ``step`` under ``torch.profiler``: seconds per category (:data:`CATEGORIES` and :data:`OVERHEAD`,
    summing to the step's wall time), the top operations, and the matrix products' FLOPs and GFLOP/s."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        start = time.perf_counter()
        step()
        wall = time.perf_counter() - start
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    by_op: dict[tuple[str, str], list] = {}
    flops = flop_seconds = 0.0
    for event in prof.events():
        self_s = event.self_cpu_time_total / 1e6
        category = categorize(event.name, _ancestors(event))
        seconds[category] += self_s
        entry = by_op.setdefault((event.name, category), [0.0, 0])
        entry[0] += self_s
        entry[1] += 1
        if category == "matrix products" and (event.flops or 0) > 0:
            flops += event.flops
            flop_seconds += self_s
    self_total = sum(seconds.values())
    seconds[OVERHEAD] = wall - self_total
    top = sorted(by_op.items(), key=lambda item: -item[1][0])[:12]
    gflop_per_s = flops / flop_seconds / 1e9 if flop_seconds else None
    return {
        "wall_s": wall,
        "profiler_self_total_s": sum(row.self_cpu_time_total for row in prof.key_averages()) / 1e6,
        "categories_s": seconds,
        "shares": {name: value / wall for name, value in seconds.items()},
        "top_ops": [{"op": op, "category": c, "self_s": s, "calls": n} for (op, c), (s, n) in top],
        "matmul_gflop": flops / 1e9,
        "matmul_flop_seconds": flop_seconds,
        "matmul_gflop_per_s": gflop_per_s,
    }


def pyro_profile(step) -> dict | None:
    """One call of ``step`` under ``cProfile``: the self time of Pyro's functions and the cumulative time of the
    outermost (largest) ``pyro.poutine`` call, with their fractions of the step; ``None`` where no poutine handler ran
    (``poutine/util.py``, the validation switches, does not count)."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    step()
    profiler.disable()
    wall = time.perf_counter() - start
    folder = os.path.dirname(pyro.__file__) + os.sep
    rows = [(key, row) for key, row in pstats.Stats(profiler).stats.items() if key[0].startswith(folder)]  # type: ignore[attr-defined]
    handlers = folder + "poutine" + os.sep
    poutine = [(k, row) for k, row in rows if k[0].startswith(handlers) and k[0] != handlers + "util.py"]
    if not poutine:
        return None
    own = sum(row[2] for _, row in rows)
    (outer_key, outer_row) = max(poutine, key=lambda item: item[1][3])
    top = sorted(rows, key=lambda item: -item[1][2])[:8]
    return {
        "cprofile_wall_s": wall,
        "pyro_self_s": own,
        "pyro_self_fraction": own / wall,
        "outermost_poutine_call": f"{os.path.relpath(outer_key[0], folder)}:{outer_key[2]}",
        "outermost_poutine_cumulative_s": outer_row[3],
        "outermost_poutine_fraction": outer_row[3] / wall,
        "top_pyro_functions": [
            {"function": f"{os.path.relpath(k[0], folder)}:{k[2]}", "self_s": r[2], "calls": r[1]} for k, r in top
        ],
    }


def build_trainer(name: str, overrides: list[str]) -> tuple[dict, Trainer]:
    """The recipe's checked configuration and a CPU :class:`Trainer` of its experiment, built as training builds it
    (the model's ``initialize`` not run, no run folder, no monitor)."""
    path = experiment_config(name)
    if is_supervised(path):
        config = load_supervised_config(path, overrides)
        torch.manual_seed(config["seed"])
        _, splits, _, objective = build_supervised(config)
        train, valid, scored = splits["train"], splits["valid"], None
    else:
        config = load_config(path, overrides)
        pyro.set_rng_seed(config["seed"])
        data, _, objective = build_experiment(config)
        train, valid, scored = data.train, data.valid, data.scored_mask("valid")
    trainer = Trainer(objective, train, valid, TrainConfig.from_dict(config["train"]), None, "cpu", valid_scored=scored)
    return config, trainer


class TrainingSteps:
    """The trainer's training steps in its epoch's batch order, one per call (streams carried as the trainer does)."""

    def __init__(self, trainer: Trainer):
        self.trainer, self.batches, self.done, self.carried = trainer, trainer._epoch_batches(), 0, None
        self.streams = trainer.config.streams is not None

    def __call__(self):
        number = self.done % len(self.batches)
        self.done += 1
        with record_function(BATCH_LABEL):
            batch = self.trainer._batch(self.trainer.train_data, self.batches[number])
        if not self.streams:
            return self.trainer._train_step(batch)
        with self.trainer.objective.model.carrying(self.carried if number else None) as box:
            out = self.trainer._train_step(batch)
        self.carried = detached(box.final)
        return out


def limit_step(recipe: Recipe, config: dict, x: torch.Tensor) -> tuple[dict, Callable[[], None]]:
    """The fused limit of ``recipe`` over the batch ``x [B, T, D]`` (repeated ``K`` times for ``K`` particles): its
    shape and a callable running one forward and backward pass."""
    particles = 1 if recipe.particles is None else int(config[recipe.particles[0]][recipe.particles[1]])
    hidden = int(config[recipe.hidden[0]][recipe.hidden[1]])
    x = x.float().repeat_interleave(particles, 0)
    layer = (nn.LSTM if recipe.cell == "lstm" else nn.GRU)(x.shape[-1], hidden, batch_first=True)

    def run() -> None:
        layer.zero_grad(set_to_none=True)
        layer(x)[0].sum().backward()

    shape = {"layer": f"nn.{recipe.cell.upper()}", "rows": x.shape[0], "steps": x.shape[1], "input_size": x.shape[2]}
    return {**shape, "hidden_size": hidden, "particles": particles}, run


def validation_seconds(trainer: Trainer, wanted: int, step_cap: int) -> dict:
    """The trainer's validation pass timed on ``wanted`` of its batches (spread over the length-sorted order, rows cut
    to ``step_cap`` steps) and extrapolated to the whole set by padded cells (rows x longest steps per batch)."""
    data, scored = trainer.valid_data, trainer.valid_scored
    if data is None:
        raise ValueError("the recipe has no validation split to time")
    batches = length_batches(data[1], trainer.config.batch_size)
    longest = [int(data[1][index].sum(1).max()) for index in batches]
    chosen = sorted({round(i * (len(batches) - 1) / max(1, wanted - 1)) for i in range(min(wanted, len(batches)))})
    seconds = cells = 0.0
    for number in chosen:
        index, cut = batches[number], min(longest[number], step_cap)
        rows = tuple(t[index] for t in data)
        rows = (rows[0][:, :cut], rows[1][:, :cut], *(y[:, :cut] if _per_step(y, rows[0]) else y for y in rows[2:]))
        part = None if scored is None else scored[index][:, :cut]
        run = partial(
            validation_bound,
            trainer.objective,
            rows,
            part,
            trainer._batch,
            batch_size=trainer.config.batch_size,
            device=trainer.device,
        )
        seconds, cells = seconds + time_repeats(run, 1)[0][0], cells + len(index) * cut
    trainer.objective.train()
    total = sum(len(index) * steps for index, steps in zip(batches, longest))
    return {
        "batches_total": len(batches),
        "batches_timed": len(chosen),
        "step_cap": step_cap,
        "cells_timed": cells,
        "cells_total": total,
        "seconds_timed": seconds,
        "pass_s_extrapolated": seconds * total / cells,
    }


def _per_step(y: torch.Tensor, x: torch.Tensor) -> bool:
    return y.dim() >= 2 and y.shape[1] == x.shape[1]


def matmul_peak(size: int, repeats: int = 10) -> dict:
    """GFLOP/s of a ``[size, size]`` float32 matrix product at the run's threads (best of ``repeats``)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times, _ = time_repeats(lambda: a @ b, repeats)
    return {"size": size, "gflop_per_s": 2 * size**3 / min(times) / 1e9, **stats(times)}


def profile_recipe(name: str, steps: int, valid_batches: int, step_cap: int, quick: bool) -> dict:
    """Every figure of one recipe (see the module's text)."""
    recipe = RECIPES[name]
    overrides = recipe.quick.split() if quick else []
    config, trainer = build_trainer(name, overrides)
    step = TrainingSteps(trainer)
    first = trainer._batch(trainer.train_data, step.batches[0])
    limit, run_limit = limit_step(recipe, config, first[0])
    step(), run_limit()  # warm-up
    recipe_times, limit_times = [], []
    for _ in range(steps):  # round-robin
        recipe_times += time_repeats(step, 1)[0]
        limit_times += time_repeats(run_limit, 1)[0]
    median = statistics.median(recipe_times)
    validation = validation_seconds(trainer, valid_batches, step_cap)
    profiles = [step_profile(step) for _ in range(1 if quick else PROFILED_STEPS)]
    valid_every, profile = trainer.config.valid_every, min(profiles, key=lambda p: p["wall_s"])
    train_s = median * len(step.batches)
    return {
        "overrides": overrides,
        "train": {
            k: config["train"].get(k) for k in ("batch_size", "streams", "optimizer", "clip_norm", "valid_every")
        },
        "batch_shape": list(first[0].shape),
        "train_rows": len(trainer.train_data[0]),
        "steps_per_epoch": len(step.batches),
        "train_step": stats(recipe_times),
        "limit": {**limit, **stats(limit_times)},
        "ratio_to_limit": median / statistics.median(limit_times),
        "validation": validation,
        "epoch": {
            "train_s_extrapolated": train_s,
            "validation_pass_s_extrapolated": validation["pass_s_extrapolated"],
            "valid_every": valid_every,
            "epoch_s_extrapolated": train_s + validation["pass_s_extrapolated"] / valid_every,
        },
        "profile": {**profile, "profiled_wall_over_median_step": profile["wall_s"] / median},
        "pyro": pyro_profile(step),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", choices=sorted(RECIPES), default=list(RECIPES), metavar="NAME")
    parser.add_argument("--steps", type=int, default=5, help="timed training steps per recipe (after one warm-up)")
    parser.add_argument("--valid-batches", type=int, default=4, help="validation batches timed per recipe")
    parser.add_argument("--valid-step-cap", type=int, default=5000, help="validation rows cut to this many steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--quick", action="store_true", help="tiny shapes that finish in seconds")
    parser.add_argument("--out", type=Path, default=None, help="write the results to this JSON file (atomically)")
    args = parser.parse_args(argv)
    if min(args.steps, args.valid_batches, args.valid_step_cap, args.threads) < 1:
        parser.error("--steps, --valid-batches, --valid-step-cap and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    load_start = load_average()
    peak_start = matmul_peak(256 if args.quick else 2048)
    recipes = {}
    for name in args.recipes:
        recipes[name] = profile_recipe(name, args.steps, args.valid_batches, args.valid_step_cap, args.quick)
        print_recipe(name, recipes[name])
    peak_end = matmul_peak(peak_start["size"])
    peak = max(peak_start["gflop_per_s"], peak_end["gflop_per_s"])
    for row in recipes.values():
        measured = row["profile"]["matmul_gflop_per_s"]
        row["profile"]["matmul_fraction_of_peak"] = None if measured is None else measured / peak
        # the step's matrix products alone at the peak: no step of this model on this machine is faster
        row["profile"]["matmul_floor_s"] = row["profile"]["matmul_gflop"] / peak
    results = {
        "measured": " ".join(" ".join(__doc__.split("\n\n")[1:3]).split()),
        "extrapolated": " ".join(__doc__.split("\n\n")[3].split()),
        **script_provenance("ppl_models.experiments.benchmarks.recipe_profiles", argv),
        "settings": {k: getattr(args, k) for k in ("steps", "valid_batches", "valid_step_cap", "threads", "quick")},
        "machine": machine_info("cpu"),
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "matmul_peak": {"gflop_per_s": peak, "start": peak_start, "end": peak_end},
        "recipes": recipes,
        "wall_s": time.perf_counter() - started,
    }
    if args.out is not None:
        write_json(args.out, results)
    return 0


def print_recipe(name: str, row: dict) -> None:
    epoch, shares = row["epoch"], sorted(row["profile"]["shares"].items(), key=lambda item: -item[1])[:3]
    print(
        f"{name:<24} step {row['train_step']['median_s']:.3f} s x {row['steps_per_epoch']} = "
        f"{epoch['train_s_extrapolated']:.1f} s, validation {epoch['validation_pass_s_extrapolated']:.1f} s, "
        f"limit x{row['ratio_to_limit']:.1f}; " + ", ".join(f"{k} {v:.0%}" for k, v in shares),
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())

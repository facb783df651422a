"""Recommended recipes checked on sources they were not tuned on (``ppl-models reproduce transfer-NAME``).

A recipe (a registered experiment such as ``srnn-hmm``) is tuned on one source. A :class:`Transfer`
trains it unchanged, for its seeds, on other sources whose exact log-likelihood is known, and
splits the held-out gap to the truth (``gap_to_truth`` of ``metrics.json``, nats per step,
negative below the truth) into where the nats go:

* **fit**: the gap on the model's own training sequences (the first ``train_sequences``), what
  capacity and optimisation leave;
* **generalisation**: the held-out gap minus the training gap, what finite data costs;
* **evaluation**: the headline estimator's gap minus that of ``more_particles`` particles on the
  test split (what a cheaper estimate of the same model loses; ``None`` when not measured);
* **bound**: the training objective's bound (e.g. the ELBO) minus the headline estimator, what
  the bound the model was trained on leaves out of the model's own likelihood.

``probes`` change one setting on every source (e.g. four times the epochs): a probe that closes
much of the gap names optimisation as the cause. :func:`run_transfer` writes
``docs/results/transfer_<recipe>.json`` (``transfer/1``: commands, seeds, commit, machine, wall
seconds, and per member one record per seed); :func:`table` renders it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from ppl_models.inference.atomic_files import write_json

from .. import compare
from ..recipes import recipe
from .readings import Stat
from .results_files import results_destination
from .truth_gaps import split_gaps

__all__ = [
    "Transfer",
    "TRANSFERS",
    "TRANSFER_FORMAT",
    "transfer_file",
    "run_transfer",
    "table",
    "shares",
    "shares_mean",
]

#: the ``format`` field of a transfer's results file
TRANSFER_FORMAT = "transfer/1"


@dataclass(frozen=True)
class Transfer:
    """A recipe and the sources it is checked on.

    Attributes:
        recipe: the registered experiment holding the recipe.
        tuned_on: the source the recipe was tuned on, in words.
        sources: ``(label, overrides)`` of sources with a known truth that the recipe was not tuned on.
        estimator: the ``gap_to_truth`` key of the headline estimate (e.g. ``"smc-100"``).
        bound: the key of the training objective's own bound (e.g. ``"elbo"``), or ``None``.
        more_particles: particles of the test-split re-evaluation behind the evaluation share (``None``: none).
        probes: ``(label, overrides)`` changes tried on every source, one at a time.
        seeds: training seeds (the source is fixed by its own data seed).
        train_sequences: training sequences scored for the fit share.
    """

    recipe: str
    tuned_on: str
    sources: tuple[tuple[str, tuple[str, ...]], ...]
    estimator: str
    bound: str | None = None
    more_particles: int | None = None
    probes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    train_sequences: int = 100

    def members(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """``(label, experiment, overrides)`` of every source, with the recipe and with each probe."""
        trainings = (("recipe", ()), *self.probes)
        return tuple(
            (f"{source} / {training}", self.recipe, (*source_sets, *training_sets))
            for source, source_sets in self.sources
            for training, training_sets in trainings
        )


def _toml(value) -> str:
    """``value`` as a TOML inline value (tables, arrays, strings, booleans, numbers)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def recipe_overrides(model: str, *, binary: bool) -> tuple[str, ...]:
    """``--set`` overrides that replace an experiment's model, objective, training and evaluation by the own-data
    recipe of registry model ``model`` (:func:`ppl_models.experiments.recipes.recipe`), keeping its data."""
    config = recipe(model, binary=binary)
    return tuple(f"{section}={_toml(config[section])}" for section in ("model", "objective", "train", "evaluate"))


_SWITCHING = 'model.emission="gaussian"'
_OWN_DATA = "the own-data recipe of ppl-models train {} --data FILE, tuned on no source"
TRANSFERS: dict[str, Transfer] = {
    "srnn-hmm": Transfer(
        "srnn-hmm",
        "HMM rolls with 4 states, 8 keys, persistence 0.9, sharpness 2 (200 training sequences)",
        (
            (
                "HMM rolls: 6 states, 10 keys, persistence 0.85, sharpness 2.5",
                ("data.num_states=6", "data.num_keys=10", "data.persistence=0.85", "data.sharpness=2.5"),
            ),
            (
                "HMM rolls: 5 states, 14 keys, persistence 0.7, sharpness 2",
                ("data.num_states=5", "data.num_keys=14", "data.persistence=0.7", "data.sharpness=2.0"),
            ),
            (
                "switching LG: 3 regimes, 2-d observations, 6 steps",
                ('data={name="switching-lg", num_regimes=3, num_steps=6}', _SWITCHING),
            ),
        ),
        estimator="smc-100",
        bound="elbo",
        probes=(
            ("200 epochs, patience 20", ("train.epochs=200", "train.patience=20")),
            ("SMC-8 objective", ('objective={name="smc", num_particles=8}', "train.kl_start=1.0")),
        ),
    ),
    "smct-demo": Transfer(
        "smct-demo",
        "the SMC Transformer paper's Model I (AR(1), alpha 0.8, sigma^2 0.5), 300 sequences",
        (
            ("Model II (two-component AR mixture)", ('data={name="ar-model-2", num_samples=300}',)),
            ("switching LG: 2 regimes, 2-d observations, 8 steps", ('data={name="switching-lg"}',)),
        ),
        estimator="smc-10",
        more_particles=100,
        probes=(("4x epochs (32)", ("train.epochs=32",)), ("diagonal covariances", ('model.covariance="diagonal"',))),
    ),
    "srnn-own-data": Transfer(
        "srnn-hmm",
        _OWN_DATA.format("srnn"),
        (
            ("HMM rolls: 4 states, 8 keys, persistence 0.9, sharpness 2", recipe_overrides("srnn", binary=True)),
            (
                "switching LG: 3 regimes, 2-d observations, 6 steps",
                (*recipe_overrides("srnn", binary=False), 'data={name="switching-lg", num_regimes=3, num_steps=6}'),
            ),
        ),
        estimator="smc-100",
        bound="elbo",
        probes=(("weight decay 1e-3", ("train.weight_decay=0.001",)),),
    ),
    "lgssm-own-data": Transfer(
        "lgssm-demo",
        _OWN_DATA.format("lgssm"),
        (
            (
                "a random LGSSM: 3 latent, 2 observed dimensions",
                (*recipe_overrides("lgssm", binary=False), "data.latent_dim=3", "data.seed=3"),
            ),
            (
                "switching LG: 2 regimes, 2-d observations, 8 steps",
                (*recipe_overrides("lgssm", binary=False), 'data={name="switching-lg"}'),
            ),
        ),
        estimator="exact",
    ),
}


def transfer_file(name: str) -> str:
    """The file name under ``docs/results/`` of transfer ``name``'s results."""
    return f"transfer_{name.replace('-', '_')}.json"


def run_transfer(
    name: str,
    seeds: int | None,
    run_dir: str | Path,
    results_dir: Path,
    commit: str,
    machine: dict,
    device: str | None = None,
) -> Path:
    """Train transfer ``name``'s members for its first ``seeds`` seeds (default all), split each gap, write the file."""
    transfer = TRANSFERS[name]
    chosen = tuple(range(seeds)) if seeds is not None else transfer.seeds
    path = results_destination(results_dir / transfer_file(name), chosen, Path(run_dir) / transfer_file(name))
    start = time.perf_counter()
    results: dict[str, dict] = {label: {"runs": []} for label, _, _ in transfer.members()}
    commands = []
    for seed in chosen:
        folder = Path(run_dir) / f"seed-{seed}"
        seeded = tuple(
            (label, experiment, (*sets, f"seed={seed}", f"train.seed={seed}"))
            for label, experiment, sets in transfer.members()
        )
        commands += [
            compare.member_command(experiment, sets, compare.member_folder(folder, label))
            for label, experiment, sets in seeded
        ]
        compare.run_suite(seeded, folder, device=device)
        for label, _, _ in seeded:
            results[label]["runs"].append({"seed": seed, **_split(compare.member_folder(folder, label), transfer)})
    record = {
        "format": TRANSFER_FORMAT,
        "transfer": name,
        "recipe": transfer.recipe,
        "tuned_on": transfer.tuned_on,
        "estimator": transfer.estimator,
        "bound": transfer.bound,
        "more_particles": transfer.more_particles,
        "train_sequences": transfer.train_sequences,
        "commands": commands,
        "seeds": list(chosen),
        "commit": commit,
        "machine": machine,
        "wall_seconds": time.perf_counter() - start,
        "results": results,
    }
    write_json(path, record)
    return path


def _split(folder: Path, transfer: Transfer) -> dict:
    """One finished run's gaps: held-out (all test sequences), on training sequences, with more particles."""
    metrics = json.loads((folder / "metrics.json").read_text())
    record = {
        "test": _gaps(metrics["gap_to_truth"]),
        "train": _gaps(split_gaps(folder, transfer.train_sequences, ("train",))["train"]),
        "truth_per_step": metrics["loglik"]["exact (true parameters)"]["per_step"],
        **compare.run_budget(folder),
    }
    if transfer.more_particles:
        more = split_gaps(folder, 10**9, ("test",), {"num_particles": transfer.more_particles})["test"]
        record["test_more_particles"] = _gaps(more)
    return record


def _gaps(gaps: dict) -> dict:
    return {
        name: {"gap_per_step": g["gap_per_step"], "standard_error_per_step": g["standard_error_per_step"]}
        for name, g in gaps.items()
    }


def shares(run: dict, transfer_data: dict) -> dict[str, float | None]:
    """One seed's split of its gap (nats per step, negative below the truth): total, fit, generalisation,
    evaluation and bound (see the module's docstring)."""
    estimator, bound = transfer_data["estimator"], transfer_data["bound"]
    test = run["test"][estimator]["gap_per_step"]
    train = run["train"][estimator]["gap_per_step"]
    more = run.get("test_more_particles")
    evaluation = None
    if more:
        key = next(k for k in more if k.split("-")[0] == estimator.split("-")[0])
        evaluation = test - more[key]["gap_per_step"]
    return {
        "total": test,
        "fit": train,
        "generalisation": test - train,
        "evaluation": evaluation,
        "bound": None if bound is None else run["test"][bound]["gap_per_step"] - test,
    }


def _mean_sd(values: list[float]) -> str:
    stat = Stat(tuple(values))
    return f"{stat.mean:.3f}" if stat.sd is None else f"{stat.mean:.3f} ± {stat.sd:.3f}"


def _where(split: dict[str, list[float]]) -> str:
    """Where most of the mean gap goes: fit (training sequences) or generalisation, in shares of the total (the
    fit's share clipped to [0, 1]: on few sequences the training gap can exceed the held-out one)."""
    total = sum(split["total"]) / len(split["total"])
    if total > -0.05:
        return "within 0.05 of the truth"
    fit = min(max(sum(split["fit"]) / len(split["fit"]) / total, 0.0), 1.0)
    words = f"fit {fit:.0%}, generalisation {1 - fit:.0%}"
    return ("mostly fit (capacity or optimisation): " if fit >= 0.5 else "mostly generalisation: ") + words


def _order(label: str) -> tuple[str, bool]:
    """Rows by source, the recipe's own row first."""
    source, _, training = label.rpartition(" / ")
    return source, training != "recipe"


def table(data: dict) -> list[str]:
    """The Markdown rows of one transfer's file: per source and training, mean ± sd over seeds of each share."""
    estimator = data["estimator"]
    more = f"{estimator} minus {data['more_particles']} particles" if data.get("more_particles") else "-"
    bound = f"{data['bound']} minus {estimator}" if data.get("bound") else "-"
    head = (
        f"Recipe `{data['recipe']}`, tuned on {data['tuned_on']}."
        if data["transfer"] == data["recipe"]
        else f"Recipe `{data['transfer']}` (run through experiment `{data['recipe']}`): {data['tuned_on']}."
    )
    lines = [
        f"{head} Nats per step against the exact "
        f"log-likelihood (negative: below the truth), mean ± sd over seeds {', '.join(map(str, data['seeds']))}; "
        f"estimator {estimator}; fit: the gap on {data['train_sequences']} training sequences.",
        "",
        f"| source / training | gap on test | fit | generalisation | evaluation ({more}) | bound ({bound}) | "
        "best epoch / epochs | where the nats go |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for label in sorted(data["results"], key=_order):
        runs = data["results"][label]["runs"]
        split = {
            key: [shares(run, data)[key] for run in runs]
            for key in ("total", "fit", "generalisation", "evaluation", "bound")
        }
        cells = [
            label,
            *(
                _mean_sd(split[k]) if None not in split[k] else "-"
                for k in ("total", "fit", "generalisation", "evaluation", "bound")
            ),
            ", ".join(f"{run.get('best_epoch', '?')}/{run['epochs']}" for run in runs),
            _where(split),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    recipe = {label: shares_mean(data, label) for label in data["results"] if label.endswith(" / recipe")}
    if recipe:
        low, high = max(recipe.values()), min(recipe.values())
        lines += [
            "",
            f"Trained as recommended, the recipe ends {-low:.3f} to {-high:.3f} nats per step below the "
            f"truth on these {len(recipe)} sources (means over seeds, {estimator}).",
        ]
    return lines


def shares_mean(data: dict, label: str, key: str = "total") -> float:
    """The mean over seeds of one share (default the held-out gap) of member ``label`` of a transfer's file."""
    values = [shares(run, data)[key] for run in data["results"][label]["runs"]]
    return sum(values) / len(values)

"""Names of the models, data sets, objectives and experiments the command line knows.

Each entry is a builder; a configuration section's keys (besides ``name``) are passed
as keyword arguments after a check against the builder's signature, so a misspelt
key is an error naming the allowed ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from inference import ParticleFilter
from inference.objectives import ELBO, IWAE, ExactLikelihood, Objective, SMCBound
from ppl_models import SRNN, GRUBaseline, LinearGaussianSSM

from . import data

__all__ = ["Entry", "MODELS", "DATASETS", "OBJECTIVES", "EXPERIMENTS", "DEMOS", "build", "experiment_config"]

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


@dataclass(frozen=True)
class Entry:
    """A named builder with a one-line description for ``ppl-models list``."""

    build: Callable
    description: str


def _lgssm(obs_dim: int, latent_dim: int = 2, proposal: str = "learned", init_seed: int = 1) -> LinearGaussianSSM:
    """A random stable LGSSM as the starting point of training (``init_seed`` picks it)."""
    generator = torch.Generator().manual_seed(init_seed)
    return LinearGaussianSSM.random(latent_dim, obs_dim, generator=generator, proposal=proposal)


def _smc(model, num_particles: int = 64, resampling: str | None = None, ess_threshold: float = 0.5,
         gradient: str = "reparam", soft_alpha: float = 0.5, fisher_lag: int | None = None) -> SMCBound:  # fmt: skip
    pf = ParticleFilter(num_particles, resampling=resampling, ess_threshold=ess_threshold, gradient=gradient,
                        soft_alpha=soft_alpha, fisher_lag=fisher_lag)  # fmt: skip
    return SMCBound(model, pf)


def _polyphonic(name: str) -> Entry:
    def load(data_dir: str | None = None, train_chunk: int | None = None,
             max_sequences: int | None = None) -> data.SequenceData:  # fmt: skip
        return data.polyphonic(name, data_dir, train_chunk=train_chunk, max_sequences=max_sequences)

    return Entry(load, f"polyphonic music {data.POLYPHONIC[name]} (88-key piano rolls, ../shared/data)")


MODELS = {
    "lgssm": Entry(_lgssm, "linear-Gaussian state-space model with exact Kalman likelihood (baseline, oracle)"),
    "srnn": Entry(SRNN, "SRNN (Fraccaro et al. 2016): GRU + nonlinear SSM, smoothing/filtering guide, Res_q"),
    "gru": Entry(GRUBaseline, "deterministic GRU with SRNN's emission (the SRNN paper's RNN row), exact likelihood"),
}
DATASETS = {
    "lgssm-synthetic": Entry(data.lgssm_synthetic, "sequences from a random stable LGSSM (true parameters known)"),
    **{f"polyphonic-{name}": _polyphonic(name) for name in data.POLYPHONIC},
    "swimmer": Entry(data.swimmer, "Swimmer robot trajectories, 5 observation columns, standardised (real-valued)"),
}
OBJECTIVES = {
    "exact": Entry(ExactLikelihood, "exact log-likelihood (models with log_likelihood, e.g. the LGSSM)"),
    "elbo": Entry(ELBO, "evidence lower bound (Pyro model/guide), optional mean-field KL and KL annealing"),
    "iwae": Entry(IWAE, "importance-weighted bound with K vectorised particles"),
    "smc": Entry(_smc, "log of the particle filter's evidence (FIVO/AESMC, soft, or Fisher identity)"),
}
EXPERIMENTS = {
    "lgssm-demo": Entry(CONFIG_DIR / "lgssm_demo.toml", "LGSSM trained by the SMC bound from a wrong start; all "
                        "estimators vs the exact likelihood; calibration (the README demo)"),  # fmt: skip
    "srnn-demo": Entry(CONFIG_DIR / "srnn_demo.toml", "small SRNN on 60 JSB chorales: ELBO/IWAE/SMC, note "
                       "calibration, generated music (the README demo)"),  # fmt: skip
    **{f"srnn-{name}": Entry(CONFIG_DIR / f"srnn_{name}.toml", f"SRNN smooth+Res_q on {data.POLYPHONIC[name]} "
                             "(the SRNN paper's Table 2; ablation by --set model.inference/residual)")
       for name in data.POLYPHONIC},  # fmt: skip
    "srnn-swimmer": Entry(CONFIG_DIR / "srnn_swimmer.toml", "SRNN with a Gaussian emission on Swimmer "
                          "trajectories (the real-valued path; speech sets are not available offline)"),  # fmt: skip
    "gru-jsb": Entry(CONFIG_DIR / "gru_jsb.toml", "deterministic GRU baseline on JSB (the SRNN paper's RNN row; "
                     "other sets by --set data.name)"),  # fmt: skip
}
#: what ``ppl-models demo`` runs, in order
DEMOS = ("lgssm-demo", "srnn-demo")


def build(table: dict, registry: dict, kind: str, **fixed):
    """Call the builder named by ``table["name"]`` with the table's other keys plus ``fixed``."""
    name = table.get("name")
    if name not in registry:
        raise ValueError(f"{kind}.name must be one of {sorted(registry)}, got {name!r}")
    builder = registry[name].build
    params = {k: v for k, v in table.items() if k != "name"}
    accepted = inspect.signature(builder).parameters
    allowed = [p for p in accepted if p not in fixed and p not in ("self", "model")]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys in [{kind}] for {name!r}: {unknown}; allowed: {allowed}")
    return builder(**fixed, **params)


def build_objective(table: dict, model) -> Objective:
    """The objective of a ``[objective]`` table around ``model``."""
    return build(table, OBJECTIVES, "objective", model=model)


def experiment_config(name_or_path: str) -> Path:
    """Path of an experiment's TOML file, by registered name or as a path."""
    if name_or_path in EXPERIMENTS:
        return EXPERIMENTS[name_or_path].build
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        return path
    raise ValueError(f"experiment must be one of {sorted(EXPERIMENTS)} or a .toml file, got {name_or_path!r}")

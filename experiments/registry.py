"""Names of the models, data sets, objectives and experiments the command line knows (the experiments' table:
:mod:`ppl_models.experiments.experiment_table`; the suites that compare experiments:
:mod:`ppl_models.experiments.suites`).

Each entry is a builder; a configuration section's keys (besides ``name``) are passed
as keyword arguments after a check against the builder's signature, so a misspelt
key is an error naming the allowed ones. The builder of a
:class:`~ppl_models.experiments.spec_builders.SpecEntry` (``file``) takes a spec instead, built from the keys that are
its fields (:mod:`ppl_models.experiments.spec_builders`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from ppl_models import (
    PSRNN,
    SRNN,
    VRNN,
    GRUBaseline,
    LinearGaussianSSM,
    MCDropoutLSTM,
    RecurrentPredictor,
    SMCTransformer,
    TransformerForecaster,
    TwoStageKalmanFilter,
)
from ppl_models.inference import ParticleFilter
from ppl_models.inference.data import FileSpec
from ppl_models.inference.defaults import SMC_OBJECTIVE_PARTICLES
from ppl_models.inference.objectives import ELBO, IWAE, ExactLikelihood, Objective, SMCBound
from ppl_models.inference.protocol import SequenceModel
from ppl_models.inference.squared_error import SquaredError

from .config import check_arguments
from .data import ExperimentData
from .experiment_table import DEMOS, EXPERIMENTS, Entry
from .spec_builders import SpecEntry, spec_call, table_parameters
from .tasks import covid, synthetic_ar
from .tasks.air_quality import air_quality
from .tasks.hmm_rolls import hmm_rolls
from .tasks.lgssm_synthetic import lgssm_synthetic
from .tasks.music import POLYPHONIC, polyphonic
from .tasks.own_file import file_data
from .tasks.ptb_chars import ptb_chars
from .tasks.ring_hmm import ring_hmm
from .tasks.srnn_authors import SRNN_AUTHORS_SETS, srnn_authors
from .tasks.swimmer import swimmer
from .tasks.switching_lg import switching_lg

__all__ = [
    "Entry",
    "MODELS",
    "DATASETS",
    "OBJECTIVES",
    "EXPERIMENTS",
    "DEMOS",
    "build",
    "build_objective",
    "experiment_config",
]


def _lgssm(obs_dim: int, latent_dim: int = 2, proposal: str = "learned", init_seed: int = 1) -> LinearGaussianSSM:
    """A random stable LGSSM as the starting point of training (``init_seed`` picks it)."""
    generator = torch.Generator().manual_seed(init_seed)
    return LinearGaussianSSM.random(latent_dim, obs_dim, generator=generator, proposal=proposal)


def _smc(
    model,
    num_particles: int = SMC_OBJECTIVE_PARTICLES,
    resampling: str | None = None,
    ess_threshold: float = 0.5,
    gradient: str = "reparam",
    soft_alpha: float = 0.5,
    fisher_lag: int | None = None,
) -> SMCBound:
    pf = ParticleFilter(
        num_particles,
        resampling=resampling,
        ess_threshold=ess_threshold,
        gradient=gradient,
        soft_alpha=soft_alpha,
        fisher_lag=fisher_lag,
    )
    return SMCBound(model, pf)


def _polyphonic(name: str) -> Entry:
    def load(
        data_dir: str | None = None, train_chunk: int | None = None, max_sequences: int | None = None
    ) -> ExperimentData:
        return polyphonic(name, data_dir, train_chunk=train_chunk, max_sequences=max_sequences)

    return Entry(load, f"polyphonic music {POLYPHONIC[name]} (88-key piano rolls, ../shared/data)")


def _srnn_authors(name: str) -> Entry:
    def load(
        data_dir: str | None = None,
        max_sequences: int | None = None,
        first_input: str = "given",
        order: str = "file",
    ) -> ExperimentData:
        return srnn_authors(name, data_dir, max_sequences=max_sequences, first_input=first_input, order=order)

    return Entry(
        load,
        f"the SRNN authors' preprocessed {name} rolls (srnn_authors/{SRNN_AUTHORS_SETS[name]}): "
        "100-step training / validation chunks, whole masked test pieces, each after the first input the file "
        "gives (first_input = 'silence': none); order = 'streams' lays the training chunks out stream by stream, "
        "for train.streams = 16",
    )


MODELS = {
    "lgssm": Entry(_lgssm, LinearGaussianSSM.description),
    "srnn": Entry(SRNN, SRNN.description),
    "vrnn": Entry(VRNN, VRNN.description),
    "gru": Entry(GRUBaseline, GRUBaseline.description),
    "psrnn": Entry(PSRNN, PSRNN.description),
    "recurrent": Entry(RecurrentPredictor, RecurrentPredictor.description + " (cell=)"),
    "kf": Entry(TwoStageKalmanFilter, TwoStageKalmanFilter.description),
    "smc-transformer": Entry(SMCTransformer, SMCTransformer.description + ' (objective smc, gradient="stop_weights")'),
    "mc-dropout-lstm": Entry(MCDropoutLSTM, MCDropoutLSTM.description),
    "transformer-forecaster": Entry(TransformerForecaster, TransformerForecaster.description),
}
DATASETS = {
    "file": SpecEntry(
        file_data,
        "your own file (--data PATH): long-format .csv / .parquet (series=, time=, features=), "
        ".npz, or a folder of .mid; split by series or time (split_by=, fractions=) or a split= column; "
        "window=, stride=; real values standardised on the training split",
        FileSpec,
    ),
    "lgssm-synthetic": Entry(lgssm_synthetic, "sequences from a random stable LGSSM (true parameters known)"),
    **{f"polyphonic-{name}": _polyphonic(name) for name in POLYPHONIC},
    **{f"srnn-authors-{name}": _srnn_authors(name) for name in SRNN_AUTHORS_SETS},
    "swimmer": Entry(swimmer, "Swimmer robot trajectories, 5 observation columns, standardised (real-valued)"),
    "ptb-chars": Entry(
        ptb_chars,
        "Penn Treebank characters, one-hot (train_chunk=, eval_chunk=, context=, unseen=): the PSRNN paper's PTB",
    ),
    "air-quality": Entry(
        air_quality,
        "UCI air quality, 5 hourly sensor responses cut into 100-hour sequences, chronological split, standardised",
    ),
    "ring-hmm": Entry(
        ring_hmm,
        "hidden Markov chain on a ring of N points, noisy 2-D emissions: predictive-state "
        "dimension N, exact likelihood known (the PSRNN synthetic source)",
    ),
    "hmm-rolls": Entry(
        hmm_rolls,
        "binary rolls from a discrete HMM (states, keys, persistence, emission "
        "sharpness): exact likelihood by the forward algorithm",
    ),
    "switching-lg": Entry(
        switching_lg,
        "switching linear-Gaussian system (regimes of the transition, short "
        "sequences): exact likelihood by enumerating the regime paths (real-valued)",
    ),
    "ar-model-1": Entry(
        synthetic_ar.ar_model_one_data,
        "SMC Transformer paper's Model I: AR(1), alpha 0.8, "
        "sigma^2 0.5, 1000 x 25 values, 800/100/100 in 5 folds (fold=); true law known",
    ),
    "ar-model-2": Entry(
        synthetic_ar.ar_model_two_data,
        "SMC Transformer paper's Model II: AR(1) with a random "
        "coefficient (0.9 w.p. 0.7, else 0.54), sigma^2 0.3, 5 folds (fold=); true law "
        "known",
    ),
    "ar-model-3": Entry(
        synthetic_ar.ar_model_three_data,
        "our Model III for the SMC Transformer: AR(1) with a "
        "random coefficient (0.95 / 0.3 / -0.6 w.p. 0.5 / 0.3 / 0.2), sigma^2 0.2, folds",
    ),
    "covid-deaths": Entry(
        covid.covid_deaths,
        "JHU COVID-19 daily deaths of US counties with >= 100 deaths, "
        "2020-03-24..05-22 (40 observed + 20 forecast days), per-series scaled (../shared/data)",
    ),
}
OBJECTIVES = {
    "exact": Entry(ExactLikelihood, "exact log-likelihood (models with log_likelihood, e.g. the LGSSM)"),
    "mse": Entry(SquaredError, "one-step mean squared error (one-step predictors; the PSRNN paper's loss)"),
    "elbo": Entry(ELBO, "evidence lower bound (Pyro model/guide), optional mean-field KL and KL annealing"),
    "iwae": Entry(IWAE, "importance-weighted bound with K vectorised particles"),
    "smc": Entry(_smc, "log of the particle filter's evidence (FIVO/AESMC, soft, or Fisher identity)"),
}


def build(table: dict, registry: dict, kind: str, **fixed):
    """Call the builder named by ``table["name"]`` with the table's other keys plus ``fixed``.

    The builder of a :class:`~ppl_models.experiments.spec_builders.SpecEntry` gets its spec built from the keys that
    are the spec's fields (:func:`~ppl_models.experiments.spec_builders.spec_call`). A ``[model]`` name may also be
    ``"package.module:ClassName"``, a :class:`~ppl_models.inference.protocol.SequenceModel` of the user's own, built
    as ``ClassName(obs_dim=..., **keys)``.
    """
    name = table.get("name")
    builder = _user_model(name) if kind == "model" and isinstance(name, str) and ":" in name else None
    if builder is None and name not in registry:
        raise ValueError(
            f"{kind}.name must be one of {sorted(registry)}"
            f"{' or a module:Class path' if kind == 'model' else ''}, got {name!r}"
        )
    spec = None if builder else getattr(registry[name], "spec", None)
    builder = builder or registry[name].build
    params = {k: v for k, v in table.items() if k != "name"}
    allowed = [p for p in table_parameters(builder, spec) if p not in fixed and p not in ("self", "model")]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys in [{kind}] for {name!r}: {unknown}; allowed: {allowed}")
    if spec is not None:
        return spec_call(builder, spec, params, kind, **fixed)
    check_arguments(builder, params, kind)
    return builder(**fixed, **params)


def _user_model(path: str) -> type:
    """The :class:`~ppl_models.inference.protocol.SequenceModel` subclass named by ``"package.module:ClassName"``."""
    module_name, _, class_name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"model.name {path!r}: cannot import {class_name!r} from {module_name!r} ({error})") from None
    if not (isinstance(cls, type) and issubclass(cls, SequenceModel)):
        raise ValueError(f"model.name {path!r} must name a SequenceModel subclass, got {cls!r}")
    return cls


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
    if path.suffix == ".toml" or path.is_file():
        problem = "is not a file" if path.suffix == ".toml" else "is not a .toml file"
        raise ValueError(f"experiment file {name_or_path} {problem}")
    raise ValueError(f"experiment must be one of {sorted(EXPERIMENTS)} or a .toml file, got {name_or_path!r}")

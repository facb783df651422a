"""Names of the models, data sets, objectives and experiments the command line knows (the suites that compare
experiments: :mod:`ppl_models.experiments.suites`).

Each entry is a builder; a configuration section's keys (besides ``name``) are passed
as keyword arguments after a check against the builder's signature, so a misspelt
key is an error naming the allowed ones.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
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
from ppl_models.inference.objectives import ELBO, IWAE, ExactLikelihood, Objective, SMCBound
from ppl_models.inference.protocol import SequenceModel
from ppl_models.inference.squared_error import SquaredError

from .config import check_arguments
from .data import ExperimentData
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
    "experiment_config",
    "SMC_OBJECTIVE_PARTICLES",
]

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
#: ``K`` of the ``smc`` training objective when ``[objective]`` gives no ``num_particles``
SMC_OBJECTIVE_PARTICLES = 64


@dataclass(frozen=True)
class Entry:
    """A named builder with a one-line description for ``ppl-models list``."""

    build: Callable
    description: str


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
    def load(data_dir: str | None = None, max_sequences: int | None = None) -> ExperimentData:
        return srnn_authors(name, data_dir, max_sequences=max_sequences)

    return Entry(
        load,
        f"the SRNN authors' preprocessed {name} rolls (srnn_authors/{SRNN_AUTHORS_SETS[name]}): "
        "100-step training / validation chunks, whole masked test pieces",
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
    "file": Entry(
        file_data,
        "your own file (--data PATH): long-format .csv / .parquet (series=, time=, features=), "
        ".npz, or a folder of .mid; split by series or time (split_by=, fractions=) or a split= column; "
        "window=, stride=; real values standardised on the training split",
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
EXPERIMENTS = {
    "lgssm-demo": Entry(
        CONFIG_DIR / "lgssm_demo.toml",
        "LGSSM trained by the SMC bound from a wrong start; all "
        "estimators vs the exact likelihood; calibration (the README demo)",
    ),
    "srnn-hmm": Entry(
        CONFIG_DIR / "srnn_hmm.toml",
        "SRNN (srnn-demo's model, weight decay, 60 epochs) on binary rolls "
        "from a known HMM: every bound against the exact log-likelihood (the hmm-gap suite)",
    ),
    "srnn-demo": Entry(
        CONFIG_DIR / "srnn_demo.toml",
        "small SRNN on 60 JSB chorales: ELBO/IWAE/SMC, note calibration, generated music (the README demo)",
    ),
    **{
        f"srnn-{name}": Entry(
            CONFIG_DIR / f"srnn_{name}.toml",
            f"SRNN smooth+Res_q on {POLYPHONIC[name]} "
            "(the SRNN paper's Table 2; ablation by --set model.inference/residual)",
        )
        for name in POLYPHONIC
    },
    **{
        f"srnn-authors-{name}": Entry(
            CONFIG_DIR / f"srnn_authors_{name}.toml",
            f"SRNN smooth+Res_q under the "
            f"SRNN authors' protocol on their own {name} file (50 epochs, their "
            "per-sequence test ELBO)",
        )
        for name in SRNN_AUTHORS_SETS
    },
    "srnn-swimmer": Entry(
        CONFIG_DIR / "srnn_swimmer.toml",
        "SRNN with a Gaussian emission on Swimmer "
        "trajectories (the real-valued path; speech sets are not available offline)",
    ),
    "psrnn-demo": Entry(
        CONFIG_DIR / "psrnn_demo.toml",
        "PSRNN from two-stage regression on Swimmer, 60 epochs "
        "of BPTT: MSE before/after, calibration (the README demo)",
    ),
    "psrnn-swimmer": Entry(
        CONFIG_DIR / "psrnn_swimmer.toml",
        "PSRNN from two-stage regression on Swimmer, "
        "refined by BPTT (--set model.rank=, model.num_layers=, model.init=)",
    ),
    "recurrent-swimmer": Entry(
        CONFIG_DIR / "recurrent_swimmer.toml",
        "RNN / GRU / LSTM baseline of the PSRNN paper on Swimmer (--set model.cell=)",
    ),
    "psrnn-ptb": Entry(
        CONFIG_DIR / "psrnn_ptb.toml",
        "PSRNN with a categorical emission on Penn Treebank "
        "characters, BPC and one-step accuracy (the PSRNN paper's Figure 3; --set model.rank=, "
        "model.num_layers=)",
    ),
    "recurrent-ptb": Entry(
        CONFIG_DIR / "recurrent_ptb.toml",
        "LSTM / GRU (20 states) with a categorical emission on Penn Treebank characters (--set model.cell=)",
    ),
    "kf-swimmer": Entry(
        CONFIG_DIR / "kf_swimmer.toml",
        "Kalman filter from two-stage regression on Swimmer, refined by its exact likelihood",
    ),
    "pfrnn-demo": Entry(
        CONFIG_DIR / "pfrnn_demo.toml",
        "small PF-LSTM localizing a robot in the PF-RNN paper's "
        "symmetric 10x10 beacon maze, with the belief picture (the README demo)",
    ),
    "pfrnn-paper-maze10": Entry(
        CONFIG_DIR / "pfrnn_paper_maze10.toml",
        "PF-LSTM-P30 (H=64) under the PF-RNN "
        "paper's own localization protocol (its 10x10 beacon maze, world-frame actions, "
        "80 steps, RMSprop, 800 epochs; 18/27 and PF-GRU by --set)",
    ),
    "rnn-paper-maze10": Entry(
        CONFIG_DIR / "rnn_paper_maze10.toml",
        "LSTM-80 (GRU-86 by --set) under the PF-RNN paper's own localization protocol",
    ),
    "pfrnn-maze10": Entry(
        CONFIG_DIR / "pfrnn_maze10.toml",
        "PF-LSTM (K=30, H=64) localizing a robot in a "
        "symmetric 10x10 maze (the PF-RNN paper's Figure 5; baselines and ablation by --set)",
    ),
    "rnn-maze10": Entry(
        CONFIG_DIR / "rnn_maze10.toml",
        "LSTM-80 (GRU-86 by --set) baseline on the 10x10 maze localization task (the PF-RNN paper's Figure 5)",
    ),
    "pfrnn-air": Entry(
        CONFIG_DIR / "pfrnn_air.toml",
        "PF-LSTM (K=20, H=50) predicting hourly NO2 of UCI air "
        "quality, RMSE and calibration (the PF-RNN paper's AIR; PF-GRU, LSTM, GRU by --set)",
    ),
    "pfrnn-pm25": Entry(
        CONFIG_DIR / "pfrnn_pm25.toml",
        "PF-LSTM (K=20, H=50) predicting hourly Beijing PM2.5, "
        "RMSE and calibration (the PF-RNN paper's PM; PF-GRU, LSTM, GRU by --set)",
    ),
    "pfrnn-regimes": Entry(
        CONFIG_DIR / "pfrnn_regimes.toml",
        "PF-LSTM on a regime-switching source with a known "
        "law: exact NLPD and CRPS of the one-step predictive (LSTM-43, GRU-46 by --set)",
    ),
    "pfrnn-vowels": Entry(
        CONFIG_DIR / "pfrnn_vowels.toml",
        "PF-LSTM (K=20, H=50) classifying the speaker of "
        "JapaneseVowels utterances (needs sktime; PF-GRU, LSTM, GRU by --set)",
    ),
    "gru-jsb": Entry(
        CONFIG_DIR / "gru_jsb.toml",
        "deterministic GRU baseline on JSB (the SRNN paper's RNN row; other sets by --set data.name)",
    ),
    "vrnn-jsb": Entry(
        CONFIG_DIR / "vrnn_jsb.toml",
        "VRNN baseline on JSB with srnn-jsb's parameter count and training settings (other sets by --set data.name)",
    ),
    "smct-demo": Entry(
        CONFIG_DIR / "smct_demo.toml",
        "small SMC Transformer on Model I: predictive against the true law, coverage, PIT, CRPS (the README demo)",
    ),
    "smct-ar1": Entry(
        CONFIG_DIR / "smct_ar1.toml",
        "SMC Transformer (d=16, M=10, Fisher identity + EM) on the "
        "SMC Transformer paper's Model I: Tables 1-2 and Figure 2 figures, PIT, CRPS (--set "
        'data.name="ar-model-2", objective.num_particles=30, data.fold=)',
    ),
    "smct-covid": Entry(
        CONFIG_DIR / "smct_covid.toml",
        "SMC Transformer (d=8, M=10) on COVID-19 daily deaths of "
        "US counties; 20-day forecasts by ppl-models forecast (the paper's section 4.2)",
    ),
    "mcdropout-covid": Entry(
        CONFIG_DIR / "mcdropout_covid.toml",
        "LSTM (d=64) with MC dropout 0.2 on COVID-19 "
        "daily deaths (--set model.dropout=0.5), the SMC Transformer paper's baseline",
    ),
    "mcdropout-ar1": Entry(
        CONFIG_DIR / "mcdropout_ar1.toml",
        "LSTM (d=64) with output MC dropout 0.2 on the SMC "
        'Transformer paper\'s Model I, 50 epochs (--set data.fold=, model.where="full")',
    ),
    "transformer-ar1": Entry(
        CONFIG_DIR / "transformer_ar1.toml",
        "deterministic causal Transformer (d=16) on the "
        "SMC Transformer paper's Model I, 50 epochs (--set data.fold=, data.name=)",
    ),
}


#: what ``ppl-models demo`` runs, in order
DEMOS = ("lgssm-demo", "srnn-demo", "psrnn-demo", "pfrnn-demo", "smct-demo")


def build(table: dict, registry: dict, kind: str, **fixed):
    """Call the builder named by ``table["name"]`` with the table's other keys plus ``fixed``.

    A ``[model]`` name may also be ``"package.module:ClassName"``, a
    :class:`~ppl_models.inference.protocol.SequenceModel`
    of the user's own, built as ``ClassName(obs_dim=..., **keys)``.
    """
    name = table.get("name")
    builder = _user_model(name) if kind == "model" and isinstance(name, str) and ":" in name else None
    if builder is None and name not in registry:
        raise ValueError(
            f"{kind}.name must be one of {sorted(registry)}"
            f"{' or a module:Class path' if kind == 'model' else ''}, got {name!r}"
        )
    builder = builder or registry[name].build
    params = {k: v for k, v in table.items() if k != "name"}
    accepted = inspect.signature(builder).parameters
    allowed = [p for p in accepted if p not in fixed and p not in ("self", "model")]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys in [{kind}] for {name!r}: {unknown}; allowed: {allowed}")
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

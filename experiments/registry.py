"""Names of the models, data sets, objectives and experiments the command line knows.

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
from .tasks.ring_hmm import ring_hmm
from .tasks.swimmer import swimmer
from .tasks.switching_lg import switching_lg

__all__ = ["Entry", "Suite", "MODELS", "DATASETS", "OBJECTIVES", "EXPERIMENTS", "SUITES", "DEMOS", "build",
           "experiment_config", "SMC_OBJECTIVE_PARTICLES"]

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


def _smc(model, num_particles: int = SMC_OBJECTIVE_PARTICLES, resampling: str | None = None, ess_threshold: float = 0.5,
         gradient: str = "reparam", soft_alpha: float = 0.5, fisher_lag: int | None = None) -> SMCBound:  # fmt: skip
    pf = ParticleFilter(num_particles, resampling=resampling, ess_threshold=ess_threshold, gradient=gradient,
                        soft_alpha=soft_alpha, fisher_lag=fisher_lag)  # fmt: skip
    return SMCBound(model, pf)


def _polyphonic(name: str) -> Entry:
    def load(data_dir: str | None = None, train_chunk: int | None = None,
             max_sequences: int | None = None) -> ExperimentData:  # fmt: skip
        return polyphonic(name, data_dir, train_chunk=train_chunk, max_sequences=max_sequences)

    return Entry(load, f"polyphonic music {POLYPHONIC[name]} (88-key piano rolls, ../shared/data)")


MODELS = {
    "lgssm": Entry(_lgssm, LinearGaussianSSM.description),
    "srnn": Entry(SRNN, SRNN.description),
    "vrnn": Entry(VRNN, VRNN.description),
    "gru": Entry(GRUBaseline, GRUBaseline.description),
    "psrnn": Entry(PSRNN, PSRNN.description),
    "recurrent": Entry(RecurrentPredictor, RecurrentPredictor.description + " (cell=)"),
    "kf": Entry(TwoStageKalmanFilter, TwoStageKalmanFilter.description),
    "smc-transformer": Entry(SMCTransformer, SMCTransformer.description + " (objective smc, "
                             "gradient=\"stop_weights\")"),  # fmt: skip
    "mc-dropout-lstm": Entry(MCDropoutLSTM, MCDropoutLSTM.description),
    "transformer-forecaster": Entry(TransformerForecaster, TransformerForecaster.description),
}
DATASETS = {
    "file": Entry(file_data, "your own file (--data PATH): long-format .csv / .parquet (series=, time=, features=), "
                  ".npz, or a folder of .mid; split by series or time (split_by=, fractions=) or a split= column; "
                  "window=, stride=; real values standardised on the training split"),
    "lgssm-synthetic": Entry(lgssm_synthetic, "sequences from a random stable LGSSM (true parameters known)"),
    **{f"polyphonic-{name}": _polyphonic(name) for name in POLYPHONIC},
    "swimmer": Entry(swimmer, "Swimmer robot trajectories, 5 observation columns, standardised (real-valued)"),
    "air-quality": Entry(air_quality, "UCI air quality, 5 hourly sensor responses cut into 100-hour "
                         "sequences, chronological split, standardised"),  # fmt: skip
    "ring-hmm": Entry(ring_hmm, "hidden Markov chain on a ring of N points, noisy 2-D emissions: predictive-state "
                      "dimension N, exact likelihood known (the PSRNN synthetic source)"),  # fmt: skip
    "hmm-rolls": Entry(hmm_rolls, "binary rolls from a discrete HMM (states, keys, persistence, emission "
                       "sharpness): exact likelihood by the forward algorithm"),  # fmt: skip
    "switching-lg": Entry(switching_lg, "switching linear-Gaussian system (regimes of the transition, short "
                          "sequences): exact likelihood by enumerating the regime paths (real-valued)"),  # fmt: skip
    "ar-model-1": Entry(synthetic_ar.ar_model_one_data, "SMC Transformer paper's Model I: AR(1), alpha 0.8, "
                        "sigma^2 0.5, 1000 x 25 values, 800/100/100 in 5 folds (fold=); true law known"),  # fmt: skip
    "ar-model-2": Entry(synthetic_ar.ar_model_two_data, "SMC Transformer paper's Model II: AR(1) with a random "
                        "coefficient (0.9 w.p. 0.7, else 0.54), sigma^2 0.3, 5 folds (fold=); true law "
                        "known"),  # fmt: skip
    "ar-model-3": Entry(synthetic_ar.ar_model_three_data, "our Model III for the SMC Transformer: AR(1) with a "
                        "random coefficient (0.95 / 0.3 / -0.6 w.p. 0.5 / 0.3 / 0.2), sigma^2 0.2, folds"),  # fmt: skip
    "covid-deaths": Entry(covid.covid_deaths, "JHU COVID-19 daily deaths of US counties with >= 100 deaths, "
                          "2020-03-24..05-22 (40 observed + 20 forecast days), per-series scaled (../shared/data)"),
}
OBJECTIVES = {
    "exact": Entry(ExactLikelihood, "exact log-likelihood (models with log_likelihood, e.g. the LGSSM)"),
    "mse": Entry(SquaredError, "one-step mean squared error (one-step predictors; the PSRNN paper's loss)"),
    "elbo": Entry(ELBO, "evidence lower bound (Pyro model/guide), optional mean-field KL and KL annealing"),
    "iwae": Entry(IWAE, "importance-weighted bound with K vectorised particles"),
    "smc": Entry(_smc, "log of the particle filter's evidence (FIVO/AESMC, soft, or Fisher identity)"),
}
EXPERIMENTS = {
    "lgssm-demo": Entry(CONFIG_DIR / "lgssm_demo.toml", "LGSSM trained by the SMC bound from a wrong start; all "
                        "estimators vs the exact likelihood; calibration (the README demo)"),  # fmt: skip
    "srnn-hmm": Entry(CONFIG_DIR / "srnn_hmm.toml", "SRNN (srnn-demo's model, weight decay, 60 epochs) on binary rolls "
                      "from a known HMM: every bound against the exact log-likelihood (the hmm-gap suite)"),
    "srnn-demo": Entry(CONFIG_DIR / "srnn_demo.toml", "small SRNN on 60 JSB chorales: ELBO/IWAE/SMC, note "
                       "calibration, generated music (the README demo)"),  # fmt: skip
    **{f"srnn-{name}": Entry(CONFIG_DIR / f"srnn_{name}.toml", f"SRNN smooth+Res_q on {POLYPHONIC[name]} "
                             "(the SRNN paper's Table 2; ablation by --set model.inference/residual)")
       for name in POLYPHONIC},  # fmt: skip
    "srnn-swimmer": Entry(CONFIG_DIR / "srnn_swimmer.toml", "SRNN with a Gaussian emission on Swimmer "
                          "trajectories (the real-valued path; speech sets are not available offline)"),  # fmt: skip
    "psrnn-demo": Entry(CONFIG_DIR / "psrnn_demo.toml", "PSRNN from two-stage regression on Swimmer, 60 epochs "
                        "of BPTT: MSE before/after, calibration (the README demo)"),  # fmt: skip
    "psrnn-swimmer": Entry(CONFIG_DIR / "psrnn_swimmer.toml", "PSRNN from two-stage regression on Swimmer, "
                           "refined by BPTT (--set model.rank=, model.num_layers=, model.init=)"),  # fmt: skip
    "recurrent-swimmer": Entry(CONFIG_DIR / "recurrent_swimmer.toml", "RNN / GRU / LSTM baseline of the PSRNN "
                               "paper on Swimmer (--set model.cell=)"),  # fmt: skip
    "kf-swimmer": Entry(CONFIG_DIR / "kf_swimmer.toml", "Kalman filter from two-stage regression on Swimmer, "
                        "refined by its exact likelihood"),  # fmt: skip
    "pfrnn-demo": Entry(CONFIG_DIR / "pfrnn_demo.toml", "small PF-LSTM localizing a robot in the PF-RNN paper's "
                        "symmetric 10x10 beacon maze, with the belief picture (the README demo)"),
    "pfrnn-paper-maze10": Entry(CONFIG_DIR / "pfrnn_paper_maze10.toml", "PF-LSTM-P30 (H=64) under the PF-RNN "
                                "paper's own localization protocol (its 10x10 beacon maze, world-frame actions, "
                                "80 steps, RMSprop, 800 epochs; 18/27 and PF-GRU by --set)"),
    "rnn-paper-maze10": Entry(CONFIG_DIR / "rnn_paper_maze10.toml", "LSTM-80 (GRU-86 by --set) under the PF-RNN "
                              "paper's own localization protocol"),
    "pfrnn-maze10": Entry(CONFIG_DIR / "pfrnn_maze10.toml", "PF-LSTM (K=30, H=64) localizing a robot in a "
                          "symmetric 10x10 maze (the PF-RNN paper's Figure 5; baselines and ablation by --set)"),
    "rnn-maze10": Entry(CONFIG_DIR / "rnn_maze10.toml", "LSTM-80 (GRU-86 by --set) baseline on the 10x10 maze "
                        "localization task (the PF-RNN paper's Figure 5)"),
    "pfrnn-air": Entry(CONFIG_DIR / "pfrnn_air.toml", "PF-LSTM (K=20, H=50) predicting hourly NO2 of UCI air "
                       "quality, RMSE and calibration (the PF-RNN paper's AIR; PF-GRU, LSTM, GRU by --set)"),
    "pfrnn-pm25": Entry(CONFIG_DIR / "pfrnn_pm25.toml", "PF-LSTM (K=20, H=50) predicting hourly Beijing PM2.5, "
                        "RMSE and calibration (the PF-RNN paper's PM; PF-GRU, LSTM, GRU by --set)"),
    "pfrnn-regimes": Entry(CONFIG_DIR / "pfrnn_regimes.toml", "PF-LSTM on a regime-switching source with a known "
                           "law: exact NLPD and CRPS of the one-step predictive (LSTM-43, GRU-46 by --set)"),
    "pfrnn-vowels": Entry(CONFIG_DIR / "pfrnn_vowels.toml", "PF-LSTM (K=20, H=50) classifying the speaker of "
                          "JapaneseVowels utterances (needs sktime; PF-GRU, LSTM, GRU by --set)"),
    "gru-jsb": Entry(CONFIG_DIR / "gru_jsb.toml", "deterministic GRU baseline on JSB (the SRNN paper's RNN row; "
                     "other sets by --set data.name)"),  # fmt: skip
    "vrnn-jsb": Entry(CONFIG_DIR / "vrnn_jsb.toml", "VRNN baseline on JSB with srnn-jsb's parameter count and "
                      "training settings (other sets by --set data.name)"),  # fmt: skip
    "smct-demo": Entry(CONFIG_DIR / "smct_demo.toml", "small SMC Transformer on Model I: predictive against the "
                       "true law, coverage, PIT, CRPS (the README demo)"),  # fmt: skip
    "smct-ar1": Entry(CONFIG_DIR / "smct_ar1.toml", "SMC Transformer (d=16, M=10, Fisher identity + EM) on the "
                      "SMC Transformer paper's Model I: Tables 1-2 and Figure 2 figures, PIT, CRPS (--set "
                      "data.name=\"ar-model-2\", objective.num_particles=30, data.fold=)"),  # fmt: skip
    "smct-covid": Entry(CONFIG_DIR / "smct_covid.toml", "SMC Transformer (d=8, M=10) on COVID-19 daily deaths of "
                        "US counties; 20-day forecasts by ppl-models forecast (the paper's section 4.2)"),
    "mcdropout-covid": Entry(CONFIG_DIR / "mcdropout_covid.toml", "LSTM (d=64) with MC dropout 0.2 on COVID-19 "
                             "daily deaths (--set model.dropout=0.5), the SMC Transformer paper's baseline"),
    "mcdropout-ar1": Entry(CONFIG_DIR / "mcdropout_ar1.toml", "LSTM (d=64) with output MC dropout 0.2 on the SMC "
                           "Transformer paper's Model I, 50 epochs (--set data.fold=, model.where=\"full\")"),
    "transformer-ar1": Entry(CONFIG_DIR / "transformer_ar1.toml", "deterministic causal Transformer (d=16) on the "
                             "SMC Transformer paper's Model I, 50 epochs (--set data.fold=, data.name=)"),
}


@dataclass(frozen=True)
class Suite:
    """Runs compared side by side by ``ppl-models suite``: ``(label, experiment, overrides)`` members."""

    members: tuple[tuple[str, str, tuple[str, ...]], ...]
    description: str


def _baselines(*overrides: str) -> tuple:
    """The PSRNN paper's section-6 comparison: KF, RNN, GRU, LSTM, PSRNN, and PSRNN from a random start."""
    return (
        ("KF", "kf-swimmer", overrides),
        *((name, "recurrent-swimmer", (f'model.cell="{cell}"', *overrides))
          for name, cell in (("RNN", "rnn"), ("GRU", "gru"), ("LSTM", "lstm"))),
        ("PSRNN", "psrnn-swimmer", overrides),
        ("PSRNN random init", "psrnn-swimmer", ('model.init="random"', *overrides)),
    )  # fmt: skip


def _ring_hmm_members() -> tuple:
    """The section-6 models (8 states, 60 epochs) on the ring HMM with 20 and 200 training sequences."""
    members = []
    for n in (20, 200):
        common = ('data.name="ring-hmm"', f"data.num_train={n}", "model.state_dim=8", "train.epochs=60",
                  "train.batch_size=10")  # fmt: skip
        members += [(f"{label} / n={n}", experiment, (*extra, *common)) for label, experiment, extra in _baselines()
                    if label != "PSRNN random init"]  # fmt: skip
    return tuple(members)


def _smc_transformer_folds(*overrides: str) -> tuple:
    """The SMC Transformer paper's Tables 1-2 and Figure 2 over 5 folds: SMC-T M=30, MC-dropout LSTMs, Transformer."""
    members = []
    for fold in range(5):
        members += [
            (f"SMC-T M=30 / fold {fold}", "smct-ar1",
             ("objective.num_particles=30", "evaluate.num_particles=30", f"data.fold={fold}", *overrides)),
            (f"LSTM dropout 0.2 output / fold {fold}", "mcdropout-ar1",
             (f"data.fold={fold}", "evaluate.predictive_samples=1000", *overrides)),
            (f"LSTM dropout 0.5 full / fold {fold}", "mcdropout-ar1",
             ("model.dropout=0.5", 'model.where="full"', f"data.fold={fold}", "evaluate.predictive_samples=1000",
              *overrides)),
            (f"Transformer / fold {fold}", "transformer-ar1", (f"data.fold={fold}", *overrides)),
        ]  # fmt: skip
    return tuple(members)


def _pf_lstm_ablation(pf: str = "pfrnn-maze10", rnn: str = "rnn-maze10") -> tuple:
    """The PF-RNN paper's Table 4 on the 10 x 10 maze: PF-LSTM variants, LSTM-BNReLU, LSTM-80 (of pf, rnn)."""
    particles = tuple((f"PF-LSTM-P{k}", pf, (f"model.num_particles={k}",)) for k in (1, 5, 10, 20, 30))
    return (
        *particles,
        ("PF-LSTM-NoResample", pf, ('model.resampling="none"',)),
        ("PF-LSTM-NoBNReLU", pf, ('model.activation="tanh"',)),
        ("PF-LSTM-NoELBO", pf, ("loss.elbo_weight=0",)),
        ("PF-LSTM-ELBOonly", pf, ("loss.pred_weight=0",)),
        # one deterministic particle with BatchNorm + ReLU: an LSTM cell with the paper's activation
        ("LSTM-BNReLU", pf, ("model.num_particles=1", "model.stochastic=false", 'model.resampling="none"',
                             "model.hidden_size=80", "loss.elbo_weight=0")),
        ("LSTM-80", rnn, ()),
    )  # fmt: skip


def _pf_rnn_mazes(pf: str = "pfrnn-maze10", rnn: str = "rnn-maze10") -> tuple:
    """The PF-RNN paper's Figure 5: PF-LSTM, PF-GRU (K=30, H=64), LSTM-80 and GRU-86 on the 10, 18 and 27 mazes."""
    members = []
    for size in (10, 18, 27):
        maze = f"data.maze_size={size}"
        members += [
            (f"PF-LSTM / maze {size}", pf, (maze,)),
            (f"PF-GRU / maze {size}", pf, (maze, 'model.cell="pf-gru"')),
            (f"LSTM-80 / maze {size}", rnn, (maze,)),
            (f"GRU-86 / maze {size}", rnn, (maze, 'model.cell="gru"', "model.hidden_size=86")),
        ]  # fmt: skip
    return tuple(members)


def _srnn_ablation() -> tuple:
    """The SRNN paper's section-4 ablation on JSB: smoothing vs filtering guide, with and without Res_q.

    In the paper's setting, without srnn-jsb's dropout and weight decay.
    """
    return tuple(
        (f"SRNN {inference}{' + Res_q' if residual else ''}", "srnn-jsb",
         (f'model.inference="{inference}"', f"model.residual={str(residual).lower()}", "model.dropout=0",
          "train.weight_decay=0"))
        for inference in ("smooth", "filter") for residual in (True, False)
    )  # fmt: skip


#: srnn-hmm's training before its weight-decay recipe (15 epochs, no weight decay), which the hmm suites keep, so
#: that they reproduce the tables of docs/known_truth.md; a member's own settings come after and win
HMM_EARLIER_TRAINING = ("train.epochs=15", "train.weight_decay=0")

#: the hmm-gap suite's training objectives: label and ``--set`` overrides (the ELBO keeps srnn-hmm's KL ramp)
HMM_OBJECTIVES = (
    ("ELBO", ()),
    ("IWAE-8", ("objective={name=\"iwae\", num_particles=8}", "train.kl_start=1.0")),
    ("SMC-8", ("objective={name=\"smc\", num_particles=8}", "train.kl_start=1.0")),
    ("SMC-8 no resampling", ("objective={name=\"smc\", num_particles=8, resampling=\"none\"}",
                             "train.kl_start=1.0")),
)  # fmt: skip


def _hmm_gap_members(seeds=(0, 1, 2)) -> tuple:
    """GRU, VRNN and SRNN (smooth/filter guide, with/without Res_q) x :data:`HMM_OBJECTIVES` x seeds on srnn-hmm.

    Trained as :data:`HMM_EARLIER_TRAINING`.
    """
    models = [(f"SRNN {guide}{' + Res_q' if residual else ''}",
               (f'model.inference="{guide}"', f"model.residual={str(residual).lower()}"))
              for guide in ("smooth", "filter") for residual in (True, False)]
    models.append(("VRNN", ('model={name="vrnn", latent_dim=16, rnn_dim=64, hidden_dim=64}',)))
    members = []
    for seed in seeds:
        seeded = (*HMM_EARLIER_TRAINING, f"seed={seed}", f"train.seed={seed}")
        members.append((f"GRU / exact / seed {seed}", "srnn-hmm",
                        (*seeded, 'model={name="gru", rnn_dim=64, hidden_dim=64}', 'objective={name="exact"}',
                         'evaluate.estimators=["exact"]')))
        members += [(f"{model} / {objective} / seed {seed}", "srnn-hmm", (*seeded, *model_sets, *objective_sets))
                    for model, model_sets in models for objective, objective_sets in HMM_OBJECTIVES]
    return tuple(members)


#: srnn-hmm's training now: the recipe that brings its SRNN within 0.1 nats per step of the truth
HMM_RECIPE = ("train.weight_decay=0.001", "train.epochs=60")
#: the recipe with early stopping, as first measured (a noisy validation ELBO can stop it too soon)
HMM_RECIPE_PATIENCE = (*HMM_RECIPE, "train.patience=10")

#: the hmm-recipe suite's changes to hmm-gap's SRNN (smooth + Res_q, ELBO, lr 0.01, 15 epochs), one at a time,
#: and the seeds each was run with
HMM_RECIPE_CHANGES = (
    ("weight decay 1e-3, 60 epochs", HMM_RECIPE, range(5)),
    ("weight decay 1e-3, 60 epochs, patience 10", HMM_RECIPE_PATIENCE, range(5)),
    ("SMC-8, weight decay 1e-3, 60 epochs, patience 10", (*HMM_OBJECTIVES[2][1], *HMM_RECIPE_PATIENCE), range(3)),
    ("60 epochs, patience 10", ("train.epochs=60", "train.patience=10"), (0,)),
    ("weight decay 1e-3", ("train.weight_decay=0.001",), (0,)),
    ("weight decay 3e-4, 60 epochs", ("train.weight_decay=0.0003", "train.epochs=60"), (0,)),
    ("weight decay 3e-3, 60 epochs", ("train.weight_decay=0.003", "train.epochs=60"), (0,)),
    ("SMC-8, 60 epochs, patience 10", (*HMM_OBJECTIVES[2][1], "train.epochs=60", "train.patience=10"), (0,)),
    ("SMC-8, weight decay 1e-3", (*HMM_OBJECTIVES[2][1], "train.weight_decay=0.001"), (0,)),
    ("SMC-8, weight decay 1e-4", (*HMM_OBJECTIVES[2][1], "train.weight_decay=0.0001"), (0,)),
    ("SMC-8, dropout 0.3", (*HMM_OBJECTIVES[2][1], "model.dropout=0.3"), (0,)),
    ("2 hidden layers per net", ("model.num_hidden_layers=2",), (0,)),
    ("latent 4", ("model.latent_dim=4",), (0,)),
    ("no KL ramp", ("train.kl_start=1.0",), (0,)),
    ("KL ramp over 300 steps", ("train.kl_anneal_steps=300",), (0,)),
    ("batch 20", ("train.batch_size=20",), (0,)),
    ("batch 5", ("train.batch_size=5",), (0,)),
    ("500 training sequences", ("data.num_train=500",), (0,)),
    ("weight decay 1e-3, 60 epochs, patience 10, 500 training sequences", (*HMM_RECIPE_PATIENCE, "data.num_train=500"),
     (0,)),
    ("weight decay 1e-3, 60 epochs, patience 10, 1000 training sequences",
     (*HMM_RECIPE_PATIENCE, "data.num_train=1000"), (0,)),
    ("lr 0.003, 30 epochs", ("train.lr=0.003", "train.epochs=30"), (0,)),
    ("dropout 0.3", ("model.dropout=0.3",), (0,)),
    ("latent 4, GRU 32", ("model.latent_dim=4", "model.rnn_dim=32", "model.hidden_dim=32"), (0,)),
    ("SMC-32", ("objective={name=\"smc\", num_particles=32}", "train.kl_start=1.0"), (0,)),
    ("1000 training sequences", ("data.num_train=1000",), (0,)),
    ("cosine lr, 30 epochs", ('train.lr_schedule="cosine"', "train.epochs=30"), (0,)),
)  # fmt: skip


def _hmm_recipe_members() -> tuple:
    """hmm-gap's SRNN with each of :data:`HMM_RECIPE_CHANGES`, for its seeds (the baseline is hmm-gap's row)."""
    return tuple((f"SRNN smooth + Res_q / {change} / seed {seed}", "srnn-hmm",
                  (*HMM_EARLIER_TRAINING, *sets, f"seed={seed}", f"train.seed={seed}"))
                 for change, sets, seeds in HMM_RECIPE_CHANGES for seed in seeds)  # fmt: skip


#: other HMM-roll sources than srnn-hmm's (4 states, 8 keys, persistence 0.9, sharpness 2): label and data settings
HMM_SOURCES = (
    ("8 states, 16 keys, persistence 0.8, sharpness 3", ("data.num_states=8", "data.num_keys=16",
                                                        "data.persistence=0.8", "data.sharpness=3.0")),
    ("3 states, 12 keys, persistence 0.95, sharpness 1", ("data.num_states=3", "data.num_keys=12",
                                                         "data.persistence=0.95", "data.sharpness=1.0")),
)  # fmt: skip


def _hmm_source_members(seed: int = 0) -> tuple:
    """GRU and SRNN (smooth guide with and without Res_q, ELBO) of srnn-hmm on each of :data:`HMM_SOURCES`.

    Trained as :data:`HMM_EARLIER_TRAINING`; plus, on every source, the SRNN with :data:`HMM_RECIPE` (with and
    without early stopping), and on the first, ELBO and SMC-8 trained longer, on 1000 sequences, and SMC-8 with
    the recipe.
    """
    seeded = (*HMM_EARLIER_TRAINING, f"seed={seed}", f"train.seed={seed}")
    models = (("GRU / exact", ('model={name="gru", rnn_dim=64, hidden_dim=64}', 'objective={name="exact"}',
                               'evaluate.estimators=["exact"]')),
              ("SRNN smooth + Res_q / ELBO", ()), ("SRNN smooth / ELBO", ("model.residual=false",)))
    switching = ('data={name="switching-lg"}', 'model.emission="gaussian"')  # real-valued, 8 steps; after model=
    sources = (*HMM_SOURCES, ("switching LG", switching))
    source, data_sets = HMM_SOURCES[0]
    changes = [(f"{objective}, 60 epochs, patience 10", (*objective_sets, "train.epochs=60", "train.patience=10"))
               for objective, objective_sets in HMM_OBJECTIVES[:3:2]]  # ELBO and SMC-8
    changes += [(f"{objective}, 1000 training sequences", (*objective_sets, "data.num_train=1000"))
                for objective, objective_sets in HMM_OBJECTIVES[:3:2]]
    changes.append(("SMC-8, weight decay 1e-3, 60 epochs, patience 10",
                    (*HMM_OBJECTIVES[2][1], *HMM_RECIPE_PATIENCE)))
    recipes = tuple((f"{source} / SRNN smooth + Res_q / {change} / seed {seed}", "srnn-hmm",
                     (*seeded, *sets, *data_sets)) for change, sets in changes)
    recipes += tuple((f"{source} / SRNN smooth + Res_q / ELBO, {change} / seed {seed}", "srnn-hmm",
                      (*seeded, *sets, *data_sets)) for source, data_sets in sources
                     for change, sets in (("weight decay 1e-3, 60 epochs", HMM_RECIPE),
                                          ("weight decay 1e-3, 60 epochs, patience 10", HMM_RECIPE_PATIENCE)))
    return recipes + tuple((f"{source} / {model} / seed {seed}", "srnn-hmm", (*seeded, *model_sets, *data_sets))
                           for source, data_sets in sources for model, model_sets in models)  # fmt: skip


SUITES = {
    "psrnn-swimmer": Suite(_baselines(), "KF, RNN, GRU, LSTM and PSRNN (2SR and random start) on Swimmer: "
                           "MSE vs epoch and predictions before/after BPTT (the PSRNN paper's Figure 4)"),  # fmt: skip
    "psrnn-air-quality": Suite(_baselines('data.name="air-quality"', "train.batch_size=13"),
                               "the same comparison on UCI air quality (in place of Mocap and Handwriting, "
                               "not available offline)"),  # fmt: skip
    "psrnn-layers": Suite((("1 layer", "psrnn-swimmer", ()), ("2 layers", "psrnn-swimmer", ("model.num_layers=2",))),
                          "1-layer vs 2-layer PSRNN on Swimmer (the PSRNN paper's Figure 3b)"),
    "psrnn-ring": Suite(_ring_hmm_members(), "KF, RNN, GRU, LSTM and PSRNN with 8 states on the ring HMM (predictive-"
                        "state dimension 4), 20 and 200 training sequences"),  # fmt: skip
    "psrnn-rank": Suite((("PSRNN", "psrnn-swimmer", ()),
                         *((f"rank {r}", "psrnn-swimmer", (f"model.rank={r}",)) for r in (5, 10, 20, 40))),
                        "PSRNN vs factorized PSRNNs of several CP ranks on Swimmer (the PSRNN paper's Figure 3c)"),
    "smct-ar1-folds": Suite(_smc_transformer_folds(), "SMC Transformer (M=30) vs MC-dropout LSTMs and a deterministic "
                            "Transformer on Model I, "
                            "5 folds: predictive MSE, share in the true 80%/95% intervals, coverage, CRPS, mean (sd)"),
    "smct-ar2-folds": Suite(_smc_transformer_folds('data.name="ar-model-2"'),
                            "the same on the SMC Transformer paper's Model II (two-regime AR)"),
    "pfrnn-maze10-ablation": Suite(_pf_lstm_ablation(), "the PF-RNN paper's Table 4 on the 10 x 10 maze: particle "
                                   "counts, no resampling, tanh, no ELBO, ELBO only, LSTM-BNReLU, LSTM-80; "
                                   "last-step pose MSE"),
    "pfrnn-mazes": Suite(_pf_rnn_mazes(), "the PF-RNN paper's Figure 5: PF-LSTM, PF-GRU, LSTM-80 and GRU-86 on the "
                         "10, 18 and 27 mazes; last-step pose MSE (split by --only)"),
    "pfrnn-paper-mazes": Suite(_pf_rnn_mazes("pfrnn-paper-maze10", "rnn-paper-maze10"),
                               "the same four models under the paper's own localization protocol; last-step "
                               "(x, y) MSE in cells, the paper's metric"),
    "pfrnn-paper-ablation": Suite(_pf_lstm_ablation("pfrnn-paper-maze10", "rnn-paper-maze10"),
                                  "the PF-RNN paper's Table 4 on its own 10 x 10 maze protocol"),
    "hmm-gap": Suite(_hmm_gap_members(), "known-truth benchmark: GRU, VRNN, SRNN (smooth/filter, +/- Res_q) x ELBO, "
                     "IWAE-8, SMC-8 with and without resampling x 3 seeds on HMM rolls; each estimate's gap to "
                     "the exact log-likelihood per step"),
    "hmm-recipe": Suite(_hmm_recipe_members(), "SRNN training recipes on HMM rolls, one change at a time from "
                        "hmm-gap's SRNN (weight decay, epochs and early stopping, SMC-8, learning rate, dropout, "
                        "size, data); gap to the truth per step"),
    "hmm-sources": Suite(_hmm_source_members(), "GRU and SRNN (ELBO, smooth guide +/- Res_q) on two more HMM-roll "
                         "sources (more states and keys; weak emissions and long persistence) and on the switching "
                         "LGSSM (Gaussian emission), each also with srnn-hmm's recipe; gap to the truth"),
    "srnn-jsb-ablation": Suite(_srnn_ablation(), "the SRNN paper's ablation on JSB: smooth/filter guide with and "
                               "without Res_q; ELBO, IWAE, SMC per step"),
}  # fmt: skip
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
        raise ValueError(f"{kind}.name must be one of {sorted(registry)}"
                         f"{' or a module:Class path' if kind == 'model' else ''}, got {name!r}")  # fmt: skip
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

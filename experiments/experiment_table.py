"""The registered experiments (``ppl-models train NAME``): each a TOML file of ``experiments/configs`` with a one-line
description for ``ppl-models list``, and the demos among them (``ppl-models demo``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .tasks.music import POLYPHONIC
from .tasks.srnn_authors import SRNN_AUTHORS_SETS

__all__ = ["Entry", "CONFIG_DIR", "EXPERIMENTS", "DEMOS"]

#: the folder of the registered experiments' TOML files
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


@dataclass(frozen=True)
class Entry:
    """A named builder with a one-line description for ``ppl-models list``."""

    build: Callable
    description: str


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
    "psrnn-ptb-authors": Entry(
        CONFIG_DIR / "psrnn_ptb_authors.toml",
        "psrnn-ptb under the PSRNN authors' protocol: 20 carried streams (BPTT 20), test text as one stream, "
        "their two-stage-regression start (fixed widths, 5-character windows, whitened projections), 10 epochs",
    ),
    "recurrent-ptb": Entry(
        CONFIG_DIR / "recurrent_ptb.toml",
        "LSTM / GRU (20 states) with a categorical emission on Penn Treebank characters (--set model.cell=)",
    ),
    "recurrent-ptb-authors": Entry(
        CONFIG_DIR / "recurrent_ptb_authors.toml",
        "recurrent-ptb under the PSRNN authors' protocol (20 carried streams, BPTT 20, test text as one stream), "
        "as psrnn-ptb-authors trains the PSRNN (--set model.cell=)",
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

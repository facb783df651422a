"""Suites: registered experiments compared side by side by ``ppl-models suite NAME``
(:func:`ppl_models.experiments.compare.run_suite`), each a list of ``(label, experiment, overrides)`` members."""

from __future__ import annotations

from dataclasses import dataclass

from .hmm_suite_members import hmm_gap_members, hmm_recipe_members, hmm_source_members

__all__ = ["Suite", "SUITES"]


@dataclass(frozen=True)
class Suite:
    """Runs compared side by side by ``ppl-models suite``: ``(label, experiment, overrides)`` members."""

    members: tuple[tuple[str, str, tuple[str, ...]], ...]
    description: str


def _baselines(*overrides: str) -> tuple:
    """The PSRNN paper's section-6 comparison: KF, RNN, GRU, LSTM, PSRNN, and PSRNN from a random start."""
    return (
        ("KF", "kf-swimmer", overrides),
        *(
            (name, "recurrent-swimmer", (f'model.cell="{cell}"', *overrides))
            for name, cell in (("RNN", "rnn"), ("GRU", "gru"), ("LSTM", "lstm"))
        ),
        ("PSRNN", "psrnn-swimmer", overrides),
        ("PSRNN random init", "psrnn-swimmer", ('model.init="random"', *overrides)),
    )


def _ring_hmm_members() -> tuple:
    """The section-6 models (8 states, 60 epochs) on the ring HMM with 20 and 200 training sequences."""
    members = []
    for n in (20, 200):
        common = (
            'data.name="ring-hmm"',
            f"data.num_train={n}",
            "model.state_dim=8",
            "train.epochs=60",
            "train.batch_size=10",
        )
        members += [
            (f"{label} / n={n}", experiment, (*extra, *common))
            for label, experiment, extra in _baselines()
            if label != "PSRNN random init"
        ]
    return tuple(members)


def _smc_transformer_folds(*overrides: str) -> tuple:
    """The SMC Transformer paper's Tables 1-2 and Figure 2 over 5 folds: SMC-T M=30, MC-dropout LSTMs, Transformer."""
    members = []
    for fold in range(5):
        members += [
            (
                f"SMC-T M=30 / fold {fold}",
                "smct-ar1",
                ("objective.num_particles=30", "evaluate.num_particles=30", f"data.fold={fold}", *overrides),
            ),
            (
                f"LSTM dropout 0.2 output / fold {fold}",
                "mcdropout-ar1",
                (f"data.fold={fold}", "evaluate.predictive_samples=1000", *overrides),
            ),
            (
                f"LSTM dropout 0.5 full / fold {fold}",
                "mcdropout-ar1",
                (
                    "model.dropout=0.5",
                    'model.where="full"',
                    f"data.fold={fold}",
                    "evaluate.predictive_samples=1000",
                    *overrides,
                ),
            ),
            (f"Transformer / fold {fold}", "transformer-ar1", (f"data.fold={fold}", *overrides)),
        ]
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
        (
            "LSTM-BNReLU",
            pf,
            (
                "model.num_particles=1",
                "model.stochastic=false",
                'model.resampling="none"',
                "model.hidden_size=80",
                "loss.elbo_weight=0",
            ),
        ),
        ("LSTM-80", rnn, ()),
    )


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
        ]
    return tuple(members)


def _srnn_ablation() -> tuple:
    """The SRNN paper's section-4 ablation on JSB: smoothing vs filtering guide, with and without Res_q.

    In the paper's setting, without srnn-jsb's dropout and weight decay.
    """
    return tuple(
        (
            f"SRNN {inference}{' + Res_q' if residual else ''}",
            "srnn-jsb",
            (
                f'model.inference="{inference}"',
                f"model.residual={str(residual).lower()}",
                "model.dropout=0",
                "train.weight_decay=0",
            ),
        )
        for inference in ("smooth", "filter")
        for residual in (True, False)
    )


SUITES = {
    "psrnn-swimmer": Suite(
        _baselines(),
        "KF, RNN, GRU, LSTM and PSRNN (2SR and random start) on Swimmer: "
        "MSE vs epoch and predictions before/after BPTT (the PSRNN paper's Figure 4)",
    ),
    "psrnn-air-quality": Suite(
        _baselines('data.name="air-quality"', "train.batch_size=13"),
        "the same comparison on UCI air quality (in place of Mocap and Handwriting, not available offline)",
    ),
    "psrnn-layers": Suite(
        (("1 layer", "psrnn-swimmer", ()), ("2 layers", "psrnn-swimmer", ("model.num_layers=2",))),
        "1-layer vs 2-layer PSRNN on Swimmer (the PSRNN paper's Figure 3b)",
    ),
    "psrnn-ring": Suite(
        _ring_hmm_members(),
        "KF, RNN, GRU, LSTM and PSRNN with 8 states on the ring HMM (predictive-"
        "state dimension 4), 20 and 200 training sequences",
    ),
    "psrnn-rank": Suite(
        (
            ("PSRNN", "psrnn-swimmer", ()),
            *((f"rank {r}", "psrnn-swimmer", (f"model.rank={r}",)) for r in (5, 10, 20, 40)),
        ),
        "PSRNN vs factorized PSRNNs of several CP ranks on Swimmer (the PSRNN paper's Figure 3c)",
    ),
    "psrnn-ptb": Suite(
        (
            ("PSRNN rank 60", "psrnn-ptb", ("model.rank=60",)),
            ("LSTM", "recurrent-ptb", ('model.cell="lstm"',)),
            ("GRU", "recurrent-ptb", ('model.cell="gru"',)),
        ),
        "rank-60 PSRNN vs LSTM and GRU (20 states) on PTB characters: test BPC and one-step accuracy "
        "(the PSRNN paper's Figure 3a)",
    ),
    "smct-ar1-folds": Suite(
        _smc_transformer_folds(),
        "SMC Transformer (M=30) vs MC-dropout LSTMs and a deterministic "
        "Transformer on Model I, "
        "5 folds: predictive MSE, share in the true 80%/95% intervals, coverage, CRPS, mean (sd)",
    ),
    "smct-ar2-folds": Suite(
        _smc_transformer_folds('data.name="ar-model-2"'),
        "the same on the SMC Transformer paper's Model II (two-regime AR)",
    ),
    "pfrnn-maze10-ablation": Suite(
        _pf_lstm_ablation(),
        "the PF-RNN paper's Table 4 on the 10 x 10 maze: particle "
        "counts, no resampling, tanh, no ELBO, ELBO only, LSTM-BNReLU, LSTM-80; "
        "last-step pose MSE",
    ),
    "pfrnn-mazes": Suite(
        _pf_rnn_mazes(),
        "the PF-RNN paper's Figure 5: PF-LSTM, PF-GRU, LSTM-80 and GRU-86 on the "
        "10, 18 and 27 mazes; last-step pose MSE (split by --only)",
    ),
    "pfrnn-paper-mazes": Suite(
        _pf_rnn_mazes("pfrnn-paper-maze10", "rnn-paper-maze10"),
        "the same four models under the paper's own localization protocol; last-step "
        "(x, y) MSE in cells, the paper's metric",
    ),
    "pfrnn-paper-ablation": Suite(
        _pf_lstm_ablation("pfrnn-paper-maze10", "rnn-paper-maze10"),
        "the PF-RNN paper's Table 4 on its own 10 x 10 maze protocol",
    ),
    "hmm-gap": Suite(
        hmm_gap_members(),
        "known-truth benchmark: GRU, VRNN, SRNN (smooth/filter, +/- Res_q) x ELBO, "
        "IWAE-8, SMC-8 with and without resampling x 3 seeds on HMM rolls; each estimate's gap to "
        "the exact log-likelihood per step",
    ),
    "hmm-recipe": Suite(
        hmm_recipe_members(),
        "SRNN training recipes on HMM rolls, one change at a time from "
        "hmm-gap's SRNN (weight decay, epochs and early stopping, SMC-8, learning rate, dropout, "
        "size, data); gap to the truth per step",
    ),
    "hmm-sources": Suite(
        hmm_source_members(),
        "GRU and SRNN (ELBO, smooth guide +/- Res_q) on two more HMM-roll "
        "sources (more states and keys; weak emissions and long persistence) and on the switching "
        "LGSSM (Gaussian emission), each also with srnn-hmm's recipe; gap to the truth",
    ),
    "srnn-jsb-ablation": Suite(
        _srnn_ablation(),
        "the SRNN paper's ablation on JSB: smooth/filter guide with and without Res_q; ELBO, IWAE, SMC per step",
    ),
}

"""The members of the suites on HMM rolls with a known likelihood (``hmm-gap``, ``hmm-recipe``, ``hmm-sources`` of
:data:`ppl_models.experiments.suites.SUITES`): ``(label, experiment, overrides)`` tuples on ``srnn-hmm``."""

from __future__ import annotations

__all__ = ["hmm_gap_members", "hmm_recipe_members", "hmm_source_members"]


#: srnn-hmm's training before its weight-decay recipe (15 epochs, no weight decay), which the hmm suites keep, so
#: that they reproduce the tables of docs/known_truth.md; a member's own settings come after and win
HMM_EARLIER_TRAINING = ("train.epochs=15", "train.weight_decay=0")

#: the hmm-gap suite's training objectives: label and ``--set`` overrides (the ELBO keeps srnn-hmm's KL ramp)
HMM_OBJECTIVES = (
    ("ELBO", ()),
    ("IWAE-8", ('objective={name="iwae", num_particles=8}', "train.kl_start=1.0")),
    ("SMC-8", ('objective={name="smc", num_particles=8}', "train.kl_start=1.0")),
    ("SMC-8 no resampling", ('objective={name="smc", num_particles=8, resampling="none"}', "train.kl_start=1.0")),
)


def hmm_gap_members(seeds=(0, 1, 2)) -> tuple:
    """GRU, VRNN and SRNN (smooth/filter guide, with/without Res_q) x :data:`HMM_OBJECTIVES` x seeds on srnn-hmm.

    Trained as :data:`HMM_EARLIER_TRAINING`.
    """
    models = [
        (
            f"SRNN {guide}{' + Res_q' if residual else ''}",
            (f'model.inference="{guide}"', f"model.residual={str(residual).lower()}"),
        )
        for guide in ("smooth", "filter")
        for residual in (True, False)
    ]
    models.append(("VRNN", ('model={name="vrnn", latent_dim=16, rnn_dim=64, hidden_dim=64}',)))
    members = []
    for seed in seeds:
        seeded = (*HMM_EARLIER_TRAINING, f"seed={seed}", f"train.seed={seed}")
        members.append(
            (
                f"GRU / exact / seed {seed}",
                "srnn-hmm",
                (
                    *seeded,
                    'model={name="gru", rnn_dim=64, hidden_dim=64}',
                    'objective={name="exact"}',
                    'evaluate.estimators=["exact"]',
                ),
            )
        )
        members += [
            (f"{model} / {objective} / seed {seed}", "srnn-hmm", (*seeded, *model_sets, *objective_sets))
            for model, model_sets in models
            for objective, objective_sets in HMM_OBJECTIVES
        ]
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
    (
        "weight decay 1e-3, 60 epochs, patience 10, 500 training sequences",
        (*HMM_RECIPE_PATIENCE, "data.num_train=500"),
        (0,),
    ),
    (
        "weight decay 1e-3, 60 epochs, patience 10, 1000 training sequences",
        (*HMM_RECIPE_PATIENCE, "data.num_train=1000"),
        (0,),
    ),
    ("lr 0.003, 30 epochs", ("train.lr=0.003", "train.epochs=30"), (0,)),
    ("dropout 0.3", ("model.dropout=0.3",), (0,)),
    ("latent 4, GRU 32", ("model.latent_dim=4", "model.rnn_dim=32", "model.hidden_dim=32"), (0,)),
    ("SMC-32", ('objective={name="smc", num_particles=32}', "train.kl_start=1.0"), (0,)),
    ("1000 training sequences", ("data.num_train=1000",), (0,)),
    ("cosine lr, 30 epochs", ('train.lr_schedule="cosine"', "train.epochs=30"), (0,)),
)


def hmm_recipe_members() -> tuple:
    """hmm-gap's SRNN with each of :data:`HMM_RECIPE_CHANGES`, for its seeds (the baseline is hmm-gap's row)."""
    return tuple(
        (
            f"SRNN smooth + Res_q / {change} / seed {seed}",
            "srnn-hmm",
            (*HMM_EARLIER_TRAINING, *sets, f"seed={seed}", f"train.seed={seed}"),
        )
        for change, sets, seeds in HMM_RECIPE_CHANGES
        for seed in seeds
    )


#: other HMM-roll sources than srnn-hmm's (4 states, 8 keys, persistence 0.9, sharpness 2): label and data settings
HMM_SOURCES = (
    (
        "8 states, 16 keys, persistence 0.8, sharpness 3",
        ("data.num_states=8", "data.num_keys=16", "data.persistence=0.8", "data.sharpness=3.0"),
    ),
    (
        "3 states, 12 keys, persistence 0.95, sharpness 1",
        ("data.num_states=3", "data.num_keys=12", "data.persistence=0.95", "data.sharpness=1.0"),
    ),
)


def hmm_source_members(seed: int = 0) -> tuple:
    """GRU and SRNN (smooth guide with and without Res_q, ELBO) of srnn-hmm on each of :data:`HMM_SOURCES`.

    Trained as :data:`HMM_EARLIER_TRAINING`; plus, on every source, the SRNN with :data:`HMM_RECIPE` (with and
    without early stopping), and on the first, ELBO and SMC-8 trained longer, on 1000 sequences, and SMC-8 with
    the recipe.
    """
    seeded = (*HMM_EARLIER_TRAINING, f"seed={seed}", f"train.seed={seed}")
    models = (
        (
            "GRU / exact",
            (
                'model={name="gru", rnn_dim=64, hidden_dim=64}',
                'objective={name="exact"}',
                'evaluate.estimators=["exact"]',
            ),
        ),
        ("SRNN smooth + Res_q / ELBO", ()),
        ("SRNN smooth / ELBO", ("model.residual=false",)),
    )
    switching = ('data={name="switching-lg"}', 'model.emission="gaussian"')  # real-valued, 8 steps; after model=
    sources = (*HMM_SOURCES, ("switching LG", switching))
    source, data_sets = HMM_SOURCES[0]
    changes = [
        (f"{objective}, 60 epochs, patience 10", (*objective_sets, "train.epochs=60", "train.patience=10"))
        for objective, objective_sets in HMM_OBJECTIVES[:3:2]
    ]  # ELBO and SMC-8
    changes += [
        (f"{objective}, 1000 training sequences", (*objective_sets, "data.num_train=1000"))
        for objective, objective_sets in HMM_OBJECTIVES[:3:2]
    ]
    changes.append(("SMC-8, weight decay 1e-3, 60 epochs, patience 10", (*HMM_OBJECTIVES[2][1], *HMM_RECIPE_PATIENCE)))
    recipes = tuple(
        (f"{source} / SRNN smooth + Res_q / {change} / seed {seed}", "srnn-hmm", (*seeded, *sets, *data_sets))
        for change, sets in changes
    )
    recipes += tuple(
        (f"{source} / SRNN smooth + Res_q / ELBO, {change} / seed {seed}", "srnn-hmm", (*seeded, *sets, *data_sets))
        for source, data_sets in sources
        for change, sets in (
            ("weight decay 1e-3, 60 epochs", HMM_RECIPE),
            ("weight decay 1e-3, 60 epochs, patience 10", HMM_RECIPE_PATIENCE),
        )
    )
    return recipes + tuple(
        (f"{source} / {model} / seed {seed}", "srnn-hmm", (*seeded, *model_sets, *data_sets))
        for source, data_sets in sources
        for model, model_sets in models
    )

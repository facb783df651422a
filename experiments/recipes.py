"""Default recipes: how ``ppl-models train MODEL --data FILE`` trains each model on data it has not seen.

A recipe is an experiment configuration without its ``[data]`` section: the model at a moderate
size, the objective that suits it (the exact likelihood where the model has one, the ELBO with a
KL ramp for the variational models, the Fisher-identity SMC bound for the SMC Transformer), and
training to convergence by early stopping on the validation bound (patience 10 within a cap of
200 epochs, so the best epoch is well before the end on most data; the run records its best
epoch). The emission of the models that offer one follows the data: Bernoulli for binary data,
Gaussian otherwise. ``--set`` changes any of it.

What each model can represent is :data:`EMISSIONS`: a model without a Bernoulli emission is refused on
binary data before training (:class:`DataNotRepresentable`). Given the data, a recipe also fits the settings
that depend on the sequences' lengths (:data:`_FITS`): the two-stage-regression horizon of ``psrnn`` and
``kf``, the SMC Transformer's attention window and the Transformer forecaster's learned positions and context;
:func:`check_data` refuses, before training, the user's settings that the data cannot meet.
"""

from __future__ import annotations

import copy

from ppl_models.spectral import window_count

__all__ = [
    "RECIPES",
    "EMISSIONS",
    "EMISSION_MODELS",
    "SUPERVISED_MODELS",
    "DataNotRepresentable",
    "recipe",
    "check_data",
    "binary_refusal",
    "supervised_recipe",
]


class DataNotRepresentable(ValueError):
    """A model cannot represent a user's data (Gaussian-only models on binary rolls, say): refused before training,
    with the reason; a leaderboard over its default models leaves such a model out and says why."""


_TRAIN = {"epochs": 200, "patience": 10, "batch_size": 16, "lr": 0.003, "clip_norm": 10.0, "progress": False}
_EVALUATE = {"num_particles": 100, "iwae_particles": 50, "predictive_samples": 100, "batch_size": 32}
_EXACT = {"objective": {"name": "exact"}, "evaluate": {**_EVALUATE, "estimators": ["exact"]}}
_VARIATIONAL = {
    "objective": {"name": "elbo", "mean_field": True},
    "train": {**_TRAIN, "lr": 0.01, "kl_start": 0.2, "kl_anneal_steps": 200},
    "evaluate": {**_EVALUATE, "estimators": ["elbo", "iwae", "smc"]},
}

#: model registry name -> its recipe (``model``, ``objective``, ``train``, ``evaluate`` sections)
RECIPES = {
    "lgssm": {"model": {"latent_dim": 4}, **_EXACT, "train": {**_TRAIN, "lr": 0.01}},
    "gru": {"model": {"rnn_dim": 64, "hidden_dim": 64}, **_EXACT},
    "recurrent": {"model": {"cell": "gru", "state_dim": 32, "encoder_dim": 32}, **_EXACT},
    "vrnn": {"model": {"latent_dim": 16, "rnn_dim": 64, "hidden_dim": 64}, **_VARIATIONAL},
    "srnn": {
        "model": {"latent_dim": 16, "rnn_dim": 64, "hidden_dim": 64, "inference": "smooth", "residual": True},
        **_VARIATIONAL,
    },
    "smc-transformer": {
        "model": {"d_model": 16, "window": 24},
        "objective": {
            "name": "smc",
            "num_particles": 10,
            "resampling": "multinomial",
            "ess_threshold": 1.0,
            "gradient": "stop_weights",
        },
        "train": {**_TRAIN, "lr": 0.003, "epochs": 100},
        "evaluate": {**_EVALUATE, "estimators": ["smc"], "num_particles": 30},
    },
    "psrnn": {
        "model": {"state_dim": 20, "obs_features": 20, "num_features": 1000, "horizon": 10, "init": "2sr"},
        **_EXACT,
        "train": {**_TRAIN, "lr": 0.001},
    },
    "kf": {"model": {"state_dim": 10, "horizon": 10}, **_EXACT, "train": {**_TRAIN, "lr": 0.001}},
    "mc-dropout-lstm": {"model": {"hidden_size": 64, "dropout": 0.2, "where": "output"}, **_EXACT},
    "transformer-forecaster": {
        "model": {"d_model": 16, "num_layers": 1, "feedforward_dim": 64, "max_len": 512},
        **_EXACT,
    },
}

#: what each model of the collection (:data:`RECIPES` and :data:`SUPERVISED_MODELS`) can represent: the emissions
#: it offers. Binary (0/1) data needs a Bernoulli one: a Gaussian density on 0/1 values grows without bound as its
#: variance shrinks, and it gives no probabilities of 1s to judge. Counts take ``poisson`` or ``negbin`` where a
#: model offers them (:mod:`ppl_models.experiments.own_data` chooses).
EMISSIONS = {
    "lgssm": ("gaussian",),
    "gru": ("gaussian", "bernoulli", "poisson", "negbin"),
    "recurrent": ("gaussian", "categorical"),
    "vrnn": ("gaussian", "bernoulli", "poisson", "negbin"),
    "srnn": ("gaussian", "bernoulli", "poisson", "negbin"),
    "smc-transformer": ("gaussian",),
    "psrnn": ("gaussian", "categorical"),
    "kf": ("gaussian",),
    "mc-dropout-lstm": ("gaussian",),
    "transformer-forecaster": ("gaussian",),
    "pf-lstm": ("gaussian",),
    "pf-gru": ("gaussian",),
}
#: models whose ``emission`` the data decides (Bernoulli for binary data, else Gaussian)
EMISSION_MODELS = tuple(model for model, emissions in EMISSIONS.items() if "bernoulli" in emissions)


def binary_refusal(model: str, emission: str = "gaussian") -> str:
    """The one line that refuses ``model`` (its ``emission``) on binary data."""
    why = "(a Gaussian density on 0/1 values has no bound and gives no probabilities of 1s)"
    if "bernoulli" in EMISSIONS[model]:
        return (
            f"{model}: the data is binary (0/1) and model.emission is {emission!r}, which cannot represent it "
            f'{why}: set model.emission="bernoulli" (the recipe\'s for binary data)'
        )
    return (
        f"{model}: the data is binary (0/1) and the model's emission is Gaussian-only, which cannot represent "
        f"it {why}; the models that take binary data, with a Bernoulli emission: {', '.join(EMISSION_MODELS)}"
    )


def recipe(model: str, *, binary: bool, seed: int = 0, data=None) -> dict:
    """The configuration (without ``[data]``) that trains registry model ``model`` on data of this kind.

    ``binary`` data is refused (:class:`DataNotRepresentable`) unless the model has a Bernoulli emission.
    ``data`` (:class:`~ppl_models.experiments.data.ExperimentData`, optional): fit the settings that depend on its
    sequences' lengths (:data:`_FITS`), or refuse it with the reason.
    """
    if model not in RECIPES:
        raise ValueError(f"model: expected one of {sorted(RECIPES)}, got {model!r}")
    if binary and model not in EMISSION_MODELS:
        raise DataNotRepresentable(binary_refusal(model))
    sections = copy.deepcopy(RECIPES[model])
    config = {
        "name": f"{model}-own-data",
        "seed": seed,
        "device": "auto",
        "model": {"name": model, **sections["model"]},
        "objective": sections["objective"],
        "train": {**_TRAIN, **sections.get("train", {}), "seed": seed},
        "evaluate": sections["evaluate"],
    }
    if model in EMISSION_MODELS:
        config["model"]["emission"] = "bernoulli" if binary else "gaussian"
    if data is not None and model in _FITS:
        _FITS[model](model, config["model"], data)
    return config


def check_data(config: dict, data) -> None:
    """Refuse, before training, a checked configuration of a recipe model (after the user's settings) that
    cannot fit ``data`` (:class:`~ppl_models.experiments.data.ExperimentData`): an emission other than Bernoulli on
    binary data (:class:`DataNotRepresentable`), too few two-stage-regression windows for ``psrnn`` / ``kf``."""
    section = config["model"]
    model = section["name"]
    if data.binary and section.get("emission") != "bernoulli":
        raise DataNotRepresentable(binary_refusal(model, section.get("emission", "gaussian")))
    problem = _two_stage_shortfall(model, section, data.train[1]) if model in ("psrnn", "kf") else None
    if problem:
        raise ValueError(f"model.horizon={section['horizon']}: {problem}; use a smaller horizon or state size")


def _two_stage_shortfall(model: str, section: dict, mask) -> str | None:
    """Why two-stage regression (``psrnn`` from ``init="2sr"``, ``kf``) cannot start from the training split
    ``mask [N, T]`` at ``section``'s horizon, or ``None``: it needs at least one window of ``2 horizon + 1`` steps
    and as many windows as each size it keeps (``state_dim``, and ``obs_features`` for ``psrnn``)."""
    if model == "psrnn" and section["init"] != "2sr":
        return None
    sizes = {
        "state_dim": section["state_dim"],
        **({"obs_features": section["obs_features"]} if model == "psrnn" else {}),
    }
    horizon, lengths = section["horizon"], mask.sum(1)
    windows, need = window_count(mask, horizon), max(1, *sizes.values())
    if windows >= need:
        return None
    kept = ", ".join(f"{name} {value}" for name, value in sizes.items())
    return (
        f"{model}'s two-stage regression with horizon {horizon} needs at least {need} windows of 2 * {horizon} + "
        f"1 = {2 * horizon + 1} steps ({kept}), and the training split gives {windows} ({len(lengths)} sequences "
        f"of {int(lengths.min())} to {int(lengths.max())} steps)"
    )


def _fit_horizon(model: str, section: dict, data) -> None:
    """``psrnn`` / ``kf``: the largest horizon, up to the recipe's, whose windows (``2 horizon + 1`` steps) fit in
    the shortest training sequence (at least 1) and number at least the sizes two-stage regression keeps; ``kf``'s
    state then within ``horizon * D``. None: :class:`DataNotRepresentable` with the reason."""
    mask = data.train[1]
    start = max(1, min(section["horizon"], (int(mask.sum(1).min()) - 1) // 2))
    for horizon in range(start, 0, -1):
        trial = {**section, "horizon": horizon}
        if model == "kf":
            trial["state_dim"] = min(section["state_dim"], horizon * data.obs_dim)
        problem = _two_stage_shortfall(model, trial, mask)
        if problem is None:
            section.update(trial)
            return
    raise DataNotRepresentable(f"{problem}: give more or longer training sequences")


def _longest(data) -> int:
    """The longest sequence of any split of ``data``, in steps."""
    return max(int(getattr(data, split)[1].sum(1).max()) for split in ("train", "valid", "test"))


def _fit_window(model: str, section: dict, data) -> None:
    """The SMC Transformer's attention window: no longer than the longest sequence's past, to which a longer
    window attends all the same (it only holds empty slots)."""
    section["window"] = min(section["window"], max(1, _longest(data) - 1))


def _fit_positions(model: str, section: dict, data) -> None:
    """The Transformer forecaster's learned positions: one for each step of the longest sequence of any split, and a
    context of the longest training sequence, so that no prediction reads a position training never reached."""
    section["max_len"] = max(section["max_len"], _longest(data))
    section["context"] = min(int(data.train[1].sum(1).max()), section["max_len"])


#: recipe model -> ``fit(model, model_section, data)``: its settings that depend on the sequences' lengths
_FITS = {
    "psrnn": _fit_horizon,
    "kf": _fit_horizon,
    "smc-transformer": _fit_window,
    "transformer-forecaster": _fit_positions,
}


#: the supervised models a user's table trains: PF-RNN cells predicting its ``targets`` columns from its features
SUPERVISED_MODELS = ("pf-lstm", "pf-gru")


def supervised_recipe(cell: str, seed: int = 0) -> dict:
    """The supervised configuration (:mod:`ppl_models.experiments.supervised`) that trains PF-RNN ``cell`` on a
    user's table.

    ``data`` is ``{"name": "file"}``: the caller adds ``path``, ``targets`` and the column options
    of :func:`ppl_models.experiments.tasks.file_regression.file_regression`. The model is moderate (hidden
    and encoder size 32, 20 particles, a learned Gaussian scale, so the particle mixture is judged
    for calibration), the loss the paper's ``L_pred + L_ELBO``, training as the other recipes
    (early stopping, patience 10 within 200 epochs) with gradient clipping at 5, Adam 3e-3 and
    batches of 8: Adam moves the learned log-scale by about ``lr`` per step, so with 1e-3 and few
    batches per epoch the scale stayed several times too wide on small tables (under-confident).
    """
    if cell not in SUPERVISED_MODELS:
        raise ValueError(f"cell: expected one of {list(SUPERVISED_MODELS)}, got {cell!r}")
    return {
        "kind": "supervised",
        "name": f"{cell}-own-data",
        "seed": seed,
        "device": "auto",
        "data": {"name": "file"},
        "model": {"cell": cell, "hidden_size": 32, "encoder_size": 32, "num_particles": 20, "learn_scale": True},
        "loss": {"target": "sequence", "pred_weight": 1.0, "elbo_weight": 1.0},
        "train": {**_TRAIN, "batch_size": 8, "lr": 0.003, "clip_norm": 5.0, "seed": seed},
    }

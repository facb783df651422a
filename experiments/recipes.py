"""Default recipes: how ``ppl-models train MODEL --data FILE`` trains each model on data it has not seen.

A recipe is an experiment configuration without its ``[data]`` section: the model at a moderate
size, the objective that suits it (the exact likelihood where the model has one, the ELBO with a
KL ramp for the variational models, the Fisher-identity SMC bound for the SMC Transformer), and
training to convergence by early stopping on the validation bound (patience 10 within a cap of
200 epochs, so the best epoch is well before the end on most data; the run records its best
epoch). The emission of the models that offer one follows the data: Bernoulli for binary data,
Gaussian otherwise. ``--set`` changes any of it.
"""

from __future__ import annotations

import copy

__all__ = ["RECIPES", "EMISSION_MODELS", "SUPERVISED_MODELS", "DataNotRepresentable", "recipe", "supervised_recipe"]


class DataNotRepresentable(ValueError):
    """A model cannot represent a user's data (Gaussian-only models on binary rolls, say): refused before training,
    with the reason; a leaderboard over its default models leaves such a model out and says why."""

_TRAIN = {"epochs": 200, "patience": 10, "batch_size": 16, "lr": 0.003, "clip_norm": 10.0, "progress": False}
_EVALUATE = {"num_particles": 100, "iwae_particles": 50, "predictive_samples": 100, "batch_size": 32}
_EXACT = {"objective": {"name": "exact"}, "evaluate": {**_EVALUATE, "estimators": ["exact"]}}
_VARIATIONAL = {"objective": {"name": "elbo", "mean_field": True},
                "train": {**_TRAIN, "lr": 0.01, "kl_start": 0.2, "kl_anneal_steps": 200},
                "evaluate": {**_EVALUATE, "estimators": ["elbo", "iwae", "smc"]}}  # fmt: skip

#: model registry name -> its recipe (``model``, ``objective``, ``train``, ``evaluate`` sections)
RECIPES = {
    "lgssm": {"model": {"latent_dim": 4}, **_EXACT, "train": {**_TRAIN, "lr": 0.01}},
    "gru": {"model": {"rnn_dim": 64, "hidden_dim": 64}, **_EXACT},
    "recurrent": {"model": {"cell": "gru", "state_dim": 32, "encoder_dim": 32}, **_EXACT},
    "vrnn": {"model": {"latent_dim": 16, "rnn_dim": 64, "hidden_dim": 64}, **_VARIATIONAL},
    "srnn": {"model": {"latent_dim": 16, "rnn_dim": 64, "hidden_dim": 64, "inference": "smooth", "residual": True},
             **_VARIATIONAL},
    "smc-transformer": {"model": {"d_model": 16, "window": 24},
                        "objective": {"name": "smc", "num_particles": 10, "resampling": "multinomial",
                                      "ess_threshold": 1.0, "gradient": "stop_weights"},
                        "train": {**_TRAIN, "lr": 0.003, "epochs": 100},
                        "evaluate": {**_EVALUATE, "estimators": ["smc"], "num_particles": 30}},
    "psrnn": {"model": {"state_dim": 20, "num_features": 1000, "horizon": 10, "init": "2sr"}, **_EXACT,
              "train": {**_TRAIN, "lr": 0.001}},
    "kf": {"model": {"state_dim": 10, "horizon": 10}, **_EXACT, "train": {**_TRAIN, "lr": 0.001}},
    "mc-dropout-lstm": {"model": {"hidden_size": 64, "dropout": 0.2, "where": "output"}, **_EXACT},
    "transformer-forecaster": {"model": {"d_model": 16, "num_layers": 1, "feedforward_dim": 64}, **_EXACT},
}  # fmt: skip
#: models whose ``emission`` the data decides (Bernoulli for binary data, else Gaussian)
EMISSION_MODELS = ("gru", "vrnn", "srnn")


def recipe(model: str, *, binary: bool, seed: int = 0) -> dict:
    """The configuration (without ``[data]``) that trains registry model ``model`` on data of this kind."""
    if model not in RECIPES:
        raise ValueError(f"model: expected one of {sorted(RECIPES)}, got {model!r}")
    sections = copy.deepcopy(RECIPES[model])
    config = {"name": f"{model}-own-data", "seed": seed, "device": "auto",
              "model": {"name": model, **sections["model"]}, "objective": sections["objective"],
              "train": {**_TRAIN, **sections.get("train", {}), "seed": seed},
              "evaluate": sections["evaluate"]}  # fmt: skip
    if model in EMISSION_MODELS:
        config["model"]["emission"] = "bernoulli" if binary else "gaussian"
    return config


#: the supervised models a user's table trains: PF-RNN cells predicting its ``targets`` columns from its features
SUPERVISED_MODELS = ("pf-lstm", "pf-gru")


def supervised_recipe(cell: str, seed: int = 0) -> dict:
    """The supervised configuration (:mod:`experiments.supervised`) that trains PF-RNN ``cell`` on a user's table.

    ``data`` is ``{"name": "file"}``: the caller adds ``path``, ``targets`` and the column options
    of :func:`experiments.tasks.file_regression.file_regression`. The model is moderate (hidden
    and encoder size 32, 20 particles, a learned Gaussian scale, so the particle mixture is judged
    for calibration), the loss the paper's ``L_pred + L_ELBO``, training as the other recipes
    (early stopping, patience 10 within 200 epochs) with gradient clipping at 5, Adam 3e-3 and
    batches of 8: Adam moves the learned log-scale by about ``lr`` per step, so with 1e-3 and few
    batches per epoch the scale stayed several times too wide on small tables (under-confident).
    """
    if cell not in SUPERVISED_MODELS:
        raise ValueError(f"cell: expected one of {list(SUPERVISED_MODELS)}, got {cell!r}")
    return {"kind": "supervised", "name": f"{cell}-own-data", "seed": seed, "device": "auto",
            "data": {"name": "file"},
            "model": {"cell": cell, "hidden_size": 32, "encoder_size": 32, "num_particles": 20, "learn_scale": True},
            "loss": {"target": "sequence", "pred_weight": 1.0, "elbo_weight": 1.0},
            "train": {**_TRAIN, "batch_size": 8, "lr": 0.003, "clip_norm": 5.0, "seed": seed}}  # fmt: skip

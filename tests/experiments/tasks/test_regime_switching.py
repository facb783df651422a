"""The regime-switching task: its exact filter and predictive law against hand computations."""

import itertools
import math

import pytest
import torch

from ppl_models.experiments.tasks.regime_switching import (
    RegimeSwitchingLaw,
    evaluate_regime_switching,
    regime_switching,
)
from ppl_models.pf_rnn import PFRNNPredictor


def _normal(value, mean, sd):
    return math.exp(-0.5 * ((value - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


def test_first_step_posterior_is_the_logistic_of_the_evidence():
    # P(s_1 = 1 | x) = N(x; .5, 1) / (N(x; .5, 1) + N(x; -.5, 1)) = sigmoid(2 * 0.5 * x) = sigmoid(0.8)
    posterior = RegimeSwitchingLaw().filter(torch.tensor([[0.8]], dtype=torch.float64))
    assert posterior.item() == pytest.approx(0.6899744811, abs=1e-9)


def test_filter_matches_enumeration_of_every_state_path():
    law = RegimeSwitchingLaw(stay=0.8, input_shift=0.7, input_sd=1.3)
    x = [0.3, -1.2, 2.0]
    joint = {0: 0.0, 1: 0.0}  # p(s_3, x_{1:3}) summed over the 8 paths
    for path in itertools.product((0, 1), repeat=3):
        prob = 0.5
        for t, state in enumerate(path):
            if t:
                prob *= law.stay if state == path[t - 1] else 1 - law.stay
            prob *= _normal(x[t], (2 * state - 1) * law.input_shift, law.input_sd)
        joint[path[-1]] += prob
    posterior = law.filter(torch.tensor([x], dtype=torch.float64))
    assert posterior[0, -1].item() == pytest.approx(joint[1] / (joint[0] + joint[1]), abs=1e-12)


def test_exact_and_moment_matched_predictive_by_hand():
    law = RegimeSwitchingLaw()  # targets N(-2, 0.5^2) in state 0, N(2, 0.5^2) in state 1
    posterior = torch.tensor([0.25], dtype=torch.float64)
    loc, scale, log_weights = law.mixture(posterior)
    from ppl_models.inference.mixture_scores import gaussian_mixture_log_density

    density = 0.75 * _normal(1.0, -2.0, 0.5) + 0.25 * _normal(1.0, 2.0, 0.5)
    value = gaussian_mixture_log_density(torch.tensor([1.0], dtype=torch.float64), loc, scale, log_weights)
    assert value.item() == pytest.approx(math.log(density), abs=1e-9)
    mean, sd, _ = law.moment_matched(posterior)  # mean -2 * .75 + 2 * .25; variance .25 + 4 - 1
    assert mean.item() == pytest.approx(-1.0) and sd.item() == pytest.approx(math.sqrt(3.25))


def test_sampler_follows_the_law():
    law = RegimeSwitchingLaw(target_sds=(0.5, 1.5))
    states, x, y = law.sample(2000, 50, torch.Generator().manual_seed(0))
    assert (states[:, 1:] != states[:, :-1]).double().mean().item() == pytest.approx(0.05, abs=0.005)
    assert states[:, 0].double().mean().item() == pytest.approx(0.5, abs=0.05)
    on = states == 1
    assert x[on].mean().item() == pytest.approx(0.5, abs=0.02) and x[~on].mean().item() == pytest.approx(-0.5, abs=0.02)
    assert y[on].std().item() == pytest.approx(1.5, abs=0.03) and y[~on].mean().item() == pytest.approx(-2.0, abs=0.01)


def test_evaluation_scores_particles_and_baselines():
    data, splits = regime_switching(num_train=4, num_valid=2, num_test=8, steps=6)
    assert splits["test"][0].shape == (8, 6, 1) and splits["test"][2].shape == (8, 6, 1)
    torch.manual_seed(0)
    for cell, options in (("pf-lstm", {"num_particles": 3}), ("gru", {})):
        metrics = evaluate_regime_switching(
            PFRNNPredictor(1, 1, cell=cell, hidden_size=4, encoder_size=8, **options), data
        )
        assert metrics["test_steps"] == 48 and all(math.isfinite(metrics[k]) for k in ("nlpd", "crps", "rmse"))
        assert metrics["truth"]["rmse"] == metrics["best_gaussian"]["rmse"]  # same mean
    assert metrics["mean_ess"] == 1.0 and metrics["particle_sd"] == 0.0  # the GRU: one particle


@pytest.mark.parametrize(
    "options, name",
    [
        ({"num_train": 0}, "num_train"),
        ({"stay": 1.5}, "stay"),
        ({"target_gap": -1.0}, "target_gap"),
        ({"data_seed": -1}, "data_seed"),
    ],
)
def test_bad_options_are_named(options, name):
    with pytest.raises(ValueError, match=name):
        regime_switching(**options)


def test_trained_run_scores_and_reevaluates_with_other_evaluation_settings(tmp_path):
    from ppl_models.experiments import supervised
    from ppl_models.experiments.studies.pfrnn_eval_variants import main, reevaluate

    config = supervised.load_supervised_config(
        "experiments/configs/pfrnn_regimes.toml",
        [
            "data.num_train=8",
            "data.num_valid=4",
            "data.num_test=4",
            "data.steps=5",
            "train.epochs=1",
            "model.hidden_size=4",
            "model.num_particles=3",
            "train.batch_size=4",
        ],
    )
    metrics = supervised.train(config, tmp_path / "run")
    assert metrics["truth"]["nlpd"] < metrics["best_gaussian"]["nlpd"] and metrics["num_particles"] == 3
    again = reevaluate(tmp_path / "run")
    assert again["nlpd"] == pytest.approx(metrics["nlpd"])  # the same checkpoint, seed and draws
    more = reevaluate(tmp_path / "run", ["model.num_particles=7", 'model.eval_randomness="off"'])
    assert math.isfinite(more["crps"]) and more["truth"] == metrics["truth"]
    with pytest.raises(ValueError, match="train.lr"):
        reevaluate(tmp_path / "run", ["train.lr=0.1"])
    assert main([str(tmp_path / "missing")]) == 2

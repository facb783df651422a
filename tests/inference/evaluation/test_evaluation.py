"""ppl_models.inference.evaluate: one call gives every figure, in the data's own units when a standardisation (or its
dict) is given; draws beyond memory, a mask without a valid step and a bad standardizer refused by name."""

import math

import pytest
import torch

from ppl_models import GRUBaseline, LinearGaussianSSM
from ppl_models.inference import evaluate, validation
from ppl_models.inference.data import Standardizer


def lgssm(generator_seed=0):
    return LinearGaussianSSM.random(2, 3, generator=torch.Generator().manual_seed(generator_seed))


def test_exact_estimate_equals_the_kalman_likelihood_per_step_and_per_sequence():
    model = lgssm()
    x, _ = model.sample(num_sequences=6, num_steps=15, generator=torch.Generator().manual_seed(1))
    mask = torch.arange(15) < torch.tensor([15, 12, 15, 9, 15, 4]).unsqueeze(1)
    result = evaluate(model, x, mask, estimators=["exact"], predictive_samples=50, seed=0)
    exact = model.log_likelihood(x, mask).detach().double()
    assert result["loglik"]["exact"]["per_step"] == pytest.approx(float(exact.sum()) / int(mask.sum()), rel=1e-6)
    assert result["loglik"]["exact"]["per_sequence"] == pytest.approx(float(exact.mean()), rel=1e-6)
    assert result["test_steps"] == int(mask.sum()) and result["test_sequences"] == 6
    assert 0 <= result["calibration"]["coverage_0.5"] <= 1
    assert result.predictive.shape == (50, 6, 15, 3)
    idata = result.to_inference_data()
    assert "posterior_predictive" in idata.groups() and "observed_data" in idata.groups()


def test_figures_come_back_in_the_data_units_by_the_change_of_variables():
    """A model of z = x / s is the model of x with C / s and R / s^2: the same law, log-densities shifted by log s."""
    model = lgssm()
    x, _ = model.sample(num_sequences=5, num_steps=12, generator=torch.Generator().manual_seed(2))
    scale = torch.tensor([2.0, 0.5, 4.0])
    with torch.no_grad():
        scaled = LinearGaussianSSM(
            model.A, model.C / scale[:, None], model.Q, model.R / scale[:, None] / scale[None, :], model.init_cov
        )
    standardizer = Standardizer([0.0, 0.0, 0.0], scale.tolist(), ["a", "b", "c"])
    z = x / scale
    in_units = evaluate(scaled, z, estimators=["exact"], predictive_samples=400, seed=0, standardizer=standardizer)
    direct = evaluate(model, x, estimators=["exact"], predictive_samples=400, seed=0)
    truth = float(model.log_likelihood(x).detach().double().sum()) / (5 * 12)
    assert in_units["loglik"]["exact"]["per_step"] == pytest.approx(truth, rel=1e-5)
    assert in_units["mse"] == pytest.approx(direct["mse"], rel=1e-4)  # the exact predictive mean, in x's units
    assert in_units.x.dtype == torch.float64  # data units in double precision
    assert torch.allclose(in_units.x, x.double(), atol=1e-5)
    for name in ("crps", "nlpd", "coverage_0.8", "pit_ks"):  # the same law judged in the same units
        assert in_units["calibration"][name] == pytest.approx(direct["calibration"][name], rel=0.05, abs=0.03), name
    assert in_units["units"].startswith("the data's own units")


def test_binary_data_gets_brier_and_reliability_and_skipped_estimators_say_why():
    torch.manual_seed(0)
    model = GRUBaseline(4, emission="bernoulli", rnn_dim=8, hidden_dim=8)
    x = (torch.rand(5, 10, 4) < 0.3).float()
    result = evaluate(model, x, estimators=["exact", "smc"], seed=0)
    assert set(result["calibration"]) >= {"brier", "ece"} and result.probabilities.shape == (5, 10, 4)
    assert "smc" in result["skipped_estimators"]
    exact = float(model.log_likelihood(x).detach().double().sum())
    assert result["loglik"]["exact"]["per_sequence"] == pytest.approx(exact / 5, rel=1e-6)
    # Brier score by hand: mean squared gap between the probabilities and the notes
    assert result["calibration"]["brier"] == pytest.approx(float(((result.probabilities - x) ** 2).mean()), rel=1e-5)


def test_gap_to_a_known_truth_and_bad_arguments():
    model = lgssm()
    x, _ = model.sample(num_sequences=4, num_steps=10, generator=torch.Generator().manual_seed(3))
    result = evaluate(model, x, estimators=["exact"], truth=model, predictive_samples=0)
    gap = result["gap_to_truth"]["exact"]
    assert gap["gap_per_step"] == pytest.approx(0.0, abs=1e-6) and not gap["above_truth"]
    assert not math.isnan(gap["standard_error_per_step"])
    with pytest.raises(ValueError, match="estimators"):
        evaluate(model, x, estimators=["bogus"])
    with pytest.raises(ValueError, match="num_particles"):
        evaluate(model, x, num_particles=0)
    from ppl_models import PFRNNPredictor

    with pytest.raises(ValueError, match="PFRNNPredictor is conditional"):
        evaluate(PFRNNPredictor(3, 1, hidden_size=4, num_particles=2), x)
    with pytest.raises(ValueError, match="standardizer: 2 features"):
        evaluate(model, x, standardizer=Standardizer([0.0, 0.0], [1.0, 2.0], ["a", "b"]))


def test_evaluate_from_python_equals_the_metrics_json_of_a_cli_run(tmp_path):
    import json

    from ppl_models.experiments import registry, runner
    from ppl_models.experiments.config import load_config

    config = load_config(
        registry.experiment_config("lgssm-demo"),
        [
            "train.epochs=2",
            "data.num_train=8",
            "data.num_valid=4",
            "data.num_test=6",
            "data.num_steps=20",
            "evaluate.num_particles=50",
            "evaluate.iwae_particles=5",
            "evaluate.predictive_samples=20",
            "train.progress=false",
        ],
    )
    runner.train(config, tmp_path / "run")
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    data = registry.build(config["data"], registry.DATASETS, "data")
    model = registry.build(config["model"], registry.MODELS, "model", obs_dim=data.obs_dim)
    model.load_params(tmp_path / "run" / "checkpoints" / "best.pt")
    settings = dict(config["evaluate"])
    result = evaluate(
        model,
        *data.test,
        valid=data.valid,
        truth=data.truth,
        description=data.description,
        seed=config["seed"],
        **settings,
    )
    assert json.loads(json.dumps(result.metrics)) == on_disk


# --- draws beyond memory, a mask with no valid step, a standardizer given as its dict -----------------------------
@pytest.mark.parametrize("name", ["predictive_samples", "posterior_draws"])
def test_evaluate_refuses_draws_beyond_memory_by_name(small_lgssm, monkeypatch, name):
    model, x = small_lgssm
    monkeypatch.setattr(validation, "available_memory", lambda: 2**30)
    need = 2 * 10**7 * 4 * 6 * 3 * 4
    with pytest.raises(ValueError, match=rf"^{name}=10000000 needs at least {need / 2**30:.3g} GiB"):
        evaluate(model, x, estimators=["exact"], **{"predictive_samples": 0, name: 10**7})


def test_a_mask_without_a_valid_step_is_refused_by_name(small_lgssm):
    model, x = small_lgssm
    with pytest.raises(ValueError, match=r"^mask has no valid step"):
        evaluate(model, x, torch.zeros(4, 6, dtype=torch.bool), estimators=["exact"])


def test_a_standardizer_given_as_its_dict_reports_the_data_units():
    """A model of z = x / s is the model of x with C / s and R / s^2: the exact log-likelihood of x is known."""
    model = lgssm()
    x, _ = model.sample(num_sequences=4, num_steps=8, generator=torch.Generator().manual_seed(2))
    scale = torch.tensor([2.0, 0.5, 4.0])
    with torch.no_grad():
        scaled = LinearGaussianSSM(
            model.A, model.C / scale[:, None], model.Q, model.R / scale[:, None] / scale[None, :], model.init_cov
        )
    record = Standardizer([0.0, 0.0, 0.0], scale.tolist(), ["a", "b", "c"]).to_dict()
    result = evaluate(scaled, x / scale, estimators=["exact"], predictive_samples=0, standardizer=record)
    truth = float(model.log_likelihood(x).detach().double().sum()) / (4 * 8)
    assert result["loglik"]["exact"]["per_step"] == pytest.approx(truth, rel=1e-5)


@pytest.mark.parametrize(
    ("standardizer", "kind", "message"),
    [
        (42, TypeError, "standardizer must be a Standardizer or its to_dict"),
        ({"mean": [0.0]}, ValueError, "standardizer must have the keys"),
        (
            {"mean": [0.0, 0.0], "scale": [1.0, 1.0], "features": ["a", "b"]},
            ValueError,
            "standardizer: 2 features for data of 3",
        ),
        (
            {"mean": [0.0] * 3, "scale": [1.0, 0.0, 1.0], "features": ["a", "b", "c"]},
            ValueError,
            "standardizer.scale must be finite and positive",
        ),
    ],
)
def test_a_bad_standardizer_is_refused_by_name(small_lgssm, standardizer, kind, message):
    model, x = small_lgssm
    with pytest.raises(kind, match=rf"^{message}"):
        evaluate(model, x, estimators=["exact"], predictive_samples=0, standardizer=standardizer)

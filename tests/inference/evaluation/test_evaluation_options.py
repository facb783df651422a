"""The evaluation's options: one checked EvaluationOptions for the API and the command line's [evaluate] section,
a public one-step MSE, the walk of num_particles from the command line to the filter, and every count of
``evaluate`` refused by its own name.

Truths: the documented defaults, hand-computed squared errors, and the particle count the filter is built with.
"""

import json

import pytest
import torch

from ppl_models import LinearGaussianSSM, RecurrentPredictor
from ppl_models.experiments import cli, registry, runner
from ppl_models.experiments.config import check_config, evaluate_section, evaluation_options, load_config
from ppl_models.inference import EvaluationOptions, evaluate, one_step_mse, protocol
from ppl_models.inference.data import Standardizer


def _constant_predictor(means=(1.0, -1.0)):
    """A GRU predictor whose decoder ignores the state: its one-step mean is ``means`` at every step."""
    model = RecurrentPredictor(2, cell="gru", state_dim=3, encoder_dim=2)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(torch.tensor(means))
    return model.eval()


def test_the_documented_defaults_have_one_home():
    options = EvaluationOptions()
    assert options.estimators == ("exact", "elbo", "iwae", "smc") and options.num_particles == 1000
    assert (options.iwae_particles, options.predictive_samples, options.posterior_draws) == (100, 200, 0)
    assert (options.batch_size, options.particle_chunk, options.noise_refit, options.seed) == (64, 25, "none", None)
    # a run's [evaluate] section: the same settings but the seed, with the noise refit on
    section = evaluate_section(evaluation_options({}))
    assert section == {
        "estimators": ["exact", "elbo", "iwae", "smc"],
        "num_particles": 1000,
        "iwae_particles": 100,
        "predictive_samples": 200,
        "posterior_draws": 0,
        "batch_size": 64,
        "particle_chunk": 25,
        "noise_refit": "auto+state",
    }
    config = check_config({"data": {"name": "x"}, "model": {"name": "y"}, "objective": {"name": "exact"}})
    assert config["evaluate"] == section


def test_the_protocol_and_the_smc_objective_keep_their_particle_counts():
    model = LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(0))
    x = torch.randn(2, 5, 2)
    assert model.score(x, estimator="smc").estimator == "smc-100"
    assert protocol.particle_predictive(model, x, None, 0).source == "the smc-100 filter"
    objective = registry.build_objective({"name": "smc"}, model)
    assert objective.kind == "smc-64"


@pytest.mark.parametrize(
    ("settings", "kind", "message"),
    [
        ({"num_particles": 0}, ValueError, "num_particles must be >= 1, got 0"),
        ({"iwae_particles": 2.5}, TypeError, "iwae_particles must be an int >= 1, got float 2.5"),
        ({"estimators": "smc"}, ValueError, "estimators must be a non-empty list from"),
        ({"estimators": []}, ValueError, "estimators must be a non-empty list from"),
        ({"noise_refit": "laplace"}, ValueError, "noise_refit must be one of"),
    ],
)
def test_each_option_is_checked_once_by_name(settings, kind, message):
    with pytest.raises(kind, match=f"^{message}"):
        EvaluationOptions(**settings)
    with pytest.raises(ValueError, match=f"^evaluate.{message}"):  # the command line's section, named as such
        evaluation_options(settings)


def test_the_seed_is_the_runs_own_not_a_key_of_its_evaluate_section():
    with pytest.raises(ValueError, match="^seed must be None or an int in"):
        EvaluationOptions(seed=-1)
    with pytest.raises(ValueError, match=r"^unknown keys in \[evaluate\]: \['seed'\]"):
        evaluation_options({"seed": 3})
    assert evaluation_options({}, seed=3).seed == 3 and "seed" not in evaluate_section(evaluation_options({}, seed=3))


def test_numpy_counts_become_ints_and_a_list_of_estimators_a_tuple():
    import numpy as np

    options = EvaluationOptions(estimators=["smc"], num_particles=np.int64(7))
    assert options.estimators == ("smc",) and type(options.num_particles) is int and options.num_particles == 7
    assert options.to_dict()["estimators"] == ["smc"]


def test_evaluate_takes_options_or_their_fields_and_refuses_unknown_keywords():
    model = LinearGaussianSSM.random(2, 3, generator=torch.Generator().manual_seed(0))
    x, _ = model.sample(num_sequences=3, num_steps=6, generator=torch.Generator().manual_seed(1))
    options = EvaluationOptions(estimators=["exact"], predictive_samples=0)
    by_options = evaluate(model, x, None, options)
    by_keywords = evaluate(model, x, estimators=["exact"], predictive_samples=0)
    assert by_options.metrics == by_keywords.metrics
    # keywords take the place of the options' values
    with_draws = evaluate(model, x, None, options, predictive_samples=4, seed=0)
    assert with_draws.predictive.shape == (4, 3, 6, 3)
    with pytest.raises(TypeError, match=r"^evaluate\(\) got unknown keyword arguments \['particles'\]"):
        evaluate(model, x, particles=10)
    with pytest.raises(TypeError, match="^options must be an EvaluationOptions or None, got dict"):
        evaluate(model, x, None, {"estimators": ["exact"]})


def test_one_step_mse_is_the_mean_squared_error_by_hand_over_valid_steps():
    model = _constant_predictor()
    x = torch.tensor([[[1.0, 1.0], [3.0, -1.0], [9.0, 9.0]], [[0.0, 0.0], [9.0, 9.0], [9.0, 9.0]]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    # errors against (1, -1) at the 3 valid steps: (0, 2), (2, 0), (-1, 1): squares 0 + 4 + 4 + 0 + 1 + 1 = 10
    assert one_step_mse(model, x, mask) == pytest.approx(10 / 6)
    assert one_step_mse(model, x, mask, batch_size=1) == pytest.approx(10 / 6)
    # in the data's units: x = 2 z + 5, so each error doubles and its square is 4 times larger
    standardizer = Standardizer([5.0, 5.0], [2.0, 2.0], ["a", "b"])
    assert one_step_mse(model, x, mask, standardizer=standardizer) == pytest.approx(40 / 6)
    assert one_step_mse(model, x, mask, standardizer=standardizer.to_dict()) == pytest.approx(40 / 6)
    # evaluate reports the same figure
    result = evaluate(model, x, mask, estimators=["exact"], predictive_samples=0, standardizer=standardizer)
    assert result["mse"] == pytest.approx(40 / 6)


def test_one_step_mse_refuses_bad_input_by_name():
    model = _constant_predictor()
    x = torch.zeros(2, 3, 2)
    with pytest.raises(ValueError, match="^mask has no valid step: one_step_mse"):
        one_step_mse(model, x, torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="^batch_size must be an int >= 1"):
        one_step_mse(model, x, None, batch_size=1.5)
    with pytest.raises(ValueError, match="^standardizer: 1 features for data of 2"):
        one_step_mse(model, x, None, standardizer=Standardizer([0.0], [1.0], ["a"]))


def test_evaluate_set_num_particles_reaches_the_filter(tmp_path, monkeypatch):
    """``ppl-models evaluate RUN --set num_particles=K``: the command line, the run's [evaluate] section, the
    evaluation and the filter all use K."""
    config = load_config(
        registry.experiment_config("lgssm-demo"),
        [
            "train.epochs=1",
            "data.num_train=4",
            "data.num_valid=2",
            "data.num_test=3",
            "data.num_steps=5",
            "train.progress=false",
            "evaluate.predictive_samples=0",
            "evaluate.estimators=['smc']",
            "evaluate.num_particles=11",
        ],
    )
    runner.train(config, tmp_path / "run")
    built = []
    filter_class = protocol.ParticleFilter

    class Recording(filter_class):
        def __init__(self, num_particles, **options):
            built.append(num_particles)
            super().__init__(num_particles, **options)

    monkeypatch.setattr(protocol, "ParticleFilter", Recording)
    out = tmp_path / "again"
    assert (
        cli.main(["evaluate", str(tmp_path / "run"), "--set", "num_particles=7", "--out", str(out), "--device", "cpu"])
        == 0
    )
    assert built and set(built) == {7}
    assert set(json.loads((out / "metrics.json").read_text())["loglik"]) == {"smc-7", "exact (true parameters)"}
    assert json.loads((out / "config.json").read_text())["evaluate"]["num_particles"] == 7
    assert json.loads((tmp_path / "run" / "config.json").read_text())["evaluate"]["num_particles"] == 11


def test_the_help_names_the_particle_defaults(capsys):
    for command in (["evaluate", "--help"], ["train", "--help"], ["forecast", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(command)
    shown = " ".join(capsys.readouterr().out.split())
    assert "1000 where its config set none" in shown  # evaluate --set
    assert "(1000 where the config sets none)" in shown and "(64 where it sets none)" in shown  # train --set
    assert "filter size for particle models (default 30)" in shown  # forecast --particles


# --- every count of evaluate names itself -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["predictive_samples", "posterior_draws"])
def test_one_draw_is_refused_where_a_spread_is_needed(small_lgssm, name):
    model, x = small_lgssm
    with pytest.raises(ValueError, match=rf"^{name} must be 0 \(none\) or an int >= 2, got 1$"):
        evaluate(model, x, estimators=["exact"], **{"predictive_samples": 0, name: 1})


COUNTS = ["num_particles", "iwae_particles", "predictive_samples", "posterior_draws", "batch_size", "particle_chunk"]


@pytest.mark.parametrize("value", [1.5, "10", True, -1, 0])
@pytest.mark.parametrize("name", COUNTS)
def test_each_count_of_evaluate_names_itself(small_lgssm, name, value):
    model, x = small_lgssm
    if value == 0 and name in ("predictive_samples", "posterior_draws"):
        return  # 0 means none
    kind = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(kind, match=rf"^{name} must be .*got .*{value!r}"):
        evaluate(model, x, estimators=["exact", "iwae", "smc"], **{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seed", -1),
        ("seed", 2**32),
        ("seed", 1.5),
        ("seed", "3"),
        ("seed", True),
        ("binary", "yes"),
        ("binary", 1),
        ("description", 5),
        ("valid", "data"),
    ],
)
def test_other_arguments_of_evaluate_name_themselves(small_lgssm, name, value):
    model, x = small_lgssm
    with pytest.raises((ValueError, TypeError), match=rf"^{name} must be"):
        evaluate(model, x, estimators=["exact"], predictive_samples=0, **{name: value})

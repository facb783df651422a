"""The shared defaults (inference.defaults): each is the value of the place its comment names, and the command
line's help shows them."""

import argparse
import inspect

import pytest

from ppl_models import LinearGaussianSSM
from ppl_models.experiments import registry
from ppl_models.experiments.arguments import HelpFormatter
from ppl_models.experiments.cli import build_parser
from ppl_models.experiments.cli_parsers import COMMAND_PARSERS
from ppl_models.experiments.config import check_config, evaluation_options
from ppl_models.experiments.forecasting import ForecastSpec
from ppl_models.inference import defaults
from ppl_models.inference.evaluation import EvaluationOptions
from ppl_models.inference.protocol import SequenceModel, particle_forecast, particle_predictive

MINIMAL = {"data": {"name": "lgssm-synthetic"}, "model": {"name": "lgssm"}, "objective": {"name": "exact"}}


def test_the_evaluation_of_a_run_without_a_setting_takes_the_named_defaults():
    assert check_config(MINIMAL)["evaluate"]["num_particles"] == defaults.EVALUATION_PARTICLES
    assert evaluation_options({}).num_particles == defaults.EVALUATION_PARTICLES
    assert EvaluationOptions().iwae_particles == defaults.EVALUATION_IWAE_PARTICLES
    assert defaults.EVALUATION_PARTICLES != defaults.METHOD_PARTICLES  # the two entry points, named apart


def test_a_model_s_own_particle_methods_take_the_method_default():
    for method in (SequenceModel.score, SequenceModel.predictive, SequenceModel.forecast):
        assert inspect.signature(method).parameters["num_particles"].default == defaults.METHOD_PARTICLES
    for function in (particle_predictive, particle_forecast):
        assert inspect.signature(function).parameters["num_particles"].default == defaults.METHOD_PARTICLES


def test_the_smc_objective_without_particles_takes_the_named_default():
    objective = registry.build_objective({"name": "smc"}, LinearGaussianSSM.random(2, 1))
    assert objective.particle_filter.num_particles == defaults.SMC_OBJECTIVE_PARTICLES


def test_forecasts_and_backtests_take_the_named_defaults():
    assert (ForecastSpec().num_particles, ForecastSpec().num_samples) == (
        defaults.FORECAST_PARTICLES,
        defaults.FORECAST_SAMPLES,
    )
    parser = build_parser()
    forecast = parser.parse_args(["forecast", "a=run", "--out", "o"])
    assert (forecast.particles, forecast.samples) == (defaults.FORECAST_PARTICLES, defaults.FORECAST_SAMPLES)
    backtest = parser.parse_args(["backtest", "run", "--horizon", "2", "--origins", "3"])
    assert (backtest.particles, backtest.samples) == (defaults.FORECAST_PARTICLES, defaults.BACKTEST_SAMPLES)


def _commands() -> dict[str, argparse.ArgumentParser]:
    """The parsers of this package's commands (plug-ins' apart)."""
    commands = argparse.ArgumentParser(prog="ppl-models").add_subparsers(dest="command")
    for add in COMMAND_PARSERS:
        add(commands)
    return dict(commands.choices)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_has_a_description_and_every_option_names_its_default(name):
    command = _commands()[name]
    assert command.description
    formatter = HelpFormatter(command.prog)
    for action in command._actions:
        if action.option_strings and action.dest != "help" and not action.required:
            assert "default" in formatter._get_help_string(action), (name, action.option_strings)


def test_the_help_shows_the_default_values(capsys):
    def help_of(*argv) -> str:
        with pytest.raises(SystemExit):
            build_parser().parse_args([*argv, "--help"])
        return " ".join(capsys.readouterr().out.split())

    top = help_of()
    assert "``" not in top and all(name in top for name in _commands())
    forecast = help_of("forecast")
    assert (
        f"(default {defaults.FORECAST_PARTICLES})" in forecast and f"(default {defaults.FORECAST_SAMPLES})" in forecast
    )
    assert f"(default {defaults.BACKTEST_SAMPLES})" in help_of("backtest")
    train = help_of("train")
    assert f"({defaults.EVALUATION_PARTICLES} where the config sets none)" in train
    assert f"({defaults.SMC_OBJECTIVE_PARTICLES} where it sets none)" in train
    assert "--device DEVICE cpu, cuda, cuda:N or auto (default: the config's device, auto" in train
    assert str(list(defaults.SPLIT_FRACTIONS)) in train
    assert f"{defaults.EVALUATION_PARTICLES} where its config set none" in help_of("evaluate")

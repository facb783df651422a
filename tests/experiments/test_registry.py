"""The registries of models, objectives, experiments and suites: their builders refuse unknown keys and names, and
every registered experiment and suite member is a valid configuration."""

import pytest

from ppl_models.experiments import cli, compare, registry, suites, supervised
from ppl_models.experiments.config import apply_overrides, check_config, evaluation_options, load_config

DEMO = registry.EXPERIMENTS["lgssm-demo"].build


def test_builders_reject_unknown_keys_and_names():
    config = load_config(DEMO)
    with pytest.raises(ValueError, match="unknown keys in \\[model\\] for 'lgssm': \\['hidden'\\]"):
        registry.build({**config["model"], "hidden": 3}, registry.MODELS, "model", obs_dim=2)
    with pytest.raises(ValueError, match="objective.name must be one of"):
        registry.build_objective({"name": "vi"}, None)
    with pytest.raises(ValueError, match="config needs a \\[model\\] section"):
        check_config({k: v for k, v in config.items() if k != "model"})
    with pytest.raises(ValueError, match="evaluate.num_particles"):
        evaluation_options({"num_particles": 0})
    assert apply_overrides({"a": {"b": 1}}, ["a.b='x'"]) == {"a": {"b": "x"}}


@pytest.mark.parametrize("suite", sorted(suites.SUITES))
def test_every_suite_member_is_a_valid_configuration_with_a_distinct_folder(suite, tmp_path):
    members = suites.SUITES[suite].members
    for _, experiment, overrides in members:
        path = registry.experiment_config(experiment)
        if supervised.is_supervised(path):
            config = supervised.load_supervised_config(path, list(overrides))
            supervised.PFRNNPredictor(8, 4, **config["model"])  # the model options are accepted
        else:
            check_config(load_config(path, list(overrides)))
    assert len({compare.member_folder(tmp_path, label) for label, _, _ in members}) == len(members)


def test_srnn_jsb_is_regularised_and_its_ablation_runs_in_the_papers_setting():
    config = load_config(registry.experiment_config("srnn-jsb"), [])
    assert config["model"]["dropout"] == 0.5 and config["train"]["weight_decay"] == 1e-3
    for _, experiment, overrides in suites.SUITES["srnn-jsb-ablation"].members:
        member = load_config(registry.experiment_config(experiment), list(overrides))
        assert member["model"]["dropout"] == 0 and member["train"]["weight_decay"] == 0


def test_list_prints_every_registry(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in [
        "lgssm",
        "lgssm-synthetic",
        "polyphonic-jsb",
        "smc",
        "lgssm-demo",
        "srnn",
        "gru",
        "swimmer",
        "srnn-demo",
        "srnn-jsb",
        "srnn-nottingham",
        "srnn-musedata",
        "srnn-piano",
        "srnn-swimmer",
        "gru-jsb",
        "psrnn",
        "recurrent",
        "kf",
        "air-quality",
        "psrnn-demo",
        "psrnn-swimmer",
        "recurrent-swimmer",
        "kf-swimmer",
        "psrnn-air-quality",
        "psrnn-layers",
        "psrnn-rank",
    ]:
        assert name in out

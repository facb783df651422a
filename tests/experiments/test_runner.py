"""A user's file on its way to a run: read once per command, its settings passed as values; what a run builds
and draws."""

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from ppl_models import LinearGaussianSSM
from ppl_models.experiments import build as build_module
from ppl_models.experiments import outputs, own_data, registry, runner
from ppl_models.experiments.cli import main
from ppl_models.experiments.config import evaluation_options
from ppl_models.experiments.data import ExperimentData
from ppl_models.experiments.own_data import model_config
from ppl_models.experiments.runner import evaluate_model
from ppl_models.experiments.tasks import own_file
from ppl_models.experiments.tasks.own_file import file_data, load_reads, save_reads
from ppl_models.inference.data.datasets import SequenceDataset

COLUMNS = ['data.series="site"', 'data.time="when"']
TINY = [
    *COLUMNS,
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.batch_size=8",
    "model.rnn_dim=4",
    "model.hidden_dim=4",
]


def sites(path, *, shift=0.0, series=10, steps=8):
    """A long-format CSV: ``series`` sites of ``steps`` steps, one feature ``v = shift + 10 site + step``."""
    rows = [{"site": f"s{s}", "when": t, "v": shift + 10.0 * s + t} for s in range(series) for t in range(steps)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def reads(monkeypatch):
    """The names of the files :meth:`SequenceDataset.from_file` reads from now on."""
    names, real = [], SequenceDataset.from_file

    def counting(cls, path, *args, **options):
        names.append(str(path))
        return real(path, *args, **options)

    monkeypatch.setattr(SequenceDataset, "from_file", classmethod(counting))
    return names


def _sets(items):
    return [arg for item in items for arg in ("--set", item)]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """``tmp_path`` as the working directory, holding ``a.csv``; figures are drawn but not rendered (seconds)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Figure, "savefig", lambda self, *args, **kwargs: None)
    sites(tmp_path / "a.csv")
    return tmp_path


def test_train_model_on_a_file_reads_it_once(folder, reads):
    assert main(["train", "gru", "--data", "a.csv", "--run-dir", "run", *_sets(TINY)]) == 0
    assert reads == ["a.csv"]  # the recipe's choices and the run


def test_a_two_model_board_reads_its_file_once(folder, reads):
    board = [
        "leaderboard",
        "--data",
        "a.csv",
        "--models",
        "gru,lgssm",
        "--out",
        "board",
        "--classical",
        "last-value",
        *_sets(TINY[:-2]),
        *_sets(["gru:model.rnn_dim=4", "gru:model.hidden_dim=4", "lgssm:model.latent_dim=2"]),
    ]
    assert main(board) == 0
    assert reads == ["a.csv"]  # two recipes, two runs and the board's figures
    assert (folder / "board" / "fan_chart.png").is_file()


def test_a_file_written_since_its_read_is_read_again(tmp_path, reads):
    path = sites(tmp_path / "a.csv")
    options = {"series": "site", "time": "when"}
    first = file_data(str(path), **options)
    first.train[0].zero_()  # what one caller does to its tensors is no other's business
    second = file_data(str(path), **options)
    assert len(reads) == 1
    sites(path, shift=1000.0)  # other values, another size
    third = file_data(str(path), **options)
    assert len(reads) == 2
    for data, shift in ((second, 0.0), (third, 1000.0)):
        ids = data.split_record["train"]["ids"]
        x, mask = data.train
        values = data.standardizer.inverse(x, dtype=torch.float64)
        for row, name in enumerate(ids):  # the file's own values, site by site
            expected = shift + 10.0 * int(name[1:]) + np.arange(8)
            assert values[row][mask[row], 0].numpy() == pytest.approx(expected, abs=1e-3)


def test_a_process_handed_the_reads_of_another_does_not_read_the_file_again(tmp_path, reads, monkeypatch):
    path = sites(tmp_path / "a.csv")
    options = {"series": "site", "time": "when"}
    first = file_data(str(path), **options)
    saved = save_reads(tmp_path / "logs" / "reads.pkl")
    monkeypatch.setattr(own_file, "_reads", type(own_file._reads)())  # a fresh process: nothing read yet
    load_reads(saved)
    second = file_data(str(path), **options)
    assert reads == [str(path)]  # read once, by the first process
    for got, expected in zip((*second.train, *second.test), (*first.train, *first.test)):
        assert torch.equal(got, expected)
    sites(path, shift=1000.0)  # written since: the handed read is stale
    file_data(str(path), **options)
    assert reads == [str(path)] * 2


def test_the_data_section_of_a_file_is_its_path_verbatim_with_the_data_settings_merged_in(tmp_path):
    folder = tmp_path / 'a "quoted\\ folder\nover two lines'  # no TOML string could carry it unescaped
    folder.mkdir()
    path = sites(folder / "a.csv", shift=0.5)  # real values: no likelihood pinned (large counts would pin "real")
    expected = {"name": "file", "path": str(path), "series": "site", "time": "when"}
    assert own_data.model_config("gru", path, TINY)["data"] == expected
    assert own_data.load_experiment("lgssm-demo", COLUMNS, data=path)["data"] == expected
    # a suite member's own data settings give way to the file; the user's --set come after it
    member = own_data.load_experiment("lgssm-demo", COLUMNS, data=path, own=["data.num_train=9", "train.lr=0.5"])
    assert member["data"] == expected and member["train"]["lr"] == 0.5


def test_the_particle_cloud_draws_at_most_500_particles(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(
        outputs.run_plots, "particle_cloud", lambda result, x, path: drawn.append(result.history_log_weights.shape[1])
    )  # [T, K, B]
    model = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0))
    x = torch.randn(3, 5, 1, generator=torch.Generator().manual_seed(1))
    split = (x, torch.ones(3, 5, dtype=torch.bool))
    data = ExperimentData(split, split, split, "tiny")
    for particles in (600, 40):
        config = evaluation_options(
            {"estimators": ["smc"], "num_particles": particles, "predictive_samples": 0, "noise_refit": "none"}
        )
        evaluate_model(model, data, config, tmp_path / str(particles))
    assert drawn == [500, 40]


def test_train_model_on_a_file_builds_the_data_and_the_model_once(folder, monkeypatch):
    built, real = [], registry.build

    def counting(table, entries, kind, **fixed):
        built.append(kind)
        return real(table, entries, kind, **fixed)

    monkeypatch.setattr(registry, "build", counting)
    monkeypatch.setattr(build_module, "build", counting)
    assert main(["train", "gru", "--data", "a.csv", "--run-dir", "run", *_sets(TINY)]) == 0
    assert sorted(built) == ["data", "model", "objective"]  # the recipe's checks build them; the run takes them


def test_a_model_built_once_gives_the_figures_of_one_built_for_the_run(folder):
    once = runner.train(model_config("gru", "a.csv", TINY), folder / "once")
    config = model_config("gru", "a.csv", TINY)
    build_module._KEPT.clear()  # the run builds its own
    assert _figures(once) == _figures(runner.train(config, folder / "twice"))


def _figures(metrics):
    """``metrics`` less its clock readings."""
    if isinstance(metrics, dict):
        return {k: _figures(v) for k, v in metrics.items() if "second" not in k and "time" not in k}
    return metrics


def test_what_is_kept_is_taken_once_and_for_its_own_config_only(folder):
    config = model_config("gru", "a.csv", TINY)
    data, model, objective = build_module.build_experiment(config)  # the kept ones
    again = build_module.build_experiment(config)  # built anew
    assert again[1] is not model and again[0] is not data
    model_config("gru", "a.csv", TINY)
    other = {**config, "seed": 1}
    assert build_module.build_experiment(other)[1] is not model and not build_module._KEPT

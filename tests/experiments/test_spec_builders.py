"""Builders that take a spec: the registry builds a :class:`FileSpec` from a ``[data]`` table's keys (refusing an
unknown key by name), and the short signatures of ``file_data``, ``file_regression``, ``evaluate`` and ``backtest``
refuse an unknown keyword by name."""

import inspect

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments.registry import DATASETS, build
from ppl_models.experiments.spec_builders import SpecEntry, spec_call, table_parameters
from ppl_models.experiments.tasks.file_regression import file_regression
from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference.backtest import BacktestOptions, backtest
from ppl_models.inference.data import FileSpec
from ppl_models.inference.evaluation import EvaluationOptions, evaluate
from ppl_models.inference.keyword_settings import options_with


def long_table(path, series=6, steps=12):
    """A long-format CSV: ``series`` series ``s<i>`` of ``steps`` steps ``t``, features ``a``, ``b``, target ``y``."""
    rng = np.random.default_rng(0)
    rows = [
        {"id": f"s{s}", "t": t, "a": rng.normal(), "b": rng.normal(), "y": rng.normal()}
        for s in range(series)
        for t in range(steps)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def capture(path, spec=None, *, fs=4.0):
    """A builder that hands back what it was called with."""
    return path, spec, fs


TABLE = {"series": "id", "time": "t", "features": ["a", "b"], "split_by": "time", "fractions": [0.5, 0.25, 0.25]}


def test_a_table_builds_the_spec_that_file_spec_of_makes():
    registry = {"captured": SpecEntry(capture, "a builder of a spec", FileSpec)}
    path, spec, fs = build({"name": "captured", "path": "d.csv", "fs": 2.0, **TABLE}, registry, "data")
    assert (path, fs) == ("d.csv", 2.0) and spec == FileSpec.of(**TABLE)
    assert spec_call(capture, FileSpec, {"path": "d.csv"}, "data")[1] == FileSpec()


def test_the_file_entry_reads_the_file_as_file_data_does(tmp_path):
    path = str(long_table(tmp_path / "d.csv"))
    built = build({"name": "file", "path": path, "window": 4, **TABLE}, DATASETS, "data")
    direct = file_data(path, FileSpec.of(window=4, **TABLE))
    by_keywords = file_data(path, window=4, **TABLE)
    for data in (direct, by_keywords):
        for split in ("train", "valid", "test"):
            assert torch.equal(getattr(built, split)[0], getattr(data, split)[0])
        assert data.split_record == built.split_record


def test_an_unknown_key_is_refused_naming_it_and_the_allowed_ones():
    with pytest.raises(
        ValueError, match=r"^unknown keys in \[data\] for 'file': \['seris'\]; allowed: \['path', "
    ) as error:
        build({"name": "file", "path": "d.csv", "seris": "id"}, DATASETS, "data")
    assert "'series'" in str(error.value) and "'fs'" in str(error.value) and "'spec'" not in str(error.value)


def test_a_value_of_the_wrong_type_is_refused_naming_its_key():
    with pytest.raises(ValueError, match=r"^data\.series must be str \| None, got int 3"):
        build({"name": "file", "path": "d.csv", "series": 3}, DATASETS, "data")
    with pytest.raises(ValueError, match=r"^data\.fs must be float, got str 'fast'"):
        build({"name": "file", "path": "d.csv", "fs": "fast"}, DATASETS, "data")


def test_the_table_parameters_are_the_builders_own_and_the_specs_fields_with_their_defaults():
    parameters = table_parameters(file_data, FileSpec)
    assert list(parameters)[:2] == ["path", "series"] and {"spec", "settings"}.isdisjoint(parameters)
    assert parameters["split_by"].default == "series" and parameters["transform"].default == "auto"
    assert set(table_parameters(file_data)) == {
        "path",
        "spec",
        "fs",
        "standardizer",
        "transform",
        "season",
        "history",
        "likelihood",
    }


@pytest.mark.parametrize(
    ("call", "unknown", "known"),
    [
        (lambda: file_data("d.csv", seris="id"), "seris", "series"),
        (lambda: file_regression("d.csv", ["y"], seris="id"), "seris", "series"),
        (lambda: evaluate(None, torch.zeros(2, 3, 1), None, particles=10), "particles", "num_particles"),
        (lambda: backtest(None, torch.zeros(2, 3, 1), None, horizon=1, origins=1, sample=2), "sample", "num_samples"),
    ],
    ids=["file_data", "file_regression", "evaluate", "backtest"],
)
def test_the_short_signatures_refuse_an_unknown_keyword_naming_it_and_the_known_ones(call, unknown, known):
    with pytest.raises(TypeError, match=rf"\(\) got unknown keyword arguments \['{unknown}'\]; known: .*'{known}'"):
        call()


def test_the_signatures_are_short():
    sizes = {f.__name__: len(inspect.signature(f).parameters) for f in (file_data, file_regression, evaluate, backtest)}
    assert sizes == {"file_data": 9, "file_regression": 4, "evaluate": 5, "backtest": 6}


def test_a_regression_sets_its_own_targets_and_keeps_every_input(tmp_path):
    path = long_table(tmp_path / "d.csv")
    with pytest.raises(TypeError, match=r"\['degenerate'\]"):
        file_regression(path, ["y"], degenerate="drop")
    data, _ = file_regression(path, spec=FileSpec.of(series="id", time="t", targets=("y",)))
    assert data.targets == ["y"] and data.features == ["a", "b"]


def test_options_are_replaced_by_keywords_and_checked_by_type():
    options = options_with(EvaluationOptions, EvaluationOptions(num_particles=7), {"batch_size": 3})
    assert (options.num_particles, options.batch_size) == (7, 3)
    assert options_with(BacktestOptions, None, {"horizon": 2, "origins": 3}) == BacktestOptions(2, 3)
    with pytest.raises(TypeError, match="^options must be a BacktestOptions or None, got dict"):
        options_with(BacktestOptions, {"horizon": 2}, {})

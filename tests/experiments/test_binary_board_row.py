"""The board's classical row of binary data: ``logistic-ar`` is the only classical row a 0/1 file gets, its one-step
probabilities are the logistic regression on the previous frame fitted on the training split, and it is refused by
name on real-valued data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments import own_data
from ppl_models.experiments.classical_rows import (
    applicable_classical,
    data_units,
    fitted_classical,
    named_row_refusals,
)
from ppl_models.experiments.registry import DATASETS, build

TABLE = ['data.series="site"', 'data.time="t"', 'data.split="part"', 'data.transform="none"']


@pytest.fixture(scope="module")
def switches(tmp_path_factory):
    """Four series of 60 steps of two 0/1 columns: ``a`` follows ``b`` of the step before, ``b`` flips now and
    then; the last 10 steps of each are the test split."""
    folder = tmp_path_factory.mktemp("switches")
    rng = np.random.default_rng(2)
    rows = []
    for s in range(4):
        a, b = 0, 1
        for t in range(60):
            a, b = int(rng.random() < (0.85 if b else 0.15)), int(b if rng.random() < 0.8 else 1 - b)
            part = "train" if t < 40 else "valid" if t < 50 else "test"
            rows.append({"site": f"s{s}", "t": t, "a": a, "b": b, "part": part})
    pd.DataFrame(rows).to_csv(folder / "switches.csv", index=False)
    return folder


def _data(folder):
    config = own_data.model_config("srnn", folder / "switches.csv", TABLE)
    return build(config["data"], DATASETS, "data")


def test_binary_data_gets_the_logistic_ar_row_only_and_its_probabilities_follow_the_previous_frame(switches):
    data = _data(switches)
    assert data.binary
    names, refused = applicable_classical(data)
    assert names == ["logistic-ar"] and "Gaussian" in refused["arima"]
    model = fitted_classical("logistic-ar", data)
    x, mask = data_units(data.levels, "test")
    predictive = model.predictive(x, mask, 0, scored=data.levels.scored["test"])
    weights = model.forecaster.pooled  # [2, 3]: intercept, a, b of the previous frame
    previous = x[:, 49:-1].numpy()
    expected = 1 / (1 + np.exp(-(weights[:, 0] + previous @ weights[:, 1:].T)))
    np.testing.assert_allclose(predictive.mean[:, 50:].numpy(), expected, rtol=1e-9)
    assert weights[0, 2] > 2.0  # a follows b: a strong positive weight on the previous b
    values = x[:, 50:].double().numpy()
    by_hand = (values * np.log(expected) + (1 - values) * np.log(1 - expected)).sum(-1)
    np.testing.assert_allclose(predictive.log_density[:, 50:].numpy(), by_hand, rtol=1e-9)
    assert torch.isfinite(predictive.log_density).all()


def test_logistic_ar_named_on_real_valued_data_is_refused_with_the_reason(switches):
    data = _data(switches)
    assert "logistic-ar" not in named_row_refusals(data)
    data.binary = False
    assert named_row_refusals(data)["logistic-ar"].endswith("this data is not binary")

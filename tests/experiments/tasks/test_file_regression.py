"""A user's table as a supervised PF-RNN task (``data.name = "file"``): loader, evaluation in the targets' units.

Expected values come from pandas and torch distributions on the raw table, or from the change of
variables ``y = c z``: scaling a target by ``c`` leaves the standardised data, hence the trained
model, unchanged, and must multiply errors by ``c`` and add ``log c`` to the NLPD.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from ppl_models.experiments.recipes import SUPERVISED_MODELS, supervised_recipe
from ppl_models.experiments.supervised import train
from ppl_models.experiments.tasks.file_regression import evaluate_file_regression, file_regression
from ppl_models.pf_rnn import PFRNNPredictor


def linear_gaussian_table(path, *, scale=(1.0,), series=10, seed=0):
    """Series of 12..20 steps, features ``a``, ``b`` ~ N(0, 1) and targets ``y0 = 2a - b + 0.3 eps`` times ``scale``."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(series):
        n = int(rng.integers(12, 21))
        a, b = rng.normal(size=(2, n))
        y = 2.0 * a - b + 0.3 * rng.normal(size=n)
        rows += [
            {"id": f"s{s}", "t": t, "a": a[t], "b": b[t], **{f"y{o}": (y[t] + 5.0) * c for o, c in enumerate(scale)}}
            for t in range(n)
        ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return pd.read_csv(path)


def config_for(path, cell="pf-lstm", targets=("y0",)):
    config = supervised_recipe(cell)
    config["data"].update(path=str(path), targets=list(targets), series="id", time="t")
    config["train"].update(epochs=2)
    return config


def test_trained_metrics_are_in_the_targets_units(tmp_path):
    table = linear_gaussian_table(tmp_path / "d.csv")
    linear_gaussian_table(tmp_path / "k.csv", scale=(1000.0,))
    metrics = train(config_for(tmp_path / "d.csv"), tmp_path / "run")
    scaled = train(config_for(tmp_path / "k.csv"), tmp_path / "run-k")
    for key in ("rmse", "mae", "crps", "nlpd", "pit_ks", "mean_rmse", "width_0.9"):
        assert math.isfinite(metrics[key]), key
    for level in ("0.5", "0.8", "0.95"):
        assert 0 <= metrics[f"coverage_{level}"] <= 1 and metrics[f"coverage_{level}"] == scaled[f"coverage_{level}"]
    # the reference by hand: the test rows of the file against the training rows' mean
    record = json.loads((tmp_path / "run" / "data_split.json").read_text())
    train_y = table[table["id"].isin(record["train"]["ids"])]["y0"]
    test_y = table[table["id"].isin(record["test"]["ids"])]["y0"]
    assert metrics["mean_rmse"] == pytest.approx(np.sqrt(((test_y - train_y.mean()) ** 2).mean()), rel=1e-5)
    assert metrics["test_steps"] == len(test_y) and metrics["test_sequences"] == len(record["test"]["ids"])
    for key in ("rmse", "mae", "crps", "mean_rmse", "width_0.9"):
        assert scaled[key] == pytest.approx(1000 * metrics[key], rel=1e-3), key
    assert scaled["nlpd"] == pytest.approx(metrics["nlpd"] + math.log(1000), abs=1e-3)
    assert scaled["sigma"]["y0"] == pytest.approx(1000 * metrics["sigma"]["y0"], rel=1e-4)
    assert {"pit_ecdf.png", "predictive_bands.png", "learning_curve.png"} <= {
        p.name for p in (tmp_path / "run" / "plots").iterdir()
    }


def test_two_targets_nlpd_is_per_target_with_each_targets_jacobian(tmp_path):
    linear_gaussian_table(tmp_path / "d.csv", scale=(1.0, -3.0), series=8)
    linear_gaussian_table(tmp_path / "k.csv", scale=(1.0, -3000.0), series=8)
    metrics = train(config_for(tmp_path / "d.csv", "pf-gru", ("y0", "y1")), tmp_path / "run")
    scaled = train(config_for(tmp_path / "k.csv", "pf-gru", ("y0", "y1")), tmp_path / "run-k")
    assert scaled["nlpd"] == pytest.approx(metrics["nlpd"] + math.log(1000) / 2, abs=1e-3)  # nats per target
    assert scaled["by_target"]["y1"]["nlpd"] == pytest.approx(
        metrics["by_target"]["y1"]["nlpd"] + math.log(1000), abs=1e-3
    )
    assert scaled["by_target"]["y0"]["rmse"] == pytest.approx(metrics["by_target"]["y0"]["rmse"], rel=1e-4)
    assert scaled["by_target"]["y1"]["rmse"] == pytest.approx(1000 * metrics["by_target"]["y1"]["rmse"], rel=1e-3)


def test_a_gaussian_baseline_is_scored_by_its_density_in_target_units_over_valid_steps(tmp_path):
    table = linear_gaussian_table(tmp_path / "d.csv")
    data, splits = file_regression(tmp_path / "d.csv", ["y0"], series="id", time="t", fractions=[0.4, 0.2, 0.4])
    x, mask, _ = splits["test"]
    assert mask is not None and not bool(mask.all())  # series of unequal lengths: padded, with a mask
    torch.manual_seed(0)
    predictor = PFRNNPredictor(2, 1, cell="lstm", hidden_size=8, encoder_size=8)
    with torch.no_grad():
        predictor.log_scale.fill_(math.log(0.7))
        mean, sd = data.target_standardizer.mean[0], data.target_standardizer.scale[0]
        predicted = predictor(x)[..., 0][mask] * sd + mean  # the valid steps, series in the split's order
    test = table[table["id"].isin(data.split_record["test"]["ids"])]
    observed = torch.tensor(
        np.concatenate([g["y0"].to_numpy() for _, g in test.groupby("id", sort=False)]), dtype=torch.float32
    )
    metrics = evaluate_file_regression(predictor, data, num_samples=50)
    density = torch.distributions.Normal(predicted, 0.7 * sd).log_prob(observed)
    assert metrics["nlpd"] == pytest.approx(-density.mean().item(), rel=1e-4)
    assert metrics["rmse"] == pytest.approx((predicted - observed).square().mean().sqrt().item(), rel=1e-4)
    assert metrics["sigma"]["y0"] == pytest.approx(0.7 * sd, rel=1e-5) and metrics["mean_ess"] == pytest.approx(1)


def test_the_loader_and_recipe_refuse_bad_options_in_one_line(tmp_path):
    linear_gaussian_table(tmp_path / "d.csv")
    config = config_for(tmp_path / "d.csv")
    del config["data"]["targets"]
    with pytest.raises(ValueError, match=r"^data\.targets: .*give data\.targets"):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written for refused input
    with pytest.raises(ValueError, match=r"got the text '\[y0\]', not a list: quote it"):
        file_regression(tmp_path / "d.csv", "[y0]", series="id")  # what bash makes of data.targets=["y0"]
    with pytest.raises(ValueError, match="stride: needs window"):
        file_regression(tmp_path / "d.csv", ["y0"], series="id", stride=2)
    np.savez(tmp_path / "d.npz", x=np.zeros((3, 4, 2)))
    with pytest.raises(ValueError, match=r"d\.npz: targets are columns of a table"):
        file_regression(tmp_path / "d.npz", ["y0"])
    with pytest.raises(ValueError, match="'a' is named both as a feature and as a target"):
        file_regression(tmp_path / "d.csv", ["a"], series="id", features=["a", "b"])
    with pytest.raises(ValueError, match="cell: expected one of"):
        supervised_recipe("lstm")
    _, splits = file_regression(tmp_path / "d.csv", "y0", series="id", time="t", window=6, stride=3)
    assert splits["train"][1] is None and splits["train"][0].shape[1:] == (6, 2)  # equal windows: no mask
    assert SUPERVISED_MODELS == ("pf-lstm", "pf-gru")

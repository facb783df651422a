"""Held-out segments are scored given their history: the splits keep it as context, and validation, evaluation and
the run folder score only the held-out steps, each given every earlier step of its series.

The truth is the dense Gaussian of a linear-Gaussian model's observations: ``log p(x_scored | x_context)`` is the
log density of the whole row less that of its context, both from the joint covariance (no Kalman filter)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from ppl_models.experiments import runner
from ppl_models.experiments.own_data import model_config
from ppl_models.inference import evaluate
from ppl_models.inference.data import SequenceDataset
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.lgssm import LinearGaussianSSM


def _joint(model: LinearGaussianSSM, steps: int) -> np.ndarray:
    """Covariance ``[T D, T D]`` of ``x_1..x_T`` under the model (zero mean), by the state covariances."""
    A, C = model.A.detach().double().numpy(), model.C.detach().double().numpy()
    Q = (model.Q_tril @ model.Q_tril.T).detach().double().numpy()
    R = (model.R_tril @ model.R_tril.T).detach().double().numpy()
    P = model.init_cov.double().numpy()
    covs = [P]
    for _ in range(steps - 1):
        covs.append(A @ covs[-1] @ A.T + Q)
    d = C.shape[0]
    joint = np.zeros((steps * d, steps * d))
    for s in range(steps):
        for t in range(s, steps):
            cross = np.linalg.matrix_power(A, t - s) @ covs[s]  # Cov(z_t, z_s)
            block = C @ cross @ C.T + (R if s == t else 0)
            joint[t * d : (t + 1) * d, s * d : (s + 1) * d] = block
            joint[s * d : (s + 1) * d, t * d : (t + 1) * d] = block.T
    return joint


def _log_density(x: np.ndarray, joint: np.ndarray) -> float:
    """``log N(x_1..x_n; 0, joint)`` of the first ``n = len(x)`` steps of ``x [n, D]``."""
    n = x.size
    return float(multivariate_normal(np.zeros(n), joint[:n, :n]).logpdf(x.reshape(-1)))


def _model(seed=0) -> LinearGaussianSSM:
    torch.manual_seed(seed)
    return LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(seed)).double()


def test_split_by_time_keeps_each_series_history_as_context():
    series = [np.arange(20.0)[:, None] + 100 * i for i in range(2)]
    splits = SequenceDataset.from_sequences(series).split(by="time", fractions=(0.6, 0.2, 0.2))
    assert splits.train.context is None and splits.train.lengths == [12, 12]
    assert splits.valid.lengths == [16, 16] and splits.valid.context == [12, 12]
    assert splits.test.lengths == [20, 20] and splits.test.context == [16, 16]
    np.testing.assert_array_equal(splits.test.sequences[1][:, 0], np.arange(20.0) + 100)  # the whole history
    scored = splits.scored()["test"]
    assert scored.tolist()[0] == [False] * 16 + [True] * 4
    record = splits.to_dict()["test"]
    assert record["ids"] == ["0[16:20]", "1[16:20]"] and record["context"] == [16, 16]
    # training windows only: the held-out splits stay whole, scored given their history
    windows = splits.windows(4)
    assert windows.train.lengths == [4] * 6 and windows.test.lengths == [20, 20]


def test_split_by_series_and_split_column_runs():
    import pandas as pd

    frame = pd.DataFrame({"id": ["a"] * 8, "v": np.arange(8.0), "part": ["train"] * 4 + ["valid"] * 2 + ["test"] * 2})
    splits = SequenceDataset.from_dataframe(frame, series="id", split="part").split()
    assert splits.valid.context == [4] and splits.valid.lengths == [6]
    assert splits.test.context == [6] and splits.test.lengths == [8]
    by_series = SequenceDataset.from_sequences([np.ones((5, 1)) * i for i in range(10)]).split(by="series")
    assert by_series.scored() == {"valid": None, "test": None}
    no_history = SequenceDataset.from_sequences([np.arange(20.0)]).split(by="time", context=False)
    assert no_history.test.lengths == [3] and no_history.test.context is None


def test_evaluate_scores_the_segment_given_its_context_exactly():
    model = _model()
    x = torch.randn(3, 9, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[2, 7:] = False
    context = torch.tensor([4, 0, 5])
    scored = mask & (torch.arange(9) >= context.unsqueeze(1))
    result = evaluate(
        model,
        x,
        mask,
        scored=scored,
        estimators=["exact", "elbo", "smc"],
        num_particles=2000,
        predictive_samples=50,
        seed=0,
    )
    joint = _joint(model, 9)
    truth = 0.0
    for i in range(3):
        n = int(mask[i].sum())
        rows = x[i, :n].numpy()
        truth += _log_density(rows, joint) - (_log_density(rows[: int(context[i])], joint) if context[i] else 0.0)
    steps = int(scored.sum())
    assert result.metrics["test_steps"] == steps == 5 + 9 + 2
    assert result.metrics["loglik"]["exact"]["per_step"] == pytest.approx(truth / steps, rel=1e-6)
    assert result.metrics["loglik"]["smc-2000"]["per_step"] == pytest.approx(truth / steps, abs=0.05)
    assert "elbo" in result.metrics["skipped_estimators"]
    # the exact one-step mean's MSE over the scored steps only
    exact = evaluate(model, x, mask, scored=scored, estimators=["exact"], predictive_samples=0)
    mean = model.predictive(x, mask, 0).mean
    assert exact.metrics["mse"] == pytest.approx(float(((mean - x)[scored] ** 2).mean()), rel=1e-9)


def test_scored_steps_are_checked():
    model = _model()
    x = torch.randn(2, 5, 2, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.bool)
    with pytest.raises(TypeError, match="scored must be a bool tensor"):
        evaluate(model, x, mask, scored=torch.ones(2, 5))
    gap = torch.tensor([[False, True, False, True, True]] * 2)
    with pytest.raises(ValueError, match="must follow its context"):
        evaluate(model, x, mask, scored=gap)
    with pytest.raises(ValueError, match="shape"):
        evaluate(model, x, mask, scored=torch.ones(2, 4, dtype=torch.bool))


def test_validation_bound_is_the_segment_given_its_context():
    model = _model()
    generator = torch.Generator().manual_seed(3)
    train = torch.randn(4, 8, 2, generator=generator, dtype=torch.float64)
    valid = torch.randn(2, 10, 2, generator=generator, dtype=torch.float64)
    mask = torch.ones(2, 10, dtype=torch.bool)
    scored = torch.arange(10).expand(2, 10) >= torch.tensor([[6], [0]])
    trainer = Trainer(
        ExactLikelihood(model), (train, None), (valid, mask), TrainConfig(epochs=1, lr=1e-3), valid_scored=scored
    )
    trainer.fit()
    joint = _joint(model, 10)
    rows = valid.numpy()
    truth = _log_density(rows[0], joint) - _log_density(rows[0, :6], joint) + _log_density(rows[1], joint)
    assert trainer.history[-1]["valid_bound_per_step"] == pytest.approx(truth / 14, rel=1e-6)


def test_a_run_on_a_file_split_by_time_scores_the_held_out_steps(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = [{"id": s, "t": t, "v": float(v)} for s in "ab" for t, v in enumerate(np.cumsum(rng.normal(size=40)))]
    path = tmp_path / "walk.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    config = model_config(
        "lgssm", path, ['data.series="id"', 'data.time="t"', 'data.split_by="time"', "data.window=10", "train.epochs=2"]
    )
    metrics = runner.train(config, tmp_path / "run")
    assert metrics["test_steps"] == 2 * 6  # 15 % of 40 steps per series, each given its 34 earlier steps
    split = json.loads((tmp_path / "run" / "data_split.json").read_text())
    assert split["test"]["context"] == [34, 34] and split["test"]["steps"] == [40, 40]
    assert split["valid"]["context"] == [28, 28]

"""The logistic autoregression of binary data (ppl_models.classical.logistic_ar): unpenalised, each feature's weights
are statsmodels' logistic regression on the previous frame; its log density is the Bernoulli sum by hand; its draws
follow its probabilities."""

import numpy as np
import pytest
import torch
from statsmodels.discrete.discrete_model import Logit

from ppl_models.classical import classical_model
from ppl_models.classical.logistic_ar import LogisticAR


def _markov_rolls(rows=6, steps=80, seed=0):
    """Two binary features: x_1 follows x_2 of the frame before, x_2 flips with probability 0.3."""
    rng = np.random.default_rng(seed)
    x = np.zeros((rows, steps, 2))
    x[:, 0] = rng.random((rows, 2)) < 0.5
    for t in range(1, steps):
        x[:, t, 0] = rng.random(rows) < np.where(x[:, t - 1, 1] > 0, 0.8, 0.25)
        x[:, t, 1] = np.where(rng.random(rows) < 0.3, 1 - x[:, t - 1, 1], x[:, t - 1, 1])
    return torch.from_numpy(x), torch.ones(rows, steps, dtype=torch.bool)


def test_unpenalised_weights_are_statsmodels_logit_of_each_feature_on_the_previous_frame():
    x, mask = _markov_rolls()
    model = LogisticAR(penalty=0.0).fit(x, mask)
    values = x.numpy()
    inputs = np.concatenate([np.ones((6 * 79, 1)), values[:, :-1].reshape(-1, 2)], 1)
    for d in range(2):
        reference = Logit(values[:, 1:, d].reshape(-1), inputs).fit(disp=0).params
        assert model.pooled[d] == pytest.approx(reference, abs=1e-4)


def test_the_log_density_is_the_bernoulli_sum_and_draws_follow_the_probabilities():
    x, mask = _markov_rolls()
    model = classical_model("logistic-ar").fit(x[:4], mask[:4])
    out = model.one_step(x[4:], mask[4:], num_samples=4000, generator=torch.Generator().manual_seed(0))
    values = x[4:].numpy()
    weights = model.pooled
    p = 1 / (1 + np.exp(-(weights[:, 0] + values[:, :-1] @ weights[:, 1:].T)))  # steps 2.. given the frame before
    by_hand = (values[:, 1:] * np.log(p) + (1 - values[:, 1:]) * np.log(1 - p)).sum(-1)
    assert out.log_density[:, 1:].numpy() == pytest.approx(by_hand, rel=1e-9)
    assert out.mean[:, 1:].numpy() == pytest.approx(p, rel=1e-9)
    frequency = out.samples.double().mean(0)[:, 1:].numpy()
    assert np.abs(frequency - p).max() < 0.04
    assert set(torch.unique(out.samples).tolist()) <= {0.0, 1.0}


def test_forecast_paths_are_binary_and_refusals_are_one_line():
    x, mask = _markov_rolls()
    model = classical_model("logistic-ar").fit(x, mask)
    paths = model.forecast(x[:2], mask[:2], horizon=3, num_samples=500, generator=torch.Generator().manual_seed(1))
    assert paths.shape == (500, 2, 3, 2) and set(torch.unique(paths).tolist()) <= {0.0, 1.0}
    last = x[0, -1, 1].item()  # x_1 one step ahead follows x_2 of the last frame: 0.8 or 0.25
    assert paths[:, 0, 0, 0].double().mean().item() == pytest.approx(0.8 if last else 0.25, abs=0.08)
    with pytest.raises(ValueError, match="every valid value of x must be 0 or 1"):
        model.fit(x + 0.5, mask)
    with pytest.raises(ValueError, match="log=True is not available"):
        classical_model("logistic-ar", log=True)
    with pytest.raises(ValueError, match="penalty must be a number >= 0"):
        LogisticAR(penalty=-1)


def test_a_scored_step_changes_no_parameter_and_no_earlier_prediction():
    x, mask = _markov_rolls()
    model = classical_model("logistic-ar").fit(x[:4], mask[:4])
    scored = mask[4:].clone()
    scored[:, :60] = False
    before = model.one_step(x[4:], mask[4:], scored)
    changed = x[4:].clone()
    changed[0, 70] = 1 - changed[0, 70]
    after = model.one_step(changed, mask[4:], scored)
    torch.testing.assert_close(after.mean[0, :71], before.mean[0, :71], rtol=0, atol=0)
    torch.testing.assert_close(after.log_density[0, :70], before.log_density[0, :70], rtol=0, atol=0)
    assert not torch.equal(after.mean[0, 71], before.mean[0, 71])

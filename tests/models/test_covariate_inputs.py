"""CovariateInputs: a GRU that reads covariates beats one without on y_t = 3 c_t + noise, scores the targets only,
and never reads a past-only covariate after the forecast origin."""

import pytest
import torch

from ppl_models import GRUBaseline
from ppl_models.covariate_model import CovariateInputs
from ppl_models.inference.data.covariates import CovariateLayout


def _series(generator, rows=16, steps=24):
    c = torch.randn(rows, steps + 1, generator=generator)
    y = 3 * c + 0.1 * torch.randn(rows, steps + 1, generator=generator)
    return y[:, :-1], c  # c [rows, steps + 1]: the last column is the step after the data


def _fit(model, x, steps=80):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(steps):
        optimizer.zero_grad()
        (-model.log_likelihood(x).mean()).backward()
        optimizer.step()
    return model


def test_a_known_covariate_cuts_the_one_step_error_far_below_the_model_without_it():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    y, c = _series(generator)
    with_c = torch.stack([y, c[:, 1:]], -1)  # row t: [y_t, c_{t+1}]
    layout = CovariateLayout(("y",), ("c",))
    model = _fit(CovariateInputs(GRUBaseline(2, emission="gaussian", rnn_dim=8, hidden_dim=16), layout), with_c)
    alone = _fit(GRUBaseline(1, emission="gaussian", rnn_dim=8, hidden_dim=16), y.unsqueeze(-1))
    test_y, test_c = _series(torch.Generator().manual_seed(1))
    test = torch.stack([test_y, test_c[:, 1:]], -1)
    error = (model.predictive(test, None, 0).mean[..., 0] - test_y)[:, 1:].pow(2).mean()
    error_alone = (alone.predictive(test_y.unsqueeze(-1), None, 0).mean[..., 0] - test_y)[:, 1:].pow(2).mean()
    assert error_alone > 5.0  # y's variance is 9 and c is independent of the past
    assert error < 0.1 * error_alone


def test_the_likelihood_counts_the_targets_only():
    torch.manual_seed(0)
    inner = GRUBaseline(3, emission="gaussian", rnn_dim=4, hidden_dim=4)
    model = CovariateInputs(inner, CovariateLayout(("y",), ("c",), ("p",)))
    x = torch.randn(2, 6, 3)
    exact = inner.predictive_distribution(x)
    by_hand = torch.distributions.Normal(exact.base_dist.loc[..., 0], exact.base_dist.scale[..., 0]).log_prob(x[..., 0])
    torch.testing.assert_close(model.log_likelihood(x), by_hand.sum(1))
    draws = model.predictive(x, None, 4).samples
    assert torch.equal(draws[..., 1:], x[..., 1:].expand_as(draws[..., 1:]))  # covariates as read


def test_a_past_only_covariate_after_the_origin_never_changes_the_forecast():
    torch.manual_seed(0)
    model = CovariateInputs(
        GRUBaseline(3, emission="gaussian", rnn_dim=4, hidden_dim=4), CovariateLayout(("y",), ("c",), ("p",))
    )
    x = torch.randn(2, 10, 3)
    mask = torch.arange(10) < torch.tensor([[7], [5]])
    future = torch.randn(2, 1, 1)
    torch.manual_seed(1)
    first = model.forecast_given(x, mask, future, 1, 50)
    changed = x.clone()
    changed[0, 7:, 2] += 100.0
    changed[1, 5:, 2] -= 100.0
    torch.manual_seed(1)
    assert torch.equal(model.forecast_given(changed, mask, future, 1, 50), first)
    changed[0, 6, 2] += 100.0  # the origin's own history does enter
    torch.manual_seed(1)
    assert not torch.equal(model.forecast_given(changed, mask, future, 1, 50)[:, 0], first[:, 0])


def test_past_only_covariates_are_refused_beyond_one_step():
    model = CovariateInputs(
        GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4), CovariateLayout(("y",), (), ("p",))
    )
    with pytest.raises(ValueError, match=r"horizon: 3 steps with past_covariates \['p'\]"):
        model.forecast_given(torch.randn(1, 5, 2), None, torch.zeros(1, 3, 0), 3)


def test_a_missing_known_value_in_the_forecast_window_is_refused():
    model = CovariateInputs(
        GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4), CovariateLayout(("y",), ("c",))
    )
    future = torch.tensor([[[1.0], [float("nan")]]])
    with pytest.raises(ValueError, match=r"future: a value of \['c'\] is missing"):
        model.forecast_given(torch.randn(1, 5, 2), None, future, 2)


def test_a_latent_model_is_refused_with_its_reason():
    from ppl_models.vrnn import VRNN

    with pytest.raises(TypeError, match="would model the covariates"):
        CovariateInputs(VRNN(2), CovariateLayout(("y",), ("c",)))


def test_a_forecast_without_the_covariates_future_values_is_refused():
    model = CovariateInputs(
        GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4), CovariateLayout(("y",), ("c",))
    )
    assert not model.supports("forecast") and not model.supports("generate")
    with pytest.raises(NotImplementedError, match="forecast_given"):
        model.forecast(torch.randn(1, 5, 2), None, 2)

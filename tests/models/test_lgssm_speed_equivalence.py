"""The LGSSM's batched Kalman filter (covariances once per batch, a steady-state stop, one product per step for the
means) against a Kalman filter written here in numpy float64, one sequence and one step at a time, and its
gradient against a plain torch filter written here."""

import math

import numpy as np
import pytest
import torch

from ppl_models import LinearGaussianSSM, kalman_kernels

pytestmark = pytest.mark.usefixtures("float64")


@pytest.fixture
def steady_stops(monkeypatch):
    """The steps at which the covariance recursion stopped at its steady state, one per filter pass that did."""
    stops, settled = [], kalman_kernels._settled

    def recording(updated, filtered, t):
        done = settled(updated, filtered, t)
        stops.extend([t] if done else [])
        return done

    monkeypatch.setattr(kalman_kernels, "_settled", recording)
    return stops


def _numpy_kalman(A, C, Q, R, P0, x, length, transitions=None):
    """The textbook filter of one sequence ``x [T, Dx]`` over its first ``length`` steps: per-step ``log p(x_t |
    x_<t)``, filtered means and covariances, predicted means and covariances, predictive means and covariances."""
    dz, dx = A.shape[0], C.shape[0]
    mean, cov = np.zeros(dz), P0
    out = {k: [] for k in ("ll", "fm", "fc", "pm", "pc", "ym", "yc")}
    for t in range(length):
        if t:
            move = A if transitions is None else transitions[t]
            mean, cov = move @ mean, move @ cov @ move.T + Q
        y_mean, y_cov = C @ mean, C @ cov @ C.T + R
        error = x[t] - y_mean
        ll = -0.5 * (error @ np.linalg.solve(y_cov, error) + np.linalg.slogdet(y_cov)[1] + dx * math.log(2 * math.pi))
        gain = cov @ C.T @ np.linalg.inv(y_cov)
        for key, value in zip(("ll", "pm", "pc", "ym", "yc"), (ll, mean, cov, y_mean, y_cov)):
            out[key].append(value)
        mean, cov = mean + gain @ error, cov - gain @ y_cov @ gain.T
        out["fm"].append(mean)
        out["fc"].append(cov)
    return {k: np.array(v) for k, v in out.items()}


def _np(tensor):
    return tensor.detach().double().numpy()


def _matrices(model):
    return [_np(m) for m in (model.A, model.C, model.Q, model.R, model.init_cov)]


def _model(latent, obs, seed, radius=0.9):
    return LinearGaussianSSM.random(latent, obs, spectral_radius=radius, generator=torch.Generator().manual_seed(seed))


def _padded(model, lengths, steps, seed):
    x, _ = model.sample(len(lengths), steps, generator=torch.Generator().manual_seed(seed))
    mask = torch.arange(steps) < torch.tensor(lengths).unsqueeze(1)
    return torch.where(mask.unsqueeze(-1), x, torch.full_like(x, float("nan"))), mask


@pytest.mark.parametrize("latent, obs, steps", [(4, 1, 400), (3, 2, 60), (1, 3, 7)])
def test_filter_equals_the_textbook_filter_at_every_valid_step(latent, obs, steps):
    model = _model(latent, obs, seed=latent + obs)
    lengths = [steps, steps // 2, 1, steps - 1]
    x, mask = _padded(model, lengths, steps, seed=1)
    result = model.kalman_filter(x, mask)
    fields = {
        "ll": "log_likelihood_steps",
        "fm": "filtered_means",
        "fc": "filtered_covs",
        "pm": "predicted_means",
        "pc": "predicted_covs",
        "ym": "predictive_means",
        "yc": "predictive_covs",
    }
    for b, n in enumerate(lengths):
        truth = _numpy_kalman(*_matrices(model), _np(x[b]), n)
        for key, field in fields.items():
            np.testing.assert_allclose(
                _np(getattr(result, field)[b, :n]), truth[key], rtol=1e-8, atol=1e-10, err_msg=field
            )
        np.testing.assert_allclose(_np(result.log_likelihood[b]), truth["ll"].sum(), rtol=1e-10)
        assert bool((result.log_likelihood_steps[b, n:] == 0).all())
        # padding holds the last valid step's filtered moments
        np.testing.assert_allclose(
            _np(result.filtered_means[b, n:]),
            np.broadcast_to(truth["fm"][-1], (steps - n, latent)),
            rtol=1e-8,
            atol=1e-10,
        )
        np.testing.assert_allclose(
            _np(result.filtered_covs[b, n:]),
            np.broadcast_to(truth["fc"][-1], (steps - n, latent, latent)),
            rtol=1e-8,
            atol=1e-10,
        )


def test_long_series_log_likelihood_equals_the_textbook_filter_past_the_steady_state(steady_stops):
    model = _model(4, 1, seed=3, radius=0.99)
    x, _ = model.sample(1, 1000, generator=torch.Generator().manual_seed(4))
    truth = _numpy_kalman(*_matrices(model), _np(x[0]), 1000)["ll"]
    np.testing.assert_allclose(_np(model.kalman_filter(x).log_likelihood_steps[0]), truth, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(_np(model.log_likelihood(x)), [truth.sum()], rtol=1e-10)
    assert steady_stops and steady_stops[0] < 1000


def test_predictive_distribution_is_the_textbook_one_step_predictive(steady_stops):
    model = _model(3, 2, seed=13, radius=0.5)
    lengths, steps = [200, 70], 200
    x, mask = _padded(model, lengths, steps, seed=14)
    predictive = model.predictive_distribution(x, mask)
    assert steady_stops and steady_stops[0] < 70
    for b, n in enumerate(lengths):
        truth = _numpy_kalman(*_matrices(model), _np(x[b]), n)
        np.testing.assert_allclose(_np(predictive.mean[b, :n]), truth["ym"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(_np(predictive.covariance_matrix[b, :n]), truth["yc"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(_np(predictive.log_prob(torch.nan_to_num(x))[b, :n]), truth["ll"], rtol=1e-8)


def test_float32_model_keeps_its_dtype_and_the_float64_answer_to_1e_5():
    model = _model(4, 2, seed=5).float()
    x, mask = _padded(model, [300, 120], 300, seed=6)
    ll = model.log_likelihood(x, mask)
    assert ll.dtype == torch.float32 and model.kalman_filter(x, mask).filtered_covs.dtype == torch.float32
    truth = [_numpy_kalman(*_matrices(model), _np(x[b]), n)["ll"].sum() for b, n in enumerate([300, 120])]
    np.testing.assert_allclose(_np(ll), truth, rtol=1e-5)


def test_per_step_transitions_equal_the_textbook_filter():
    model = _model(2, 2, seed=7)
    lengths, steps = [9, 5], 9
    x, mask = _padded(model, lengths, steps, seed=8)
    transitions = 0.5 * torch.randn(2, steps, 2, 2, generator=torch.Generator().manual_seed(9))
    result = model.kalman_filter(x, mask, transitions=transitions)
    for b, n in enumerate(lengths):
        truth = _numpy_kalman(*_matrices(model), _np(x[b]), n, _np(transitions[b]))
        np.testing.assert_allclose(_np(result.log_likelihood_steps[b, :n]), truth["ll"], rtol=1e-9)
        np.testing.assert_allclose(_np(result.filtered_means[b, :n]), truth["fm"], rtol=1e-8, atol=1e-10)


def _torch_log_likelihood(model, x):
    """``log p(x)`` of one sequence ``x [T, Dx]`` by the textbook filter in torch, step by step (for its gradient)."""
    A, C, Q, R = model.A, model.C, model.Q, model.R
    mean, cov, total = torch.zeros(model.latent_dim), model.init_cov, 0.0
    for t in range(x.shape[0]):
        if t:
            mean, cov = A @ mean, A @ cov @ A.T + Q
        y_cov = C @ cov @ C.T + R
        error = x[t] - C @ mean
        total = total - 0.5 * (
            error @ torch.linalg.solve(y_cov, error) + torch.logdet(y_cov) + model.obs_dim * math.log(2 * math.pi)
        )
        gain = cov @ C.T @ torch.linalg.inv(y_cov)
        mean, cov = mean + gain @ error, cov - gain @ y_cov @ gain.T
    return total


def test_gradient_equals_the_textbook_filter_gradient_past_the_steady_state(steady_stops):
    model = _model(2, 2, seed=10, radius=0.5)
    x, mask = _padded(model, [100, 30], 100, seed=11)
    params = [model.A, model.C, model.Q_raw, model.R_raw]
    ours = torch.autograd.grad(model.log_likelihood(x, mask).sum(), params)
    assert steady_stops and steady_stops[0] < 100  # the covariances stopped early
    textbook = _torch_log_likelihood(model, x[0]) + _torch_log_likelihood(model, x[1, :30])
    for mine, truth in zip(ours, torch.autograd.grad(textbook, params)):
        torch.testing.assert_close(mine, truth, rtol=1e-7, atol=1e-9)


def test_a_covariance_that_does_not_factorise_is_refused_in_one_line():
    model = _model(2, 1, seed=12)
    with torch.no_grad():
        model.R_raw.fill_(float("-inf"))  # R = 0 and C = 0: C P C^T + R is singular
        model.C.zero_()
    with pytest.raises(ValueError, match="innovation covariance") as error:
        model.log_likelihood(torch.zeros(1, 5, 1))
    assert "\n" not in str(error.value)

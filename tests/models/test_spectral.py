"""Method-of-moments pieces of the PSRNN held to exact answers: the Gaussian kernel, a discrete
HMM's forward filter, known low-rank tensors and a known linear-Gaussian system."""

import pyro
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO

from ppl_models import LinearGaussianSSM, TwoStageKalmanFilter
from ppl_models.inference.objectives import IWAE
from ppl_models.psrnn import PSRNNCell, normalize
from ppl_models.spectral import (
    RandomFourierFeatures,
    RidgeSolver,
    cp_decompose,
    cp_reconstruct,
    linear_two_stage_regression,
    median_distance,
    ridge_regression,
    time_windows,
    two_stage_regression,
)


def test_random_fourier_features_approximate_the_gaussian_kernel_better_with_more_features():
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 3, generator=generator), torch.randn(40, 3, generator=generator)
    bandwidth = 1.5
    kernel = torch.exp(-(torch.cdist(x, y) ** 2) / (2 * bandwidth**2))
    errors = []
    for num_features in (100, 1000, 20000):
        rff = RandomFourierFeatures(3, num_features, bandwidth, generator=generator)
        errors.append(float((rff(x) @ rff(y).T - kernel).abs().mean()))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.01  # Monte Carlo error ~ 1 / sqrt(F)


def test_median_distance_is_the_median_of_distinct_pairs():
    points = torch.tensor([[0.0], [1.0], [3.0]])  # distances 1, 3, 2
    assert median_distance(points) == pytest.approx(2.0)


def test_time_windows_cut_history_observation_and_futures_inside_each_valid_prefix():
    x = torch.arange(12.0).reshape(2, 6, 1)
    mask = torch.tensor([[True] * 6, [True] * 5 + [False]])
    w = time_windows(x, mask, horizon=2)
    # first sequence: t = 2, 3 (2 steps before, 2 + 1 after); second: t = 2 only
    assert w.observation.flatten().tolist() == [2.0, 3.0, 8.0]
    assert w.history.tolist() == [[0.0, 1.0], [1.0, 2.0], [6.0, 7.0]]
    assert w.future.tolist() == [[2.0, 3.0], [3.0, 4.0], [8.0, 9.0]]
    assert w.next_future.tolist() == [[3.0, 4.0], [4.0, 5.0], [9.0, 10.0]]


def test_ridge_regression_matches_the_normal_equations():
    generator = torch.Generator().manual_seed(1)
    u = torch.randn(50, 4, generator=generator, dtype=torch.float64)
    y = torch.randn(50, 2, generator=generator, dtype=torch.float64)
    m = ridge_regression(u, y, ridge=0.1)
    expected = y.T @ u @ torch.linalg.inv(u.T @ u + 0.1 * 50 * torch.eye(4, dtype=torch.float64))
    torch.testing.assert_close(m, expected)


def test_one_ridge_solver_serves_several_targets_as_separate_regressions_do():
    generator = torch.Generator().manual_seed(2)
    u = torch.randn(80, 6, generator=generator, dtype=torch.float64)
    solver = RidgeSolver(u, ridge=0.05)
    for width in (1, 3, 7):
        y = torch.randn(80, width, generator=generator, dtype=torch.float64)
        expected = y.T @ u @ torch.linalg.inv(u.T @ u + 0.05 * 80 * torch.eye(6, dtype=torch.float64))
        torch.testing.assert_close(solver(y), expected)


def test_ridge_solver_refuses_a_singular_gram_matrix_by_name():
    u = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], dtype=torch.float64)  # a zero column, no ridge
    with pytest.raises(ValueError, match="ridge=0.0"):
        RidgeSolver(u, ridge=0.0)
    torch.testing.assert_close(RidgeSolver(u, ridge=1e-3)(2 * u[:, :1])[0, 1], torch.tensor(0.0, dtype=torch.float64))


def test_two_stage_regression_with_a_shared_stage1_solver_gives_the_same_tensor():
    generator = torch.Generator().manual_seed(3)
    n = 200
    history, future, next_future = (torch.randn(n, d, generator=generator, dtype=torch.float64) for d in (9, 3, 3))
    observation = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    own = two_stage_regression(future, next_future, observation, history, 0.01)
    shared = two_stage_regression(future, next_future, observation, history, 0.01, stage1=RidgeSolver(history, 0.01))
    torch.testing.assert_close(shared.transition, own.transition, rtol=1e-10, atol=1e-12)
    # and both equal eq. 3 with ridge written out with explicit inverses
    gram_inv = torch.linalg.inv(history.T @ history + 0.01 * n * torch.eye(9, dtype=torch.float64))
    q = history @ gram_inv @ history.T @ future
    e = history @ gram_inv @ history.T @ (next_future[:, :, None] * observation[:, None, :]).flatten(1)
    w = e.T @ q @ torch.linalg.inv(q.T @ q + 0.01 * n * torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(own.transition, w.reshape(3, 2, 3))


# --- a discrete HMM: two-stage regression is consistent (the paper's appendix B) -----------------
TRANSITION = torch.tensor([[0.80, 0.10, 0.15], [0.15, 0.70, 0.05], [0.05, 0.20, 0.80]], dtype=torch.float64)
EMISSION = torch.tensor([[0.70, 0.20, 0.10], [0.20, 0.60, 0.10], [0.10, 0.20, 0.80]], dtype=torch.float64)


def _stationary():
    values, vectors = torch.linalg.eig(TRANSITION)
    v = vectors[:, values.real.argmax()].real
    return v / v.sum()


def _sample_hmm(num_sequences, num_steps, generator):
    """One-hot observations ``[B, T, 3]`` with states started from the stationary distribution."""
    state = torch.multinomial(_stationary().expand(num_sequences, -1), 1, generator=generator).squeeze(-1)
    observations = []
    for _ in range(num_steps):
        observations.append(torch.multinomial(EMISSION[:, state].T, 1, generator=generator).squeeze(-1))
        state = torch.multinomial(TRANSITION[:, state].T, 1, generator=generator).squeeze(-1)
    return torch.nn.functional.one_hot(torch.stack(observations, 1), 3).double()


def _forward_predictive(x):
    """Exact ``P(o_t | o_<t)`` ``[B, T, 3]`` of the true HMM."""
    belief = _stationary().expand(x.shape[0], -1)
    out = []
    for t in range(x.shape[1]):
        out.append(belief @ EMISSION.T)
        joint = belief * (x[:, t] @ EMISSION)
        belief = (joint / joint.sum(-1, keepdim=True)) @ TRANSITION.T
    return torch.stack(out, 1)


def _psrnn_predictive(result, x):
    """Filter with the eq.-5 cell (bias 0); the state read as probabilities after L1 normalisation."""
    cell = PSRNNCell(3, 3).double()
    with torch.no_grad():
        cell.transition.copy_(result.transition)
    q = normalize(result.initial_state).expand(x.shape[0], -1)
    out = []
    with torch.no_grad():
        for t in range(x.shape[1]):
            out.append(q / q.sum(-1, keepdim=True))
            q = cell(x[:, t], q)
    return torch.stack(out, 1)


def test_two_stage_regression_recovers_an_hmm_predictor_as_the_data_grow():
    generator = torch.Generator().manual_seed(0)
    test = _sample_hmm(50, 30, generator)
    truth = _forward_predictive(test)
    errors = []
    for num_sequences in (20, 200, 2000):
        w = time_windows(_sample_hmm(num_sequences, 100, generator), None, horizon=1)
        result = two_stage_regression(w.future, w.next_future, w.observation, w.history, ridge=1e-8)
        errors.append(float((_psrnn_predictive(result, test) - truth).abs().max()))
    assert errors[0] > errors[2]
    assert errors[2] < 0.03, errors


def test_cp_decompose_reconstructs_a_tensor_of_known_low_rank():
    generator = torch.Generator().manual_seed(2)
    factors = tuple(torch.randn(3, size, generator=generator, dtype=torch.float64) for size in (6, 5, 4))
    tensor = cp_reconstruct(factors)
    result = cp_decompose(tensor, 3, generator=generator)
    assert result.relative_error < 1e-6
    torch.testing.assert_close(cp_reconstruct(result.factors), tensor, atol=1e-5, rtol=0.0)


def test_cp_decompose_of_too_low_a_rank_leaves_an_error():
    generator = torch.Generator().manual_seed(3)
    tensor = torch.randn(5, 5, 5, generator=generator, dtype=torch.float64)
    assert cp_decompose(tensor, 2, generator=generator).relative_error > 0.3


def test_linear_two_stage_regression_approaches_the_true_kalman_predictor():
    generator = torch.Generator().manual_seed(4)
    truth = LinearGaussianSSM.random(2, 3, spectral_radius=0.9, generator=generator).double()
    test, _ = truth.sample(200, 40, generator=generator)
    with torch.no_grad():
        true_mse = float(((truth.kalman_filter(test).predictive_means - test) ** 2).mean())
        mses = []
        for num_sequences in (30, 3000):
            train, _ = truth.sample(num_sequences, 40, generator=generator)
            system = linear_two_stage_regression(train, None, 2, horizon=3, ridge=1e-6)
            learned = LinearGaussianSSM(system.A, system.C, system.Q, system.R, system.init_cov)
            mses.append(float(((learned.kalman_filter(test).predictive_means - test) ** 2).mean()))
    assert mses[1] < mses[0]
    assert mses[1] < 1.02 * true_mse, (mses, true_mse)  # the finite horizon leaves a small bias


def test_two_stage_kalman_filter_initializes_from_data_and_is_an_lgssm():
    generator = torch.Generator().manual_seed(5)
    truth = LinearGaussianSSM.random(2, 3, generator=generator)
    train, _ = truth.sample(100, 30, generator=generator)
    kf = TwoStageKalmanFilter(3, state_dim=2, horizon=3).initialize(train)
    assert kf.log_likelihood(train).shape == (100,)
    assert torch.isfinite(kf.log_likelihood(train)).all()
    predictive = kf.predictive_distribution(train)
    assert predictive.batch_shape == (100, 30) and predictive.event_shape == (3,)


def test_exact_proposal_makes_every_elbo_and_iwae_draw_the_kalman_log_likelihood():
    generator = torch.Generator().manual_seed(0)
    truth = LinearGaussianSSM.random(3, 2, generator=generator)
    x, _ = truth.sample(4, 12, generator=generator)
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[1, 8:], mask[3, 5:] = False, False
    model = LinearGaussianSSM(
        truth.A.detach(), truth.C.detach(), truth.Q.detach(), truth.R.detach(), truth.init_cov, proposal="exact"
    ).double()
    x = x.double()
    exact = model.log_likelihood(x, mask).detach()
    for _ in range(3):  # log p(x, z) - log q(z) = log p(x) whatever z the guide draws
        pyro.clear_param_store()
        assert Trace_ELBO().loss(model.model, model.guide, x, mask) == pytest.approx(-exact.sum().item(), rel=1e-10)
        torch.testing.assert_close(IWAE(model, 5)(x, mask).bound.detach(), exact)


def test_two_stage_kalman_filter_svi_loss_is_minus_its_exact_log_likelihood_at_lr_1e_2():
    generator = torch.Generator().manual_seed(5)
    truth = LinearGaussianSSM.random(2, 3, generator=generator)
    x, _ = truth.sample(20, 40, generator=generator)
    losses = {}
    for proposal in ("learned", "exact"):
        pyro.set_rng_seed(0)
        pyro.clear_param_store()
        kf = TwoStageKalmanFilter(3, state_dim=2, horizon=3, proposal=proposal).initialize(x)
        svi = SVI(kf.model, kf.guide, pyro.optim.Adam({"lr": 1e-2}), Trace_ELBO())
        losses[proposal] = []
        for _ in range(3):
            minus_exact = -kf.log_likelihood(x).sum().item()
            losses[proposal].append(svi.step(x))
            if proposal == "exact":  # the loss is evaluated at the parameters before the step
                assert losses[proposal][-1] == pytest.approx(minus_exact, rel=1e-4)
    # the exact likelihood improves step after step ...
    assert losses["exact"][2] < losses["exact"][1] < losses["exact"][0]
    # ... while the learned guide, set for the start's near-deterministic dynamics, lags them: its loss explodes
    assert losses["learned"][1] > 10 * losses["learned"][0]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: RandomFourierFeatures(0, 10), ValueError, "in_dim"),
        (lambda: RandomFourierFeatures(2, 10, bandwidth=0.0), ValueError, "bandwidth"),
        (lambda: time_windows(torch.zeros(1, 4, 1), None, horizon=2), ValueError, "2 \\* horizon \\+ 1"),
        (lambda: ridge_regression(torch.zeros(3, 2), torch.zeros(3, 1), ridge=-1.0), ValueError, "ridge"),
        (lambda: cp_decompose(torch.zeros(3, 3), 2), ValueError, "3-mode"),
        (lambda: cp_decompose(torch.zeros(3, 3, 3), 0), ValueError, "rank"),
        (lambda: TwoStageKalmanFilter(2, state_dim=9, horizon=4), ValueError, "state_dim"),
        (lambda: linear_two_stage_regression(torch.zeros(2, 20, 2), None, 5, horizon=2), ValueError, "state_dim"),
        # 15 steps with 5 before and 5 after: 5 windows, fewer than state_dim
        (
            lambda: TwoStageKalmanFilter(2, state_dim=8, horizon=5).initialize(torch.randn(1, 15, 2)),
            ValueError,
            r"^state_dim=8 is more than the 5 windows .* horizon=5",
        ),
    ],
)
def test_bad_input_raises_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()

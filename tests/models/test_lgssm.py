"""The LGSSM's Kalman filter and smoother against dense Gaussian algebra on the joint of (z, x)."""

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive, Trace_ELBO

from ppl_models import LinearGaussianSSM, TwoStageKalmanFilter

pytestmark = pytest.mark.usefixtures("float64")


def _model(latent=2, obs=3, seed=0):
    return LinearGaussianSSM.random(latent, obs, generator=torch.Generator().manual_seed(seed))


def _joint_moments(model, steps):
    """Mean zero and covariance of the stacked vector (z_1..z_T, x_1..x_T), built directly."""
    A, C, Q, R, P0 = (t.detach() for t in (model.A, model.C, model.Q, model.R, model.init_cov))
    dz = A.shape[0]
    # z = L w with w = (z_1, w_2..w_T): z_t = sum_s A^{t-s} w_s
    blocks = [[torch.zeros(dz, dz) for _ in range(steps)] for _ in range(steps)]
    for t in range(steps):
        for s in range(t + 1):
            blocks[t][s] = torch.linalg.matrix_power(A, t - s)
    L = torch.cat([torch.cat(row, 1) for row in blocks], 0)
    noise = torch.block_diag(P0, *([Q] * (steps - 1)))
    cov_z = L @ noise @ L.T
    big_c = torch.block_diag(*([C] * steps))
    cov_x = big_c @ cov_z @ big_c.T + torch.block_diag(*([R] * steps))
    cross = cov_z @ big_c.T
    return cov_z, cov_x, cross


def test_log_likelihood_equals_dense_gaussian():
    model, steps = _model(), 6
    x, _ = model.sample(4, steps, generator=torch.Generator().manual_seed(1))
    _, cov_x, _ = _joint_moments(model, steps)
    dense = torch.distributions.MultivariateNormal(torch.zeros(cov_x.shape[0]), cov_x).log_prob(x.reshape(4, -1))
    torch.testing.assert_close(model.log_likelihood(x), dense)


def test_smoother_and_filter_equal_gaussian_conditioning():
    model, steps = _model(), 5
    x, _ = model.sample(2, steps, generator=torch.Generator().manual_seed(2))
    cov_z, cov_x, cross = _joint_moments(model, steps)
    gain = cross @ torch.linalg.inv(cov_x)
    post_mean = (gain @ x.reshape(2, -1).T).T.reshape(2, steps, -1)
    post_cov = cov_z - gain @ cross.T
    means, covs = model.smooth(x)
    torch.testing.assert_close(means, post_mean)
    dz = model.latent_dim
    for t in range(steps):
        torch.testing.assert_close(covs[0, t], post_cov[t * dz : (t + 1) * dz, t * dz : (t + 1) * dz])
    # the filter at the last step is the smoother at the last step; at step 1 it conditions on x_1 only
    k = model.kalman_filter(x)
    torch.testing.assert_close(k.filtered_means[:, -1], means[:, -1])
    dx = model.obs_dim
    g1 = cross[:dz, :dx] @ torch.linalg.inv(cov_x[:dx, :dx])
    torch.testing.assert_close(k.filtered_means[:, 0], x[:, 0] @ g1.T)


def test_padded_batch_equals_sequences_alone():
    model = _model()
    x, _ = model.sample(3, 10, generator=torch.Generator().manual_seed(3))
    lengths = [10, 4, 7]
    mask = torch.arange(10).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    padded = torch.where(mask.unsqueeze(-1), x, torch.full_like(x, 1e3))
    batch_ll = model.kalman_filter(padded, mask)
    batch_means, _ = model.smooth(padded, mask)
    for b, n in enumerate(lengths):
        alone = model.log_likelihood(x[b : b + 1, :n])
        torch.testing.assert_close(batch_ll.log_likelihood[b : b + 1], alone)
        assert torch.all(batch_ll.log_likelihood_steps[b, n:] == 0)
        torch.testing.assert_close(batch_means[b, :n], model.smooth(x[b : b + 1, :n])[0][0])


def test_sample_moments_match_model():
    model = _model(2, 2)
    x, z = model.sample(20000, 2, generator=torch.Generator().manual_seed(4))
    C, R, P0 = model.C.detach(), model.R.detach(), model.init_cov
    torch.testing.assert_close(torch.cov(x[:, 0].T), C @ P0 @ C.T + R, atol=0.05, rtol=0.05)
    torch.testing.assert_close(torch.cov(z[:, 0].T), P0, atol=0.05, rtol=0.05)


def test_log_likelihood_is_differentiable():
    model = _model()
    x, _ = model.sample(2, 5)
    model.log_likelihood(x).sum().backward()
    for name in ("A", "C", "Q_raw", "R_raw"):
        assert getattr(model, name).grad.abs().sum() > 0


def test_model_and_guide_work_with_pyro_svi_and_predictive():
    model = _model(1, 1)
    x, _ = model.sample(4, 8)
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    before = model.A.detach().clone()
    for _ in range(3):
        assert torch.isfinite(torch.tensor(svi.step(x)))
    assert not torch.equal(before, model.A.detach())
    samples = Predictive(pyro.poutine.uncondition(model.model), guide=model.guide, num_samples=5)(x)
    assert samples["x_3"].shape == (5, 4, 1) and samples["z_0"].shape == (5, 4, 1)


def _three_states_one_feature(noise_q, noise_r):
    """A 3-state model seen through 1 feature (information matrices singular), its data and a padded mask."""
    base = _model(3, 1, seed=3)
    model = LinearGaussianSSM(
        base.A.detach(), base.C.detach(), noise_q * torch.eye(3), noise_r * torch.eye(1), torch.eye(3), proposal="exact"
    )
    x, _ = base.sample(3, 8, generator=torch.Generator().manual_seed(5))
    return model, x, torch.arange(8).expand(3, 8) < torch.tensor([[8], [5], [1]])


@pytest.mark.parametrize(
    "build",
    [
        lambda: _three_states_one_feature(1.0, 1.0),
        lambda: _three_states_one_feature(1e-6, 1e-2),  # near-deterministic dynamics, as a two-stage start's
        # its raw start before initialize: C = 0, so no step carries information (J = 0 throughout)
        lambda: (TwoStageKalmanFilter(1, state_dim=2, horizon=2), _model(1, 1).sample(3, 8)[0], None),
    ],
    ids=["unit-noise", "near-deterministic", "two-stage-raw-start"],
)
def test_exact_proposal_elbo_and_its_gradient_are_the_kalman_likelihoods(build):
    """Padded steps (zero information, where an eigendecomposition's gradient is NaN) and singular information."""
    model, x, mask = build()
    loss = Trace_ELBO().differentiable_loss(model.model, model.guide, x, mask)
    exact = model.log_likelihood(x, mask).sum()
    assert loss.item() == pytest.approx(-exact.item(), rel=1e-10)
    by_elbo = torch.autograd.grad(loss, list(model.parameters()))
    by_kalman = torch.autograd.grad(-exact, list(model.parameters()))
    for (name, _), elbo_grad, kalman_grad in zip(model.named_parameters(), by_elbo, by_kalman, strict=True):
        assert torch.isfinite(elbo_grad).all(), name
        torch.testing.assert_close(elbo_grad, kalman_grad, rtol=1e-6, atol=1e-8, msg=name)


@pytest.mark.parametrize(
    ("proposal", "own"), [("learned", {"F", "G", "b", "S_raw"}), ("bootstrap", set()), ("exact", set())]
)
def test_only_the_learned_proposal_has_parameters_of_its_own(proposal, own):
    model = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0), proposal=proposal)
    x, _ = model.sample(2, 5, generator=torch.Generator().manual_seed(1))
    SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO()).step(x)
    names = {"A", "C", "Q_raw", "R_raw"} | own
    assert set(pyro.get_param_store().keys()) == {f"{model.pyro_name}$$${name}" for name in names}
    assert {name for name, _ in model.named_parameters()} == names
    # a checkpoint written with the learned guide's parameters loads (strictly) into every proposal
    learned = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(2))
    model.load_state_dict(learned.state_dict())
    assert torch.equal(model.A, learned.A) and torch.equal(model.R_raw, learned.R_raw)


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("A", float("nan"), "A, C, Q or R holds NaN or inf"),
        ("C", float("inf"), "A, C, Q or R holds NaN or inf"),
        # Q's variance e^-800: its inverse overflows
        ("Q_raw", -400.0, "the parameters are too ill-conditioned for floating point"),
    ],
)
def test_exact_proposal_refuses_parameters_it_cannot_factorise_in_one_line(name, value, match):
    model = LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0), proposal="exact")
    x, _ = model.sample(2, 5, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        getattr(model, name)[0, 0] = value
    with pytest.raises(
        ValueError, match=f"'exact': the posterior precision does not factorise or its moments are not finite; {match}"
    ):
        model.guide(x)


def test_bad_parameters_raise_value_error_naming_them():
    eye = torch.eye(2)
    with pytest.raises(ValueError, match="A must"):
        LinearGaussianSSM(torch.ones(2, 3), eye, eye, eye, eye)
    with pytest.raises(ValueError, match="C must"):
        LinearGaussianSSM(eye, torch.ones(2, 3), eye, eye, eye)
    with pytest.raises(ValueError, match="Q must be symmetric positive definite"):
        LinearGaussianSSM(eye, eye, -eye, eye, eye)
    with pytest.raises(ValueError, match="R must"):
        LinearGaussianSSM(eye, eye, eye, torch.eye(3), eye)
    with pytest.raises(ValueError, match="proposal"):
        LinearGaussianSSM(eye, eye, eye, eye, eye, proposal="optimal")
    model = LinearGaussianSSM(eye, eye, eye, eye, eye)
    with pytest.raises(ValueError, match="x must have 2 features"):
        model.log_likelihood(torch.zeros(1, 3, 5))

"""The particle filter held to the exact Kalman answers of a linear-Gaussian SSM (in float64); its weights kept
normalised and finite by an outlier up to the dtype's limit, and a NaN weight one error naming its place."""

import math

import pyro
import pyro.distributions as dist
import pytest
import torch
from factories import lgssm_sequences, random_lgssm, warned

from ppl_models import LinearGaussianSSM
from ppl_models.inference import FilterFailed, FilterResult, ParticleFilter, forecast
from ppl_models.inference.particle_filter import Step
from ppl_models.inference.pyro_programs import PyroProgramModel

pytestmark = pytest.mark.usefixtures("float64")


@pytest.mark.parametrize("scheme", ["multinomial", "stratified", "systematic", "soft"])
def test_log_evidence_matches_kalman_for_every_scheme(scheme):
    model = random_lgssm()
    x = lgssm_sequences(model, 8, 100)
    exact = model.log_likelihood(x)
    with torch.no_grad():
        est = ParticleFilter(1000, resampling=scheme, generator=torch.Generator().manual_seed(2)).run(model, x)
    err = est.log_evidence - exact
    assert err.abs().max() < 0.6, err
    assert err.mean().abs() < 0.25, err


def test_error_shrinks_as_particles_grow_like_one_over_sqrt_k():
    model = random_lgssm()
    x = lgssm_sequences(model, 1, 50).expand(400, 50, 1)  # 400 independent runs on one sequence, in one batch
    exact = model.log_likelihood(x[:1])
    spreads, biases = [], []
    with torch.no_grad():
        for k in (25, 100, 400):
            est = ParticleFilter(k, generator=torch.Generator().manual_seed(k)).run(model, x).log_evidence
            spreads.append(est.std().item())
            biases.append((est.mean() - exact).abs().item())
    assert 1.5 < spreads[0] / spreads[1] < 2.7 and 1.5 < spreads[1] / spreads[2] < 2.7, spreads
    assert biases[2] < biases[0], biases


@pytest.mark.parametrize("scheme", ["multinomial", "systematic", "soft", "none"])
def test_exp_of_estimate_is_unbiased(scheme):
    model = random_lgssm()
    x = lgssm_sequences(model, 1, 20, seed=3).expand(4000, 20, 1)
    exact = model.log_likelihood(x[:1])
    with torch.no_grad():
        est = ParticleFilter(50, resampling=scheme, generator=torch.Generator().manual_seed(4)).run(model, x)
    ratio = torch.exp(est.log_evidence - exact)
    se = ratio.std() / math.sqrt(ratio.numel())
    assert (ratio.mean() - 1).abs() < 3.5 * se, (ratio.mean(), se)
    assert ratio.mean() > 0.8  # the standard error itself is small enough to mean something


def test_padding_is_ignored_and_padded_sequences_match_their_length():
    model = random_lgssm(2, 2, proposal="learned")
    x = lgssm_sequences(model, 3, 30)
    lengths = torch.tensor([30, 12, 20])
    mask = torch.arange(30).unsqueeze(0) < lengths.unsqueeze(1)
    garbage = torch.where(mask.unsqueeze(-1), x, torch.full_like(x, 7.0))
    runs = []
    for padded in (x, garbage):
        pyro.set_rng_seed(5)
        with torch.no_grad():
            runs.append(ParticleFilter(500, generator=torch.Generator().manual_seed(6)).run(model, padded, mask))
    assert torch.equal(runs[0].log_evidence, runs[1].log_evidence)
    assert torch.all(runs[0].log_evidence_steps[~mask] == 0)
    assert runs[0].num_steps.tolist() == lengths.tolist()
    for b, n in enumerate(lengths.tolist()):
        alone = model.log_likelihood(x[b : b + 1, :n])
        assert (runs[0].log_evidence[b] - alone).abs() < 0.5


def test_one_sequence_alone_and_in_a_batch_agree_within_monte_carlo_error():
    model = random_lgssm(2, 2, proposal="learned")
    x = lgssm_sequences(model, 4, 40)
    with torch.no_grad():
        batch = ParticleFilter(2000, generator=torch.Generator().manual_seed(7)).run(model, x).log_evidence
        alone = torch.cat([ParticleFilter(2000).run(model, x[b : b + 1]).log_evidence for b in range(4)])
    assert (batch - alone).abs().max() < 0.3


def test_ancestry_paths_and_smoothing_agree_with_kalman():
    model = random_lgssm(1, 1, seed=2)
    x = lgssm_sequences(model, 2, 15)
    with torch.no_grad():
        result = ParticleFilter(5000, generator=torch.Generator().manual_seed(8)).run(model, x, keep_ancestry=True)
    paths = result.paths("z")
    assert paths.shape == (15, 5000, 2, 1)
    assert torch.equal(paths[-1], result.state["z"])
    # each path step is an existing particle of that step
    assert torch.all(torch.isin(paths[5, :, 0, 0], result.history["z"][5, :, 0, 0]))
    kalman = model.kalman_filter(x)
    torch.testing.assert_close(result.filtered_mean("z"), kalman.filtered_means, atol=0.06, rtol=0)
    smoothed, _ = model.smooth(x)
    torch.testing.assert_close(result.smoothed_mean("z")[:, 8:], smoothed[:, 8:], atol=0.1, rtol=0)
    # fixed lag L: E[z_t | x_{1:t+L}], exactly the RTS smoother run on the data up to t + L
    lag = 3
    fixed_lag = torch.stack([model.smooth(x[:, : min(t + lag, 14) + 1])[0][:, t] for t in range(15)], 1)
    torch.testing.assert_close(result.smoothed_mean("z", lag=lag), fixed_lag, atol=0.1, rtol=0)
    with pytest.raises(ValueError, match="keep_ancestry"):
        ParticleFilter(10).run(model, x).paths("z")


def test_recorded_means_match_kalman_and_the_history_without_keeping_particles():
    """keep_means records E[z_t | x_{1:t}] per step: the Kalman filtering means, and the history's means."""
    model = random_lgssm(2, 1, seed=3)
    x = lgssm_sequences(model, 3, 12)
    mask = torch.ones(3, 12, dtype=torch.bool)
    mask[1, 8:] = False
    with torch.no_grad():
        result = ParticleFilter(4000, generator=torch.Generator().manual_seed(2)).run(model, x, mask, keep_means=("z",))
        both = ParticleFilter(50, generator=torch.Generator().manual_seed(2)).run(
            model, x, mask, keep_ancestry=True, keep_means=("z",)
        )
    assert result.history is None and result.means["z"].shape == (3, 12, 2)
    kalman = model.kalman_filter(x, mask)
    valid = mask.unsqueeze(-1).expand(-1, -1, 2)
    torch.testing.assert_close(result.filtered_mean("z")[valid], kalman.filtered_means[valid], atol=0.08, rtol=0)
    from_history = FilterResult._weighted_mean(both.history["z"], both.history_log_weights).transpose(0, 1)
    torch.testing.assert_close(both.means["z"], from_history)
    torch.testing.assert_close(result.means["z"][1, 8:], result.means["z"][1, 7].expand(4, 2))  # carried at padding
    with pytest.raises(ValueError, match="keep_means"):
        ParticleFilter(10).run(model, x, keep_means=("h",))
    with pytest.raises(TypeError, match="keep_means"):
        ParticleFilter(10).run(model, x, keep_means="z")


def _exact_gradient(model, x):
    model.zero_grad()
    model.log_likelihood(x).sum().backward()
    grads = torch.cat([p.grad.flatten() for p in (model.A, model.C, model.Q_raw, model.R_raw)])
    model.zero_grad()
    return grads


@pytest.mark.parametrize("lag", [None, 5])
def test_fisher_identity_gradient_matches_exact_score(lag):
    model = random_lgssm(1, 1, seed=3, proposal="learned")
    x = lgssm_sequences(model, 4, 15)
    exact = _exact_gradient(model, x)
    pf = ParticleFilter(3000, gradient="stop_weights", fisher_lag=lag, generator=torch.Generator().manual_seed(9))
    result = pf.run(model, x)
    result.fisher_objective.sum().backward()
    est = torch.cat([p.grad.flatten() for p in (model.A, model.C, model.Q_raw, model.R_raw)])
    assert torch.linalg.norm(est - exact) < 0.15 * torch.linalg.norm(exact), (est, exact)
    for p in (model.F, model.G, model.S_raw):  # the proposal does not enter Fisher's identity
        assert p.grad is None or p.grad.abs().sum() == 0


def test_reparam_and_soft_modes_give_gradients_to_model_and_proposal():
    model = random_lgssm(1, 1, proposal="learned")
    x = lgssm_sequences(model, 2, 10)
    for pf in (ParticleFilter(50), ParticleFilter(50, gradient="soft", soft_alpha=0.5)):
        model.zero_grad()
        pf.run(model, x).log_evidence.sum().backward()
        for p in (model.A, model.R_raw, model.F, model.S_raw):
            assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


class _LGSSMPrograms:
    """The same LGSSM as ``init``/``step`` Pyro programs; ``init`` draws z_0 and step 0 moves to z_1."""

    def __init__(self, model):
        self.m = model

    def init(self, state, x):
        with pyro.plate("sequences", x.shape[0], dim=-1):
            state["z"] = pyro.sample("z_init", dist.MultivariateNormal(torch.zeros(1), self.m.init_cov))

    def step(self, state, x_t):
        with pyro.plate("sequences", state["z"].shape[1], dim=-1):
            z = pyro.sample("z", dist.MultivariateNormal(state["z"] @ self.m.A.T, scale_tril=self.m.Q_tril))
            pyro.sample("x", dist.MultivariateNormal(z @ self.m.C.T, scale_tril=self.m.R_tril), obs=x_t)
        state["z"] = z


def test_pyro_programs_give_the_exact_evidence_and_fisher_gradients():
    model = random_lgssm(1, 1, seed=5)
    x = lgssm_sequences(model, 3, 30)
    shifted = LinearGaussianSSM(model.A, model.C, model.Q, model.R, model.A @ model.init_cov @ model.A.T + model.Q)
    programs = PyroProgramModel(_LGSSMPrograms(model))
    with torch.no_grad():
        est = ParticleFilter(2000, generator=torch.Generator().manual_seed(10)).run(programs, x)
    assert (est.log_evidence - shifted.log_likelihood(x)).abs().max() < 0.4
    result = ParticleFilter(200, gradient="stop_weights").run(programs, x[:, :5])
    result.fisher_objective.sum().backward()
    assert model.A.grad.abs() > 0 and model.R_raw.grad.abs() > 0
    with pytest.raises(TypeError, match="model must have init"):
        PyroProgramModel(object())


def test_bad_input_raises_value_error_naming_argument():
    model = random_lgssm()
    x = lgssm_sequences(model, 2, 5)
    with pytest.raises(ValueError, match="num_particles"):
        ParticleFilter(0)
    with pytest.raises(TypeError, match="num_particles"):
        ParticleFilter(2.5)
    with pytest.raises(ValueError, match="resampling"):
        ParticleFilter(10, resampling="residual")
    with pytest.raises(ValueError, match="gradient"):
        ParticleFilter(10, gradient="score")
    with pytest.raises(ValueError, match="gradient='soft' needs resampling='soft'"):
        ParticleFilter(10, resampling="systematic", gradient="soft")
    with pytest.raises(ValueError, match="ess_threshold"):
        ParticleFilter(10, ess_threshold=1.5)
    pf = ParticleFilter(10)
    for bad_model in (None, object()):
        with pytest.raises(TypeError, match="model must be a particle model with start"):
            pf.run(bad_model, x)
    with pytest.raises(ValueError, match=r"x must have shape \[B, T, D\]"):
        pf.run(model, x[0])
    with pytest.raises(ValueError, match="empty batch"):
        pf.run(model, x[:0])
    bad = x.clone()
    bad[0, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        pf.run(model, bad)
    with pytest.raises(ValueError, match="mask must have shape"):
        pf.run(model, x, torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="prefix"):
        pf.run(model, x, torch.tensor([[True, False, True, True, True]] * 2))


def test_forecasts_match_the_kalman_predictive_h_steps_ahead():
    model = random_lgssm(2, 1, seed=6, proposal="learned")
    x = lgssm_sequences(model, 3, 20)
    lengths = torch.tensor([20, 12, 16])
    mask = torch.arange(20).unsqueeze(0) < lengths.unsqueeze(1)
    with torch.no_grad():
        result = ParticleFilter(3000, generator=torch.Generator().manual_seed(11)).run(model, x, mask)
        paths = forecast(model, result, horizon=4, num_samples=20000)
        kalman = model.kalman_filter(x, mask)
    assert paths.shape == (20000, 3, 4, 1)
    A, C, Q, R = (t.detach() for t in (model.A, model.C, model.Q, model.R))
    for b, n in enumerate(lengths.tolist()):
        mean, cov = kalman.filtered_means[b, n - 1], kalman.filtered_covs[b, n - 1]
        for h in range(4):  # p(x_{T+h+1} | x_{1:T}) = N(C A^{h+1} m, C P_{h+1} C^T + R)
            mean, cov = A @ mean, A @ cov @ A.T + Q
            torch.testing.assert_close(paths[:, b, h, 0].mean(), (C @ mean)[0], atol=0.06, rtol=0)
            torch.testing.assert_close(paths[:, b, h, 0].var(), (C @ cov @ C.T + R)[0, 0], atol=0.08, rtol=0.06)
    with pytest.raises(ValueError, match="horizon"):
        forecast(model, result, horizon=0)


class _Walk:
    """A one-dimensional particle model, unit weights; ``fail_at = (t, b)`` makes that weight NaN."""

    def __init__(self, fail_at=None):
        self.fail_at = fail_at

    def start(self, x, mask, num_particles):
        return {"z": x.new_zeros(num_particles, x.shape[0])}, None

    def step(self, state, t, x_t, context, *, reparameterize=True):
        log_w = torch.zeros_like(state["z"])
        if self.fail_at is not None and t == self.fail_at[0]:
            log_w[:, self.fail_at[1]] = math.nan
        return Step(state, log_w, log_w)


class _DeclaresSimulateOnly(_Walk):
    particle_options = frozenset({"simulate"})

    def simulate(self, state, t, context):
        return state, state["z"].unsqueeze(-1)


class _DeclaresWithoutDefining(_Walk):
    particle_options = frozenset({"predict_mean"})


def test_a_failed_run_raises_filter_failed_naming_the_step_and_sequence():
    x = torch.zeros(3, 6, 1)
    with pytest.raises(FilterFailed, match=r"NaN or \+inf at step 4 of sequence 2 \(x\[2, 4\]\)"):
        ParticleFilter(5).run(_Walk(fail_at=(4, 2)), x)
    assert issubclass(FilterFailed, ValueError)  # callers catching bad values catch it too
    mask = torch.arange(6) < torch.tensor([[6], [6], [4]])  # the failure falls on padding: no failure
    assert ParticleFilter(5).run(_Walk(fail_at=(4, 2)), x, mask).log_evidence.tolist() == [0.0, 0.0, 0.0]


def test_optional_methods_are_read_from_the_declared_particle_options():
    x = torch.zeros(2, 3, 1)
    result = ParticleFilter(4).run(_DeclaresSimulateOnly(), x, predictive_samples=2)
    assert torch.equal(result.predictive, torch.zeros(2, 2, 3, 1))  # every particle is 0
    with pytest.raises(
        ValueError,
        match=r"predictive_mean=True needs predict_mean\(state, t, context\).*"
        r"_DeclaresSimulateOnly does not declare",
    ):
        ParticleFilter(4).run(_DeclaresSimulateOnly(), x, predictive_mean=True)
    with pytest.raises(ValueError, match=r"predictive_samples > 0 needs simulate.*_Walk does not declare"):
        ParticleFilter(4).run(_Walk(), x, predictive_samples=2)
    with pytest.raises(ValueError, match=r"forecast needs simulate.*_Walk does not declare"):
        forecast(_Walk(), ParticleFilter(4).run(_Walk(), x), horizon=1)
    with pytest.raises(
        TypeError,
        match="_DeclaresWithoutDefining declares 'predict_mean' in its particle_options "
        "but defines no method predict_mean",
    ):
        ParticleFilter(4).run(_DeclaresWithoutDefining(), x)


# --- an outlier keeps the weights normalised and finite up to the dtype's limit -----------------------------------
K, OUTLIER_STEP = 64, 5


def _with_outlier(value, dtype):
    """``x [3, 12, 1]`` drawn in float32 (whatever the default dtype), ``±value`` at ``OUTLIER_STEP`` of sequences 0
    and 2, in ``dtype``."""
    x = torch.randn(3, 12, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float32).to(dtype)
    x[0, OUTLIER_STEP, 0] = value
    x[2, OUTLIER_STEP, 0] = -value
    return x


def _run(model, x, scheme="systematic", **kwargs):
    """``(result, [RuntimeWarning messages])`` of a filter of ``K`` particles."""
    pf = ParticleFilter(K, resampling=scheme, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        return warned(lambda: pf.run(model, x, **kwargs), RuntimeWarning)


F32_MAX, F64_MAX = torch.finfo(torch.float32).max, torch.finfo(torch.float64).max


@pytest.mark.parametrize("scheme", ["systematic", "stratified", "multinomial", "soft"])
@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (1e6, torch.float32),
        (1e18, torch.float32),
        (1e19, torch.float32),
        (1e30, torch.float32),
        (F32_MAX, torch.float32),
        (1e150, torch.float64),
        (F64_MAX, torch.float64),
    ],
)
def test_outlier_keeps_filter_finite_and_normalised(value, dtype, scheme):
    model = random_lgssm(2, 1).to(dtype)
    result, _ = _run(model, _with_outlier(value, dtype), scheme, keep_ancestry=True)
    assert torch.isfinite(result.log_evidence).all(), result.log_evidence
    assert ((result.ess >= 1) & (result.ess <= K)).all(), result.ess
    sums = result.history_log_weights.exp().sum(1)  # [T, B]
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5), sums
    # the outlier sequences are far less likely than the clean one
    assert (result.log_evidence[[0, 2]] < result.log_evidence[1] - 1e6).all()


def test_overflowing_outlier_warns_naming_step_and_sequence():
    _, messages = _run(random_lgssm(2, 1).to(torch.float32), _with_outlier(1e30, torch.float32))
    assert len(messages) == 1 and f"step {OUTLIER_STEP} of sequence 0" in messages[0], messages


def test_representable_outlier_neither_warns_nor_changes_the_weights_argmax():
    """At a 1e6 outlier (log-weights ~ -1e12 in float32) the filter's weights match a float64 hand computation."""
    model = random_lgssm(2, 1).to(torch.float32)
    x = _with_outlier(1e6, torch.float32)
    result, messages = _run(model, x, keep_ancestry=True)
    assert messages == []
    z = result.history["z"][OUTLIER_STEP].double()  # [K, B, 2]: particles that weighed the outlier
    mean = z @ model.C.double().T  # [K, B, 1]
    var = model.R.double()[0, 0]
    prior_log_w = result.history_log_weights[OUTLIER_STEP - 1].double()
    resampled = result.resampled[:, OUTLIER_STEP]
    prior_log_w = torch.where(resampled, torch.full_like(prior_log_w, -math.log(K)), prior_log_w)
    log_lik = -0.5 * (x[:, OUTLIER_STEP, 0].double() - mean[..., 0]) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)
    hand = torch.softmax(prior_log_w + log_lik, dim=0)
    filt = result.history_log_weights[OUTLIER_STEP].exp().double()
    assert torch.equal(hand.argmax(0)[[0, 2]], filt.argmax(0)[[0, 2]])
    assert torch.allclose(filt[:, [0, 2]], hand[:, [0, 2]], atol=1e-3)


class _NaNAt:
    """A particle model whose incremental weight is NaN at one (step, sequence)."""

    def __init__(self, step, sequence):
        self.step_index, self.sequence = step, sequence

    def start(self, x, mask, num_particles):
        return {"z": x.new_zeros(num_particles, x.shape[0])}, None

    def step(self, state, t, x_t, context, *, reparameterize=True):
        log_w = torch.zeros_like(state["z"])
        if t == self.step_index:
            log_w[:, self.sequence] = math.nan
        return Step(state, log_w, log_w)


@pytest.mark.parametrize("scheme", ["systematic", "multinomial"])
def test_nan_weight_is_one_error_naming_step_and_sequence(scheme):
    x = torch.zeros(3, 6, 1)
    with pytest.raises(ValueError, match=r"NaN or \+inf at step 3 of sequence 1 \(x\[1, 3\]\)"):
        ParticleFilter(8, resampling=scheme, ess_threshold=1.0).run(_NaNAt(3, 1), x)


def test_nan_at_padding_is_ignored():
    x = torch.zeros(3, 6, 1)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 3:] = False
    result = ParticleFilter(8).run(_NaNAt(3, 1), x, mask)
    assert torch.isfinite(result.log_evidence).all()

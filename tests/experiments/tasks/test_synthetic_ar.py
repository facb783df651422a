"""The SMC Transformer paper's data: synthetic AR models I and II (true law, metrics) and the COVID-19 loader."""

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
import torch

from ppl_models.experiments.data import resolve_data_dir
from ppl_models.experiments.registry import DATASETS, build
from ppl_models.experiments.tasks.covid import covid_deaths
from ppl_models.experiments.tasks.synthetic_ar import (
    ARModel,
    ar_data,
    ar_model_two_data,
    interval_share,
    model_one,
    model_two,
    predictive_mse,
)

ALPHA_I, VAR_I = 0.8, 0.5
ALPHA_II, BETA_II, P_II, VAR_II = 0.9, 0.54, 0.7, 0.3


def _numpy_mixture_cdf(value, x_prev):
    """Model II's conditional CDF written with scipy (independent of the code under test)."""
    scale = math.sqrt(VAR_II)
    return P_II * scipy.stats.norm.cdf(value, ALPHA_II * x_prev, scale) + (1 - P_II) * scipy.stats.norm.cdf(
        value, BETA_II * x_prev, scale
    )


def _numpy_true_draws(model: str, x_prev: np.ndarray, num_samples: int, seed: int) -> np.ndarray:
    """``[S, *x_prev.shape]`` draws of X_{t+1} given X_t, from numpy's generator (independent sampler)."""
    rng = np.random.default_rng(seed)
    shape = (num_samples, *x_prev.shape)
    if model == "I":
        return ALPHA_I * x_prev + math.sqrt(VAR_I) * rng.standard_normal(shape)
    coefficient = np.where(rng.random(shape) < P_II, ALPHA_II, BETA_II)
    return coefficient * x_prev + math.sqrt(VAR_II) * rng.standard_normal(shape)


# --------------------------------------------------------------------------- generator and splits


def test_model_one_generator_has_the_papers_coefficient_and_noise():
    x = model_one().simulate(20000, 24, generator=torch.Generator().manual_seed(0))[..., 0].numpy()
    assert x.shape == (20000, 25)
    assert abs(x[:, 0].mean()) < 0.03 and abs(x[:, 0].var() - 1.0) < 0.04  # X_0 ~ N(0, 1)
    prev, nxt = x[:, :-1].ravel(), x[:, 1:].ravel()
    slope = (prev * nxt).sum() / (prev * prev).sum()  # least squares through the origin
    residual = nxt - slope * prev
    assert abs(slope - ALPHA_I) < 0.003
    assert abs(residual.var() - VAR_I) < 0.005
    assert abs(scipy.stats.kurtosis(residual)) < 0.05  # Gaussian noise


def test_model_two_generator_has_the_papers_mixture():
    x = model_two().simulate(20000, 24, generator=torch.Generator().manual_seed(1))[..., 0].numpy()
    prev, nxt = x[:, :-1].ravel(), x[:, 1:].ravel()
    mean_coefficient = P_II * ALPHA_II + (1 - P_II) * BETA_II
    slope = (prev * nxt).sum() / (prev * prev).sum()
    assert abs(slope - mean_coefficient) < 0.003
    # Var(X_{t+1} | X_t) = sigma^2 + p (1 - p) (alpha - beta)^2 X_t^2: regress squared residuals on X_t^2
    squared = (nxt - mean_coefficient * prev) ** 2
    design = np.stack([np.ones_like(prev), prev**2], 1)
    (intercept, curvature), *_ = np.linalg.lstsq(design, squared, rcond=None)
    assert abs(intercept - VAR_II) < 0.01
    assert abs(curvature - P_II * (1 - P_II) * (ALPHA_II - BETA_II) ** 2) < 0.004


def test_folds_split_800_100_100_with_disjoint_test_blocks():
    folds = [ar_data(model_one(), fold=k, seed=3) for k in range(5)]
    everything = torch.cat([folds[0].train[0], folds[0].valid[0], folds[0].test[0]])
    assert everything.shape == (1000, 25, 1) and everything.dtype == torch.float32
    keys = {tuple(row.flatten().tolist()) for row in everything}
    assert len(keys) == 1000
    tests, valids = [], []
    for data in folds:
        sizes = [part[0].shape[0] for part in (data.train, data.valid, data.test)]
        assert sizes == [800, 100, 100]
        assert all(bool(part[1].all()) for part in (data.train, data.valid, data.test))
        rows = [{tuple(r.flatten().tolist()) for r in part[0]} for part in (data.train, data.valid, data.test)]
        assert rows[0] | rows[1] | rows[2] == keys  # the same 1000 sequences in every fold
        assert not (rows[0] & rows[1] or rows[0] & rows[2] or rows[1] & rows[2])
        tests.append(rows[2])
        valids.append(rows[1])
    assert set().union(*tests, *valids) == keys  # test and validation blocks of the folds cover everything once
    assert sum(len(t) for t in tests) == 500
    assert torch.equal(ar_data(model_one(), fold=2, seed=3).test[0], folds[2].test[0])
    assert not torch.equal(ar_data(model_one(), fold=2, seed=4).test[0], folds[2].test[0])


def test_registry_builds_the_data_sets_with_a_fold():
    data = build({"name": "ar-model-2", "fold": 4}, DATASETS, "data")
    assert data.truth.coefficients == pytest.approx((ALPHA_II, BETA_II))
    assert torch.equal(data.test[0], ar_model_two_data(fold=4).test[0])


# --------------------------------------------------------------------------- the true conditional law


def test_model_one_interval_is_the_gaussian_one():
    x_prev = torch.linspace(-3, 3, 13, dtype=torch.float64)
    low, high = model_one().interval(x_prev, 0.95)
    half = scipy.stats.norm.ppf(0.975) * math.sqrt(VAR_I)
    torch.testing.assert_close(low, ALPHA_I * x_prev - half, rtol=0, atol=1e-9)
    torch.testing.assert_close(high, ALPHA_I * x_prev + half, rtol=0, atol=1e-9)
    torch.testing.assert_close(model_one().mean(x_prev), ALPHA_I * x_prev)


def test_model_two_quantiles_match_scipy_root_finding_and_monte_carlo():
    x_prev = np.array([-2.5, -0.4, 0.0, 1.0, 3.0])
    truth = model_two()
    for q in (0.025, 0.1, 0.5, 0.9, 0.975):
        ours = truth.quantile(torch.tensor(x_prev), q).numpy()
        roots = [
            scipy.optimize.brentq(lambda v, x=x, q=q: _numpy_mixture_cdf(v, x) - q, -20, 20, xtol=1e-12) for x in x_prev
        ]
        np.testing.assert_allclose(ours, roots, atol=1e-8)
        monte_carlo = np.quantile(_numpy_true_draws("II", x_prev, 400000, seed=5), q, axis=0)
        np.testing.assert_allclose(ours, monte_carlo, atol=0.01)


def test_model_two_samples_follow_the_mixture():
    x_prev = torch.tensor([1.5, -2.0], dtype=torch.float64)
    draws = model_two().sample(x_prev, 20000, generator=torch.Generator().manual_seed(6)).numpy()
    assert draws.shape == (20000, 2)
    for column, x in zip(draws.T, x_prev.tolist()):
        assert scipy.stats.kstest(column, lambda v, x=x: _numpy_mixture_cdf(v, x)).pvalue > 0.01


def test_true_log_likelihood_matches_independent_densities():
    x = model_one().simulate(3, 6, generator=torch.Generator().manual_seed(7))
    # Model I: (X_0 .. X_6) is Gaussian with covariance A^{-1} D A^{-T}, A the AR difference operator
    steps = x.shape[1]
    operator = np.eye(steps) - ALPHA_I * np.eye(steps, k=-1)
    inverse = np.linalg.inv(operator)
    covariance = inverse @ np.diag([1.0] + [VAR_I] * (steps - 1)) @ inverse.T
    expected = scipy.stats.multivariate_normal(np.zeros(steps), covariance).logpdf(x[..., 0].numpy())
    np.testing.assert_allclose(model_one().log_likelihood(x).numpy(), expected, rtol=1e-10)
    # Model II: the sum of log mixture densities; padded steps leave the sum
    values = x[..., 0].numpy()
    scale = math.sqrt(VAR_II)
    density = P_II * scipy.stats.norm.pdf(values[:, 1:], ALPHA_II * values[:, :-1], scale) + (
        1 - P_II
    ) * scipy.stats.norm.pdf(values[:, 1:], BETA_II * values[:, :-1], scale)
    per_step = np.concatenate([scipy.stats.norm.logpdf(values[:, :1]), np.log(density)], 1)
    mask = torch.arange(steps) < torch.tensor([[7], [4], [1]])
    ours = model_two().log_likelihood(x, mask).numpy()
    np.testing.assert_allclose(ours, [per_step[0].sum(), per_step[1, :4].sum(), per_step[2, :1].sum()], rtol=1e-10)


# --------------------------------------------------------------------------- the paper's metrics


def _true_predictive_samples(model, x, num_samples, seed):
    """``[S, B, T, 1]`` one-step draws: column t is a draw of x_t given x_{t-1} (column 0 is unused noise)."""
    prev = np.concatenate([np.zeros_like(x[:, :1, 0]), x[:, :-1, 0]], 1)
    return torch.as_tensor(_numpy_true_draws(model, prev, num_samples, seed)).unsqueeze(-1)


@pytest.mark.parametrize("model", ["I", "II"])
def test_the_true_law_scores_its_known_predictive_mse_and_interval_shares(model):
    truth = model_one() if model == "I" else model_two()
    x = truth.simulate(100, 24, generator=torch.Generator().manual_seed(8))
    samples = _true_predictive_samples(model, x.numpy(), 1000, seed=9)
    mse = predictive_mse(truth, samples, x)
    assert mse.shape == (100, 24)
    prev = x[:, :-1, 0]
    if model == "I":
        expected = torch.full_like(prev, VAR_I)
    else:
        expected = VAR_II + 2 * P_II * (1 - P_II) * (ALPHA_II - BETA_II) ** 2 * prev**2
    relative = (mse / expected - 1).abs()
    assert float(relative.mean()) < 0.05 and float(relative.max()) < 0.25  # 1000 draws per step
    assert abs(float(mse.mean() / expected.mean()) - 1) < 0.005
    shares = interval_share(truth, samples, x)
    assert set(shares) == {0.8, 0.95} and shares[0.8].shape == (100, 24)
    assert abs(float(shares[0.8].mean()) - 0.8) < 0.003
    assert abs(float(shares[0.95].mean()) - 0.95) < 0.002
    # the pooled table the runner reports
    table = truth.predictive_metrics(samples.float(), x.float())
    assert table["true_predictive_mse"] == pytest.approx(float(expected.mean()), rel=1e-6)
    assert table["predictive_mse"] == pytest.approx(float(expected.mean()), rel=0.005)
    assert table["predictive_mse_std"] == pytest.approx(float(mse.std()), rel=1e-3)
    assert table["share_in_80"] == pytest.approx(0.8, abs=0.003)
    assert table["share_in_95"] == pytest.approx(0.95, abs=0.002)


def test_metrics_of_a_point_mass_at_one_component_mean():
    x = torch.tensor([[[1.0], [2.0], [-1.0]]], dtype=torch.float64)
    at_alpha = (ALPHA_II * torch.cat([torch.zeros(1, 1, 1), x[:, :-1]], 1)).expand(5, -1, -1, -1)
    # every draw sits on alpha X_t: only the beta component's share (1 - p) of (alpha - beta)^2 X_t^2 is left
    expected = (1 - P_II) * (ALPHA_II - BETA_II) ** 2 * torch.tensor([[1.0, 4.0]], dtype=torch.float64)
    torch.testing.assert_close(predictive_mse(model_two(), at_alpha, x), expected)
    torch.testing.assert_close(
        predictive_mse(model_one(), at_alpha / ALPHA_II * ALPHA_I, x), torch.zeros(1, 2, dtype=torch.float64)
    )
    shares = interval_share(model_two(), torch.cat([at_alpha, at_alpha + 100]), x, levels=(0.5,))
    torch.testing.assert_close(shares[0.5], torch.full((1, 2), 0.5, dtype=torch.float64))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: predictive_mse(model_one(), torch.zeros(4, 2, 5, 1), torch.zeros(2, 6, 1)), ValueError, "samples"),
        (lambda: predictive_mse(model_one(), torch.zeros(4, 2, 1, 1), torch.zeros(2, 1, 1)), ValueError, "2 steps"),
        (
            lambda: interval_share(model_one(), torch.zeros(4, 2, 5, 1), torch.zeros(2, 5, 1), levels=(1.0,)),
            ValueError,
            "level",
        ),
        (lambda: model_two().quantile(torch.zeros(3), 0.0), ValueError, "q must"),
        (lambda: model_two(p=1.0), ValueError, "p must"),
        (lambda: ARModel((0.5, 0.4), (1.0,), 0.3), ValueError, "weights"),
        (lambda: ARModel((0.5,), (1.0,), 0.0), ValueError, "noise_var"),
        (lambda: ar_data(model_one(), fold=5), ValueError, "fold"),
        (lambda: ar_data(model_one(), num_samples=995), ValueError, "num_samples"),
        (lambda: ar_data("Model I"), TypeError, "truth"),
        (lambda: covid_deaths(min_deaths=0), ValueError, "min_deaths"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --------------------------------------------------------------------------- COVID-19 deaths


def test_covid_loader_against_an_independent_pandas_computation():
    pandas = pytest.importorskip("pandas")
    data = covid_deaths(seed=0, split="80/10/10")  # the sizes below are this split's
    frame = pandas.read_csv(resolve_data_dir() / "covid" / "time_series_covid19_deaths_US.csv")
    dates = [c for c in frame.columns if c.count("/") == 2]
    kept = frame[frame[dates[-1]] >= 100]
    daily = kept[dates].T.diff().T.clip(lower=0)  # day-to-day differences per row
    window = daily[daily.columns[-60:]]
    assert window.columns[0] == "3/24/20" and window.columns[-1] == "5/22/20"
    assert data.dates[0] == "2020-03-24" and data.dates[39] == "2020-05-02" and data.dates[-1] == "2020-05-22"
    by_name = dict(zip(kept["Combined_Key"], window.to_numpy()))
    splits = {"train": data.train, "valid": data.valid, "test": data.test}
    assert sum(len(data.names[s]) for s in splits) == len(kept) == len(by_name)
    sizes = [len(data.names[s]) for s in splits]
    assert sizes == [
        round(0.8 * len(kept)),
        round(0.9 * len(kept)) - round(0.8 * len(kept)),
        len(kept) - round(0.9 * len(kept)),
    ]
    names = [set(data.names[s]) for s in splits]
    assert not (names[0] & names[1] or names[0] & names[2] or names[1] & names[2])
    assert names[0] | names[1] | names[2] == set(by_name)
    for split, (x, mask) in splits.items():
        assert x.shape == (len(data.names[split]), 60, 1) and bool(mask.all())
        assert bool(torch.isfinite(x).all()) and bool((x >= 0).all())
        expected = np.stack([by_name[n] for n in data.names[split]])
        np.testing.assert_allclose(data.to_deaths(x, split)[..., 0].numpy(), expected, rtol=1e-5, atol=1e-4)
        # scaled by the largest of the first 40 days: that maximum is 1
        np.testing.assert_allclose(x[:, :40, 0].max(1).values.numpy(), 1.0)
    assert data.to_deaths(torch.ones(7, *data.test[0].shape)).shape == (7, *data.test[0].shape)
    assert covid_deaths(seed=0, split="80/10/10").names == data.names
    assert covid_deaths(seed=1, split="80/10/10").names != data.names

"""ppl_models.inference.arviz_compat on the installed ArviZ (0.x InferenceData or 1.x DataTree).

Loaded from its file, without the ``inference`` package (and so without torch), so that this
module also runs under ArviZ 1.x on Python 3.12+: ``python -m pytest tests/test_arviz_compat.py``
in an environment with only numpy, arviz, matplotlib, h5netcdf and pytest (add ``--noconftest``:
the suite's conftest imports torch).
"""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

_FILE = Path(__file__).resolve().parents[2] / "inference" / "arviz_compat.py"
_spec = importlib.util.spec_from_file_location("arviz_compat", _FILE)
compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat)

S, B, T, D = 400, 3, 4, 2
DIMS = {"x": ["sequence", "time", "feature"]}


def _groups(seed=0, constant=False):
    """A Gaussian location model: draws mu_s ~ N(0, 1/n); y ~ N(mu, 1); log-likelihood of each entry."""
    rng = np.random.default_rng(seed)
    observed = rng.normal(size=(B, T, D))
    mu = rng.normal(observed.mean(), 1 / math.sqrt(observed.size), size=S)
    if constant:
        mu[:] = observed.mean()
    log_lik = -0.5 * (math.log(2 * math.pi) + (observed[None] - mu[:, None, None, None]) ** 2)
    replicates = mu[:, None, None, None] + rng.normal(size=(S, B, T, D))
    return {
        "posterior": compat.dataset({"mu": mu[None]}, dims={}),
        "posterior_predictive": compat.dataset({"x": replicates[None]}, dims=DIMS),
        "log_likelihood": compat.dataset({"x": log_lik[None]}, dims=DIMS),
        "observed_data": compat.dataset({"x": observed}, dims=DIMS, draws=False),
    }, log_lik


def test_containers_and_round_trip(tmp_path):
    groups, _ = _groups()
    data = compat.inference_data(groups)
    assert compat.is_inference_data(data) and not compat.is_inference_data(groups)
    assert data["observed_data"]["x"].dims == ("sequence", "time", "feature")
    assert data["log_likelihood"]["x"].dims == ("chain", "draw", "sequence", "time", "feature")
    data.to_netcdf(tmp_path / "d.nc")
    loaded = compat.az.from_netcdf(tmp_path / "d.nc")
    np.testing.assert_array_equal(loaded["log_likelihood"]["x"].values, data["log_likelihood"]["x"].values)


def test_loo_and_waic_match_their_definitions():
    groups, log_lik = _groups()
    loo = compat.loo_summary(compat.inference_data(groups))
    lppd = np.log(np.exp(log_lik).mean(0)).sum()  # log pointwise predictive density, by hand
    p_waic = log_lik.var(0, ddof=1).sum()
    assert loo["elpd"] == pytest.approx(lppd - p_waic, abs=0.5)  # PSIS-LOO ~ WAIC for a well-behaved posterior
    assert loo["max_pareto_k"] < 0.7
    waic = compat.waic_summary(compat.inference_data(groups))
    if compat.ARVIZ_1:
        assert waic is None  # ArviZ 1.x has PSIS-LOO only
    else:
        assert waic["elpd"] == pytest.approx(lppd - p_waic, abs=0.01)  # ArviZ's variance divides by S, not S - 1


def test_constant_draws_give_the_exact_log_likelihood():
    groups, log_lik = _groups(constant=True)
    loo = compat.loo_summary(compat.inference_data(groups))
    assert loo["elpd"] == pytest.approx(log_lik[0].sum(), rel=1e-12)
    assert loo["p"] == 0.0 and math.isnan(loo["max_pareto_k"])


def test_loo_pit_plot_runs():
    import matplotlib

    matplotlib.use("Agg")
    data = compat.inference_data(_groups()[0])
    if compat.ARVIZ_1:
        assert compat.az.plot_loo_pit(data, var_names=["x"], backend="matplotlib") is not None
    else:
        assert compat.az.plot_loo_pit(data, y="x") is not None

"""The likelihood a user's file gets (counts, log-normal, Gaussian, Bernoulli), against hand-computed figures and
scipy."""

import numpy as np
import pytest
import torch
from scipy import stats

from ppl_models.inference.data import SequenceDataset, resolve_likelihood
from ppl_models.inference.data.likelihoods import DISPERSION_THRESHOLD, LARGE_COUNT, dispersion_index
from ppl_models.inference.validation import SettingError


def _splits(rows):
    return SequenceDataset.from_sequences(rows).split(by="series", fractions=(0.6, 0.2, 0.2), seed=0)


def _poisson_rows(seed=0, series=10, steps=40):
    rng = np.random.default_rng(seed)
    return [rng.poisson(3.0, size=(steps, 1)).astype(float) for _ in range(series)]


def _overdispersed_rows(seed=0, series=10, steps=40):
    rng = np.random.default_rng(seed)
    return [rng.negative_binomial(0.5, 0.5 / 3.5, size=(steps, 1)).astype(float) for _ in range(series)]


def test_the_dispersion_index_by_hand():
    rows = [np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0]]), np.array([[0.0, 0.0], [4.0, 0.0]])]
    # changes 2, -1, 4: squares 4 + 1 + 16 = 21; sums 4 + 5 + 4 = 13; the all-zero feature is 1
    assert np.allclose(dispersion_index(rows), [21 / 13, 1.0])


def test_poisson_counts_get_a_poisson_likelihood_neither_transformed_nor_standardised():
    splits, transform, chosen = resolve_likelihood("auto", _splits(_poisson_rows()))
    assert chosen["name"] == "poisson" and "counts" in chosen["why"]
    assert chosen["dispersion_index"]["x0"] <= DISPERSION_THRESHOLD
    assert transform["name"] == "none" and splits.standardizer.identity
    x, mask = splits.tensors()[0]
    assert torch.equal(x[mask], x[mask].round())  # the integers themselves


def test_the_count_scale_is_one_plus_each_features_training_mean_by_hand():
    held_out = [[100.0, 100.0]] * 4
    rows = [
        np.array([[1.0, 0.0], [3.0, 10.0], [0.0, 0.0], [2.0, 1.0], *held_out]),
        np.array([[2.0, 2.0], [9.0, 9.0], [0.0, 0.0], [1.0, 1.0], *held_out]),
    ]
    splits = SequenceDataset.from_sequences(rows).split(by="time", fractions=(0.5, 0.25, 0.25))
    # the training split: the first four steps of each series
    assert np.allclose(resolve_likelihood("poisson", splits)[2]["count_scale"], [1 + 18 / 8, 1 + 23 / 8])
    assert np.allclose(resolve_likelihood("auto", _splits(_poisson_rows()))[2]["count_scale"], [4.0], atol=0.3)


def test_overdispersed_counts_get_a_negative_binomial():
    _, _, chosen = resolve_likelihood("auto", _splits(_overdispersed_rows()))
    assert chosen["name"] == "negbin" and chosen["dispersion_index"]["x0"] > DISPERSION_THRESHOLD


def test_the_likelihood_can_be_given():
    counts = _splits(_poisson_rows())
    splits, _, chosen = resolve_likelihood("gaussian", counts)
    assert chosen["name"] == "gaussian" and not splits.standardizer.identity  # real values, standardised
    assert resolve_likelihood("negbin", counts)[2]["name"] == "negbin"
    splits, transform, chosen = resolve_likelihood("auto", counts, "difference")  # a transform asks for real values
    assert chosen["name"] == "gaussian" and transform["name"] == "difference"
    with pytest.raises(SettingError, match="counts are modelled as they are") as error:
        resolve_likelihood("poisson", counts, "difference")
    assert error.value.key == "transform"


def test_large_counts_are_real_values_and_real_takes_logs_where_they_fit():
    rng = np.random.default_rng(5)
    growing = [np.round(100 * np.exp(np.cumsum(rng.normal(0.02, 0.05, size=(40, 1)), 0))) for _ in range(10)]
    smallest = min(row.min() for row in _splits(growing).train.sequences)
    assert smallest >= LARGE_COUNT
    splits, transform, chosen = resolve_likelihood("auto", _splits(growing))
    assert chosen["name"] == "lognormal" and transform["log"] and "large counts" in chosen["why"]
    assert f"the smallest {smallest:g}" in chosen["why"] and not splits.standardizer.identity
    assert resolve_likelihood("poisson", _splits(growing))[2]["name"] == "poisson"  # still asked for
    shifted = [row - smallest + LARGE_COUNT - 1 for row in growing]  # one training value below the limit: counts
    assert resolve_likelihood("auto", _splits(shifted))[2]["name"] in ("poisson", "negbin")
    # "real": counts read as real values, log-normal only where the chosen transform takes logs (here zeros forbid)
    _, transform, chosen = resolve_likelihood("real", _splits(_poisson_rows()))
    assert chosen["name"] == "gaussian" and not transform["log"]


def test_a_count_likelihood_on_real_values_is_refused_naming_the_value():
    rows = _poisson_rows()
    rows[3][5, 0] = 2.5
    with pytest.raises(SettingError, match="needs counts: feature 'x0' holds 2.5 in series '3'") as error:
        resolve_likelihood("poisson", _splits(rows))
    assert error.value.key == "likelihood"
    assert resolve_likelihood("auto", _splits(rows))[2]["name"] == "gaussian"


def test_binary_data_stays_bernoulli():
    rows = [(np.arange(8)[:, None] % (i + 2) == 0).astype(float) for i in range(6)]
    assert resolve_likelihood("auto", _splits(rows))[2]["name"] == "bernoulli"
    with pytest.raises(SettingError, match="binary"):
        resolve_likelihood("poisson", _splits(rows))


def _positive_rows(seed=0, series=8, steps=30):
    rng = np.random.default_rng(seed)
    return [
        np.exp(np.cumsum(rng.normal(0, 0.1, size=(steps, 2)), 0) + rng.normal(0, 0.3, size=2)) for _ in range(series)
    ]


def test_a_log_normal_density_in_the_data_units_is_scipys():
    splits, transform, chosen = resolve_likelihood("lognormal", _splits(_positive_rows()), "log")
    assert chosen["name"] == "lognormal" and transform["log"]
    units = splits.units("valid")
    x, mask = splits.tensors(dtype=torch.float64)[1]
    m, s = 0.3, 0.8  # a Gaussian of the standardised log values, N(m, s^2)
    density = torch.distributions.Normal(m, s).log_prob(x).sum(-1) + units.log_jacobian()
    values = units.observed.numpy()
    mean, scale = np.asarray(splits.standardizer.mean), np.asarray(splits.standardizer.scale)
    want = stats.lognorm.logpdf(values, s * scale, scale=np.exp(mean + scale * m)).sum(-1)
    assert np.allclose(density[mask].numpy(), want[mask.numpy()], rtol=1e-6)  # float32 values as read


def test_a_log_normal_likelihood_takes_logs_and_is_refused_on_non_positive_values():
    splits, transform, chosen = resolve_likelihood("lognormal", _splits(_positive_rows()))
    assert (
        chosen["name"] == "lognormal" and transform["log"] and all(c.startswith("log") for c in transform["candidates"])
    )
    assert not resolve_likelihood("gaussian", _splits(_positive_rows()))[1]["log"]
    with pytest.raises(SettingError, match="with log") as error:
        resolve_likelihood("lognormal", _splits(_positive_rows()), "difference")
    assert error.value.key == "transform"
    rows = _positive_rows()
    rows[2][4, 1] = -1.0
    with pytest.raises(SettingError, match="needs values > 0: feature 'x1' holds -1"):
        resolve_likelihood("lognormal", _splits(rows))

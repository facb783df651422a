"""A Markov state-space model's particle methods, derived from its prior and emission, held to the Kalman answers of
a linear-Gaussian SSM: one-step predictive draws (``simulate``) and means (``predict_mean``)."""

import pytest
import torch
from factories import lgssm_sequences, random_lgssm

from ppl_models.inference import ParticleFilter

pytestmark = pytest.mark.usefixtures("float64")


def test_predictive_samples_match_kalman_predictive():
    model = random_lgssm(1, 1, seed=4)
    x = lgssm_sequences(model, 2, 10)
    with torch.no_grad():
        result = ParticleFilter(2000).run(model, x, predictive_samples=4000)
    kalman = model.kalman_filter(x)
    assert result.predictive.shape == (4000, 2, 10, 1)
    torch.testing.assert_close(result.predictive.mean(0), kalman.predictive_means, atol=0.1, rtol=0)
    torch.testing.assert_close(result.predictive.var(0), kalman.predictive_covs[..., 0], atol=0.1, rtol=0.1)


def test_predictive_means_match_kalman_predictive_means_and_are_zero_at_padding():
    model = random_lgssm(2, 2, seed=4, proposal="learned")
    x = lgssm_sequences(model, 3, 10)
    mask = torch.arange(10) < torch.tensor([[10], [6], [10]])
    with torch.no_grad():
        result = ParticleFilter(20000).run(model, x, mask, predictive_mean=True)
    kalman = model.kalman_filter(x, mask)
    assert result.predictive_mean.shape == (3, 10, 2)
    torch.testing.assert_close(result.predictive_mean[mask], kalman.predictive_means[mask], atol=0.03, rtol=0)
    assert bool((result.predictive_mean[~mask] == 0).all())

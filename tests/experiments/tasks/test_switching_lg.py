"""The switching linear-Gaussian source's enumerated likelihood against hand cases."""

import math

import pytest
import torch

from ppl_models import LinearGaussianSSM
from ppl_models.experiments.tasks.switching_lg import SwitchingLGSSM, switching_lg


def _scalar_source(a, persistence=0.7):
    """Dz = Dx = 1: ``C = 1.3``, ``Q = 0.2``, ``R = 0.3``, ``P_0 = 0.8``, one regime per value of ``a``."""

    def t(value):
        return torch.tensor(value, dtype=torch.float64)

    return SwitchingLGSSM(t(a).reshape(-1, 1, 1), t([[1.3]]), t([[0.2]]), t([[0.3]]), t([[0.8]]), persistence)


def test_two_steps_equal_the_closed_form_gaussian_mixture():
    # T = 2, scalar: given the regime, (x_1, x_2) is Gaussian with
    # var x_1 = C^2 P0 + R, cov = C^2 a P0, var x_2 = C^2 (a^2 P0 + Q) + R; the regime is uniform
    a, c, q, r, p0 = (0.9, -0.5), 1.3, 0.2, 0.3, 0.8
    source = _scalar_source(a)
    x = torch.tensor([[[0.4], [-1.1]], [[2.0], [1.5]]], dtype=torch.float64)
    for row in range(2):
        x1, x2 = float(x[row, 0, 0]), float(x[row, 1, 0])
        density = 0.0
        for a_r in a:
            v1, v2, cov = c * c * p0 + r, c * c * (a_r * a_r * p0 + q) + r, c * c * a_r * p0
            det = v1 * v2 - cov * cov
            quad = (v2 * x1 * x1 - 2 * cov * x1 * x2 + v1 * x2 * x2) / det
            density += 0.5 * math.exp(-0.5 * quad) / (2 * math.pi * math.sqrt(det))
        assert float(source.log_likelihood(x)[row]) == pytest.approx(math.log(density), rel=1e-10)


def test_one_regime_is_the_plain_kalman_filter_and_padding_is_ignored():
    generator = torch.Generator().manual_seed(0)
    source = SwitchingLGSSM.random(1, latent_dim=2, obs_dim=3, generator=generator)
    x = source.sample(3, 6, torch.Generator().manual_seed(1)).double()
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    lg = source.lgssm
    plain = LinearGaussianSSM(source.transitions[0], lg.C, lg.Q, lg.R, lg.init_cov)
    torch.testing.assert_close(source.log_likelihood(x, mask), plain.log_likelihood(x, mask))


def test_identical_regimes_do_not_change_the_likelihood_and_short_sequences_match():
    one, two = _scalar_source([0.8]), _scalar_source([0.8, 0.8], persistence=0.3)
    x = one.sample(4, 5, torch.Generator().manual_seed(2)).double()
    torch.testing.assert_close(two.log_likelihood(x), one.log_likelihood(x))
    source = _scalar_source([0.9, -0.6])
    mask = torch.tensor([[True] * 3 + [False] * 2])
    torch.testing.assert_close(source.log_likelihood(x[:1], mask), source.log_likelihood(x[:1, :3]))


def test_loader_and_bad_settings():
    data = switching_lg(num_train=4, num_valid=2, num_test=3, num_steps=5)
    assert data.train[0].shape == (4, 5, 2) and data.truth is not None
    with pytest.raises(ValueError, match="num_steps"):
        switching_lg(num_regimes=2, num_steps=20)
    with pytest.raises(ValueError, match="persistence"):
        _scalar_source([0.5], persistence=2.0)
    with pytest.raises(ValueError, match="transitions"):
        SwitchingLGSSM(torch.eye(2), torch.eye(2), torch.eye(2), torch.eye(2), torch.eye(2))

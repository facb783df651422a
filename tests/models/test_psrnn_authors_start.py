"""The options of the PSRNN that follow the authors' code: whitened projections against numpy's SVD, fixed kernel
widths, the stage-2 intercept against a hand-built affine system, the observation bias of the cells against the
update written out, trainable random features, the encoder bias, and the refusals of bad values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppl_models import PSRNN
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.psrnn import FactorizedPSRNNCell, PSRNNCell
from ppl_models.spectral import RandomFourierFeatures, two_stage_regression
from ppl_models.spectral_projections import whitened_directions


@pytest.mark.parametrize("centre", [False, True])
def test_whitened_directions_are_the_cross_covariance_singular_vectors_over_root_singular_values(centre):
    generator = torch.Generator().manual_seed(0)
    x, y = torch.rand(50, 6, generator=generator, dtype=torch.float64), torch.rand(50, 4, generator=generator)
    a, b = x.numpy(), y.double().numpy()
    if centre:
        a, b = a - a.mean(0), b - b.mean(0)
    u, s, _ = np.linalg.svd(a.T @ b / 50)
    expected = u[:, :3] / np.sqrt(s[:3])
    got = whitened_directions(x, y, 3, centre=centre).numpy()
    signs = np.sign((got * expected).sum(0))  # each vector's sign is the SVD's choice
    np.testing.assert_allclose(got * signs, expected, rtol=1e-9, atol=1e-12)


def _one_hot(steps=80, seed=0):
    ids = torch.randint(0, 3, (4, steps), generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.one_hot(ids, 3).float()


def test_fixed_kernel_widths_and_whitened_projections_start_the_model():
    model = PSRNN(
        3,
        emission="categorical",
        state_dim=2,
        obs_features=2,
        num_features=20,
        horizon=2,
        bandwidths=[0.5, 1.5, 2.5],
        projections="whitened",
    )
    model.initialize(_one_hot(), generator=torch.Generator().manual_seed(0))
    assert float(model.layers[0].features.bandwidth) == 0.5  # the observation features' width, fixed
    assert torch.isfinite(model.log_likelihood(_one_hot(seed=1))).all()


def test_stage_two_intercept_recovers_an_affine_system():
    # observation o = (1, 2) at every step and phi' = M q + m, so phi' (x) o = W q + B with W[s, p] = (p + 1) M[s] and
    # B[s, p] = (p + 1) m[s]; a history spanning (q, 1) makes stage 1 the identity on these targets
    generator = torch.Generator().manual_seed(0)
    n, states = 400, 3
    q = torch.randn(n, states, generator=generator, dtype=torch.float64)
    m_matrix = torch.randn(states, states, generator=generator, dtype=torch.float64)
    m_offset = torch.randn(states, generator=generator, dtype=torch.float64)
    next_future = q @ m_matrix.T + m_offset
    observation = torch.tensor([1.0, 2.0], dtype=torch.float64).expand(n, 2)
    history = torch.cat([q, torch.ones(n, 1, dtype=torch.float64)], 1)
    result = two_stage_regression(q, next_future, observation, history, ridge=1e-12, intercept=True)
    scale = torch.tensor([1.0, 2.0], dtype=torch.float64)
    torch.testing.assert_close(result.transition, m_matrix[:, None, :] * scale[None, :, None], rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(result.observation_bias, m_offset[:, None] * scale[None, :], rtol=1e-6, atol=1e-8)
    assert two_stage_regression(q, next_future, observation, history, ridge=1e-12).observation_bias is None


def test_cells_add_a_bias_linear_in_the_observation():
    generator = torch.Generator().manual_seed(1)
    states, obs = 3, 2
    transition = torch.randn(states, obs, states, generator=generator)
    observation_bias = torch.randn(states, obs, generator=generator)
    o, q = torch.randn(5, obs, generator=generator), torch.randn(5, states, generator=generator)
    full = PSRNNCell(states, obs, transition, observation_bias)
    pre = torch.einsum("ijk,bj,bk->bi", transition, o, q) + o @ observation_bias.T
    torch.testing.assert_close(full(o, q), pre / pre.norm(dim=-1, keepdim=True))
    a, b, c = (torch.randn(4, size, generator=generator) for size in (states, obs, states))
    factorized = FactorizedPSRNNCell.from_factors((a, b, c), torch.zeros(states), observation_bias)
    pre = torch.einsum("ri,rj,rk,bj,bk->bi", a, b, c, o, q) + o @ observation_bias.T
    torch.testing.assert_close(factorized(o, q), pre / pre.norm(dim=-1, keepdim=True))
    assert PSRNNCell(states, obs).observation_bias is None


def test_trainable_random_features_keep_the_map_and_become_parameters():
    features = RandomFourierFeatures(3, 16, bandwidth=0.5, generator=torch.Generator().manual_seed(2))
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(3))
    expected = np.sqrt(2 / 16) * np.cos(x.numpy() @ features.frequencies.numpy() / 0.5 + features.phases.numpy())
    features.make_trainable()
    assert {name for name, _ in features.named_parameters()} == {"frequencies", "phases"}
    np.testing.assert_allclose(features(x).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_the_authors_switches_start_and_train_every_added_parameter(tmp_path):
    switches = {"encoder_bias": True, "train_features": True, "observation_bias": True}
    options = {"emission": "categorical", "state_dim": 2, "obs_features": 2, "num_features": 20, "horizon": 2}
    model = PSRNN(3, **options, **switches).initialize(_one_hot(), generator=torch.Generator().manual_seed(0))
    layer = model.layers[0]
    assert torch.equal(layer.projection.bias, torch.zeros(2))
    assert layer.cell.observation_bias.abs().sum() > 0  # the stage-2 intercept
    before = {name: value.detach().clone() for name, value in model.named_parameters()}
    for name in ("features.frequencies", "features.phases", "projection.bias", "cell.observation_bias"):
        assert f"layers.0.{name}" in before
    config = TrainConfig(epochs=2, batch_size=2, lr=0.1, optimizer="sgd", progress=False)
    Trainer(ExactLikelihood(model), (_one_hot(), None), (_one_hot(seed=1), None), config).fit()
    for name in ("features.frequencies", "features.phases", "projection.bias", "cell.observation_bias"):
        assert not torch.equal(dict(model.named_parameters())[f"layers.0.{name}"], before[f"layers.0.{name}"]), name
    reloaded = PSRNN(3, **options, **switches)
    reloaded.load_state_dict(model.state_dict())
    torch.testing.assert_close(reloaded.log_likelihood(_one_hot(seed=2)), model.log_likelihood(_one_hot(seed=2)))


def test_factorized_start_keeps_the_observation_bias():
    options = {"emission": "categorical", "state_dim": 2, "obs_features": 2, "num_features": 20, "horizon": 2}
    full = PSRNN(3, **options, observation_bias=True).initialize(_one_hot(), generator=torch.Generator().manual_seed(0))
    factorized = PSRNN(3, **options, rank=2, observation_bias=True)
    factorized.initialize(_one_hot(), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(factorized.layers[0].cell.observation_bias, full.layers[0].cell.observation_bias)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"bandwidths": (1.0, 2.0)}, "bandwidths must be None or three kernel widths > 0"),
        ({"bandwidths": (1.0, 0.0, 2.0)}, "bandwidths must be None or three kernel widths > 0"),
        ({"projections": "pca"}, "projections"),
    ],
)
def test_bad_start_options_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        PSRNN(3, **settings)


@pytest.mark.parametrize("name", ["encoder_bias", "train_features", "observation_bias"])
def test_switches_must_be_bools(name):
    with pytest.raises(TypeError, match=f"^{name} must be a bool"):
        PSRNN(3, **{name: 1})

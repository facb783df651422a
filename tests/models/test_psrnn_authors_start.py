"""The options of the PSRNN's start that follow the authors' code: whitened projections against numpy's SVD, fixed
kernel widths, and the refusals of bad values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppl_models import PSRNN
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

"""Shared test set-up: one thread (the CI machine has two cores), fixed seeds."""

import pyro
import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    yield


@pytest.fixture
def float64():
    """Run a test in double precision (exact comparisons with Kalman algebra)."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)

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

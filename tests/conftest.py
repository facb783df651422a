"""Shared test set-up: one thread (the CI machine has two cores), fixed seeds, and the fixtures several files take."""

import pyro
import pytest
import torch
from factories import lgssm_sequences, random_lgssm

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


@pytest.fixture(scope="module")
def small_lgssm():
    """``(model, x [4, 6, 3])``: a random LGSSM (2 latent dimensions, learned proposal) and sequences it drew."""
    model = random_lgssm(2, 3, proposal="learned")
    return model, lgssm_sequences(model, 4, 6)

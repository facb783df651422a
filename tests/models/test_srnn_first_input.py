"""An SRNN reading each sequence's first step as its first input: with a silent first input it is the plain SRNN
(same parameters, same draws), and a given first input changes the first steps' figures only through ``d_1``."""

import pyro
import pytest
import torch

from ppl_models import SRNN
from ppl_models.inference.objectives import ELBO, IWAE, SMCBound
from ppl_models.inference.particle_filter import ParticleFilter

SIZES = dict(latent_dim=3, rnn_dim=5, hidden_dim=7, feature_dim=4)


def pair():
    """The plain SRNN and the one reading a first input, with the same parameters."""
    torch.manual_seed(0)
    plain = SRNN(6, **SIZES)
    reading = SRNN(6, **SIZES, first_step_is_input=True)
    reading.load_state_dict(plain.state_dict())
    return plain.eval(), reading.eval()


def rolls(batch=3, steps=5, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, steps, 6, generator=generator) < 0.4).float()


def after(first, x):
    """``[first, x_1, ..., x_T]``: ``[B, 1 + T, D]``."""
    return torch.cat([first[:, None], x], 1)


@pytest.mark.parametrize(
    "objective", [lambda m: ELBO(m, mean_field=True), lambda m: IWAE(m, 4), lambda m: SMCBound(m, ParticleFilter(4))]
)
def test_a_silent_first_input_gives_the_plain_models_bound_and_step_count(objective):
    plain, reading = pair()
    x = rolls()
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    pyro.set_rng_seed(7)
    expected = objective(plain)(x, mask)
    pyro.set_rng_seed(7)
    got = objective(reading)(after(torch.zeros(3, 6), x), torch.cat([mask[:, :1], mask], 1))
    assert torch.allclose(got.bound, expected.bound, atol=1e-5)
    assert got.num_steps.tolist() == expected.num_steps.tolist() == [5, 3, 5]
    assert torch.allclose(got.loss, expected.loss, atol=1e-6)


def test_a_given_first_input_is_read_as_u_1():
    """``d_1 = GRU(0, phi(u_1))``: the deterministic states are the plain model's on ``x`` with ``u_1`` in place of
    silence, the input step's own state zero."""
    plain, reading = pair()
    x, first = rolls(), rolls(steps=1, seed=2)[:, 0]
    states = reading.deterministic_states(after(first, x))
    by_hand, _ = plain.rnn(plain.features(torch.cat([first[:, None], x[:, :-1]], 1)))
    assert torch.equal(states[:, 0], torch.zeros_like(states[:, 0]))
    assert torch.allclose(states[:, 1:], by_hand, atol=1e-6)
    assert first.sum() > 0 and not torch.allclose(states[:, 1], plain.deterministic_states(x)[:, 0], atol=1e-3)


def test_first_step_is_input_must_be_a_bool():
    with pytest.raises(TypeError, match=r"^first_step_is_input must be a bool, got int$"):
        SRNN(6, **SIZES, first_step_is_input=1)


def test_a_sequence_of_its_first_input_alone_has_no_modelled_step():
    """The context of a held-out row scored after its first input: a bound of 0 nats over 0 steps."""
    _, reading = pair()
    first = rolls(steps=1, seed=2)
    for objective in (ELBO(reading, mean_field=True), IWAE(reading, 3), SMCBound(reading, ParticleFilter(3))):
        out = objective(first, torch.ones(3, 1, dtype=torch.bool))
        assert out.bound.tolist() == [0.0, 0.0, 0.0] and out.num_steps.tolist() == [0, 0, 0]

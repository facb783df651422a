"""The ring-HMM source's exact filter against brute-force enumeration of its state paths."""

import itertools
import math

import pytest
import torch

from ppl_models.experiments.tasks.ring_hmm import RingHMM, ring_hmm


def _enumerated_log_likelihood(source, x):
    """``log sum_paths p(path) p(x | path)`` over all N^T paths of one sequence ``x [T, 2]``, by hand."""
    n, total = source.num_states, 0.0
    for path in itertools.product(range(n), repeat=len(x)):
        p = 1 / n
        for t, s in enumerate(path):
            if t:
                prev = path[t - 1]
                p *= source.stay if s == prev else (1 - source.stay) if s == (prev + 1) % n else 0.0
            angle = 2 * math.pi * s / n
            d2 = (x[t][0] - math.cos(angle)) ** 2 + (x[t][1] - math.sin(angle)) ** 2
            p *= math.exp(-d2 / (2 * source.noise**2)) / (2 * math.pi * source.noise**2)
        total += p
    return math.log(total)


def test_forward_algorithm_equals_enumeration_and_ignores_padding():
    source = RingHMM(num_states=3, stay=0.4, noise=0.5)
    x = source.sample(2, 4, torch.Generator().manual_seed(0)).double()
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    got = source.log_likelihood(x, mask)
    assert float(got[0]) == pytest.approx(_enumerated_log_likelihood(source, x[0].tolist()), rel=1e-10)
    assert float(got[1]) == pytest.approx(_enumerated_log_likelihood(source, x[1, :3].tolist()), rel=1e-10)


def test_first_predictive_mean_is_the_ring_centre_and_the_chain_moves_clockwise():
    source = RingHMM(num_states=4, stay=0.0, noise=0.05)
    x = source.sample(3, 6, torch.Generator().manual_seed(1))
    mean = source.predictive_mean(x)
    torch.testing.assert_close(mean[:, 0], torch.zeros(3, 2), atol=1e-6, rtol=0)
    # stay = 0 and little noise: after one observation the next place is known exactly
    torch.testing.assert_close(mean[:, 1:], x[:, 1:], atol=0.25, rtol=0)
    angles = torch.atan2(x[..., 1], x[..., 0])
    steps = torch.remainder(angles[:, 1:] - angles[:, :-1], 2 * math.pi)
    torch.testing.assert_close(steps, torch.full_like(steps, math.pi / 2), atol=0.3, rtol=0)


def test_loader_shapes_and_bad_settings():
    data = ring_hmm(num_train=5, num_valid=2, num_test=3, num_steps=7)
    assert [s[0].shape for s in (data.train, data.valid, data.test)] == [(5, 7, 2), (2, 7, 2), (3, 7, 2)]
    assert data.truth is not None
    bigger = ring_hmm(num_train=9, num_valid=2, num_test=3, num_steps=7)
    assert torch.equal(bigger.test[0], data.test[0]) and torch.equal(bigger.valid[0], data.valid[0])
    with pytest.raises(ValueError, match="stay"):
        RingHMM(stay=1.0)
    with pytest.raises(ValueError, match="num_train"):
        ring_hmm(num_train=0)

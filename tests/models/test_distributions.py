"""The fast multivariate normal against Pyro's own."""

import pyro.distributions as dist
import pytest
import torch
from torch.distributions import kl_divergence

from ppl_models.distributions import MultivariateNormal, times_transpose


def _tril(d=3, seed=0):
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.linalg.cholesky(a @ a.T + d * torch.eye(d, dtype=torch.float64))


@pytest.mark.parametrize("d", [1, 3])
def test_log_prob_equals_pyros_for_shared_and_batched_scales(d):
    loc = torch.randn(5, 4, d, dtype=torch.float64)
    value = torch.randn(4, d, dtype=torch.float64)
    for tril in (_tril(d), _tril(d).expand(4, d, d)):
        ours, theirs = MultivariateNormal(loc, scale_tril=tril), dist.MultivariateNormal(loc, scale_tril=tril)
        assert ours.batch_shape == theirs.batch_shape == (5, 4) and ours.event_shape == (d,)
        torch.testing.assert_close(ours.log_prob(value), theirs.log_prob(value))
    cov = _tril(d) @ _tril(d).T
    torch.testing.assert_close(
        MultivariateNormal(loc, covariance_matrix=cov).log_prob(value),
        dist.MultivariateNormal(loc, covariance_matrix=cov).log_prob(value),
    )


@pytest.mark.parametrize("d", [1, 3])
def test_rsample_has_the_right_moments_and_gradients(d):
    tril = _tril(d).requires_grad_()
    loc = torch.tensor([1.0, -2.0, 0.5][:d], dtype=torch.float64, requires_grad=True)
    samples = MultivariateNormal(loc.expand(20000, d), scale_tril=tril).rsample((5,))
    assert samples.shape == (5, 20000, d)
    flat = samples.reshape(-1, d).detach()
    torch.testing.assert_close(flat.mean(0), loc.detach(), atol=0.05, rtol=0)
    torch.testing.assert_close(torch.cov(flat.T).reshape(d, d), (tril @ tril.T).detach(), atol=0.1, rtol=0.03)
    samples.sum().backward()
    assert loc.grad is not None and tril.grad is not None


def test_expand_keeps_the_class_and_kl_matches():
    p = MultivariateNormal(torch.zeros(3, dtype=torch.float64), scale_tril=_tril(seed=1))
    q = MultivariateNormal(torch.ones(4, 3, dtype=torch.float64), scale_tril=_tril(seed=2))
    expanded = p.expand((4,))
    assert type(expanded) is MultivariateNormal and expanded.batch_shape == (4,)
    torch.testing.assert_close(
        expanded.log_prob(torch.ones(3, dtype=torch.float64)),
        dist.MultivariateNormal(torch.zeros(4, 3, dtype=torch.float64), scale_tril=_tril(seed=1)).log_prob(
            torch.ones(3)
        ),
    )
    reference = kl_divergence(
        dist.MultivariateNormal(q.loc, scale_tril=_tril(seed=2)),
        dist.MultivariateNormal(torch.zeros(3, dtype=torch.float64), scale_tril=_tril(seed=1)),
    )
    torch.testing.assert_close(kl_divergence(q, p), reference)


def test_times_transpose_is_a_matrix_product():
    v = torch.randn(4, 2, 3)
    for m in (torch.randn(5, 3), torch.randn(1, 1)):
        w = v[..., :1] if m.shape == (1, 1) else v
        torch.testing.assert_close(times_transpose(w, m), w @ m.T)


def test_mismatched_loc_raises():
    with pytest.raises(ValueError, match="loc must end with size 3"):
        MultivariateNormal(torch.zeros(4, 2), scale_tril=torch.eye(3))

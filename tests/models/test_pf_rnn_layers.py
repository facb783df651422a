"""The PF-RNN layers of ``ppl_models.pf_rnn.layers`` as particle filters: the particle state carried between calls,
the weighted mean particle, gradients through soft-resampled weights, long runs and masked steps.

The nn.LSTM / nn.GRU drop-in contract (signature, packed and unbatched input, stacking) is in
tests/test_pf_rnn_dropin.py.
"""

import pytest
import torch

from ppl_models.pf_rnn import PFGRU, PFLSTM, ParticleState

CELLS = [PFLSTM, PFGRU]


@pytest.mark.parametrize("cell", CELLS)
def test_shapes_and_particle_state_round_trip(cell):
    torch.manual_seed(0)
    rnn = cell(3, 8, batch_first=True, num_particles=5)
    x = torch.randn(4, 7, 3)
    out, _ = rnn(x)
    assert out.shape == (4, 7, 8)
    state = rnn.last_particle_state
    assert isinstance(state, ParticleState) and state.steps == 7
    assert state.h.shape == (1, 5, 4, 8) and state.log_weights.shape == (1, 5, 4)
    assert (state.c is None) == (cell is PFGRU)
    out2, _ = rnn(x, state)  # truncated BPTT: continue from the returned particle set
    assert out2.shape == (4, 7, 8)
    assert rnn.last_particle_state.steps == 14
    assert torch.allclose(rnn.last_particle_state.log_weights.exp().sum(1), torch.ones(1, 4))
    time_major = cell(3, 8, num_particles=5)
    assert time_major(x.transpose(0, 1))[0].shape == (7, 4, 8)


@pytest.mark.parametrize("cell", CELLS)
def test_mean_particle_is_the_weighted_mean(cell):
    torch.manual_seed(3)
    belief = cell(2, 4, batch_first=True, num_particles=6).filter(torch.randn(3, 5, 2))
    weights = belief.log_weights.exp()
    assert torch.allclose(weights.sum(1), torch.ones(5, 3), atol=1e-6)
    expected = torch.einsum("tkb,tkbh->bth", weights, belief.particles)
    assert torch.allclose(belief.mean, expected, atol=1e-6)


def test_f_obs_gets_gradients_through_soft_resampled_weights():
    """The weights at step 1 depend on f_obs at step 0 only through the soft-resampled weights."""
    torch.manual_seed(5)
    x = torch.randn(3, 2, 2)
    grads = {}
    for alpha in (0.5, 1.0):
        rnn = PFLSTM(2, 4, batch_first=True, num_particles=4, stochastic=True, alpha=alpha)
        torch.manual_seed(5)
        with torch.no_grad():
            for p in rnn.parameters():
                p.copy_(torch.randn_like(p) * 0.5)
        # step 1's weights read step 0's f_obs only through the soft-resampled weights w'
        belief = rnn.filter(x, generator=torch.Generator().manual_seed(1))
        target = (belief.log_weights[1] * torch.randn(4, 3, generator=torch.Generator().manual_seed(2))).sum()
        grads[alpha] = torch.autograd.grad(target, rnn.layers[0].obs_net.output.weight)[0]
    assert grads[0.5].abs().sum() > 0
    # alpha = 1 gives uniform weights after resampling: the step-1 weights then depend on f_obs
    # through step 1 alone, so the two gradients differ
    assert not torch.allclose(grads[0.5], grads[1.0])


@pytest.mark.parametrize("cell", CELLS)
def test_weights_stay_normalised_and_finite_over_1000_steps(cell):
    torch.manual_seed(6)
    rnn = cell(2, 8, batch_first=True, num_particles=10)
    with torch.no_grad():
        rnn.layers[0].obs_net.output.weight.mul_(20.0)  # sharp weights: degeneracy stresses the arithmetic
        belief = rnn.filter(torch.randn(2, 1000, 2) * 3)
    assert torch.isfinite(belief.log_weights).all() and torch.isfinite(belief.particles).all()
    assert torch.allclose(belief.log_weights.exp().sum(1), torch.ones(1000, 2), atol=1e-5)


@pytest.mark.parametrize("cell", CELLS)
def test_masked_steps_keep_the_state(cell):
    torch.manual_seed(7)
    rnn = cell(2, 4, batch_first=True, num_particles=3).eval()
    x = torch.randn(2, 6, 2)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    gen = torch.Generator().manual_seed(0)
    belief = rnn.filter(x, mask=mask, generator=gen)
    assert torch.allclose(belief.mean[1, 2], belief.mean[1, 5])
    short = rnn.filter(x[1:, :3], generator=torch.Generator().manual_seed(0))
    assert short.mean.shape == (1, 3, 4)

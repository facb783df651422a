"""The PF-RNN predictor of ``ppl_models.pf_rnn.predictor``: its Gaussian head, its dtype and device, stacked layers."""

import math

import pytest
import torch

from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.pf_rnn import PFRNNPredictor, PFRNNProgram


def test_unit_variance_elbo_is_the_papers_gaussian():
    torch.manual_seed(8)
    predictor = PFRNNPredictor(2, 3, cell="pf-gru", hidden_size=5, num_particles=4, learn_scale=False)
    particles = torch.randn(2, 4, 3, 5)
    y = torch.randn(2, 1, 3, 3)
    log_p = predictor.particle_distribution(particles).log_prob(y)
    by_hand = -0.5 * (predictor.head(particles) - y).square().sum(-1) - 1.5 * math.log(2 * math.pi)
    assert torch.allclose(log_p, by_hand, atol=1e-5)
    assert not predictor.log_scale.requires_grad and "log_scale" not in dict(predictor.named_parameters())


@pytest.mark.parametrize("cell", ["pf-lstm", "pf-gru", "lstm"])
def test_belief_outputs_are_the_head_of_each_particle(cell):
    options = {} if cell == "lstm" else {"num_particles": 4}
    predictor = PFRNNPredictor(3, 2, cell=cell, hidden_size=5, **options)
    x, mask = torch.randn(6, 7, 3), torch.arange(7) < torch.tensor([[7], [7], [5], [3], [7], [1]])
    torch.manual_seed(2)
    belief = predictor.belief(x, mask)
    torch.manual_seed(2)  # the same draws
    read = predictor.belief(x, mask, outputs=True)
    torch.testing.assert_close(read.outputs, predictor.head(belief.particles))
    torch.testing.assert_close(read.mean, belief.mean)
    torch.testing.assert_close(read.log_weights, belief.log_weights)
    if cell != "lstm":  # the particles themselves are not kept
        assert read.particles is None and belief.outputs is None
    # and the losses read them: the ELBO term by hand from the particles
    y = torch.randn(6, 7, 2)
    torch.manual_seed(2)
    loss = DiscriminativeLoss(predictor, pred_weight=0.0)(x, mask, y).bound
    log_p = predictor.particle_distribution(belief.particles).log_prob(y.transpose(0, 1).unsqueeze(1))
    by_hand = torch.logsumexp(belief.log_weights + log_p, 1).T.masked_fill(~mask, 0.0).sum(1)
    torch.testing.assert_close(loss, by_hand)


def test_to_device_moves_everything():
    predictor = PFRNNPredictor(3, 2, cell="pf-gru", hidden_size=4, num_particles=2).to(torch.float64)
    out = predictor(torch.randn(2, 5, 3, dtype=torch.float64))
    assert out.dtype == torch.float64
    if torch.cuda.is_available():  # pragma: no cover - CI has no GPU
        predictor = predictor.to("cuda")
        assert predictor(torch.randn(2, 5, 3, dtype=torch.float64, device="cuda")).is_cuda


def test_predictor_with_stacked_pf_layers_trains_and_its_program_refuses_them():
    torch.manual_seed(13)
    predictor = PFRNNPredictor(
        2, 1, cell="pf-gru", hidden_size=6, encoder_size=4, num_particles=3, num_layers=2, dropout=0.1
    )
    x = torch.randn(8, 5, 2)
    y = x.cumsum(1)[..., :1]
    belief = predictor.belief(x)
    assert belief.particles.shape == (5, 3, 8, 6) and belief.state.h.shape == (2, 3, 8, 6)
    objective = DiscriminativeLoss(predictor, belief_weight=0.5)
    optimizer = torch.optim.Adam(predictor.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = objective(x, None, y).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    with pytest.raises(ValueError, match="num_layers=2"):
        PFRNNProgram(predictor)

"""The PF-RNN as a Pyro program (``ppl_models.pf_rnn.program``): the same ELBO loss as the module, SVI learns,
no warnings."""

import math
import warnings

import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO

from ppl_models.inference.discriminative import DiscriminativeLoss, particle_elbo_loss
from ppl_models.pf_rnn import PFRNNPredictor, PFRNNProgram


@pytest.mark.parametrize("cell", ["pf-lstm", "pf-gru"])
def test_pyro_program_and_module_give_the_same_elbo_loss(cell):
    torch.manual_seed(11)
    predictor = PFRNNPredictor(2, 2, cell=cell, hidden_size=5, encoder_size=4, num_particles=6).eval()
    program = PFRNNProgram(predictor, generator=torch.Generator().manual_seed(3))
    x, y = torch.randn(3, 4, 2), torch.randn(3, 4, 2)
    guide_trace = poutine.trace(program.guide).get_trace(x, y)
    pyro_loss = Trace_ELBO().differentiable_loss(
        poutine.replay(program.model, trace=guide_trace), poutine.replay(program.guide, trace=guide_trace), x, y
    )
    noise = torch.stack([guide_trace.nodes[f"noise_{t}"]["value"] for t in range(4)])
    features = predictor.encoder(x)
    belief = predictor.rnn.filter(features, noise=noise, generator=torch.Generator().manual_seed(3))
    log_p = predictor.particle_distribution(belief.particles).log_prob(y.transpose(0, 1).unsqueeze(1))
    module_loss = particle_elbo_loss(log_p, belief.log_weights, torch.ones(3, 4, dtype=torch.bool)).sum()
    assert torch.allclose(pyro_loss, module_loss, atol=1e-4)
    objective = DiscriminativeLoss(predictor, pred_weight=0.0, elbo_weight=1.0)
    assert objective.elbo_weight == 1.0


def test_svi_with_the_pyro_program_learns():
    pyro.clear_param_store()
    torch.manual_seed(12)
    predictor = PFRNNPredictor(1, 1, cell="pf-gru", hidden_size=6, encoder_size=6, num_particles=4)
    program = PFRNNProgram(predictor)
    x = torch.randn(16, 5, 1)
    y = x.cumsum(1)
    svi = SVI(program.model, program.guide, pyro.optim.Adam({"lr": 2e-2}), Trace_ELBO())
    losses = [svi.step(x, y) for _ in range(80)]
    assert sum(losses[-10:]) < 0.7 * sum(losses[:10])


@pytest.mark.parametrize(
    "task, y", [("classification", torch.randint(0, 3, (5, 4))), ("regression", torch.randn(5, 4, 3))]
)
def test_the_pyro_program_runs_without_warnings(task, y):
    """A fixed scale (classification, or learn_scale=False) is a buffer, so pyro.module has nothing to skip."""
    predictor = PFRNNPredictor(2, 3, task=task, hidden_size=4, encoder_size=4, num_particles=3, learn_scale=False)
    program = PFRNNProgram(predictor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = Trace_ELBO().loss(program.model, program.guide, torch.randn(5, 4, 2), y)
    assert math.isfinite(loss)

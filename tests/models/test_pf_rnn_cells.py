"""The particle cells of ``ppl_models.pf_rnn.cells``: with one noiseless particle, no resampling and tanh, the
LSTM cell is ``nn.LSTMCell`` and the GRU cell the paper's appendix GRU; ``StepBatchNorm`` keeps each time step's
statistics, so evaluation normalises every step as training did."""

import pytest
import torch
from torch import nn

from ppl_models.pf_rnn import PFGRU, PFLSTM, StepBatchNorm

CELLS = [PFLSTM, PFGRU]


def test_pflstm_reduces_to_lstm_cell():
    """K=1, no noise, no resampling, tanh: exactly nn.LSTMCell with the same weights."""
    torch.manual_seed(1)
    rnn = PFLSTM(3, 6, batch_first=True, num_particles=1, stochastic=False, resampling="none", activation="tanh")
    reference = nn.LSTMCell(3, 6)
    cell = rnn.layers[0]
    with torch.no_grad():
        cell.input_projection.weight.copy_(reference.weight_ih)
        cell.input_projection.bias.copy_(reference.bias_ih + reference.bias_hh)
        cell.hidden_projection.weight.copy_(reference.weight_hh)
    x = torch.randn(2, 5, 3)
    out, (_, c_n) = rnn(x)
    h = c = torch.zeros(2, 6)
    for t in range(5):
        h, c = reference(x[:, t], (h, c))
        assert torch.allclose(out[:, t], h, atol=1e-6)
    assert torch.allclose(c_n[0], c, atol=1e-6)


def test_pfgru_reduces_to_papers_gru():
    """K=1, no noise, no resampling, tanh: the appendix GRU, computed directly."""
    torch.manual_seed(2)
    rnn = PFGRU(3, 6, batch_first=True, num_particles=1, stochastic=False, resampling="none", activation="tanh")
    cell = rnn.layers[0]
    w_in, b_in = cell.input_projection.weight, cell.input_projection.bias  # z, r, n blocks
    w_h, w_n = cell.hidden_projection.weight, cell.candidate_projection.weight
    x = torch.randn(2, 5, 3)
    out, _ = rnn(x)
    h = torch.zeros(2, 6)
    for t in range(5):
        xin = x[:, t] @ w_in.T + b_in
        z = torch.sigmoid(xin[:, :6] + h @ w_h[:6].T)
        r = torch.sigmoid(xin[:, 6:12] + h @ w_h[6:].T)
        n = torch.tanh(xin[:, 12:] + (r * h) @ w_n.T)
        h = (1 - z) * n + z * h
        assert torch.allclose(out[:, t], h, atol=1e-6)


def test_step_batch_norm_keeps_each_steps_statistics_like_its_own_batchnorm1d():
    torch.manual_seed(0)
    norm, references = StepBatchNorm(5, max_steps=3), [nn.BatchNorm1d(5) for _ in range(3)]
    norm.weight.data.uniform_(0.5, 2.0)
    norm.bias.data.normal_()
    for reference in references:
        reference.weight.data, reference.bias.data = norm.weight.data.clone(), norm.bias.data.clone()
    for _ in range(4):  # batches whose distribution depends on the step
        for t in range(3):
            x = 2.0 * t + (t + 1.0) * torch.randn(64, 5)
            torch.testing.assert_close(norm(x, t), references[t](x))
    assert int(norm.steps_trained) == 3
    norm.eval()
    x = torch.randn(8, 5)
    for t, reference in enumerate(references):
        torch.testing.assert_close(norm(x, t), reference.eval()(x))
    torch.testing.assert_close(norm(x, 7), references[2](x))  # steps past max_steps share the last statistics


def test_step_batch_norm_uses_the_last_trained_step_for_steps_training_never_reached():
    norm = StepBatchNorm(2, max_steps=10)
    for _ in range(30):
        norm(torch.randn(100, 2) + 3.0, 0)
        norm(torch.randn(100, 2) - 3.0, 1)
    norm.eval()
    x = torch.zeros(1, 2)
    torch.testing.assert_close(norm(x, 6), norm(x, 1))
    assert norm(x, 1).mean() > 2.0 and norm(x, 0).mean() < -2.0


@pytest.mark.parametrize("cell", CELLS)
def test_evaluation_normalises_each_step_as_training_did(cell):
    """With running statistics set by one batch (momentum 1), evaluation on it reproduces training mode.

    One set of statistics shared by the steps fails this: all particles start equal, so the
    candidate's distribution differs between steps.
    """
    torch.manual_seed(0)
    rnn = cell(3, 6, batch_first=True, num_particles=40, resampling="none", activation="relu_bn")
    rnn.layers[0].norm.momentum = 1.0
    x = torch.randn(50, 4, 3)
    noise = torch.randn(4, 40, 50, 6)
    with torch.no_grad():
        trained = rnn.train().filter(x, noise=noise).mean
        evaluated = rnn.eval().filter(x, noise=noise).mean
    # the running variance is unbiased (N / (N - 1) of the batch's) with N = 2000 particles
    torch.testing.assert_close(evaluated, trained, atol=2e-3, rtol=2e-3)


def test_a_continued_state_normalises_with_the_statistics_of_its_later_steps():
    torch.manual_seed(1)
    rnn = PFLSTM(3, 6, batch_first=True, num_particles=4, resampling="none")
    x, noise = torch.randn(5, 6, 3), torch.randn(6, 4, 5, 6)
    with torch.no_grad():
        rnn.train().filter(torch.randn(50, 6, 3))  # statistics for steps 0-5
        rnn.eval()
        whole = rnn.filter(x, noise=noise)
        first = rnn.filter(x[:, :2], noise=noise[:2])
        rest = rnn.filter(x[:, 2:], first.state, noise=noise[2:])
    assert first.state.steps == 2 and rest.state.steps == 6
    torch.testing.assert_close(torch.cat([first.mean, rest.mean], 1), whole.mean)


def test_compiled_option_reaches_every_cell_and_is_refused_if_not_a_bool():
    rnn = PFLSTM(3, 4, num_layers=2, num_particles=2, compiled=True)
    assert all(cell.compiled for cell in rnn.layers)
    assert not any(cell.compiled for cell in PFGRU(3, 4, num_layers=2, num_particles=2).layers)
    with pytest.raises(TypeError, match="compiled must be a bool"):
        PFLSTM(3, 4, num_particles=2, compiled=1)


@pytest.mark.slow
@pytest.mark.parametrize("layer", CELLS)
def test_compiled_update_gives_the_eager_outputs_and_gradients(layer):
    """The fused kernels compute the same equations: same draws, outputs and gradients to round-off."""
    torch.manual_seed(3)
    eager = layer(3, 8, batch_first=True, num_particles=4)
    compiled = layer(3, 8, batch_first=True, num_particles=4, compiled=True)
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(5, 6, 3)
    outputs = []
    for rnn in (eager, compiled):
        out = rnn.filter(x, generator=torch.Generator().manual_seed(0)).mean
        out.square().sum().backward()
        outputs.append((out.detach(), [p.grad for p in rnn.parameters()]))
    torch.testing.assert_close(outputs[1][0], outputs[0][0], atol=1e-5, rtol=1e-5)
    for grad_compiled, grad_eager in zip(outputs[1][1], outputs[0][1]):
        torch.testing.assert_close(grad_compiled, grad_eager, atol=1e-4, rtol=1e-4)

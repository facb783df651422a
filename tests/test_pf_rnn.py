"""PF-LSTM / PF-GRU: the particle state, reduction to plain cells, soft resampling, losses, Pyro expression.

The nn.LSTM / nn.GRU drop-in contract (signature, packed and unbatched input, stacking) is in
tests/test_pf_rnn_dropin.py.
"""

import math
import warnings

import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO
from torch import nn

from ppl_models.inference.discriminative import DiscriminativeLoss, belief_loss, particle_elbo_loss, prediction_loss
from ppl_models.inference.resampling import resample
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.pf_rnn import PFGRU, PFLSTM, ParticleState, PFRNNPredictor, PFRNNProgram, StepBatchNorm

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


class _LSTMRegressor(nn.Module):
    """A model written for nn.LSTM (batch_first): the last output through a linear head."""

    def __init__(self, rnn_class, **options):
        super().__init__()
        self.rnn = rnn_class(3, 16, batch_first=True, **options)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


@pytest.mark.parametrize("rnn_class, options", [(nn.LSTM, {}), (PFLSTM, {"num_particles": 4}),
                                                (nn.GRU, {}), (PFGRU, {"num_particles": 4})])
def test_drop_in_replacement_trains(rnn_class, options):
    torch.manual_seed(0)
    model = _LSTMRegressor(rnn_class, **options)
    x = torch.randn(16, 6, 3)
    y = x[:, :, :1].sum(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


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


@pytest.mark.parametrize("cell", CELLS)
def test_mean_particle_is_the_weighted_mean(cell):
    torch.manual_seed(3)
    belief = cell(2, 4, batch_first=True, num_particles=6).filter(torch.randn(3, 5, 2))
    weights = belief.log_weights.exp()
    assert torch.allclose(weights.sum(1), torch.ones(5, 3), atol=1e-6)
    expected = torch.einsum("tkb,tkbh->bth", weights, belief.particles)
    assert torch.allclose(belief.mean, expected, atol=1e-6)


def test_soft_resampling_weights_are_eq3_and_carry_gradients():
    """w' = w_a / (alpha w_a + (1 - alpha) / K) for the drawn ancestor a; gradients reach the weights' source."""
    torch.manual_seed(4)
    theta = torch.randn(5, 2, requires_grad=True)
    log_w = torch.log_softmax(theta, 0)
    ancestors, new_log_w = resample(log_w, "soft", alpha=0.5, generator=torch.Generator().manual_seed(0))
    w = log_w.exp()
    picked = torch.gather(w, 0, ancestors)
    by_hand = picked / (0.5 * picked + 0.5 / 5)
    assert torch.allclose(new_log_w.exp(), by_hand / by_hand.sum(0), atol=1e-6)
    (new_log_w[0] * torch.tensor([1.0, -2.0])).sum().backward()
    assert theta.grad.abs().sum() > 0


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


def test_losses_match_hand_computation():
    log_w = torch.log(torch.tensor([[[0.25], [0.75]]]))  # [N=1, K=2, B=1]
    log_p = torch.log(torch.tensor([[[0.2], [0.6]]]))
    valid = torch.ones(1, 1, dtype=torch.bool)
    assert torch.allclose(particle_elbo_loss(log_p, log_w, valid), -torch.log(torch.tensor([0.25 * 0.2 + 0.75 * 0.6])))
    losses = torch.tensor([[[1.0], [3.0]]])
    assert torch.allclose(belief_loss(losses, log_w, valid), torch.tensor([0.25 + 2.25]))
    pred = torch.tensor([[[1.0, 2.0]]])
    assert torch.allclose(prediction_loss(pred, torch.tensor([[[0.0, 0.0]]]), valid, "regression"), torch.tensor([5.0]))
    ce = prediction_loss(pred, torch.tensor([[1]]), valid, "classification")
    assert torch.allclose(ce, -torch.log_softmax(pred, -1)[..., 1].reshape(1))


def test_unit_variance_elbo_is_the_papers_gaussian():
    torch.manual_seed(8)
    predictor = PFRNNPredictor(2, 3, cell="pf-gru", hidden_size=5, num_particles=4, learn_scale=False)
    particles = torch.randn(2, 4, 3, 5)
    y = torch.randn(2, 1, 3, 3)
    log_p = predictor.particle_distribution(particles).log_prob(y)
    by_hand = -0.5 * (predictor.head(particles) - y).square().sum(-1) - 1.5 * math.log(2 * math.pi)
    assert torch.allclose(log_p, by_hand, atol=1e-5)
    assert not predictor.log_scale.requires_grad and "log_scale" not in dict(predictor.named_parameters())


@pytest.mark.parametrize("target, task", [("sequence", "regression"), ("last", "classification")])
def test_objective_trains_with_the_shared_trainer(tmp_path, target, task):
    torch.manual_seed(9)
    x = torch.randn(48, 6, 2)
    if task == "regression":
        y = x.cumsum(1)[..., :1]
        out = 1
    else:
        y = (x[:, :, 0].sum(1) > 0).long()
        out = 2
    predictor = PFRNNPredictor(2, out, cell="pf-lstm", hidden_size=8, encoder_size=8, num_particles=4, task=task)
    objective = DiscriminativeLoss(predictor, target=target, belief_weight=0.5)
    before = objective(x, None, y).loss.item()
    trainer = Trainer(objective, (x, None, y), (x[:16], None, y[:16]),
                      TrainConfig(epochs=15, batch_size=16, lr=1e-2, progress=False), run_dir=tmp_path)
    history = trainer.fit()
    assert history[-1]["bound_kind"] == "-loss"
    assert objective(x, None, y).loss.item() < 0.7 * before


def test_last_step_targets_use_each_sequences_last_valid_step():
    torch.manual_seed(10)
    predictor = PFRNNPredictor(2, 3, cell="pf-lstm", hidden_size=4, num_particles=3, task="classification",
                               resampling="none", stochastic=False).eval()
    x = torch.randn(2, 5, 2)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    y = torch.tensor([0, 2])
    loss = DiscriminativeLoss(predictor, target="last", elbo_weight=0.0)(x, mask, y)
    logits = predictor(x[1:, :2])[0, -1]
    assert torch.allclose(-loss.bound[1], -torch.log_softmax(logits, -1)[2], atol=1e-5)


@pytest.mark.parametrize("cell", ["pf-lstm", "pf-gru"])
def test_pyro_program_and_module_give_the_same_elbo_loss(cell):
    torch.manual_seed(11)
    predictor = PFRNNPredictor(2, 2, cell=cell, hidden_size=5, encoder_size=4, num_particles=6).eval()
    program = PFRNNProgram(predictor, generator=torch.Generator().manual_seed(3))
    x, y = torch.randn(3, 4, 2), torch.randn(3, 4, 2)
    guide_trace = poutine.trace(program.guide).get_trace(x, y)
    pyro_loss = Trace_ELBO().differentiable_loss(poutine.replay(program.model, trace=guide_trace),
                                                 poutine.replay(program.guide, trace=guide_trace), x, y)
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


def test_bad_input_errors():
    rnn = PFLSTM(3, 4, batch_first=True, num_particles=2)
    with pytest.raises(ValueError, match="input_size = 3"):
        rnn(torch.randn(2, 5, 4))
    with pytest.raises(TypeError, match="ParticleState"):
        rnn(torch.randn(2, 5, 3), "state")
    with pytest.raises(ValueError, match="hx.h"):
        rnn(torch.randn(2, 5, 3), ParticleState(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.zeros(2, 3)))
    with pytest.raises(ValueError, match="hx.steps"):
        rnn(torch.randn(2, 5, 3), ParticleState(torch.zeros(2, 2, 4), torch.zeros(2, 2, 4), torch.zeros(2, 2), -1))
    with pytest.raises(ValueError, match="resampling"):
        PFLSTM(3, 4, resampling="multinomial")
    with pytest.raises(ValueError, match="bidirectional"):
        PFGRU(3, 4, bidirectional=True)
    with pytest.raises(ValueError, match="alpha"):
        PFGRU(3, 4, alpha=0.0)
    with pytest.raises(ValueError, match="NaN"):
        rnn(torch.full((2, 5, 3), float("nan")))
    for layer in (rnn, PFGRU(3, 4, num_particles=2)):  # nn.LSTM's float64 mistake: one TypeError naming input
        with pytest.raises(TypeError, match=r"input must have the dtype .* torch.float32, got torch.float64"):
            layer(torch.randn(2, 5, 3, dtype=torch.float64))
        with pytest.raises(TypeError, match="input must have the dtype"):
            layer.filter(torch.randn(2, 5, 3, dtype=torch.float64))
    predictor = PFRNNPredictor(3, 2, cell="pf-lstm", hidden_size=4, num_particles=2, task="classification")
    with pytest.raises(TypeError, match=r"x must have the dtype .* torch.float32, got torch.float64"):
        predictor(torch.randn(2, 5, 3, dtype=torch.float64))
    objective = DiscriminativeLoss(predictor, target="last")
    with pytest.raises(ValueError, match="class indices"):
        objective(torch.randn(2, 5, 3), None, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"y must have shape \[B\]"):
        objective(torch.randn(2, 5, 3), None, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="apply to PF cells only"):
        PFRNNPredictor(3, 2, cell="lstm", num_particles=4)
    with pytest.raises(ValueError, match="elbo_weight"):
        DiscriminativeLoss(predictor, elbo_weight=-1)


def test_to_device_moves_everything():
    predictor = PFRNNPredictor(3, 2, cell="pf-gru", hidden_size=4, num_particles=2).to(torch.float64)
    out = predictor(torch.randn(2, 5, 3, dtype=torch.float64))
    assert out.dtype == torch.float64
    if torch.cuda.is_available():  # pragma: no cover - CI has no GPU
        predictor = predictor.to("cuda")
        assert predictor(torch.randn(2, 5, 3, dtype=torch.float64, device="cuda")).is_cuda


@pytest.mark.parametrize("task, y", [("classification", torch.randint(0, 3, (5, 4))),
                                     ("regression", torch.randn(5, 4, 3))])
def test_the_pyro_program_runs_without_warnings(task, y):
    """A fixed scale (classification, or learn_scale=False) is a buffer, so pyro.module has nothing to skip."""
    predictor = PFRNNPredictor(2, 3, task=task, hidden_size=4, encoder_size=4, num_particles=3, learn_scale=False)
    program = PFRNNProgram(predictor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = Trace_ELBO().loss(program.model, program.guide, torch.randn(5, 4, 2), y)
    assert math.isfinite(loss)


def test_predictor_with_stacked_pf_layers_trains_and_its_program_refuses_them():
    torch.manual_seed(13)
    predictor = PFRNNPredictor(2, 1, cell="pf-gru", hidden_size=6, encoder_size=4, num_particles=3, num_layers=2,
                               dropout=0.1)  # fmt: skip
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

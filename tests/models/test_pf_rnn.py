"""Training a PF-RNN: soft resampling (eq. 3), the PF-RNN losses by hand, the discriminative objective with the shared
trainer, the one-line errors of bad inputs, and the models that declare no density of x saying so.

The package's modules have their own files: test_pf_rnn_cells.py, test_pf_rnn_layers.py (and the nn.LSTM / nn.GRU
drop-in contract in test_pf_rnn_dropin.py), test_pf_rnn_predictor.py, test_pf_rnn_program.py.
"""

import pytest
import torch
from factories import FACTORIES, MASK

from ppl_models import PFRNNProgram
from ppl_models.inference import Unsupported
from ppl_models.inference.discriminative import DiscriminativeLoss, belief_loss, particle_elbo_loss, prediction_loss
from ppl_models.inference.resampling import resample
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.pf_rnn import PFGRU, PFLSTM, ParticleState, PFRNNPredictor


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
    trainer = Trainer(
        objective,
        (x, None, y),
        (x[:16], None, y[:16]),
        TrainConfig(epochs=15, batch_size=16, lr=1e-2, progress=False),
        run_dir=tmp_path,
    )
    history = trainer.fit()
    assert history[-1]["bound_kind"] == "-loss"
    assert objective(x, None, y).loss.item() < 0.7 * before


def test_last_step_targets_use_each_sequences_last_valid_step():
    torch.manual_seed(10)
    predictor = PFRNNPredictor(
        2, 3, cell="pf-lstm", hidden_size=4, num_particles=3, task="classification", resampling="none", stochastic=False
    ).eval()
    x = torch.randn(2, 5, 2)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    y = torch.tensor([0, 2])
    loss = DiscriminativeLoss(predictor, target="last", elbo_weight=0.0)(x, mask, y)
    logits = predictor(x[1:, :2])[0, -1]
    assert torch.allclose(-loss.bound[1], -torch.log_softmax(logits, -1)[2], atol=1e-5)


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


@pytest.mark.parametrize("cls", [PFLSTM, PFGRU, PFRNNPredictor, PFRNNProgram], ids=lambda c: c.__name__)
def test_the_models_without_a_density_of_x_say_so(cls):
    model, x = FACTORIES[cls]()
    x[0, 1, 0] = 1e30  # even for an extreme value: no score, and why
    with pytest.raises(Unsupported, match="declares no way to score x"):
        model.score(x, MASK)

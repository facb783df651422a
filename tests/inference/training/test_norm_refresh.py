"""Re-estimating batch-norm running statistics at the current weights (``refresh_norm_statistics``).

The truth each test is held to is computed apart from the running-average code: the batches'
own statistics gathered by hand from the norm's inputs, and the training-mode output, which
normalises by the batch's statistics (``F.batch_norm`` with ``training=True``).
"""

import copy

import pytest
import torch

from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.inference.training import TrainConfig, Trainer, refresh_norm_statistics
from ppl_models.pf_rnn import PFGRU, PFLSTM, PFRNNPredictor, StepBatchNorm

DETERMINISTIC = {"num_particles": 3, "stochastic": False, "resampling": "none"}


def _stale_predictor(seed: int = 0) -> tuple[PFRNNPredictor, torch.Tensor]:
    """A small PF-LSTM predictor after a few large steps: its running averages trail its weights."""
    torch.manual_seed(seed)
    x = torch.randn(40, 6, 3)
    y = x.cumsum(1)[..., :2]
    predictor = PFRNNPredictor(3, 2, hidden_size=8, encoder_size=8, **DETERMINISTIC)
    objective = DiscriminativeLoss(predictor)
    optimizer = torch.optim.Adam(predictor.parameters(), lr=0.05)
    for _ in range(15):
        optimizer.zero_grad()
        objective(x, None, y).loss.backward()
        optimizer.step()
    return predictor, x


def _training_mode_output(predictor: PFRNNPredictor, x: torch.Tensor) -> torch.Tensor:
    reference = copy.deepcopy(predictor).train()
    with torch.no_grad():
        return reference(x)


@pytest.mark.parametrize("cell", [PFLSTM, PFGRU])
def test_refresh_sets_each_steps_statistics_to_the_average_of_the_batches_own(cell):
    torch.manual_seed(1)
    rnn = cell(3, 5, batch_first=True, **DETERMINISTIC)
    batches = [(torch.randn(6, 4, 3) * (1 + i),) for i in range(3)]
    inputs = {}  # step -> the norm's input in each batch, gathered from a training-mode copy
    reference = copy.deepcopy(rnn).train()
    norm = reference.layers[0].norm
    norm.register_forward_hook(lambda module, args, out: inputs.setdefault(args[1], []).append(args[0].clone()))
    with torch.no_grad():
        for (x,) in batches:
            reference(x)
    assert refresh_norm_statistics(rnn, batches) == 1
    refreshed = rnn.layers[0].norm
    for t in range(4):
        expected_mean = torch.stack([step_input.mean(0) for step_input in inputs[t]]).mean(0)
        expected_var = torch.stack([step_input.var(0) for step_input in inputs[t]]).mean(0)  # unbiased, as BN keeps
        torch.testing.assert_close(refreshed.running_mean[t], expected_mean)
        torch.testing.assert_close(refreshed.running_var[t], expected_var)
    assert int(refreshed.steps_trained) == 4


def test_after_refresh_evaluation_equals_the_batch_statistics_output():
    predictor, x = _stale_predictor()
    truth = _training_mode_output(predictor, x)
    with torch.no_grad():
        stale = predictor.eval()(x)
    assert (stale - truth).abs().max() > 0.05  # the running averages lag the weights
    refresh_norm_statistics(predictor, [(x,)])  # one batch: the statistics are this batch's own
    rows = x.shape[0] * DETERMINISTIC["num_particles"]
    predictor.rnn.layers[0].norm.running_var.mul_((rows - 1) / rows)  # kept unbiased; training divides by rows
    with torch.no_grad():
        refreshed = predictor.eval()(x)
    torch.testing.assert_close(refreshed, truth, atol=1e-5, rtol=1e-4)


def test_refresh_restores_modes_momenta_and_random_streams():
    predictor, x = _stale_predictor(seed=2)
    predictor.eval()
    predictor.encoder.train()
    modes = {name: m.training for name, m in predictor.named_modules()}
    torch.manual_seed(5)
    state = torch.get_rng_state()
    refresh_norm_statistics(predictor, [(x[:20],), (x[20:],)], seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert modes == {name: m.training for name, m in predictor.named_modules()}
    assert predictor.rnn.layers[0].norm.momentum == 0.1
    assert refresh_norm_statistics(torch.nn.Linear(2, 2), [(torch.randn(3, 2),)]) == 0  # no norm: nothing to do


def test_trainer_refresh_leaves_training_unchanged_and_fixes_the_evaluation(tmp_path):
    torch.manual_seed(4)
    x = torch.randn(64, 6, 3)
    y = x.cumsum(1)[..., :2]
    runs = {}
    for refresh in (0, 4):
        torch.manual_seed(0)
        predictor = PFRNNPredictor(3, 2, hidden_size=8, encoder_size=8, num_particles=4)
        config = TrainConfig(epochs=3, batch_size=16, lr=0.05, progress=False, norm_refresh_batches=refresh)
        Trainer(
            DiscriminativeLoss(predictor), (x, None, y), (x[:16], None, y[:16]), config, run_dir=tmp_path / str(refresh)
        ).fit()
        runs[refresh] = predictor
    for before, after in zip(runs[0].parameters(), runs[4].parameters()):
        torch.testing.assert_close(before, after, rtol=0, atol=0)
    means = [run.rnn.layers[0].norm.running_mean[:6] for run in (runs[0], runs[4])]
    assert not torch.allclose(*means)


def test_norm_refresh_batches_must_be_a_count():
    with pytest.raises(ValueError, match="norm_refresh_batches"):
        TrainConfig(norm_refresh_batches=-1)
    assert isinstance(PFLSTM(2, 3).layers[0].norm, StepBatchNorm)

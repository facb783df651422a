"""Trainer options added for the PF-RNN paper protocol: RMSprop and recorded (CUDA-graph) training steps."""

import pytest
import torch

from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.pf_rnn import PFRNNPredictor


def _fit(config: TrainConfig, device="cpu"):
    torch.manual_seed(0)
    model = PFRNNPredictor(3, 2, hidden_size=6, encoder_size=6, num_particles=3, learn_scale=False)
    x, y = torch.randn(20, 5, 3), torch.randn(20, 5, 2)
    trainer = Trainer(
        DiscriminativeLoss(model, time_decay=0.1), (x, None, y), (x[:6], None, y[:6]), config, device=device
    )
    return trainer, trainer.fit()


def test_rmsprop_is_torchs_rmsprop():
    config = TrainConfig(epochs=2, batch_size=8, optimizer="rmsprop", lr=5e-4, clip_norm=3.0, progress=False)
    trainer, history = _fit(config)
    assert isinstance(trainer.optimizer, torch.optim.RMSprop) and trainer.optimizer.defaults["lr"] == 5e-4
    assert history[-1]["train_loss"] < float("inf")


def test_cuda_graph_option_runs_the_same_eager_steps_off_cuda():
    common = dict(epochs=2, batch_size=8, optimizer="rmsprop", lr=1e-3, clip_norm=3.0, progress=False)
    eager, eager_history = _fit(TrainConfig(**common))
    graphed, graphed_history = _fit(TrainConfig(**common, cuda_graph=True))
    assert not graphed.graphed and not graphed.graphs  # CPU: no graph recorded
    for a, b in zip(eager.parameters, graphed.parameters):
        assert torch.equal(a, b)
    assert [r["train_loss"] for r in eager_history] == [r["train_loss"] for r in graphed_history]


@pytest.mark.parametrize("bad", [{"lr_schedule": "cosine"}, {"kl_anneal_steps": 10}, {"cuda_graph": 1}])
def test_cuda_graph_rejects_what_a_graph_cannot_follow(bad):
    with pytest.raises(ValueError, match="cuda_graph"):
        TrainConfig(**{"cuda_graph": True, **bad})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_trains_on_cuda():
    config = TrainConfig(epochs=3, batch_size=8, optimizer="rmsprop", lr=1e-2, progress=False, cuda_graph=True)
    trainer, history = _fit(config, device="cuda")
    assert trainer.graphed and len(trainer.graphs) == 2  # batches of 8 and the last one of 4
    assert history[-1]["train_loss"] < history[0]["train_loss"]

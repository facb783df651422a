"""Truncated BPTT over continuous streams (TrainConfig.streams): the stream layout, the carried state against a hand
loop over the whole streams with the state detached every chunk, and the refusals."""

from __future__ import annotations

import pytest
import torch

from ppl_models import PSRNN, GRUBaseline, MCDropoutLSTM, RecurrentPredictor
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.protocol_terms import Unsupported
from ppl_models.inference.training import TrainConfig, Trainer, stream_batches

STREAMS, CHUNKS, LENGTH, K = 3, 4, 5, 4


def _text(seed=0):
    """One-hot symbols of one text ``[STREAMS * CHUNKS * LENGTH, K]``."""
    ids = torch.randint(0, K, (STREAMS * CHUNKS * LENGTH,), generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.one_hot(ids, K).float()


def _fit(model, text, lr, epochs=1):
    """Train on the text's consecutive chunks with streams; returns the history."""
    chunks = text.reshape(STREAMS * CHUNKS, LENGTH, K)
    config = TrainConfig(epochs=epochs, optimizer="sgd", lr=lr, streams=STREAMS, progress=False)
    return Trainer(ExactLikelihood(model), (chunks, None), config=config).fit()


def test_stream_batches_take_row_c_of_every_contiguous_stream():
    # 7 rows, 3 streams: C = 2 chunks each (row 6 left out); stream s is rows 2s, 2s + 1
    assert [b.tolist() for b in stream_batches(7, 3)] == [[0, 2, 4], [1, 3, 5]]
    assert [b.tolist() for b in stream_batches(6, 2, rank=1, world_size=2)] == [[3], [4], [5]]


def _gru():
    torch.manual_seed(0)
    return GRUBaseline(K, emission="gaussian", rnn_dim=6, hidden_dim=5)


def _psrnn():
    torch.manual_seed(0)
    model = PSRNN(K, emission="categorical", state_dim=3, obs_features=3, num_features=8, init="random")
    model.initialize(_text(1).reshape(6, 10, K))
    return model


def _lstm():
    torch.manual_seed(0)
    return RecurrentPredictor(K, cell="lstm", emission="categorical", state_dim=4, encoder_dim=3)


@pytest.mark.parametrize("build", [_gru, _psrnn, _lstm])
def test_at_learning_rate_zero_the_streams_score_the_whole_text(build):
    model, text = build(), _text()
    history = _fit(model, text, lr=0.0)
    streams = text.reshape(STREAMS, CHUNKS * LENGTH, K)
    with torch.no_grad():
        whole = model.log_likelihood(streams).sum() / streams[..., 0].numel()  # each stream once, from its start
    assert history[0]["train_bound_per_step"] == pytest.approx(float(whole), rel=1e-5)


def _gru_hand_epoch(model, streams, lr):
    """SGD over the streams ``[S, n, K]`` in chunks of LENGTH: the GRU's inputs are the previous steps (zero first),
    its state carried from chunk to chunk and detached. Returns the chunks' losses."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    hidden, losses = None, []
    inputs = torch.cat([torch.zeros_like(streams[:, :1]), streams[:, :-1]], 1)
    for c in range(CHUNKS):
        steps = slice(c * LENGTH, (c + 1) * LENGTH)
        d, hidden = model.rnn(inputs[:, steps], hidden)
        loss = -model.step_distribution(d).log_prob(streams[:, steps]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        hidden = hidden.detach()
        losses.append(loss.item())
    return losses


def _psrnn_hand_epoch(model, streams, lr):
    """The same for the PSRNN: ``q`` predicts the step, then reads it (``q_1`` first), carried and detached."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    layer, losses = model.layers[0], []
    q = (layer.initial_state / layer.initial_state.norm()).expand(STREAMS, -1)
    for c in range(CHUNKS):
        log_p = []
        for t in range(c * LENGTH, (c + 1) * LENGTH):
            log_p.append((model.decoder(q).log_softmax(-1) * streams[:, t]).sum(-1))
            q = layer.cell(layer.encode(streams[:, t]), q)
        loss = -torch.stack(log_p).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        q = q.detach()
        losses.append(loss.item())
    return losses


def _lstm_hand_epoch(model, streams, lr):
    """The same for the LSTM predictor: the state before a step predicts it (zero first), the LSTM's output after
    it and its ``(h, c)`` carried from chunk to chunk and detached."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    state, hidden, losses = torch.zeros(STREAMS, 4), None, []
    for c in range(CHUNKS):
        chunk = streams[:, c * LENGTH : (c + 1) * LENGTH]
        outputs, hidden = model.rnn(model.encoder(chunk), hidden)
        states = torch.cat([state.unsqueeze(1), outputs[:, :-1]], 1)
        loss = -(model.decoder(states).log_softmax(-1) * chunk).sum(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state, hidden = outputs[:, -1].detach(), tuple(h.detach() for h in hidden)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    ("build", "hand"), [(_gru, _gru_hand_epoch), (_psrnn, _psrnn_hand_epoch), (_lstm, _lstm_hand_epoch)]
)
def test_streams_train_as_truncated_bptt_by_hand(build, hand):
    model, reference, text = build(), build(), _text()
    history = _fit(model, text, lr=0.5)
    losses = hand(reference, text.reshape(STREAMS, CHUNKS * LENGTH, K), lr=0.5)
    assert history[0]["train_loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    for (name, trained), by_hand in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(trained, by_hand, rtol=1e-5, atol=1e-6, msg=name)


def test_stream_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match="TrainConfig.streams must be an integer >= 1"):
        TrainConfig(streams=0)
    with pytest.raises(ValueError, match="cuda_graph cannot record"):
        TrainConfig(streams=2, cuda_graph=True)
    text = _text()
    with pytest.raises(ValueError, match="streams=61 is more than the 60 training rows"):
        Trainer(ExactLikelihood(_gru()), (text.reshape(60, 1, K), None), config=TrainConfig(streams=61))
    x, mask = text.reshape(6, 10, K), torch.ones(6, 10, dtype=torch.bool)
    mask[0, 9] = False  # the first chunk of stream 0 (rows 0, 1, 2) hands on a state that read padding
    with pytest.raises(ValueError, match="only each stream's last chunk may be shorter"):
        Trainer(ExactLikelihood(_gru()), (x, mask), config=TrainConfig(streams=2))
    mask[0, 9], mask[2, 9] = True, False  # the last chunk of stream 0 may be short
    Trainer(ExactLikelihood(_gru()), (x, mask), config=TrainConfig(streams=2))
    assert "streams" not in TrainConfig().to_dict()  # runs without it record what they did before


def test_a_model_that_cannot_carry_its_state_is_refused():
    model = MCDropoutLSTM(K, hidden_size=3)
    with pytest.raises(Unsupported, match="MCDropoutLSTM cannot carry its state"):
        Trainer(ExactLikelihood(model), (_text().reshape(12, 5, K), None), config=TrainConfig(streams=3))

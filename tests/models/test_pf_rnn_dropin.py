"""PFLSTM / PFGRU swapped into code written for nn.LSTM / nn.GRU.

The references are torch's own layers (nn.LSTM with copied weights, its signature, its packed
sequences) and, for PF-GRU, the GRU of the PF-RNN paper's appendix written out by hand: the
paper applies the reset gate before the recurrent product, nn.GRU after it.
"""

import inspect

import pytest
import torch
from torch import nn
from torch.nn.functional import dropout
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ppl_models.pf_rnn import PFGRU, PFLSTM, ParticleState

PLAIN = {"num_particles": 1, "stochastic": False, "resampling": "none", "activation": "tanh"}


def _copy_lstm_weights(pf: PFLSTM, reference: nn.LSTM) -> None:
    """nn.LSTM's gate order (i, f, g, o) is the PF cell's without its noise-scale block."""
    with torch.no_grad():
        for index, cell in enumerate(pf.layers):
            cell.input_projection.weight.copy_(getattr(reference, f"weight_ih_l{index}"))
            cell.hidden_projection.weight.copy_(getattr(reference, f"weight_hh_l{index}"))
            if reference.bias:
                cell.input_projection.bias.copy_(
                    getattr(reference, f"bias_ih_l{index}") + getattr(reference, f"bias_hh_l{index}")
                )


def _papers_gru(pf: PFGRU, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The appendix GRU by hand over ``x [T, B, D]`` from ``h0 [L, B, H]``: ``(output [T, B, H], h_n)``."""
    size, layer_input, finals = pf.hidden_size, x, []
    for cell, h in zip(pf.layers, h0):
        w_in, b_in = cell.input_projection.weight, cell.input_projection.bias  # z, r, n blocks
        w_h, w_n = cell.hidden_projection.weight, cell.candidate_projection.weight
        outputs = []
        for x_t in layer_input:
            gates_in = x_t @ w_in.T + b_in
            z = torch.sigmoid(gates_in[:, :size] + h @ w_h[:size].T)
            r = torch.sigmoid(gates_in[:, size : 2 * size] + h @ w_h[size:].T)
            h = (1 - z) * torch.tanh(gates_in[:, 2 * size :] + (r * h) @ w_n.T) + z * h
            outputs.append(h)
        layer_input = torch.stack(outputs)
        finals.append(h)
    return layer_input, torch.stack(finals)


def test_positional_signature_and_defaults_are_nn_lstm_and_nn_gru():
    for ours, theirs in ((PFLSTM, nn.LSTM), (PFGRU, nn.GRU)):
        torch_params = list(inspect.signature(nn.RNNBase.__init__).parameters.values())[2:]  # after self, mode
        if theirs is nn.GRU:
            torch_params = [p for p in torch_params if p.name != "proj_size"]
        params = list(inspect.signature(ours.__init__).parameters.values())[1 : len(torch_params) + 1]
        assert [(p.name, p.default) for p in params] == [(p.name, p.default) for p in torch_params]
    rnn = PFLSTM(8, 16, 2)  # as nn.LSTM(8, 16, 2): two layers, not two particles
    assert rnn.num_layers == 2 and len(rnn.layers) == 2 and rnn.num_particles == 20
    assert rnn.batch_first is False and rnn.bias is True and rnn.bidirectional is False
    rnn = PFGRU(8, 16, 1, False, True, num_particles=3)
    assert rnn.bias is False and rnn.batch_first is True and rnn.layers[0].input_projection.bias is None
    with pytest.raises(TypeError):  # K only by keyword
        PFLSTM(8, 16, 1, True, False, 0.0, False, 0, None, None, 5)


class SequenceFirstTagger(nn.Module):
    """Written for nn.LSTM / nn.GRU: sequence-first input, classifies from the last layer's h_n."""

    def __init__(self, make_rnn):
        super().__init__()
        self.rnn = make_rnn(3, 8, 2)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        output, state = self.rnn(x)
        h_n = state[0] if isinstance(state, tuple) else state
        return self.head(h_n[-1]), output, state


@pytest.mark.parametrize(
    "make_rnn",
    [nn.LSTM, nn.GRU, lambda *a: PFLSTM(*a, num_particles=4), lambda *a: PFGRU(*a, num_particles=4)],
    ids=["lstm", "gru", "pf-lstm", "pf-gru"],
)
def test_a_sequence_first_model_reading_h_n_runs_and_trains(make_rnn):
    torch.manual_seed(0)
    model = SequenceFirstTagger(make_rnn)
    x = torch.randn(6, 16, 3)  # [T, B, D]
    y = (x[:, :, 0].sum(0) > 0).long()
    logits, output, state = model(x)
    assert logits.shape == (16, 2) and output.shape == (6, 16, 8)
    for tensor in state if isinstance(state, tuple) else (state,):
        assert tensor.shape == (2, 16, 8)
    h_n = state[0] if isinstance(state, tuple) else state
    torch.testing.assert_close(h_n[-1], output[-1])  # the top layer's final state is its last output
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x)[0], y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


@pytest.mark.parametrize("bias", [True, False])
def test_one_noiseless_particle_is_a_stacked_nn_lstm(bias):
    torch.manual_seed(1)
    reference = nn.LSTM(3, 5, 2, bias=bias)
    pf = PFLSTM(3, 5, 2, bias=bias, **PLAIN)
    _copy_lstm_weights(pf, reference)
    x, h0, c0 = torch.randn(7, 4, 3), torch.randn(2, 4, 5), torch.randn(2, 4, 5)
    for hx in (None, (h0, c0)):
        expected, (h_n, c_n) = reference(x, hx)
        output, (pf_h, pf_c) = pf(x, hx)
        torch.testing.assert_close(output, expected)
        torch.testing.assert_close(pf_h, h_n)
        torch.testing.assert_close(pf_c, c_n)


def test_one_noiseless_particle_is_the_papers_gru_stacked():
    torch.manual_seed(2)
    pf = PFGRU(3, 5, 2, **PLAIN)
    x, h0 = torch.randn(6, 4, 3), torch.randn(2, 4, 5)
    expected, h_n = _papers_gru(pf, x, h0)
    output, pf_h = pf(x, h0)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(pf_h, h_n)
    zero_start, _ = _papers_gru(pf, x, torch.zeros(2, 4, 5))
    torch.testing.assert_close(pf(x)[0], zero_start)


def test_dropout_acts_between_layers_in_training_only():
    torch.manual_seed(3)
    reference = nn.LSTM(3, 5, 2, dropout=0.5)
    pf = PFLSTM(3, 5, 2, dropout=0.5, **PLAIN)
    _copy_lstm_weights(pf, reference)
    x = torch.randn(6, 4, 3)
    torch.testing.assert_close(pf.eval()(x)[0], reference.eval()(x)[0])
    torch.manual_seed(4)  # the only random draw of a noiseless, non-resampling stack: the dropout mask
    output = pf.train()(x)[0]
    torch.manual_seed(4)
    mask = dropout(torch.ones(4, 6, 5), 0.5, True).transpose(0, 1)  # drawn [B, T, H], as inside the layer
    bottom = nn.LSTM(3, 5)
    top = nn.LSTM(5, 5)
    for index, layer in enumerate((bottom, top)):
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(layer, f"{name}_l0").data = getattr(reference, f"{name}_l{index}").data
    torch.testing.assert_close(output, top(bottom(x)[0] * mask)[0])
    assert not torch.allclose(output, pf.eval()(x)[0])


def _packed_batch():
    x = torch.randn(4, 6, 3)  # [B, T, D], lengths not sorted
    lengths = torch.tensor([3, 6, 1, 4])
    return x, lengths, pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)


@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_packed_sequences_match_nn_lstm(enforce_sorted):
    torch.manual_seed(5)
    reference = nn.LSTM(3, 5, 2, batch_first=True)
    pf = PFLSTM(3, 5, 2, batch_first=True, **PLAIN)
    _copy_lstm_weights(pf, reference)
    x, lengths, packed = _packed_batch()
    if enforce_sorted:  # a batch already sorted by length: no sorted_indices
        order = lengths.argsort(descending=True)
        packed = pack_padded_sequence(x[order], lengths[order], batch_first=True)
    hx = (torch.randn(2, 4, 5), torch.randn(2, 4, 5))  # in the batch's own order, as nn.LSTM takes it
    expected, (h_n, c_n) = reference(packed, hx)
    output, (pf_h, pf_c) = pf(packed, hx)
    assert type(output) is type(expected) and (output.sorted_indices is None) == enforce_sorted
    torch.testing.assert_close(output.data, expected.data)
    torch.testing.assert_close(output.batch_sizes, expected.batch_sizes)
    if not enforce_sorted:
        torch.testing.assert_close(output.unsorted_indices, expected.unsorted_indices)
    torch.testing.assert_close(pf_h, h_n)
    torch.testing.assert_close(pf_c, c_n)


@pytest.mark.parametrize("cell", [PFLSTM, PFGRU])
def test_packed_particle_filters_give_each_sequence_its_own_run_and_h_n_at_its_last_step(cell):
    """With weighted, distinct particles (a given particle state) and eval draws off, each
    packed sequence gives what the layer gives on that sequence alone, unbatched."""
    torch.manual_seed(6)
    pf = cell(3, 5, 2, num_particles=6, activation="tanh", eval_randomness="off").eval()
    x, lengths, packed = _packed_batch()
    shape = (2, 6, 4, 5)
    hx = ParticleState(
        torch.randn(shape), torch.randn(shape) if cell is PFLSTM else None, torch.log_softmax(torch.randn(2, 6, 4), 1)
    )
    output, state = pf(packed, hx)
    padded, out_lengths = pad_packed_sequence(output, batch_first=True)
    torch.testing.assert_close(out_lengths, lengths)
    h_n = state[0] if cell is PFLSTM else state
    for b, length in enumerate(lengths.tolist()):
        alone = ParticleState(
            hx.h[:, :, b : b + 1], None if hx.c is None else hx.c[:, :, b : b + 1], hx.log_weights[:, :, b : b + 1]
        )
        single_output, single_state = pf(x[b, :length], alone)  # unbatched [T, D]
        torch.testing.assert_close(padded[b, :length], single_output)
        assert (padded[b, length:] == 0).all()
        single_h = single_state[0] if cell is PFLSTM else single_state
        assert single_h.shape == (2, 5)
        torch.testing.assert_close(h_n[:, b], single_h)
        torch.testing.assert_close(h_n[-1, b], padded[b, length - 1])


class PackedLastState(nn.Module):
    """Written for nn.LSTM / nn.GRU: packs padded sequence-first input, predicts from h_n."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn, self.head = rnn, nn.Linear(5, 1)

    def forward(self, x, lengths):
        output, state = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
        h_n = state[0] if isinstance(state, tuple) else state
        return self.head(h_n[-1]), pad_packed_sequence(output)[0]


@pytest.mark.parametrize(
    "rnn",
    [lambda: nn.LSTM(3, 5, 2), lambda: PFLSTM(3, 5, 2, num_particles=4), lambda: PFGRU(3, 5, 2, num_particles=4)],
    ids=["lstm", "pf-lstm", "pf-gru"],
)
def test_a_packing_model_ignores_padding_and_trains(rnn):
    torch.manual_seed(12)
    model = PackedLastState(rnn())
    x, lengths = torch.randn(6, 4, 3), torch.tensor([3, 6, 1, 4])
    valid = (torch.arange(8).unsqueeze(-1) < lengths).unsqueeze(-1)  # [T', B, 1] with 2 more steps
    garbage = torch.where(valid, torch.cat([x, x[:2]]), torch.randn(8, 4, 3) * 9)
    model.eval()
    prediction, output = model(x, lengths)
    assert prediction.shape == (4, 1) and output.shape == (6, 4, 5)
    torch.testing.assert_close(model(garbage, lengths)[0], prediction)  # other padding, longer: same answer
    model.train()
    y = x[0, :, :1]
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = (model(x, lengths)[0] - y).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("cell", [PFLSTM, PFGRU])
def test_unbatched_input_is_a_batch_of_one(cell):
    torch.manual_seed(7)
    pf = cell(3, 5, 2, num_particles=4).eval()
    x = torch.randn(6, 3)
    output, state = pf(x)
    batched_output, batched_state = pf(x.unsqueeze(1))
    assert output.shape == (6, 5)
    torch.testing.assert_close(output, batched_output[:, 0])
    for single, batched in zip(
        state if cell is PFLSTM else (state,), batched_state if cell is PFLSTM else (batched_state,)
    ):
        assert single.shape == (2, 5)
        torch.testing.assert_close(single, batched[:, 0])
    h0 = torch.randn(2, 5)
    hx = (h0, torch.zeros(2, 5)) if cell is PFLSTM else h0
    assert pf(x, hx)[0].shape == (6, 5)


def test_evaluation_draws_fixed_off_or_sampled():
    torch.manual_seed(8)
    x = torch.randn(5, 3, 2)
    fixed = PFLSTM(2, 4, num_particles=8).eval()
    rng = torch.get_rng_state()
    first, second = fixed(x)[0], fixed(x)[0]
    torch.testing.assert_close(first, second)
    assert torch.equal(torch.get_rng_state(), rng)  # its own generator: the caller's stream is untouched
    assert not torch.allclose(fixed.train()(x)[0], fixed.train()(x)[0])  # training draws afresh
    fixed.eval_seed = 1
    assert not torch.allclose(fixed.eval()(x)[0], first)
    sampled = PFLSTM(2, 4, num_particles=8, eval_randomness="sampled").eval()
    assert not torch.allclose(sampled(x)[0], sampled(x)[0])
    # off: no noise, no resampling; equal particles from a zero start make it nn.LSTM's update
    off = PFLSTM(2, 4, num_particles=8, activation="tanh", eval_randomness="off").eval()
    reference = nn.LSTM(2, 4)
    with torch.no_grad():
        cell = off.layers[0]
        reference.weight_ih_l0.copy_(cell.input_projection.weight[:16])  # i, f, g, o; the noise scale is last
        reference.weight_hh_l0.copy_(cell.hidden_projection.weight[:16])
        reference.bias_ih_l0.copy_(cell.input_projection.bias[:16])
        reference.bias_hh_l0.zero_()
    torch.testing.assert_close(off(x)[0], reference(x)[0])


def test_particle_state_continues_the_stack_and_h_n_is_its_weighted_mean():
    torch.manual_seed(9)
    pf = PFLSTM(3, 5, 2, num_particles=6, eval_randomness="off")
    with torch.no_grad():
        pf.train()(torch.randn(8, 32, 3))  # per-step batch-norm statistics for the evaluation below
    pf.eval()
    shape = (2, 6, 4, 5)
    hx = ParticleState(torch.randn(shape), torch.randn(shape), torch.log_softmax(torch.randn(2, 6, 4), 1))
    x = torch.randn(7, 4, 3)
    whole, (h_n, c_n) = pf(x, hx)
    state = pf.last_particle_state
    assert state.h.shape == shape and state.log_weights.shape == (2, 6, 4) and state.steps == 7
    assert not state.h.requires_grad  # detached; filter() keeps the gradient path
    weights = state.log_weights.exp().unsqueeze(-1)
    torch.testing.assert_close(h_n, (weights * state.h).sum(1))
    torch.testing.assert_close(c_n, (weights * state.c).sum(1))
    first, _ = pf(x[:3], hx)
    rest, _ = pf(x[3:], pf.last_particle_state)
    torch.testing.assert_close(torch.cat([first, rest]), whole)
    belief = pf.filter(x, hx)
    assert belief.particles.shape == (7, 6, 4, 5) and belief.state.h.requires_grad
    torch.testing.assert_close(belief.mean.transpose(0, 1), whole)


def test_stacked_filter_takes_noise_per_layer():
    torch.manual_seed(10)
    pf = PFGRU(2, 4, 2, batch_first=True, num_particles=3, resampling="none")
    x, noise = torch.randn(2, 5, 2), torch.randn(2, 5, 3, 2, 4)
    torch.testing.assert_close(pf.filter(x, noise=noise).mean, pf.filter(x, noise=noise).mean)
    with pytest.raises(ValueError, match=r"noise must be a tensor \[num_layers, T, K, B, H\]"):
        pf.filter(x, noise=noise[0])


def test_checkpoints_of_the_single_layer_version_load():
    torch.manual_seed(11)
    pf = PFLSTM(3, 4, num_particles=2)
    old_style = {key.replace("layers.0.", ""): value for key, value in pf.state_dict().items()}
    assert "input_projection.weight" in old_style
    restored = PFLSTM(3, 4, num_particles=2)
    restored.load_state_dict(old_style)
    for (name, value), (_, loaded) in zip(pf.state_dict().items(), restored.state_dict().items()):
        assert torch.equal(value, loaded), name


def test_device_and_dtype_arguments():
    pf = PFGRU(3, 4, dtype=torch.float64, num_particles=2)
    assert all(p.dtype == torch.float64 for p in pf.parameters())
    assert pf(torch.randn(5, 2, 3, dtype=torch.float64))[0].dtype == torch.float64


@pytest.mark.parametrize(
    "build, error, words",
    [
        (lambda: PFLSTM(3, 4, proj_size=2), ValueError, "proj_size"),
        (lambda: PFGRU(3, 4, bidirectional=True), ValueError, "bidirectional"),
        (lambda: PFLSTM(3, 4, 0), ValueError, "num_layers"),
        (lambda: PFLSTM(3, 4, dropout=1.5), ValueError, "dropout"),
        (lambda: PFLSTM(3, 4, batch_first="yes"), TypeError, "batch_first"),
        (lambda: PFLSTM(3, 4, bias=1), TypeError, "bias"),
        (lambda: PFLSTM(3, 4, num_particles=0), ValueError, "num_particles"),
        (lambda: PFGRU(3, 4, eval_randomness="never"), ValueError, "eval_randomness"),
        (lambda: PFGRU(3, 4, eval_seed=-1), ValueError, "eval_seed"),
        (lambda: PFLSTM(3, 4)(torch.randn(2, 5, 3, 3)), ValueError, "input must have shape"),
        (lambda: PFLSTM(3, 4)(torch.randn(5, 2, 3), (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))), ValueError, "h_0"),
        (
            lambda: PFLSTM(3, 4)(torch.randn(5, 3), (torch.zeros(1, 1, 4), torch.zeros(1, 1, 4))),
            ValueError,
            r"\[1, 4\]",
        ),
        (lambda: PFGRU(3, 4)(torch.randn(5, 2, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))), TypeError, "h_0"),
        (lambda: PFLSTM(3, 4)([[1.0, 2.0, 3.0]]), TypeError, "input"),
    ],
)
def test_bad_arguments_raise_one_line_errors_naming_them(build, error, words):
    with pytest.raises(error, match=words) as caught:
        build()
    assert "\n" not in str(caught.value)


def test_dropout_on_one_layer_warns_as_nn_lstm():
    with pytest.warns(UserWarning, match="dropout"):
        PFLSTM(3, 4, dropout=0.2)


class _LSTMRegressor(nn.Module):
    """A model written for nn.LSTM (batch_first): the last output through a linear head."""

    def __init__(self, rnn_class, **options):
        super().__init__()
        self.rnn = rnn_class(3, 16, batch_first=True, **options)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


@pytest.mark.parametrize(
    "rnn_class, options", [(nn.LSTM, {}), (PFLSTM, {"num_particles": 4}), (nn.GRU, {}), (PFGRU, {"num_particles": 4})]
)
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

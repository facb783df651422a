"""Baselines of the SMC Transformer paper: the MC-dropout LSTM and the deterministic causal Transformer."""

import math

import pytest
import torch

from ppl_models import transformer_forecaster
from ppl_models.experiments import registry
from ppl_models.experiments.config import load_config
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.mc_dropout import MCDropoutLSTM
from ppl_models.transformer_forecaster import TransformerForecaster


def _ar_sequences(num_sequences=64, num_steps=25, alpha=0.8, seed=0):
    """AR(1) sequences ``[B, T, 1]`` (written out here, independent of the project's generator)."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(num_sequences, num_steps, generator=generator)
    values = [noise[:, 0]]
    for t in range(1, num_steps):
        values.append(alpha * values[-1] + math.sqrt(0.5) * noise[:, t])
    return torch.stack(values, 1).unsqueeze(-1)


@pytest.mark.parametrize("where", ["output", "full"])
def test_dropout_is_off_in_eval_mode_and_on_in_train_mode(where):
    torch.manual_seed(0)
    model = MCDropoutLSTM(1, hidden_size=16, dropout=0.3, where=where)
    x = torch.randn(5, 12, 1)
    model.eval()
    torch.testing.assert_close(model.predict(x), model.predict(x), rtol=0, atol=0)
    # eval mode is the plain network: nn.LSTM, shifted by one step, then the decoder
    outputs, _ = model.lstm(x)
    shifted = torch.cat([torch.zeros(5, 1, 16), outputs[:, :-1]], 1)
    torch.testing.assert_close(model.predict(x), model.decoder(shifted))
    model.train()
    assert not torch.equal(model.predict(x), model.predict(x))


@pytest.mark.parametrize("where", ["output", "full"])
def test_mc_samples_shape_differ_between_passes_and_reduce_to_the_network_without_dropout(where):
    torch.manual_seed(1)
    x = torch.randn(3, 10, 2)
    model = MCDropoutLSTM(2, hidden_size=8, dropout=0.25, where=where).eval()
    samples = model.mc_samples(x, num_samples=50)
    assert samples.shape == (50, 3, 10, 2)
    assert bool((samples.std(0)[:, 1:] > 0).all())  # every step after the first varies across passes
    assert not model.training  # MC sampling leaves the module's mode alone
    noisy = model.mc_samples(x, num_samples=4000, noise=True)
    plain = model.mc_samples(x, num_samples=4000)
    # the added noise has the learned scale (exp(0) = 1): variances add
    added = noisy.var(0).mean() - plain.var(0).mean()
    assert abs(float(added) - 1.0) < 0.1
    # with a rate of 0, every pass equals the deterministic network (for "full": the written-out
    # LSTM recursion equals torch's nn.LSTM)
    exact = MCDropoutLSTM(2, hidden_size=8, dropout=0.0, where=where).eval()
    expected = exact.predict(x).detach().expand(3, -1, -1, -1)
    torch.testing.assert_close(exact.mc_samples(x, num_samples=3), expected, rtol=1e-5, atol=1e-6)


def _set_lstm(model, *, input_weight, recurrent_weight, g_bias):
    """One-unit LSTM with i = o = 1 and f = 0, so ``h_t = tanh(tanh(w x_t + u h_{t-1} + b))``; decoder = identity."""
    lstm = model.lstm
    with torch.no_grad():
        for p in (lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0):
            p.zero_()
        lstm.bias_ih_l0.copy_(torch.tensor([30.0, -30.0, g_bias, 30.0]))  # gates i, f, g, o
        lstm.weight_ih_l0[2, 0] = input_weight
        lstm.weight_hh_l0[2, 0] = recurrent_weight
        model.decoder.weight.fill_(1.0)
        model.decoder.bias.zero_()


def test_full_dropout_draws_a_fresh_input_mask_at_every_step():
    torch.manual_seed(2)
    model = MCDropoutLSTM(1, hidden_size=1, dropout=0.5, where="full")
    _set_lstm(model, input_weight=1.0, recurrent_weight=0.0, g_bias=0.5)
    x = torch.ones(2000, 25, 1)
    samples = model.mc_samples(x, num_samples=1)[0, :, 1:, 0]  # [B, 24]: output dropout of h_{t-1} / keep
    # h_t = tanh(tanh(0.5 + x_t')) with the input x_t' = 0 (dropped) or 2 (kept, x_t / keep); output / keep
    dropped, kept = 2 * math.tanh(math.tanh(0.5)), 2 * math.tanh(math.tanh(2.5))
    is_dropped, is_kept = torch.isclose(samples, torch.tensor(dropped)), torch.isclose(samples, torch.tensor(kept))
    assert bool(((samples == 0) | is_dropped | is_kept).all())
    assert abs(float(is_dropped.sum() / (is_dropped | is_kept).sum()) - 0.5) < 0.02  # half the inputs dropped
    # fresh per step: a sequence shows no kept input at any of its 24 steps with chance 0.75^24 = 0.001
    # (a mask per sequence would silence half of them)
    assert float((is_dropped | (samples == 0)).all(1).float().mean()) < 0.01


def test_full_dropout_keeps_one_recurrent_mask_per_sequence():
    torch.manual_seed(3)
    model = MCDropoutLSTM(1, hidden_size=1, dropout=0.5, where="full")
    _set_lstm(model, input_weight=0.0, recurrent_weight=-2.0, g_bias=1.0)
    # the two possible paths of h, by hand: state mask 0 (h stays put) or 1 / keep = 2 (h oscillates)
    paths = {}
    for mask in (0.0, 2.0):
        h, path = 0.0, []
        for _ in range(24):
            h = math.tanh(math.tanh(1.0 - 2.0 * mask * h))
            path.append(2 * h)  # what the decoder sees after output dropout keeps the unit
        paths[mask] = torch.tensor(path)
    samples = model.mc_samples(torch.zeros(2000, 25, 1), num_samples=1)[0, :, 1:, 0]
    kept = samples != 0  # output dropout zeroes some steps at random
    matches = {m: ((samples - p).abs() < 1e-4) | ~kept for m, p in paths.items()}
    assert bool((matches[0.0].all(1) | matches[2.0].all(1)).all())  # each sequence follows one path throughout
    stayed = (matches[0.0].all(1) & ~matches[2.0].all(1)).float().mean()
    assert abs(float(stayed) - 0.5) < 0.04


def test_transformer_does_not_see_the_present_or_the_future():
    torch.manual_seed(4)
    for positions in ("learned", "sinusoidal"):
        model = TransformerForecaster(2, d_model=8, num_heads=2, num_layers=2, positions=positions).eval()
        x = torch.randn(3, 9, 2)
        base = model.predict(x)
        for t in range(9):
            changed = x.clone()
            changed[:, t] += 5.0
            after = model.predict(changed)
            torch.testing.assert_close(after[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-6)
            if t < 8:
                assert (after[:, t + 1] - base[:, t + 1]).abs().max() > 1e-4


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_past_its_context_each_step_is_predicted_from_a_window_of_its_own(positions, monkeypatch):
    """With a context of 4 steps, step t >= 4 is predicted as the last step of ``x_{t-3..t}`` read as a sequence
    of its own (the start vector, then ``x_{t-3..t-1}``); the first 4 steps as before."""
    torch.manual_seed(6)
    model = TransformerForecaster(2, d_model=8, num_heads=2, num_layers=2, positions=positions, context=4).eval()
    x = torch.randn(3, 11, 2)
    means = model.predict(x)
    torch.testing.assert_close(means[:, :4], model.predict(x[:, :4]))
    for t in range(4, 11):
        torch.testing.assert_close(means[:, t], model.predict(x[:, t - 3 : t + 1])[:, -1], rtol=0, atol=1e-6)
    assert model.predict(torch.randn(2, 700, 2)).shape == (2, 700, 2)  # past max_len = 512 too
    monkeypatch.setattr(transformer_forecaster, "WINDOW_POSITIONS", 10)  # the windows a few at a time: the same
    torch.testing.assert_close(model.predict(x), means)
    assert (
        TransformerForecaster(2, max_len=8).context == 8
        and TransformerForecaster(2, positions="sinusoidal").context is None
    )


def test_transformer_positions_tell_steps_apart():
    torch.manual_seed(5)
    model = TransformerForecaster(1, positions="sinusoidal").eval()
    # a constant sequence has the same inputs at every step: only the positions can vary the predictions
    predictions = model.predict(torch.ones(1, 6, 1))[0, 1:, 0]
    assert predictions.unique().numel() == 5


@pytest.mark.parametrize(
    "build",
    [
        lambda: MCDropoutLSTM(1, hidden_size=16, where="output"),
        lambda: MCDropoutLSTM(1, hidden_size=16, where="full"),
        lambda: TransformerForecaster(1, d_model=16),
    ],
)
def test_training_with_the_shared_trainer_lowers_the_loss(build):
    torch.manual_seed(6)
    x = _ar_sequences()
    model = build()
    with torch.no_grad():
        before = float(-model.eval().log_likelihood(x).mean())
    config = TrainConfig(epochs=8, batch_size=16, lr=1e-2, progress=False)
    history = Trainer(ExactLikelihood(model), (x, None), None, config).fit()
    with torch.no_grad():
        after = float(-model.eval().log_likelihood(x).mean())
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert after < before


def test_models_run_in_double_precision():
    x = torch.randn(2, 7, 1, dtype=torch.float64)
    for model in (
        MCDropoutLSTM(1, hidden_size=4, where="full"),
        TransformerForecaster(1, positions="sinusoidal"),
        TransformerForecaster(1),
    ):
        model = model.to(torch.float64)
        assert model.predict(x).dtype == torch.float64
        assert model.log_likelihood(x).dtype == torch.float64
    assert MCDropoutLSTM(1, where="full").to(torch.float64).mc_samples(x, num_samples=3).dtype == torch.float64


def test_the_papers_configuration_builds_the_lstm_of_appendix_b():
    config = load_config(registry.experiment_config("mcdropout-ar1"))
    assert (config["train"]["epochs"], config["train"]["batch_size"], config["train"]["lr"]) == (50, 32, 1e-3)
    data = registry.build(config["data"], registry.DATASETS, "data")
    model = registry.build(config["model"], registry.MODELS, "model", obs_dim=data.obs_dim)
    assert isinstance(model, MCDropoutLSTM) and (model.state_dim, model.dropout, model.where) == (64, 0.2, "output")
    assert data.train[0].shape == (800, 25, 1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: MCDropoutLSTM(1, hidden_size=0), ValueError, "hidden_size"),
        (lambda: MCDropoutLSTM(1, dropout=1.0), ValueError, "dropout"),
        (lambda: MCDropoutLSTM(1, dropout=-0.1), ValueError, "dropout"),
        (lambda: MCDropoutLSTM(1, where="inside"), ValueError, "where"),
        (lambda: MCDropoutLSTM(1).mc_samples(torch.zeros(2, 5, 1), num_samples=0), ValueError, "num_samples"),
        (lambda: MCDropoutLSTM(1).mc_samples(torch.zeros(2, 5, 3)), ValueError, "1 features"),
        (lambda: MCDropoutLSTM(1).predict(torch.zeros(2, 5)), ValueError, "x must have shape"),
        (lambda: TransformerForecaster(1, d_model=10, num_heads=3), ValueError, "num_heads"),
        (lambda: TransformerForecaster(1, positions="rotary"), ValueError, "positions"),
        (lambda: TransformerForecaster(1, dropout=1.0), ValueError, "dropout"),
        (lambda: TransformerForecaster(1, max_len=4, context=5), ValueError, "^context must be <= max_len = 4"),
        (lambda: TransformerForecaster(1, context=0), ValueError, "context"),
        (lambda: TransformerForecaster(0), ValueError, "obs_dim"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()

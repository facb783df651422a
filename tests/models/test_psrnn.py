"""PSRNN cells, layers and the model, and the Gaussian one-step predictors it shares with its baselines."""

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive, Trace_ELBO

from ppl_models import PSRNN, RecurrentPredictor
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.psrnn import FactorizedPSRNNCell, PSRNNCell, PSRNNLayer, normalize
from ppl_models.spectral import cp_reconstruct


def _sine_data(num_sequences=12, num_steps=40, seed=0):
    """Noisy two-feature oscillations with random phases: ``[B, T, 2]``."""
    generator = torch.Generator().manual_seed(seed)
    phase = 6.28 * torch.rand(num_sequences, 1, generator=generator)
    t = torch.arange(num_steps).float()
    x = torch.stack([torch.sin(0.3 * t + phase), torch.cos(0.3 * t + phase)], -1)
    return x + 0.05 * torch.randn(x.shape, generator=generator)


def _reference_update(transition, bias, o, q):
    """Eq. 5 for one sequence written as the explicit double sum ``sum_jk W_ijk o_j q_k``."""
    pre = (transition * o[None, :, None] * q[None, None, :]).sum((1, 2)) + bias
    return pre / pre.norm()


def test_cell_batched_output_equals_a_per_sequence_reference():
    torch.manual_seed(0)
    layer = PSRNNLayer(in_dim=3, state_dim=4, obs_dim=5, num_features=16)
    with torch.no_grad():
        layer.cell.bias.normal_()
    u = torch.randn(6, 7, 3)
    states = layer(u)
    encoded = layer.encode(u)
    for b in range(6):
        q = normalize(layer.initial_state)
        for t in range(7):
            q = _reference_update(layer.cell.transition, layer.cell.bias, encoded[b, t], q)
            torch.testing.assert_close(states[b, t], q, rtol=1e-5, atol=1e-6)


def test_states_stay_unit_norm_for_full_and_factorized_cells():
    torch.manual_seed(1)
    for rank in (None, 3):
        layer = PSRNNLayer(in_dim=2, state_dim=5, obs_dim=4, num_features=32, rank=rank)
        states = layer(10 * torch.randn(4, 30, 2))
        torch.testing.assert_close(states.norm(dim=-1), torch.ones(4, 30))


def test_factorized_cell_with_full_rank_factors_of_w_equals_the_full_cell():
    torch.manual_seed(2)
    full = PSRNNCell(state_dim=4, obs_dim=3)
    with torch.no_grad():
        full.bias.normal_()
    W = full.transition.detach()
    # the exact rank-(P S) decomposition W = sum_jk W[:, j, k] (x) e_j (x) e_k
    pairs = [(j, k) for j in range(3) for k in range(4)]
    a = torch.stack([W[:, j, k] for j, k in pairs])
    b = torch.stack([torch.eye(3)[j] for j, _ in pairs])
    c = torch.stack([torch.eye(4)[k] for _, k in pairs])
    torch.testing.assert_close(cp_reconstruct((a, b, c)), W)
    factored = FactorizedPSRNNCell.from_factors((a, b, c), full.bias.detach())
    o, q = torch.randn(5, 3), normalize(torch.randn(5, 4))
    torch.testing.assert_close(factored(o, q), full(o, q))


def test_two_stage_regression_start_predicts_better_than_a_random_start():
    x = _sine_data()
    mse = {}
    for init in ("2sr", "random"):
        torch.manual_seed(0)
        model = PSRNN(2, state_dim=6, obs_features=6, num_features=200, horizon=4, init=init).initialize(x)
        mse[init] = float(((model.predictive(x, None, 0).mean - x) ** 2).mean())
    assert mse["2sr"] < 0.5 * mse["random"], mse
    assert mse["2sr"] < 0.5 * float(x.var()), mse  # better than predicting the mean


@pytest.mark.parametrize(
    "options",
    [
        {"rank": 8},
        {"num_layers": 2},
        {"num_layers": 2, "rank": 8},
        {"append_input": True},
        {"append_input": True, "num_layers": 2, "rank": 8},
    ],
)
def test_factorized_and_multilayer_models_initialize_and_predict(options):
    torch.manual_seed(3)
    x = _sine_data()
    model = PSRNN(2, state_dim=6, obs_features=6, num_features=200, horizon=4, **options).initialize(x)
    prediction = model.predictive(x, None, 0).mean
    assert prediction.shape == x.shape and torch.isfinite(prediction).all()
    assert float(((prediction - x) ** 2).mean()) < float(x.var())
    if "rank" in options:
        assert all(isinstance(layer.cell, FactorizedPSRNNCell) for layer in model.layers)
        assert all(layer.cell.bias.abs().sum() > 0 for layer in model.layers)  # a multiple of the mean state


def test_append_input_feeds_the_raw_input_beside_the_projected_features():
    torch.manual_seed(4)
    layer = PSRNNLayer(in_dim=3, state_dim=4, obs_dim=5, num_features=16, append_input=True)
    u = torch.randn(2, 6, 3)
    encoded = layer.encode(u)
    torch.testing.assert_close(encoded, torch.cat([layer.projection(layer.features(u)), u], -1))
    assert layer.cell.transition.shape == (4, 8, 4)


def test_bandwidth_scale_multiplies_every_median_distance_bandwidth():
    x = _sine_data()
    widths = {}
    for scale in (1.0, 0.25):
        model = PSRNN(2, state_dim=4, obs_features=4, num_features=64, horizon=3, bandwidth_scale=scale)
        model.initialize(x, generator=torch.Generator().manual_seed(0))
        widths[scale] = float(model.layers[0].features.bandwidth)
    assert widths[0.25] == pytest.approx(0.25 * widths[1.0], rel=1e-6)


def test_factorized_start_approaches_the_full_start_as_the_rank_grows():
    x = _sine_data()
    errors = {}
    for rank in (None, 2, 40):
        model = PSRNN(2, state_dim=4, obs_features=4, num_features=200, horizon=4, rank=rank, bias_scale=0.0)
        model.initialize(x, generator=torch.Generator().manual_seed(4))  # the same features for every rank
        errors[rank] = model.predictive(x, None, 0).mean
    gap_low = float((errors[2] - errors[None]).abs().mean())
    gap_high = float((errors[40] - errors[None]).abs().mean())
    assert gap_high < gap_low
    assert gap_high < 0.02


@pytest.mark.parametrize(
    "make",
    [
        lambda: PSRNN(2, state_dim=4, obs_features=4, num_features=64, horizon=3),
        lambda: RecurrentPredictor(2, cell="lstm", state_dim=4, encoder_dim=3),
    ],
)
def test_predictions_are_causal_and_padding_is_ignored(make):
    torch.manual_seed(5)
    model = make()
    if isinstance(model, PSRNN):
        model.initialize(_sine_data())
    x = _sine_data(3, 20)
    changed = x.clone()
    changed[:, 10:] += 5.0
    with torch.no_grad():
        before, after = model.predict(x), model.predict(changed)
    torch.testing.assert_close(before[:, :11], after[:, :11])  # step t depends on x_<t only
    mask = torch.ones(3, 20, dtype=torch.bool)
    mask[0, 10:] = False
    full = model.log_likelihood(x)
    masked = model.log_likelihood(changed, mask)
    head = model.predictive_distribution(x).log_prob(x)[0, :10].sum()
    torch.testing.assert_close(masked[0], head)
    torch.testing.assert_close(masked[1:], model.log_likelihood(changed)[1:])
    assert full.shape == (3,)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_recurrent_baselines_use_xavier_weights_and_zero_biases(cell):
    model = RecurrentPredictor(3, cell=cell, state_dim=5, encoder_dim=4)
    for name, parameter in model.named_parameters():
        if "bias" in name:
            assert parameter.abs().sum() == 0, name
    assert model.predict(torch.randn(2, 6, 3)).shape == (2, 6, 3)


def test_noise_scale_starts_at_the_root_mean_square_residual_of_the_initial_predictions():
    # a decoder fixed at the constant 1 for feature 0 and -1 for feature 1: residuals by hand
    x = torch.tensor([[[1.0, 0.0], [3.0, -1.0], [1.0, 1.0]], [[0.0, -1.0], [5.0, 9.0], [2.0, 2.0]]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    model = RecurrentPredictor(2, cell="rnn", state_dim=3, encoder_dim=2)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(torch.tensor([1.0, -1.0]))
    model.initialize(x, mask)
    # valid residuals, feature 0: 0, 2, 0, -1, 4; feature 1: 1, 0, 2, 0, 10
    expected = torch.tensor([(21 / 5) ** 0.5, (105 / 5) ** 0.5])
    torch.testing.assert_close(model.log_noise_scale.exp(), expected)


@pytest.mark.parametrize("init", ["2sr", "random"])
def test_psrnn_noise_scale_starts_at_its_initial_residuals(init):
    x = _sine_data()
    model = PSRNN(2, state_dim=4, obs_features=4, num_features=64, horizon=3, init=init)
    model.initialize(x, generator=torch.Generator().manual_seed(0))
    rms = ((model.predict(x) - x) ** 2).mean((0, 1)).sqrt()
    torch.testing.assert_close(model.log_noise_scale.exp(), rms.detach())


def test_pyro_model_and_empty_guide_give_the_exact_log_likelihood():
    torch.manual_seed(6)
    x = _sine_data(4, 15)
    model = PSRNN(2, state_dim=4, obs_features=4, num_features=64, horizon=3).initialize(x)
    pyro.clear_param_store()
    loss = Trace_ELBO().loss(model.model, model.guide, x)
    assert loss == pytest.approx(-model.log_likelihood(x).detach().sum().item(), rel=1e-5)
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 1e-3}), Trace_ELBO())
    assert torch.isfinite(torch.tensor(svi.step(x)))
    draws = Predictive(model.model, num_samples=7)(x[:2])["x"]
    assert draws.shape == (7, 2, 15, 2)


def test_state_dependent_noise_refit_stays_bounded_on_states_it_never_saw():
    # refit on oscillations like the training data's, then faced with faster, larger ones
    x, valid = _sine_data(seed=0), _sine_data(seed=1)
    generator = torch.Generator().manual_seed(2)
    t = torch.arange(40).float()
    phase = 6.28 * torch.rand(12, 1, generator=generator)
    far = 3 * torch.stack([torch.sin(0.9 * t + phase), torch.cos(0.9 * t + phase)], -1)
    torch.manual_seed(0)
    model = PSRNN(2, state_dim=6, obs_features=6, num_features=100, horizon=4).initialize(x)
    model.calibrate(valid, refit="normal+state", check=True)
    verdict = model.refit_check
    assert verdict["kept"] and verdict["nlpd_refit"] < verdict["nlpd_unrefit"]
    with torch.no_grad():
        states = model.states(far)
        raw = (model.log_noise_scale + states @ model.noise_weight).exp()
        scale = model.predictive_distribution(far).base_dist.scale
        valid_rms = (valid - model.predict(valid)).pow(2).mean((0, 1)).sqrt()
    assert raw.min() < 1e-6 * valid_rms.min()  # the unbounded log-linear scale collapses on these states
    # bounded: every scale within a factor 5 of the validation errors' root mean square (0.18 here)
    assert (scale > valid_rms / 5).all() and (scale < 5 * valid_rms).all()


def test_bptt_with_the_shared_trainer_improves_the_two_stage_start():
    torch.manual_seed(7)
    x = _sine_data()
    model = PSRNN(2, state_dim=6, obs_features=6, num_features=200, horizon=4).initialize(x)
    before = float(((model.predict(x) - x) ** 2).mean())
    seen = []

    def monitor():
        seen.append(1)
        return {"train_mse": ((model.predict(x) - x) ** 2).mean()}

    config = TrainConfig(epochs=30, batch_size=4, lr=3e-3, progress=False)
    trainer = Trainer(ExactLikelihood(model), (x, None), (x, None), config, monitor=monitor)
    history = trainer.fit()
    after = float(((model.predict(x) - x) ** 2).mean())
    assert after < before
    assert len(seen) == 30 and history[-1]["monitor"]["train_mse"] == pytest.approx(after, rel=1e-4)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: PSRNN(2, state_dim=0), ValueError, "state_dim"),
        (lambda: PSRNN(2, init="spectral"), ValueError, "init"),
        (lambda: PSRNN(2, rank=0), ValueError, "rank"),
        (lambda: PSRNN(2, num_features=10, state_dim=20), ValueError, "num_features"),
        (lambda: PSRNN(2, ridge=-1.0), ValueError, "ridge"),
        (lambda: PSRNN(2, bandwidth_scale=0.0), ValueError, "bandwidth_scale"),
        (lambda: PSRNN(2, append_input="yes"), TypeError, "append_input"),
        (lambda: PSRNN(2, num_features=64).initialize(torch.zeros(2, 10, 3)), ValueError, "2 features"),
        (lambda: PSRNN(2, num_features=64, horizon=10).initialize(torch.zeros(2, 10, 2)), ValueError, "horizon"),
        # 38 steps with 10 before and 10 after: 18 windows, fewer than the default obs_features, then state_dim
        (
            lambda: PSRNN(2, num_features=64, horizon=10).initialize(torch.randn(1, 38, 2)),
            ValueError,
            r"^obs_features=20 is more than the 18 windows .* horizon=10",
        ),
        (
            lambda: PSRNN(2, num_features=64, horizon=10, obs_features=4).initialize(torch.randn(1, 38, 2)),
            ValueError,
            r"^state_dim=20 is more than the 18 windows",
        ),
        (lambda: PSRNN(2, num_features=64).predict(torch.full((1, 5, 2), float("nan"))), ValueError, "NaN"),
        (lambda: RecurrentPredictor(2, cell="elman"), ValueError, "cell"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()

"""The one-step predictors' categorical emission: log-likelihood, 2SR start on one-hot data, BPC and accuracy."""

from __future__ import annotations

import math

import pytest
import torch

from ppl_models import PSRNN, RecurrentPredictor
from ppl_models.inference.evaluation.figures import categorical_figures, is_one_hot


def _one_hot(ids, k):
    return torch.nn.functional.one_hot(torch.tensor(ids), k).float()


def test_log_likelihood_is_the_log_softmax_at_the_observed_symbols():
    model = RecurrentPredictor(3, cell="gru", state_dim=2, encoder_dim=2, emission="categorical")
    with torch.no_grad():
        for p in model.rnn.parameters():
            p.zero_()  # the state stays 0: the logits are the decoder's bias at every step
        model.decoder.bias.copy_(torch.tensor([1.0, 2.0, 0.0]))
    x = _one_hot([[1, 0, 2]], 3)
    norm = math.log(math.e + math.e**2 + 1)
    expected = (2 - norm) + (1 - norm) + (0 - norm)
    assert model.log_likelihood(x).item() == pytest.approx(expected, rel=1e-6)
    assert model.predict(x)[0, 0].tolist() == pytest.approx([math.exp(v - norm) for v in (1, 2, 0)], rel=1e-6)


def test_categorical_model_refuses_data_that_is_not_one_hot():
    model = RecurrentPredictor(3, emission="categorical")
    with pytest.raises(ValueError, match="one-hot"):
        model.log_likelihood(torch.tensor([[[1.0, 1.0, 0.0]]]))


def test_categorical_has_no_noise_parameters_and_refits_nothing():
    model = RecurrentPredictor(3, emission="categorical")
    assert model.log_noise_scale.numel() == 0
    x = _one_hot([[0, 1, 2, 1, 0]], 3)
    assert model.refit_noise(x, None, "auto") is None


def test_psrnn_two_stage_regression_start_on_one_hot_data():
    generator = torch.Generator().manual_seed(0)
    ids = torch.tensor([0, 1, 2, 3] * 30)  # a deterministic cycle of 4 symbols
    x = _one_hot(ids.reshape(4, 30).tolist(), 4)
    model = PSRNN(4, state_dim=3, obs_features=3, num_features=50, horizon=1, emission="categorical")
    model.initialize(x, generator=generator)
    log_lik = model.log_likelihood(x).sum().item() / x[..., 0].numel()
    assert math.isfinite(log_lik)
    assert log_lik > -math.log(4)  # better than the symbols' shares alone (uniform here)
    # the next symbol is a function of the state's input: a lightly penalised decoder reads the state, well above
    # the shares (-1.386); the default penalty (the 2SR's ridge) stays nearer them (-1.13)
    model = PSRNN(
        4, state_dim=3, obs_features=3, num_features=50, horizon=1, emission="categorical", decoder_ridge=1e-5
    )
    model.initialize(x, generator=torch.Generator().manual_seed(0))
    assert model.log_likelihood(x).sum().item() / x[..., 0].numel() > -1.0
    for name in ("weight", "bias"):
        assert getattr(model.decoder, name).abs().sum() > 0


def test_generation_draws_one_hot_symbols():
    model = RecurrentPredictor(5, emission="categorical")
    out = model.generate(4, num_sequences=2)
    assert out.x.shape == (2, 4, 5)
    assert bool((out.x.sum(-1) == 1).all())


def test_categorical_figures_against_hand_computation():
    probabilities = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]])
    observed = _one_hot([[0, 1, 1]], 3)
    mask = torch.tensor([[True, True, False]])
    figures = categorical_figures(probabilities, observed, mask)
    assert figures["bpc"] == pytest.approx((1 + math.log2(5)) / 2)  # -log2 0.5 = 1, -log2 0.2
    assert figures["accuracy"] == pytest.approx(0.5)  # step 1 right (symbol 0), step 2 wrong (2 is likelier)
    assert is_one_hot(observed, mask)
    assert not is_one_hot(torch.ones(1, 3, 3), mask)


def test_top_directions_of_tall_features_span_the_leading_singular_vectors():
    from ppl_models.spectral import top_directions

    generator = torch.Generator().manual_seed(0)
    scales = torch.tensor([5.0, 3.0, 1.0, 0.5, 0.1])
    features = torch.randn(200, 5, generator=generator, dtype=torch.float64) * scales  # known leading axes
    basis = top_directions(features, 2)  # n = 200 >= 4 p: the Gram route
    reference = torch.linalg.svd(features, full_matrices=False).Vh[:2].T
    assert torch.allclose(basis @ basis.T, reference @ reference.T, atol=1e-8)  # the same span, signs aside


def test_evaluate_reports_test_bpc_and_accuracy_of_the_scored_steps():
    from ppl_models.inference import evaluate

    model = RecurrentPredictor(2, cell="gru", state_dim=2, encoder_dim=2, emission="categorical")
    with torch.no_grad():
        for p in model.rnn.parameters():
            p.zero_()
        model.decoder.bias.copy_(torch.tensor([math.log(3.0), 0.0]))  # p = (3/4, 1/4) at every step
    x = _one_hot([[0, 1, 0, 0]], 2)
    scored = torch.tensor([[False, True, True, True]])  # the first step is context
    metrics = evaluate(
        model, x, torch.ones(1, 4, dtype=torch.bool), estimators=["exact"], predictive_samples=0, scored=scored
    ).metrics
    assert metrics["test_bpc"] == pytest.approx((2 + 2 * math.log2(4 / 3)) / 3)  # -log2 1/4, then -log2 3/4 twice
    assert metrics["test_accuracy"] == pytest.approx(2 / 3)

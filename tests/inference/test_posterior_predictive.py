"""The posterior predictive: replicates of the data drawn given the guide's latents, not the data given back.

Each model's replicates are checked against the law the model says they come from, computed here from
the model's own emission parameters (read directly, or through its networks' public pieces), not from
the traces under test: standardised residuals have mean 0 and variance 1 at every step.
"""

import math
import warnings

import matplotlib
import pyro
import pytest
import torch
from factories import FACTORIES, MASK
from pyro.infer import Predictive

from ppl_models import (
    PSRNN,
    SRNN,
    VRNN,
    GRUBaseline,
    LinearGaussianSSM,
    MCDropoutLSTM,
    PFRNNPredictor,
    PFRNNProgram,
    RecurrentPredictor,
    SMCTransformer,
    TransformerForecaster,
    TwoStageKalmanFilter,
)
from ppl_models.inference import posterior_predictive
from ppl_models.inference.arviz_compat import az
from ppl_models.inference.calibration import stack_sequence_sites, to_inference_data

matplotlib.use("Agg")

S = 400  # draws per sequence
SIGMAS = 5.0  # tolerance of the Monte Carlo checks, in standard errors


def _exact_law(model, x, draws):
    law = model.predictive_distribution(x, MASK)
    return law.mean.expand(draws.shape), law.variance.expand(draws.shape)


def _markov_law(model, x, draws, latents):
    context = model.context(x, MASK)
    laws = [model.emission(latents["z"][:, :, t], t, context) for t in range(x.shape[1])]
    return torch.stack([law.mean for law in laws], 2), torch.stack([law.variance for law in laws], 2)


def _vrnn_law(model, x, draws, latents):
    """Free: ``h_t`` reads the drawn ``x_t``, as the model's recurrence does."""
    h = x.new_zeros(S, x.shape[0], model.rnn_dim)
    means, variances = [], []
    for t in range(x.shape[1]):
        z = latents["z"][:, :, t]
        law = model.emission(z, h)
        means.append(law.mean)
        variances.append(law.variance)
        h = model.recurrence(h, model.x_features(draws[:, :, t]), z)
    return torch.stack(means, 2), torch.stack(variances, 2)


def _smc_transformer_law(model, x, draws, latents):
    """Free: each step's embedding reads the drawn ``x_{t-1}``; variance ``Σ_obs,1`` at the first step."""
    u = x.new_zeros(S, x.shape[0], x.shape[2])
    means, variances = [], []
    for t in range(x.shape[1]):
        means.append(model.readout(model._output(model._embedding(u), latents["z"][:, :, t])))
        variances.append((model.var_x_first if t == 0 else model.var_x).expand_as(means[-1]))
        u = draws[:, :, t]
    return torch.stack(means, 2), torch.stack(variances, 2)


#: class -> law of its replicates given (model, x, replicates, latents): ``(mean, variance)`` ``[S, B, T, D]``
LAWS = {
    SRNN: _markov_law,
    VRNN: _vrnn_law,
    GRUBaseline: lambda model, x, draws, latents: _exact_law(model, x, draws),
    SMCTransformer: _smc_transformer_law,
    MCDropoutLSTM: lambda model, x, draws, latents: _exact_law(model, x, draws),
    TransformerForecaster: lambda model, x, draws, latents: _exact_law(model, x, draws),
    PSRNN: lambda model, x, draws, latents: _exact_law(model, x, draws),
    RecurrentPredictor: lambda model, x, draws, latents: _exact_law(model, x, draws),
    TwoStageKalmanFilter: _markov_law,
}
DENSITIES = [cls for cls in FACTORIES if "programs" in cls.capabilities and not cls.conditional]


def test_every_density_model_with_programs_has_its_law_here():
    assert set(DENSITIES) == set(LAWS) | {LinearGaussianSSM}


def _assert_standardised(draws, mean, variance, mask):
    """At every step, residuals ``(draw - mean) / sd`` over draws, sequences and features: mean 0, variance 1."""
    residuals = (draws - mean) / variance.sqrt()
    for t in range(draws.shape[2]):
        values = residuals[:, mask[:, t], t].flatten().detach().double()
        n = values.numel()
        assert abs(float(values.mean())) < SIGMAS / math.sqrt(n), f"step {t}: mean {float(values.mean()):.3f}"
        squares = values.square()
        spread = max(float(squares.std()) / math.sqrt(n), 1e-3)
        assert abs(float(squares.mean()) - 1) < SIGMAS * spread, f"step {t}: variance {float(squares.mean()):.3f}"


@pytest.mark.parametrize("cls", list(LAWS), ids=lambda c: c.__name__)
def test_replicates_differ_from_the_data_and_spread_as_the_model_says(cls):
    pyro.set_rng_seed(0)
    model, x = FACTORIES[cls]()
    model.eval()
    result = posterior_predictive(model, x, MASK, S)
    draws = result.samples
    assert draws.shape == (S, *x.shape) and result.uncondition == cls.uncondition
    assert bool(draws[:, ~MASK].isnan().all()) and bool(draws[:, MASK].isfinite().all())
    binary = bool(((x == 0) | (x == 1)).all())
    same = (draws == x)[:, MASK].float().mean()
    assert float(same) < (0.9 if binary else 1e-6), f"{float(same):.2f} of the replicates equal the data"
    mean, variance = LAWS[cls](model, x, draws.nan_to_num(), result.latents)
    _assert_standardised(draws, mean, variance, MASK)


def test_lgssm_replicates_scatter_around_c_z_with_covariance_r():
    """Independent truth: ``x_t - C z_t ~ N(0, R)`` for the guide's ``z_t``, with ``C`` and ``R`` read off the model."""
    pyro.set_rng_seed(1)
    model, x = FACTORIES[LinearGaussianSSM]()
    result = posterior_predictive(model, x, MASK, 2000)
    z = result.latents["z"]
    assert z.shape == (2000, *x.shape[:2], model.latent_dim)
    noise = result.samples - z @ model.C.detach().T
    R = model.R.detach()
    for t in range(x.shape[1]):
        e = noise[:, MASK[:, t], t].reshape(-1, x.shape[2]).double()
        n = e.shape[0]
        covariance = e.T @ e / n
        tolerance = SIGMAS * ((R.diagonal()[:, None] * R.diagonal()[None] + R.square()) / n).sqrt()
        assert bool(((covariance - R).abs() < tolerance).all()), f"step {t}: {covariance} vs R = {R}"
        assert bool((e.mean(0).abs() < SIGMAS * (R.diagonal() / n).sqrt()).all())


def test_the_pf_rnn_program_replicates_targets_from_its_head_and_scale():
    """One deterministic particle: ``y_t ~ N(f_out(h_t), exp(log_scale)^2)``, ``h_t`` from the layer alone."""
    pyro.set_rng_seed(2)
    predictor = PFRNNPredictor(2, 1, hidden_size=4, encoder_size=4, num_particles=2, stochastic=False).eval()
    with torch.no_grad():
        predictor.log_scale.fill_(math.log(0.3))
    program = PFRNNProgram(predictor)
    x = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(0))
    y = torch.randn(3, 6, 1, generator=torch.Generator().manual_seed(1))
    result = posterior_predictive(program, x, MASK, S, targets=y)
    assert result.samples.shape == (S, 3, 6, 1) and result.uncondition == "free"
    with torch.no_grad():
        mean = predictor.head(predictor.belief(x, MASK).mean)
    _assert_standardised(result.samples, mean.expand_as(result.samples), torch.full_like(result.samples, 0.09), MASK)


def test_plain_predictive_gives_the_data_back_and_the_library_call_does_not():
    """Why docs/calibration.md uses posterior_predictive: Predictive called with x conditions on it."""
    model, x = FACTORIES[VRNN]()
    given_back = stack_sequence_sites(Predictive(model.model, guide=model.guide, num_samples=5)(x, MASK))
    assert torch.equal(given_back, x.masked_fill(~MASK[..., None], 0).expand_as(given_back))
    replicates = posterior_predictive(model, x, MASK, 5).samples
    assert not bool((replicates == x)[:, MASK].any())
    idata = to_inference_data(replicates, x, mask=MASK)
    assert idata.posterior_predictive["x"].shape == (1, 5, int(MASK.sum()), 2)
    assert float(idata.posterior_predictive["x"].std("draw").min()) > 0  # az.plot_ppc shows a spread
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's warnings about matplotlib keywords
        assert az.plot_ppc(idata, num_pp_samples=5) is not None
    matplotlib.pyplot.close("all")


def test_resampled_and_sequential_draws_have_the_same_shapes():
    model, x = FACTORIES[LinearGaussianSSM]()
    resampled = posterior_predictive(model, x, MASK, 4, resample=True, generator=torch.Generator().manual_seed(0))
    sequential = posterior_predictive(model, x, MASK, 4, parallel=False)
    assert resampled.samples.shape == sequential.samples.shape == (4, *x.shape)
    assert "importance-resampled" in resampled.source


def test_bad_arguments_are_refused_with_their_names():
    model, x = FACTORIES[LinearGaussianSSM]()
    with pytest.raises(ValueError, match="num_samples"):
        posterior_predictive(model, x, MASK, 0)
    with pytest.raises(ValueError, match="targets must be None"):
        posterior_predictive(model, x, MASK, 2, targets=x)
    program, _ = FACTORIES[PFRNNProgram]()
    with pytest.raises(ValueError, match="targets must be given"):
        posterior_predictive(program, x, MASK, 2)
    layer, _ = FACTORIES[PFRNNPredictor]()
    with pytest.raises(NotImplementedError, match="programs"):
        posterior_predictive(layer, x, MASK, 2)

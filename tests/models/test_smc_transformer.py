"""SMC Transformer: shapes, genealogy of the windows, Fisher-identity gradients, EM, the deterministic limit."""

import math

import pyro
import pytest
import torch
from pyro.infer import SVI, SMCFilter, Trace_ELBO
from pyro.infer.autoguide import AutoNormal
from torch.distributions import Categorical, Normal

from ppl_models.inference import ParticleFilter
from ppl_models.inference.forecast import forecast
from ppl_models.inference.objectives import SMCBound
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.smc_transformer import SMCTransformer


def _model(heads=1, window=3, d=4, seed=0, **kwargs):
    torch.manual_seed(seed)
    return SMCTransformer(1, d_model=d, num_heads=heads, window=window, ff_dim=8, **kwargs)


def _filter(num_particles, seed=0, gradient="stop_weights", **kwargs):
    generator = torch.Generator().manual_seed(seed)
    return ParticleFilter(
        num_particles, resampling="multinomial", ess_threshold=1.0, gradient=gradient, generator=generator, **kwargs
    )


def _ar_data(n, steps, seed=0, alpha=0.8, sigma=0.5**0.5):
    generator = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, steps, 1)
    x[:, 0] = torch.randn(n, 1, generator=generator)
    for t in range(1, steps):
        x[:, t] = alpha * x[:, t - 1] + sigma * torch.randn(n, 1, generator=generator)
    return x


# --- an independent computation of the model's equations along given latent paths ---------------
def _direct(model, x, latents, var=None):
    """Complete-data log-density ``[K, B]`` and observation means ``[T, K, B, D]`` along latent paths.

    ``latents`` maps ``q, k, v, z`` to ``[T, K, B, d]``; written from the paper's equations with
    explicit loops, using the module's layers only as the maps E, W_q, W_k, W_v, W_o, FFN, G.
    """
    steps, particles, batch, d = latents["q"].shape
    heads, size = model.num_heads, d // model.num_heads
    var = var or model.variances()
    total = x.new_zeros(particles, batch)
    means_x = []
    for t in range(steps):
        u = torch.zeros(batch, 1) if t == 0 else x[:, t - 1]
        e = model.embed(u).expand(particles, batch, d)
        for name, layer in (("q", model.query), ("k", model.key), ("v", model.value)):
            total = total + Normal(layer(e), var[name].sqrt()).log_prob(latents[name][t]).sum(-1)
        first = max(0, t - model.window + 1)
        mean_z = []
        for h in range(heads):
            part = slice(h * size, (h + 1) * size)
            q = latents["q"][t][..., part]
            scores = torch.stack(
                [(q * latents["k"][s][..., part]).sum(-1) / math.sqrt(size) for s in range(first, t + 1)], -1
            )
            pi = torch.softmax(scores, -1)
            window = enumerate(range(first, t + 1))
            mean_z.append(sum(pi[..., i : i + 1] * latents["v"][s][..., part] for i, s in window))
        mean_z = torch.cat(mean_z, -1)
        total = total + Normal(mean_z, var["z"].sqrt()).log_prob(latents["z"][t]).sum(-1)
        a = torch.nn.functional.layer_norm(
            e + model.attention_out(latents["z"][t]), (d,), model.norm_attention.weight, model.norm_attention.bias
        )
        ff = model.feed_forward[2](torch.relu(model.feed_forward[0](a)))
        r = torch.nn.functional.layer_norm(a + ff, (d,), model.norm_output.weight, model.norm_output.bias)
        mean = model.readout(r)
        means_x.append(mean)
        var_x = var["x_first"] if t == 0 else var["x"]  # the first observation has its own variance
        total = total + Normal(mean, var_x.sqrt()).log_prob(x[:, t]).sum(-1)
    return total, torch.stack(means_x)


@pytest.mark.parametrize("heads", [1, 2])
def test_shapes_of_filter_predictive_forecast_and_state_estimates(heads):
    model = _model(heads=heads, d=4)
    x = _ar_data(3, 6)
    result = _filter(5).run(model, x, keep_ancestry=True, predictive_samples=7, predictive_mean=True)
    assert result.log_evidence.shape == (3,) and result.fisher_objective.shape == (3,)
    assert result.predictive.shape == (7, 3, 6, 1) and result.predictive_mean.shape == (3, 6, 1)
    assert result.filtered_mean("z").shape == (3, 6, 4) and result.history["keys"].shape == (6, 5, 3, 3, 4)
    assert forecast(model, result, horizon=4, num_samples=11).shape == (11, 3, 4, 1)
    assert torch.isfinite(result.log_evidence).all()


def test_windows_move_with_their_ancestors():
    model = _model(window=3)
    result = _filter(6, seed=3).run(model, _ar_data(2, 7), keep_ancestry=("keys", "values", "k"))
    keys, values, ancestors = result.history["keys"], result.history["values"], result.ancestors
    assert not torch.equal(ancestors[3], torch.arange(6).unsqueeze(-1).expand(6, 2))  # something was resampled
    for t in range(1, 7):
        parent = ancestors[t]  # [K, B]
        for b in range(2):
            # after resampling, a particle's window is its ancestor's, shifted by one, plus its own new key
            assert torch.equal(keys[t][:, b, :-1], keys[t - 1][parent[:, b], b, 1:])
            assert torch.equal(values[t][:, b, :-1], values[t - 1][parent[:, b], b, 1:])
            assert torch.equal(keys[t][:, b, -1], result.history["k"][t][:, b])


def test_fisher_loss_and_gradient_are_the_weighted_complete_data_scores():
    model = _model(heads=2, window=2, init_variance=0.3)
    x = _ar_data(2, 4, seed=1)
    result = _filter(4, seed=2).run(model, x, keep_ancestry=True)
    latents = {name: result.paths(name).detach() for name in ("q", "k", "v", "z")}
    log_joint, _ = _direct(model, x, latents)
    expected = (result.log_weights.detach().exp() * log_joint).sum(0)
    assert torch.allclose(result.fisher_objective, expected, atol=1e-4)
    got = torch.autograd.grad(result.fisher_objective.sum(), list(model.parameters()))
    want = torch.autograd.grad(expected.sum(), list(model.parameters()))
    for name, g, w in zip(dict(model.named_parameters()), got, want):
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), name


def test_em_update_of_the_observation_variance_is_the_weighted_residual_formula():
    model = _model(window=2, init_variance=0.2, init_obs_variance=0.7)
    x = _ar_data(3, 5, seed=4)
    result = _filter(5, seed=1).run(model, x, keep_ancestry=True)
    latents = {name: result.paths(name) for name in ("q", "k", "v", "z")}
    with torch.no_grad():
        _, means = _direct(model, x, latents)
        weights = result.log_weights.exp()
        squares = (x.transpose(0, 1).unsqueeze(1) - means) ** 2  # [T, K, B, D]
        # (1/(T-1)) sum_m w^m sum_{t>=2} |X_t - G(r_t^m)|^2, batch mean; the first step alone for Σ_obs,1
        first = ((weights * squares[1:].sum((0, 3))).sum(0) / 4).mean()
        first_step = (weights * squares[0].sum(-1)).sum(0).mean()
        z_residual = ((latents["z"] - _attention_means(model, latents)) ** 2).sum(0).mean(-1)
        first_z = ((weights * z_residual).sum(0) / 5).mean()
    model.em_update(result)  # p = 1: step size 1
    assert model.var_x.item() == pytest.approx(first.item(), rel=1e-5)
    assert model.var_x_first.item() == pytest.approx(first_step.item(), rel=1e-5)
    assert model.var_z.item() == pytest.approx(first_z.item(), rel=1e-4)
    model.em_update(result)  # p = 2: the same estimate mixed in with step 2^-0.6 leaves it unchanged
    assert model.var_x.item() == pytest.approx(first.item(), rel=1e-5)
    model.var_x = torch.tensor([0.7])
    model.em_update(result)  # p = 3
    eta = 3**-0.6
    assert model.var_x.item() == pytest.approx((1 - eta) * 0.7 + eta * first.item(), rel=1e-5)


def test_per_sequence_em_takes_each_sequence_its_own_weighted_residuals():
    model = _model(window=2, init_variance=0.2, init_obs_variance=0.7)
    x = _ar_data(3, 5, seed=4) * torch.tensor([1.0, 3.0, 0.5]).view(3, 1, 1)
    result = _filter(5, seed=1).run(model, x, keep_ancestry=True)
    latents = {name: result.paths(name) for name in ("q", "k", "v", "z")}
    with torch.no_grad():
        _, means = _direct(model, x, latents)
        squares = (x.transpose(0, 1).unsqueeze(1) - means) ** 2  # [T, K, B, D]
        # sequence b alone: (1/(T-1)) sum_m w^{m,b} sum_{t>=2} |X_t - G(r_t^m)|^2
        expected = (result.log_weights.exp() * squares[1:].sum((0, 3))).sum(0) / 4
    for name in ("x", "q"):
        setattr(model, f"var_{name}", getattr(model, f"var_{name}").expand(3, 1).clone())
    model.em_update(result, sites=("x", "q"))  # p = 1: step size 1
    assert model.var_x.shape == (3, 1) and model.var_q.shape == (3, 1)
    assert torch.allclose(model.var_x[:, 0], expected, rtol=1e-5)
    assert model.var_z.shape == (1,) and model.var_z.item() == pytest.approx(0.2)  # not in sites: unchanged


def test_fine_tuned_copy_fits_each_series_noise_and_leaves_the_model_alone():
    # without latent noise and with one particle, EM's Σ_obs of a series is its mean squared
    # one-step residual over t >= 2, the fixed point of every iteration
    model = _model(window=3, init_variance=0.0, init_obs_variance=0.5)
    x = _ar_data(3, 8, seed=6) * torch.tensor([1.0, 2.0, 0.3]).view(3, 1, 1)
    tuned = model.fine_tuned(x, iterations=4, num_particles=1)
    with torch.no_grad():
        means = ParticleFilter(1).run(model, x, predictive_mean=True).predictive_mean
    residual = ((x - means) ** 2)[:, 1:, 0].mean(1)
    assert torch.allclose(tuned.var_x[:, 0], residual, rtol=1e-4)
    assert torch.allclose(tuned.var_x_first[:, 0], ((x - means) ** 2)[:, 0, 0], rtol=1e-4)
    assert torch.equal(tuned.var_q, torch.zeros(3, 1))
    assert model.var_x.shape == (1,) and model.var_x.item() == 0.5 and int(model.em_updates) == 0
    assert tuned.var_x.shape == (3, 1) and int(tuned.em_updates) == 4
    # the copy forecasts each series with its own noise: the first step ahead is N(mean, Σ_obs of that series)
    result = ParticleFilter(1).run(tuned, x)
    torch.manual_seed(0)
    paths = forecast(tuned, result, horizon=1, num_samples=2000)
    assert torch.allclose(paths.std(0)[:, 0, 0], tuned.var_x[:, 0].sqrt(), rtol=0.08)
    with pytest.raises(ValueError, match="sites"):
        model.fine_tuned(x, sites=("w",))
    with pytest.raises(ValueError, match="iterations"):
        model.fine_tuned(x, iterations=0)


def _attention_means(model, latents):
    """``[T, K, B, d]`` means of ``z`` along the paths (single head)."""
    steps = latents["q"].shape[0]
    out = []
    for t in range(steps):
        first = max(0, t - model.window + 1)
        keys = torch.stack([latents["k"][s] for s in range(first, t + 1)], -2)
        values = torch.stack([latents["v"][s] for s in range(first, t + 1)], -2)
        pi = torch.softmax((latents["q"][t].unsqueeze(-2) * keys).sum(-1) / math.sqrt(model.d_model), -1)
        out.append((pi.unsqueeze(-1) * values).sum(-2))
    return torch.stack(out)


def test_without_noise_one_particle_is_a_deterministic_attention_forecaster():
    model = _model(heads=2, window=3, d=4, init_variance=0.0)
    x = _ar_data(2, 6, seed=5)
    result = ParticleFilter(1).run(model, x, predictive_mean=True, keep_ancestry=True)
    # the direct recurrence: noise-free q, k, v, z computed from the observations
    steps = x.shape[1]
    latents = {name: [] for name in ("q", "k", "v", "z")}
    with torch.no_grad():
        for t in range(steps):
            u = torch.zeros(2, 1) if t == 0 else x[:, t - 1]
            e = model.embed(u).unsqueeze(0)
            for name, layer in (("q", model.query), ("k", model.key), ("v", model.value)):
                latents[name].append(layer(e))
            stacked = {n: torch.stack(v) for n, v in latents.items() if n != "z"}
            latents["z"].append(_multihead_mean(model, stacked, t))
        latents = {n: torch.stack(v) for n, v in latents.items()}
        _, means = _direct(model, x, latents, var={n: torch.ones(1) for n in ("q", "k", "v", "z", "x", "x_first")})
    assert torch.allclose(result.predictive_mean, means[:, 0].transpose(0, 1), atol=1e-5)
    assert torch.allclose(result.history["z"][:, 0], latents["z"][:, 0], atol=1e-5)


def _multihead_mean(model, latents, t):
    heads, size = model.num_heads, model.d_model // model.num_heads
    first = max(0, t - model.window + 1)
    parts = []
    for h in range(heads):
        part = slice(h * size, (h + 1) * size)
        keys = torch.stack([latents["k"][s][..., part] for s in range(first, t + 1)], -2)
        values = torch.stack([latents["v"][s][..., part] for s in range(first, t + 1)], -2)
        pi = torch.softmax((latents["q"][t][..., part].unsqueeze(-2) * keys).sum(-1) / math.sqrt(size), -1)
        parts.append((pi.unsqueeze(-1) * values).sum(-2))
    return torch.cat(parts, -1)


def test_padding_leaves_the_short_sequence_as_if_alone():
    model = _model(init_variance=0.0)
    x = _ar_data(2, 6, seed=6)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    padded = ParticleFilter(1).run(model, x, mask)
    alone = ParticleFilter(1).run(model, x[1:, :4])
    assert torch.allclose(padded.log_evidence[1], alone.log_evidence[0], atol=1e-5)
    assert torch.equal(padded.log_evidence_steps[1, 4:], torch.zeros(2))
    noisy = _filter(5).run(_model(), x, mask, keep_ancestry=("keys",))
    # over padding the sequence's particles neither move nor resample
    assert torch.equal(noisy.history["keys"][5][:, 1], noisy.history["keys"][3][:, 1])
    assert torch.equal(noisy.log_evidence_steps[1, 4:], torch.zeros(2))


def test_categorical_emission_scores_classes():
    torch.manual_seed(0)
    model = SMCTransformer(1, d_model=4, window=2, emission="categorical", num_classes=3, init_variance=0.0)
    x = torch.tensor([[[0.0], [2.0], [1.0]]])
    result = ParticleFilter(1).run(model, x)
    # by hand: with no noise the single particle's log-evidence is sum_t log softmax(G r_t)[x_t]
    state, total = {}, 0.0
    with torch.no_grad(), pyro.validation_enabled(False), pyro.plate("particles", 1, dim=-2):
        model.init_program(state, x)
        for t in range(3):
            trace = pyro.poutine.trace(model.step_program).get_trace(state, x[:, t])
            logits = trace.nodes["x"]["fn"].logits
            total += Categorical(logits=logits).log_prob(x[:, t, 0].long()).sum()
    assert result.log_evidence.item() == pytest.approx(float(total), abs=1e-5)
    with pytest.raises(ValueError, match="class indices"):
        ParticleFilter(2).run(model, torch.tensor([[[0.5]]]))


def test_runs_under_pyro_smcfilter_and_predictive():
    model = _model(window=2)
    x = _ar_data(1, 5)
    smc = SMCFilter(model.programs, model.guide_programs, num_particles=8, max_plate_nesting=1)
    smc.init(x)
    for t in range(5):
        smc.step(x[:, t])
    assert smc.state["keys"].shape == (8, 1, 2, 4)
    assert torch.isfinite(smc.state._log_weights).all()
    samples = pyro.infer.Predictive(model.model, num_samples=3)(torch.zeros(2, 4, 1))
    assert samples["t3/x"].shape[0] == 3 and samples["t0/z"].shape[-1] == 4
    conditioned = pyro.poutine.trace(model.model).get_trace(x)
    assert torch.equal(conditioned.nodes["t2/x"]["value"], x[:, 2])


def test_training_with_fisher_gradients_and_em_fits_an_ar_process():
    x = _ar_data(96, 12, seed=7)
    model = _model(d=8, window=4, init_variance=0.05, init_obs_variance=2.0)
    objective = SMCBound(model, _filter(10, seed=0))
    held_out = _ar_data(64, 12, seed=8)
    before = _filter(50).run(model, held_out).log_evidence.mean()
    config = TrainConfig(epochs=6, batch_size=16, lr=5e-3, progress=False)
    Trainer(objective, (x, None), None, config).fit()
    after = _filter(50).run(model, held_out).log_evidence.mean()
    assert after > before + 2.0
    # EM has moved Σ_obs from 2.0 towards the AR noise variance 0.5 (the data's one-step residual)
    assert model.em_updates.item() == 36 and 0.3 < model.var_x.item() < 1.0
    with torch.no_grad():
        objective.eval()
        objective(x[:8])
    assert model.em_updates.item() == 36  # no EM outside training


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_model": 6, "num_heads": 4}, "multiple of num_heads"),
        ({"window": 0}, "window"),
        ({"emission": "poisson"}, "emission"),
        ({"init_variance": -1.0}, "init_variance"),
        ({"init_obs_variance": 0.0}, "init_obs_variance"),
        ({"num_classes": 3}, "num_classes"),
        ({"emission": "categorical", "num_classes": 3, "obs_dim": 2}, "obs_dim"),
        ({"covariance": "full"}, "covariance"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    kwargs = {"obs_dim": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        SMCTransformer(**kwargs)


def test_bad_data_and_results_are_rejected():
    model = _model()
    with pytest.raises(ValueError, match="feature"):
        ParticleFilter(2).run(model, torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="NaN|finite"):
        ParticleFilter(2).run(model, torch.full((1, 3, 1), float("nan")))
    with pytest.raises(ValueError, match="FilterResult"):
        model.em_update("not a result")


def test_dtype_and_device_moves():
    model = _model().double()
    result = ParticleFilter(3).run(model, _ar_data(2, 4).double(), predictive_samples=2)
    assert result.log_evidence.dtype == torch.float64 and model.var_x.dtype == torch.float64
    assert result.predictive.dtype == torch.float64


# Pyro's plate check sees the autoguide's unscoped "sequences" plate beside the model's per-step scoped ones
@pytest.mark.filterwarnings("ignore:Found plate statements in guide but not model")
def test_autoguides_get_finite_losses_and_the_bootstrap_guide_trains():
    """The start input is no sample site, so an autoguide sees only the Gaussian latents q, k, v, z."""
    torch.manual_seed(0)
    x = torch.randn(3, 6, 1)
    model = SMCTransformer(1, d_model=4, window=3)
    guide = AutoNormal(model.model)
    svi = SVI(model.model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    assert all(math.isfinite(svi.step(x)) for _ in range(3))
    latent = {
        name.split("/")[-1]
        for name, node in guide.prototype_trace.nodes.items()
        if node["type"] == "sample" and not node["is_observed"]
    }
    assert latent == {"q", "k", "v", "z"}
    bootstrap = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    assert all(math.isfinite(bootstrap.step(x)) for _ in range(3))


def test_parallel_predictive_matches_sequential_predictive_shapes_and_law():
    """Vectorised Predictive draws (an outer plate on every state tensor) follow the same law as one at a time."""
    torch.manual_seed(0)
    model = SMCTransformer(1, d_model=4, window=3, init_variance=0.05)
    x = torch.randn(2, 5, 1)
    sites = ["t0/q", "t4/x", "_RETURN"]
    serial = pyro.infer.Predictive(model.model, guide=model.guide, num_samples=400, return_sites=sites)(x)
    parallel = pyro.infer.Predictive(
        model.model, guide=model.guide, num_samples=400, parallel=True, return_sites=sites
    )(x)
    for site in sites:
        assert serial[site].shape == parallel[site].shape
    # simulated sequences (the unconditioned x drawn by the model): same mean and spread at the last step
    a, b = serial["t4/x"].flatten(), parallel["t4/x"].flatten()
    assert abs(float(a.mean() - b.mean())) < 0.25 and abs(float(a.std() / b.std()) - 1) < 0.15

"""VRNN: Pyro programs, the shared bounds against a hand-written ELBO and Pyro's, padding, ordering, generation."""

import math

import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, SMCFilter, Trace_ELBO, TraceMeanField_ELBO
from torch.distributions import Bernoulli, Normal
from torch.nn import functional as F

from ppl_models import VRNN
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE, SMCBound
from ppl_models.inference.training import TrainConfig, Trainer

LENGTHS = [9, 4, 6, 1]


def _rolls(batch=4, steps=9, keys=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch, steps, keys, generator=generator) < 0.3).float()
    mask = torch.arange(steps) < torch.tensor(LENGTHS[:batch]).unsqueeze(1)
    return x, mask


def _vrnn(keys=6, **kwargs):
    torch.manual_seed(0)
    return VRNN(keys, latent_dim=3, rnn_dim=8, hidden_dim=16, feature_dim=8, **kwargs)


# --- an independent ELBO, written from Chung et al.'s equations with the module's layers as maps ----------
def _act(v):
    return F.leaky_relu(v, 1.0 / 3.0).clamp(-3.0, 3.0)


def _net(net, a, b):
    """A one-hidden-layer net of ``[a, b]``: ``W_o act(W_a a + W_b b + c)``."""
    pre = net.input_b(b) + (net.input_a(a) if a is not None else 0.0)
    return net.output(_act(pre))


def _hand_elbo(model, x, mask, noise):
    """Per-sequence ``sum_t log p(x_t | z_t, h_{t-1}) + log p(z_t | h_{t-1}) - log q(z_t | x_t, h_{t-1})``.

    ``z_t = mu_q + sigma_q * noise[t]``; padding steps are drawn but not counted.
    """
    batch, steps, _ = x.shape
    h = torch.zeros(batch, model.rnn_dim)
    total = torch.zeros(batch)
    for t in range(steps):
        phi_x = _act(_net(model.phi_x, None, x[:, t]))
        mean_q, log_var_q = _net(model.encoder, h, phi_x).chunk(2, -1)
        q = Normal(mean_q, (0.5 * log_var_q).exp())
        z = mean_q + q.scale * noise[t]
        mean_p, log_var_p = _net(model.prior_net, None, h).chunk(2, -1)
        phi_z = _act(_net(model.phi_z, None, z))
        logits = _net(model.decoder, phi_z, h)
        term = (
            Bernoulli(logits=logits).log_prob(x[:, t]).sum(-1)
            + Normal(mean_p, (0.5 * log_var_p).exp()).log_prob(z).sum(-1)
            - q.log_prob(z).sum(-1)
        )
        total = total + term * mask[:, t]
        h = model.rnn(torch.cat([phi_x, phi_z], -1), h)  # h_t reads the sampled z_t
    return total


def test_shapes_of_the_distributions_and_programs():
    model = _vrnn()
    x, mask = _rolls()
    h = torch.randn(5, 4, 8)
    assert model.prior(h).batch_shape == (5, 4) and model.prior(h).event_shape == (3,)
    q = model.proposal(h, model.proposal_input(model.x_features(x[:, 0])))  # [B] features broadcast over K
    assert q.batch_shape == (5, 4) and q.event_shape == (3,)
    assert model.emission(torch.randn(5, 4, 3), h).event_shape == (6,)
    assert model.recurrence(torch.zeros(4, 8), model.x_features(x[:, 0]), torch.randn(5, 4, 3)).shape == (5, 4, 8)
    trace = poutine.trace(model.guide).get_trace(x, mask)
    assert [n for n in trace.nodes if n.startswith("z_")] == [f"z_{t}" for t in range(9)]
    assert trace.nodes["z_0"]["value"].shape == (4, 3)
    drawn = poutine.uncondition(model.model)(x, mask)
    assert drawn.shape == x.shape and set(drawn.unique().tolist()) <= {0.0, 1.0}
    assert not torch.equal(drawn, x)


@pytest.mark.parametrize("elbo", [Trace_ELBO, TraceMeanField_ELBO])
def test_svi_with_pyros_elbos_trains_model_and_guide(elbo):
    model = _vrnn()
    x, mask = _rolls()
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.01}), elbo(max_plate_nesting=1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    losses = [svi.step(x, mask) for _ in range(30)]
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) < sum(losses[:5])
    changed = {k.split(".")[0] for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert {"encoder", "prior_net", "decoder", "rnn", "phi_x", "phi_z"} <= changed


def test_elbo_equals_a_hand_written_loop_and_pyros_losses_on_the_same_draws():
    model = _vrnn()
    x, mask = _rolls()
    pyro.set_rng_seed(5)
    ours = ELBO(model)(x, mask).bound
    torch.manual_seed(5)
    noise = torch.stack([torch.randn(4, 3) for _ in range(9)])  # the guide's draws, in its order
    torch.testing.assert_close(ours, _hand_elbo(model, x, mask, noise))
    pyro.set_rng_seed(5)
    pyros = -Trace_ELBO(max_plate_nesting=1).differentiable_loss(model.model, model.guide, x, mask)
    torch.testing.assert_close(ours.sum(), pyros)
    # the analytic-KL variant against TraceMeanField_ELBO, gradients included
    pyro.set_rng_seed(5)
    ours = ELBO(model, mean_field=True)(x, mask).bound.sum()
    ours_grads = torch.autograd.grad(ours, list(model.parameters()))
    pyro.set_rng_seed(5)
    pyros = -TraceMeanField_ELBO(max_plate_nesting=1).differentiable_loss(model.model, model.guide, x, mask)
    torch.testing.assert_close(ours, pyros)
    for a, b in zip(ours_grads, torch.autograd.grad(pyros, list(model.parameters()))):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("objective", ["elbo", "elbo-mf", "iwae", "smc", "smc-fisher"])
def test_bounds_ignore_the_padding(objective):
    """Whatever sits after a sequence's end, every bound of that sequence is the same (same random draws)."""
    model = _vrnn()
    x, mask = _rolls()
    other = torch.where(mask.unsqueeze(-1), x, 1.0 - x)
    build = {
        "elbo": lambda: ELBO(model),
        "elbo-mf": lambda: ELBO(model, mean_field=True),
        "iwae": lambda: IWAE(model, 7),
        "smc": lambda: SMCBound(model, ParticleFilter(7)),
        "smc-fisher": lambda: SMCBound(model, ParticleFilter(7, gradient="stop_weights")),
    }[objective]
    results = []
    for data in (x, other):
        pyro.set_rng_seed(3)
        results.append(build()(data, mask))
    torch.testing.assert_close(results[0].bound, results[1].bound)
    assert results[0].num_steps.tolist() == LENGTHS
    assert torch.isfinite(results[0].loss) and results[0].bound.shape == (4,)
    results[0].loss.backward()
    assert model.prior_net.output.weight.grad is not None and model.rnn.weight_hh.grad is not None
    if objective != "smc-fisher":  # Fisher's identity scores the model alone: the guide gets no gradient
        assert model.encoder.output.weight.grad is not None


def test_fisher_identity_differentiates_through_the_deterministic_state():
    """With one particle, the Fisher surrogate's gradient is autograd of log p(x, z) at the filter's z.

    The truth conditions the whole-sequence Pyro model on the filter's latent path, so ``h_t``
    is recomputed from the fixed ``z_{<t}`` with its full dependence on the parameters.
    """
    model = _vrnn()
    x, _ = _rolls()
    pyro.set_rng_seed(11)
    result = ParticleFilter(1, gradient="stop_weights").run(model, x, keep_ancestry=("z",))
    z = result.paths("z")[:, 0]  # [T, B, latent]
    ours = torch.autograd.grad(result.fisher_objective.sum(), list(model.parameters()), allow_unused=True)
    conditioned = poutine.condition(model.model, data={f"z_{t}": z[t] for t in range(x.shape[1])})
    truth = poutine.trace(conditioned).get_trace(x).log_prob_sum()
    torch.testing.assert_close(result.fisher_objective.sum(), truth)
    truth_grads = torch.autograd.grad(truth, list(model.parameters()), allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), ours, truth_grads):
        if b is None:  # the guide's nets: Fisher's identity does not train them
            assert a is None or torch.count_nonzero(a) == 0, name
        else:
            torch.testing.assert_close(a, b, msg=name)
    assert torch.count_nonzero(ours[[n for n, _ in model.named_parameters()].index("rnn.weight_hh")]) > 0


def test_a_padded_batch_gives_each_sequence_its_unpadded_bound():
    """The batch's per-sequence ELBO equals that of each sequence alone, cut to its length, on the same draws."""
    model = _vrnn()
    x, mask = _rolls()
    pyro.set_rng_seed(7)
    batched = ELBO(model)(x, mask).bound
    pyro.set_rng_seed(7)
    draws = poutine.trace(model.guide).get_trace(x, mask)  # the same draws: the guide runs first
    for b, length in enumerate(LENGTHS):
        alone = x[b : b + 1, :length]
        values = {f"z_{t}": draws.nodes[f"z_{t}"]["value"][b : b + 1] for t in range(length)}
        guide = poutine.trace(poutine.condition(model.guide, values)).get_trace(alone)
        joint = poutine.trace(poutine.condition(model.model, values)).get_trace(alone)
        torch.testing.assert_close(batched[b], joint.log_prob_sum() - guide.log_prob_sum())


def test_bounds_are_ordered_elbo_iwae_and_smc_above_elbo():
    """On average over replicates: ELBO <= IWAE-4 <= IWAE-64, and SMC-64 >= ELBO (Jensen)."""
    model = _vrnn()
    x, _ = _rolls(batch=1)
    reps = x.expand(300, -1, -1)
    with torch.no_grad():
        values = {
            "elbo": ELBO(model)(reps).bound,
            "iwae-4": IWAE(model, 4)(reps).bound,
            "iwae-64": IWAE(model, 64)(reps).bound,
            "smc-64": SMCBound(model, ParticleFilter(64))(reps).bound,
        }

    def above(high, low):
        a, b = values[high], values[low]
        return a.mean() - b.mean() > 3 * (a.var() / a.numel() + b.var() / b.numel()).sqrt()

    assert above("iwae-4", "elbo") and above("iwae-64", "iwae-4") and above("smc-64", "elbo")
    assert values["iwae-64"].std() < values["elbo"].std()


def test_objectives_run_the_recurrence_once_per_step(monkeypatch):
    """Inside an objective the replayed model reuses the guide's h_t; outside, each program computes its own."""
    model = _vrnn()
    x, mask = _rolls()
    calls = []
    original = VRNN.recurrence
    monkeypatch.setattr(VRNN, "recurrence", lambda self, *a: calls.append(1) or original(self, *a))
    ELBO(model)(x, mask)
    IWAE(model, 4)(x, mask)
    assert len(calls) == 2 * 9
    model.guide(x, mask)
    model.model(x, mask)
    assert len(calls) == 4 * 9


def test_particles_carry_their_own_deterministic_state():
    model = _vrnn()
    x, mask = _rolls()
    result = ParticleFilter(5).run(model, x, mask, keep_ancestry=True)
    h = result.history["h"]  # [T, K, B, rnn_dim]
    assert h.shape == (9, 5, 4, 8) and result.history["z"].shape == (9, 5, 4, 3)
    assert (h[0] - h[0, :1]).abs().amax() > 0  # h_1 already reads each particle's z_1
    # pyro.infer.SMCFilter runs the same programs
    smc = SMCFilter(model.programs, model.guide_programs, num_particles=6, max_plate_nesting=1)
    smc.init(x)
    for t in range(x.shape[1]):
        smc.step(x[:, t])
    assert smc.state["h"].shape == (6, 4, 8)


def test_training_improves_the_elbo():
    torch.manual_seed(0)
    x = (torch.rand(16, 10, 6) < 0.2).float()
    x[:, :, 0] = (torch.arange(10) % 2).float()  # a pattern to learn
    model = _vrnn()

    def elbo():
        with torch.no_grad():
            return ELBO(model, mean_field=True, num_samples=10)(x).per_step

    before = elbo()
    Trainer(
        ELBO(model, mean_field=True),
        (x, None),
        config=TrainConfig(
            epochs=20, batch_size=8, lr=0.02, kl_start=0.2, kl_anneal_steps=20, clip_norm=10.0, progress=False
        ),
    ).fit()
    assert elbo() > before + 0.5


def _predictive(model, x, mask):
    pyro.set_rng_seed(0)
    return model.predictive(x, mask, 0, num_particles=50, generator=torch.Generator().manual_seed(0)).mean


def test_predictive_probabilities_are_probabilities_and_ignore_future_steps():
    model = _vrnn()
    x, mask = _rolls()
    probs = _predictive(model, x, mask)
    assert probs.shape == x.shape and bool(((probs >= 0) & (probs <= 1)).all())
    assert bool((probs[~mask] == 0).all())
    changed = x.clone()
    changed[:, 5:] = 1 - changed[:, 5:]
    again = _predictive(model, changed, mask)
    torch.testing.assert_close(again[:, :6], probs[:, :6])
    assert not torch.allclose(again[:, 6:], probs[:, 6:])


def test_generation_returns_binary_rolls_of_the_requested_length():
    model = _vrnn()
    out = model.generate(12, num_sequences=3, generator=torch.Generator().manual_seed(0))
    assert out.x.shape == (3, 12, 6) and set(out.x.unique().tolist()) <= {0.0, 1.0}
    assert bool(((out.mean > 0) & (out.mean < 1)).all())
    x, _ = _rolls()
    cont = model.generate(5, prefix=x[:2, :4], generator=torch.Generator().manual_seed(0))
    assert cont.x.shape == (2, 9, 6) and torch.equal(cont.x[:, :4], x[:2, :4])
    assert set(cont.x.unique().tolist()) <= {0.0, 1.0}
    same = model.generate(12, num_sequences=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(same.x, out.x)


def test_gaussian_emission_and_double_precision():
    torch.manual_seed(0)
    model = VRNN(2, emission="gaussian", latent_dim=2, rnn_dim=4, hidden_dim=8).to(torch.float64)
    x = torch.randn(3, 5, 2, dtype=torch.float64)
    for objective in (ELBO(model, mean_field=True), IWAE(model, 4), SMCBound(model, ParticleFilter(4))):
        out = objective(x)
        assert out.bound.dtype == torch.float64 and bool(torch.isfinite(out.bound).all())
    gen = model.generate(7, num_sequences=2)
    assert gen.x.shape == (2, 7, 2) and gen.x.dtype == torch.float64
    assert not set(gen.x.unique().tolist()) <= {0.0, 1.0}


def test_bad_input_raises_clear_errors():
    model = _vrnn()
    x, mask = _rolls()
    with pytest.raises(ValueError, match="x must have 6 features"):
        model.model(torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="x must have 6 features"):
        SMCBound(model, ParticleFilter(3))(torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="x must be binary"):
        ELBO(model)(x * 0.5 + 0.25)
    with pytest.raises(ValueError, match="x must be binary"):
        model.predictive(x + 0.5, None, 0)
    nan = x.clone()
    nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ELBO(model)(nan, mask)
    with pytest.raises(ValueError, match="prefix must have 6 features"):
        model.generate(3, prefix=torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="emission must be one of"):
        VRNN(6, emission="laplace")
    with pytest.raises(TypeError, match="latent_dim"):
        VRNN(6, latent_dim=2.5)
    with pytest.raises(TypeError, match="num_steps"):
        model.generate(2.5)
    with pytest.raises(ValueError, match="mask must have shape"):
        model.guide(x, mask[:, :3])

"""Every exported class, as a Pyro user would use it: the interop matrix.

Models with programs: SVI with three ELBOs (``JitTrace_ELBO`` included), AutoNormal, sequential and
parallel Predictive into ArviZ, the posterior predictive into ArviZ, ArviZ's LOO, WAIC and LOO-PIT.
Classes without programs (the PF-RNN layers and predictor) refuse each of these with their reason.
Every class: two instances side by side, and parameters saved and loaded.
"""

import math
import warnings

import matplotlib
import numpy as np
import pyro
import pytest
import torch
from factories import FACTORIES, MASK
from pyro import poutine
from pyro.infer import SVI, JitTrace_ELBO, Predictive, Trace_ELBO, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoNormal

import ppl_models
from ppl_models import PFRNNProgram
from ppl_models.inference import UNCONDITION, SequenceModel, Unsupported, posterior_predictive
from ppl_models.inference.arviz_compat import ARVIZ_1, az, group_names, loo_summary
from ppl_models.inference.calibration import posterior_inference_data, stack_sequence_sites, to_inference_data
from ppl_models.inference.objectives import ELBO, IWAE
from ppl_models.inference.traces import latent_sites

matplotlib.use("Agg")

PROGRAMS = [cls for cls in FACTORIES if "programs" in cls.capabilities]
LAYERS = [cls for cls in FACTORIES if "programs" not in cls.capabilities]
#: exported base classes, which are not models themselves
BASES = {SequenceModel, ppl_models.OneStepPredictor}
ELBOS = {"Trace_ELBO": Trace_ELBO, "TraceMeanField_ELBO": TraceMeanField_ELBO, "JitTrace_ELBO": JitTrace_ELBO}


def _model_and_args(cls):
    """A tiny instance and the arguments of its programs: ``(x, mask)``, or ``(x, y, mask)`` if conditional."""
    model, x = FACTORIES[cls]()
    if model.conditional:
        y = torch.randn(x.shape[0], x.shape[1], 1, generator=torch.Generator().manual_seed(3))
        return model, (x, y, MASK)
    return model, (x, MASK)


def _parameters(model):
    return {name: value.detach().clone() for name, value in model.named_parameters()}


@pytest.mark.parametrize("elbo", list(ELBOS))
@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_svi_with_each_elbo_trains_every_parameter_it_reaches(cls, elbo):
    model, args = _model_and_args(cls)
    before = _parameters(model)
    options = {"ignore_jit_warnings": True} if elbo == "JitTrace_ELBO" else {}
    svi = SVI(model.model, model.guide, pyro.optim.Adam({"lr": 0.05}), ELBOS[elbo](max_plate_nesting=2, **options))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        losses = [svi.step(*args) for _ in range(3)]
    assert all(np.isfinite(losses))
    changed = [name for name, value in model.named_parameters() if not torch.equal(value, before[name])]
    assert changed, f"{elbo} changed none of {cls.__name__}'s parameters"
    names = set(pyro.get_param_store().keys())
    assert any(name.startswith(model.pyro_name + "$$$") for name in names)


def test_every_exported_class_is_in_the_matrix():
    exported = {getattr(ppl_models, name) for name in ppl_models.__all__}
    models = {obj for obj in exported if isinstance(obj, type) and issubclass(obj, SequenceModel)} - BASES
    assert models == set(FACTORIES) == set(PROGRAMS) | set(LAYERS)


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_autonormal_gives_a_finite_loss_and_learns(cls):
    """AutoNormal replaces the guide of every latent site; a model without latent sites trains its own parameters."""
    model, args = _model_and_args(cls)
    guide = AutoNormal(model.model)
    svi = SVI(model.model, guide, pyro.optim.Adam({"lr": 0.05}), Trace_ELBO(max_plate_nesting=2))
    before = _parameters(model)
    losses = [svi.step(*args) for _ in range(3)]
    assert all(np.isfinite(losses))
    if latent_sites(poutine.trace(model.guide).get_trace(*args)):
        assert any(name.startswith("AutoNormal.") for name in pyro.get_param_store().keys())
    assert any(not torch.equal(value, before[name]) for name, value in model.named_parameters())


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_predictive_sequential_and_parallel_give_the_same_sites_and_shapes(cls):
    model, args = _model_and_args(cls)
    sequential = Predictive(model.model, guide=model.guide, num_samples=4)(*args)
    parallel = Predictive(model.model, guide=model.guide, num_samples=4, parallel=True)(*args)
    assert set(sequential) == set(parallel) and sequential
    for name, value in sequential.items():
        assert value.shape == parallel[name].shape, name
        assert value.shape[0] == 4 and bool(torch.isfinite(value).all()), name


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_predictive_output_stacks_into_arviz(cls, parallel):
    """Predictive's sites (padded to the plate nesting: the PF-RNN program's y_t [S, 1, B, O]) give [S, B, T, D]."""
    model, args = _model_and_args(cls)
    samples = Predictive(model.model, guide=model.guide, num_samples=3, parallel=parallel)(*args)
    observed = args[1] if model.conditional else args[0]
    stacked = stack_sequence_sites(samples, "y" if model.conditional else "x")
    assert stacked.shape == (3, *observed.shape)
    assert to_inference_data(stacked, observed, mask=MASK).posterior_predictive is not None


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_posterior_predictive_replicates_go_to_arviz(cls):
    model, args = _model_and_args(cls)
    targets = args[1] if model.conditional else None
    observed = args[0] if targets is None else targets
    result = posterior_predictive(model, args[0], MASK, 4, targets=targets)
    assert result.samples.shape == (4, *observed.shape) and result.uncondition == cls.uncondition
    idata = to_inference_data(result.samples, observed, mask=MASK, var_name="y" if model.conditional else "x")
    assert {"posterior_predictive", "observed_data"} <= group_names(idata)


def test_the_pf_rnn_program_declares_that_the_density_bounds_cannot_score_it():
    """Its programs are model(x, y, mask): score(x) and the shared ELBO / IWAE (model(x, mask)) refuse it."""
    program, args = _model_and_args(PFRNNProgram)
    assert not program.supports("latent")
    reason = PFRNNProgram.limitations["latent"]
    for use in (
        lambda: program.score(args[0], None, "elbo"),
        lambda: program.score(args[0], None, "iwae"),
        lambda: ELBO(program),
        lambda: IWAE(program, 4),
    ):
        with pytest.raises(Unsupported, match="conditional model") as error:
            use()
        assert reason in str(error.value)
    with pytest.raises(Unsupported, match="declares no way to score x"):
        program.score(args[0])
    assert math.isfinite(Trace_ELBO().loss(program.model, program.guide, *args))  # what scores it


@pytest.mark.parametrize("cls", LAYERS, ids=lambda c: c.__name__)
def test_classes_without_programs_refuse_every_pyro_use_with_their_reason(cls):
    model, x = FACTORIES[cls]()
    reason = cls.limitations["programs"]
    for use in (
        lambda: model.model(x),
        lambda: model.guide(x),
        lambda: posterior_predictive(model, x, None, 2),
        lambda: posterior_inference_data(model, x, None, 3),
    ):
        with pytest.raises(Unsupported, match="programs") as error:
            use()
        assert reason in str(error.value)


def _same(values, expected) -> bool:
    """Every tensor equal to its expected one, NaN matching NaN (what this test checks is where values go)."""
    return all(
        torch.equal(value.isnan(), expected[name].isnan())
        and torch.equal(value.nan_to_num(), expected[name].nan_to_num())
        for name, value in values
    )


@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_two_instances_keep_apart_and_each_reloads_its_own_parameters(cls, tmp_path):
    """Changing the second leaves the first as it was; each file restores its own instance into a third."""
    first, second = FACTORIES[cls]()[0], FACTORIES[cls]()[0]
    assert first.pyro_name != second.pyro_name
    first.save_params(tmp_path / "first.pt")
    saved = {name: value.clone() for name, value in first.state_dict().items()}
    if cls in PROGRAMS:  # trained by SVI in one store, side by side
        _, args = _model_and_args(cls)
        svi = SVI(second.model, second.guide, pyro.optim.Adam({"lr": 0.05}), Trace_ELBO(max_plate_nesting=2))
        svi.step(*args)
    else:
        with torch.no_grad():
            for parameter in second.parameters():
                parameter.add_(1.0)
    assert _same(first.state_dict().items(), saved)
    third = FACTORIES[cls]()[0].load_params(tmp_path / "first.pt")
    assert _same(third.state_dict().items(), saved)
    pyro.clear_param_store()
    pyro.module(second.pyro_name, second)
    pyro.get_param_store().save(tmp_path / "store.pt")
    fourth = FACTORIES[cls]()[0].load_params(tmp_path / "store.pt")
    assert _same(fourth.named_parameters(), dict(second.named_parameters()))


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_arviz_loo_waic_and_loo_pit_run_on_its_inference_data(cls):
    model, args = _model_and_args(cls)
    targets = args[1] if model.conditional else None
    idata = posterior_inference_data(model, args[0], MASK, 30, targets=targets)
    name = "y" if model.conditional else "x"
    assert {"posterior", "posterior_predictive", "log_likelihood", "observed_data"} <= group_names(idata)
    assert idata.log_likelihood[name].dims[:2] == ("chain", "draw")
    assert idata.log_likelihood[name].shape[:2] == (1, 30)
    loo = loo_summary(idata)  # az.loo, or the exact answer when every draw agrees (no latent sites)
    assert np.isfinite(loo["elpd"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k warnings of tiny untrained models
        if "latent" in cls.capabilities:
            assert np.isfinite(float(az.loo(idata).elpd if ARVIZ_1 else az.loo(idata).elpd_loo))
        if not ARVIZ_1:
            assert np.isfinite(az.waic(idata).elpd_waic)
        if not ARVIZ_1:
            assert az.plot_loo_pit(idata, y=name) is not None
        elif "latent" in cls.capabilities:  # ArviZ 1.x's PSIS refuses draws that all agree (no latent sites)
            assert az.plot_loo_pit(idata, var_names=[name]) is not None
    assert idata.observed_data[name].sizes["step"] == int(MASK.sum())  # MASK pads: only valid steps are stored
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_uncondition_draws_what_the_model_declares(cls):
    """Free simulations ignore the observed values; teacher-forced draws read them (same seed, other data).

    Compared through the laws the draws come from (their means), which binary draws can hide.
    """
    model, args = _model_and_args(cls)
    assert cls.uncondition in UNCONDITION
    index = 1 if model.conditional else 0  # the modelled variable: y of a conditional model, else x
    data = args[index]
    binary = bool(((data == 0) | (data == 1)).all())
    other = list(args)
    other[index] = 1 - data if binary else data + 3.0

    def draws(program_args):
        pyro.set_rng_seed(11)
        trace = poutine.trace(poutine.uncondition(model.model)).get_trace(*program_args)
        return {
            name: site["fn"].mean
            for name, site in trace.nodes.items()
            if site["type"] == "sample" and site["name"].split("/")[-1][0] in "xy"
        }

    first, second = draws(args), draws(other)
    assert first and set(first) == set(second)
    same = all(torch.equal(first[name], second[name]) for name in first)
    assert same == (cls.uncondition == "free"), f"{cls.__name__} declares {cls.uncondition!r}"

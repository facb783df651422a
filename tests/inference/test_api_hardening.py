"""The Python API refuses what it cannot judge, by the argument's name, before it allocates; ``Trainer.fit`` ends
with the parameters of the best validation epoch."""

import pytest
import torch

import ppl_models.inference.validation as validation
from ppl_models import LinearGaussianSSM
from ppl_models.inference import evaluate, posterior_predictive
from ppl_models.inference.data import Standardizer
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.pointwise import posterior_draws
from ppl_models.inference.training import TrainConfig, Trainer, load_checkpoint


def lgssm(seed=0):
    return LinearGaussianSSM.random(2, 3, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def small():
    """``(model, x [4, 6, 3])``."""
    model = lgssm()
    return model, model.sample(num_sequences=4, num_steps=6, generator=torch.Generator().manual_seed(1))[0]


# --- 11, 22: every count names itself -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["predictive_samples", "posterior_draws"])
def test_one_draw_is_refused_where_a_spread_is_needed(small, name):
    model, x = small
    with pytest.raises(ValueError, match=rf"^{name} must be 0 \(none\) or an int >= 2, got 1$"):
        evaluate(model, x, estimators=["exact"], **{"predictive_samples": 0, name: 1})


COUNTS = ["num_particles", "iwae_particles", "predictive_samples", "posterior_draws", "batch_size", "particle_chunk"]


@pytest.mark.parametrize("value", [1.5, "10", True, -1, 0])
@pytest.mark.parametrize("name", COUNTS)
def test_each_count_of_evaluate_names_itself(small, name, value):
    model, x = small
    if value == 0 and name in ("predictive_samples", "posterior_draws"):
        return  # 0 means none
    kind = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(kind, match=rf"^{name} must be .*got .*{value!r}"):
        evaluate(model, x, estimators=["exact", "iwae", "smc"], **{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seed", -1),
        ("seed", 2**32),
        ("seed", 1.5),
        ("seed", "3"),
        ("seed", True),
        ("binary", "yes"),
        ("binary", 1),
        ("description", 5),
        ("valid", "data"),
    ],
)
def test_other_arguments_of_evaluate_name_themselves(small, name, value):
    model, x = small
    with pytest.raises((ValueError, TypeError), match=rf"^{name} must be"):
        evaluate(model, x, estimators=["exact"], predictive_samples=0, **{name: value})


@pytest.mark.parametrize("value", [1.5, "10", True, -1, 0])
@pytest.mark.parametrize(("call", "name"), [(posterior_predictive, "num_samples"), (posterior_draws, "num_draws")])
def test_the_counts_of_the_posterior_draws_name_themselves(small, call, name, value):
    model, x = small
    kind = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(kind, match=rf"^{name} must be"):
        call(model, x, None, value)


@pytest.mark.parametrize("call", [posterior_predictive, posterior_draws])
def test_max_plate_nesting_names_itself(small, call):
    model, x = small
    with pytest.raises(TypeError, match=r"^max_plate_nesting must be an int >= 1, got float 1.5"):
        call(model, x, None, 2, max_plate_nesting=1.5)


@pytest.mark.parametrize("flag", ["resample", "parallel"])
@pytest.mark.parametrize("call", [posterior_predictive, posterior_draws])
def test_the_flags_of_the_posterior_draws_must_be_bools(small, call, flag):
    model, x = small
    with pytest.raises(TypeError, match=rf"^{flag} must be True or False, got str 'no'"):
        call(model, x, None, 2, **{flag: "no"})


# --- 21: memory is estimated before the draws are allocated -------------------------------------------------
GIB = 2**30


@pytest.mark.parametrize(
    ("call", "name", "copies"), [(posterior_predictive, "num_samples", 2), (posterior_draws, "num_draws", 2)]
)
def test_posterior_draws_beyond_memory_are_refused_by_name_before_allocating(small, monkeypatch, call, name, copies):
    model, x = small
    monkeypatch.setattr(validation, "available_memory", lambda: GIB)
    draws = 10**7
    need = copies * draws * 4 * 6 * 3 * 4  # copies x S x B x T x D x 4 bytes (float32)
    with pytest.raises(
        ValueError,
        match=rf"^{name}={draws} needs at least {need / GIB:.3g} GiB of memory .*but 1 GiB "
        rf"are available: lower {name}$",
    ):
        call(model, x, None, draws)
    assert call(model, x, None, 3) is not None  # a count that fits is drawn


def test_posterior_predictive_of_a_billion_draws_is_refused_with_its_name(small):
    model, x = small
    with pytest.raises(ValueError, match=r"^num_samples=1000000000 needs at least 536 GiB of memory"):
        posterior_predictive(model, x, None, 10**9)  # 2 x 1e9 x 4 x 6 x 3 x 4 bytes


@pytest.mark.parametrize("name", ["predictive_samples", "posterior_draws"])
def test_evaluate_refuses_draws_beyond_memory_by_name(small, monkeypatch, name):
    model, x = small
    monkeypatch.setattr(validation, "available_memory", lambda: GIB)
    need = 2 * 10**7 * 4 * 6 * 3 * 4
    with pytest.raises(ValueError, match=rf"^{name}=10000000 needs at least {need / GIB:.3g} GiB"):
        evaluate(model, x, estimators=["exact"], **{"predictive_samples": 0, name: 10**7})


# --- 20: a mask with no valid step; a standardizer given as its dict -----------------------------------------
def test_a_mask_without_a_valid_step_is_refused_by_name(small):
    model, x = small
    with pytest.raises(ValueError, match=r"^mask has no valid step"):
        evaluate(model, x, torch.zeros(4, 6, dtype=torch.bool), estimators=["exact"])


def test_a_standardizer_given_as_its_dict_reports_the_data_units():
    """A model of z = x / s is the model of x with C / s and R / s^2: the exact log-likelihood of x is known."""
    model = lgssm()
    x, _ = model.sample(num_sequences=4, num_steps=8, generator=torch.Generator().manual_seed(2))
    scale = torch.tensor([2.0, 0.5, 4.0])
    with torch.no_grad():
        scaled = LinearGaussianSSM(
            model.A, model.C / scale[:, None], model.Q, model.R / scale[:, None] / scale[None, :], model.init_cov
        )
    record = Standardizer([0.0, 0.0, 0.0], scale.tolist(), ["a", "b", "c"]).to_dict()
    result = evaluate(scaled, x / scale, estimators=["exact"], predictive_samples=0, standardizer=record)
    truth = float(model.log_likelihood(x).detach().double().sum()) / (4 * 8)
    assert result["loglik"]["exact"]["per_step"] == pytest.approx(truth, rel=1e-5)


@pytest.mark.parametrize(
    ("standardizer", "kind", "message"),
    [
        (42, TypeError, "standardizer must be a Standardizer or its to_dict"),
        ({"mean": [0.0]}, ValueError, "standardizer must have the keys"),
        (
            {"mean": [0.0, 0.0], "scale": [1.0, 1.0], "features": ["a", "b"]},
            ValueError,
            "standardizer: 2 features for data of 3",
        ),
        (
            {"mean": [0.0] * 3, "scale": [1.0, 0.0, 1.0], "features": ["a", "b", "c"]},
            ValueError,
            "standardizer.scale must be finite and positive",
        ),
    ],
)
def test_a_bad_standardizer_is_refused_by_name(small, standardizer, kind, message):
    model, x = small
    with pytest.raises(kind, match=rf"^{message}"):
        evaluate(model, x, estimators=["exact"], predictive_samples=0, standardizer=standardizer)


# --- 16: fit ends with the best validation epoch's parameters ---------------------------------------------------
class _ScriptedValidation(ExactLikelihood):
    """Exact likelihood whose validation bounds per step are ``bounds``, one per validation (one batch each)."""

    def __init__(self, model, bounds):
        super().__init__(model)
        self.bounds, self.validations = bounds, 0

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        if not self.training:
            out.bound = self.bounds[self.validations] * out.num_steps.to(out.bound)
            self.validations += 1
        return out


BOUNDS = [-2.0, -1.0, -3.0, -4.0]  # the best epoch is the 2nd of 4
FOUR_EPOCHS = TrainConfig(epochs=4, batch_size=8, lr=0.05, progress=False)


@pytest.fixture(scope="module")
def splits():
    truth = lgssm(5)
    train = truth.sample(16, 8, generator=torch.Generator().manual_seed(1))[0]
    valid = truth.sample(8, 8, generator=torch.Generator().manual_seed(2))[0]
    return (train, None), (valid, None)


def _state(module):
    return {k: v.clone() for k, v in module.state_dict().items()}


def _equal(state, checkpoint):
    return set(state) == set(checkpoint) and all(torch.equal(v, checkpoint[k]) for k, v in state.items())


def _trained(splits, run_dir=None, resume=False, **options):
    objective = _ScriptedValidation(lgssm(3), BOUNDS)
    trainer = Trainer(objective, *splits, FOUR_EPOCHS, run_dir=run_dir)
    trainer.fit(resume=resume, **options)
    return trainer


def test_fit_ends_with_the_parameters_of_best_pt_not_of_last_pt(splits, tmp_path):
    trainer = _trained(splits, tmp_path)
    best, last = (load_checkpoint(tmp_path / "checkpoints" / f"{w}.pt") for w in ("best", "last"))
    assert (best["epoch"], last["epoch"], trainer.epoch) == (2, 4, 4)
    assert _equal(_state(trainer.objective), best["objective"])
    assert not _equal(best["objective"], last["objective"])  # training moved on after the best epoch

    kept = _trained(splits, tmp_path / "last", restore_best=False)
    assert _equal(_state(kept.objective), last["objective"])

    in_memory = _trained(splits)  # no run folder: the best epoch's parameters are kept in memory
    assert _equal(_state(in_memory.objective), best["objective"])

    resumed = _trained(splits, tmp_path, resume=True)  # a finished run: nothing to train, best.pt restored
    assert resumed.epoch == 4 and _equal(_state(resumed.objective), best["objective"])
    with pytest.raises(TypeError, match=r"^restore_best must be True or False, got str 'no'"):
        resumed.fit(restore_best="no")


def test_a_second_fit_continues_from_the_last_parameters_not_the_best(splits, tmp_path):
    """Two fits of 3 and then 4 epochs end as one fit of 4: the second starts from epoch 3's parameters, not from the
    best (epoch 2's) that the first fit ended with."""
    objective = _ScriptedValidation(lgssm(3), BOUNDS)
    trainer = Trainer(objective, *splits, TrainConfig(epochs=3, batch_size=8, lr=0.05, progress=False))
    trainer.fit()
    trainer.config.epochs = 4
    trainer.fit()
    straight = _trained(splits, tmp_path, restore_best=False)
    trainer.fit(restore_best=False)  # nothing left to train: the last parameters come back
    assert _equal(_state(trainer.objective), _state(straight.objective))

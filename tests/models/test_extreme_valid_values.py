"""An extreme value at a valid step (beyond the dtype's range once squared) gives every model that scores x a finite
result held at the dtype's lowest value and one warning naming the place; the models that cannot score it say why."""

import re
import warnings

import pytest
import torch
from factories import FACTORIES, MASK, VARIANTS, warned

from ppl_models import SRNN, GRUBaseline, SMCTransformer, TransformerForecaster
from ppl_models.inference import ESTIMATORS

#: the models that score x, with a Gaussian emission for the two whose Bernoulli one refuses a non-binary value
SCORING = {
    cls.__name__: FACTORIES[cls]
    for cls in FACTORIES
    if any(cls.supports(cls, capability) for capability in ESTIMATORS.values()) and not cls.conditional
}
SCORING["SRNN gaussian"] = VARIANTS["SRNN gaussian filter guide without Res_q, dropout"]
SCORING["GRUBaseline gaussian"] = VARIANTS["GRUBaseline gaussian"]
#: attention over the extreme input overflows the transformers' states (NaN): they cannot score the steps after it
OVERFLOWING = (SMCTransformer, TransformerForecaster)
EXTREMES = [(1e30, torch.float32), (1e200, torch.float64)]


def _with_extreme(x, value, dtype):
    x = x.to(dtype).clone()
    x[0, 1, 0] = value
    return x


def _refusal(model):
    """``(error, message)`` for a model that cannot score an extreme value at ``x[0, 1]``, else ``None``."""
    if isinstance(model, (SRNN, GRUBaseline)) and model.emission_kind == "bernoulli":
        return ValueError, "must be binary"  # outside the support: refused at the boundary
    if isinstance(model, OVERFLOWING):
        return ValueError, r"NaN or \+inf at step 2 of sequence 0 \(x\[0, 2\]\).*overflowed"
    return None


def _one_saturation_warning(messages, dtype):
    assert len(messages) == 1, messages
    pattern = (
        rf"fell below the {re.escape(str(dtype))} range \(-inf\) at \d+ valid (steps?|sequences?) of x, "
        r"the first at (step \d+ of )?sequence 0 \(x\[0"
    )
    assert re.search(pattern, messages[0]), messages[0]


@pytest.mark.parametrize(("value", "dtype"), EXTREMES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(SCORING))
def test_an_extreme_valid_value_gives_a_finite_result_and_one_warning(name, value, dtype):
    model, x = SCORING[name]()
    model = model.to(dtype).eval()
    x = _with_extreme(x, value, dtype)
    lowest, refusal = torch.finfo(dtype).min, _refusal(model)
    calls = {
        estimator: lambda e=estimator: model.score(x, MASK, e, num_particles=4).log_likelihood
        for estimator, capability in ESTIMATORS.items()
        if model.supports(capability)
    }
    if model.supports("predictive"):
        calls["predictive"] = lambda: model.predictive(x, MASK, 0, num_particles=4).log_density
    for name, compute in calls.items():
        with torch.no_grad():
            if refusal:
                with pytest.raises(refusal[0], match=refusal[1]):
                    compute()
                continue
            result, messages = warned(compute, RuntimeWarning)
        _one_saturation_warning(messages, dtype)
        assert torch.isfinite(result).all(), (name, result)
        # the true value (about -value^2 / 2, or below) is below the range: held at its lowest value
        assert (result[0, 1] if name == "predictive" else result[0]) == lowest, (name, result)
    if model.supports("exact") and not refusal:  # the other sequences keep their numbers
        clean = x.clone()
        clean[0, 1, 0] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert torch.equal(model.log_likelihood(x, MASK)[1:], model.log_likelihood(clean, MASK)[1:])

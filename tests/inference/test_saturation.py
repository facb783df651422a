"""The shared mechanism that holds a log-density below the dtype's range (``ppl_models.inference.saturation``),
against hand-computed values: valid -inf held at the lowest value with one warning, the padding ignored, NaN at a valid
step refused."""

import math

import pytest
import torch
from factories import warned

from ppl_models.inference.saturation import saturate, saturated_sum

LOWEST32 = torch.finfo(torch.float32).min


def test_saturate_holds_valid_minus_inf_and_ignores_the_padding():
    values = torch.tensor([[-1.0, -math.inf, -math.inf], [-2.0, math.nan, -math.inf]], requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    held, messages = warned(lambda: saturate(values, mask), RuntimeWarning)
    assert torch.equal(held.detach(), torch.tensor([[-1.0, LOWEST32, LOWEST32], [-2.0, 0.0, 0.0]]))
    assert len(messages) == 1
    assert "at 2 valid steps of x, the first at step 1 of sequence 0 (x[0, 1])" in messages[0], messages
    held.sum().backward()  # the held and the padded entries pass no gradient, the others pass 1
    assert torch.equal(values.grad, torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))


def test_saturate_raises_for_nan_at_a_valid_step_unless_told_not_to():
    values = torch.tensor([[0.0, -1.0], [math.nan, 0.0]])
    with pytest.raises(ValueError, match=r"NaN or \+inf at step 0 of sequence 1 \(x\[1, 0\]\)"):
        saturate(values)
    assert saturate(values, failures=False).isnan().sum() == 1


def test_saturated_sum_holds_a_sum_that_overflows_from_finite_steps():
    steps = torch.tensor([[-2e38, -2e38], [-1.0, -2.0]])  # each finite, their sum below float32's range
    total, messages = warned(lambda: saturated_sum(steps), RuntimeWarning)
    assert torch.equal(total, torch.tensor([LOWEST32, -3.0]))
    assert len(messages) == 1 and "the sum over the steps of the log-density" in messages[0], messages
    assert "1 valid sequence of x, the first at sequence 0 (x[0])" in messages[0], messages

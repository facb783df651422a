"""Exact mixture CRPS / log density against hand-computed closed forms and the CRPS definition."""

import math

import pytest
import torch

from ppl_models.inference.mixture_scores import gaussian_mixture_crps, gaussian_mixture_log_density


def _one(values):
    return torch.tensor(values, dtype=torch.float64)


def test_gaussian_crps_matches_the_closed_form_by_hand():
    # y = loc: scale * (2 phi(0) - 1/sqrt(pi)) = 2 * (0.7978845608 - 0.5641895835)
    at_mean = gaussian_mixture_crps(_one(3.0), _one([3.0]), _one([2.0]), _one([0.0]))
    assert at_mean.item() == pytest.approx(0.4673899546, abs=1e-9)
    # z = 1: (2 Phi(1) - 1) + 2 phi(1) - 1/sqrt(pi) = 0.6826894921 + 0.4839414490 - 0.5641895835
    one_sd = gaussian_mixture_crps(_one(1.0), _one([0.0]), _one([1.0]), _one([0.0]))
    assert one_sd.item() == pytest.approx(0.6024413576, abs=1e-9)


def test_mixture_crps_equals_the_integral_of_the_squared_cdf_gap():
    loc, scale, weights = _one([-2.0, 0.5, 2.0]), _one([0.5, 1.0, 0.3]), _one([0.2, 0.5, 0.3])

    def cdf(points):
        return (weights * torch.distributions.Normal(loc, scale).cdf(points.unsqueeze(-1))).sum(-1)

    for y in (-2.3, 0.0, 1.7, 6.0):  # int_{-inf}^y F^2 + int_y^inf (1 - F)^2, split at y
        below, above = (torch.linspace(a, b, 200_001, dtype=torch.float64) for a, b in ((-20, y), (y, 20)))
        integral = torch.trapezoid(cdf(below).square(), below) + torch.trapezoid((1 - cdf(above)).square(), above)
        exact = gaussian_mixture_crps(_one(y), loc, scale, weights.log()).item()
        assert exact == pytest.approx(integral.item(), abs=1e-7)


def test_mixture_log_density_by_hand_and_unnormalised_weights():
    # equal weights at +-1, unit scale, y = 0: log N(0; 1, 1) = -log sqrt(2 pi) - 1/2
    value = gaussian_mixture_log_density(_one(0.0), _one([-1.0, 1.0]), _one([1.0, 1.0]), _one([5.0, 5.0]))
    assert value.item() == pytest.approx(-0.9189385332 - 0.5, abs=1e-9)


def test_identical_components_score_like_one_and_batch_shapes_broadcast():
    y = torch.randn(4, 3, dtype=torch.float64)
    loc = torch.randn(4, 3, 1, dtype=torch.float64)
    single = gaussian_mixture_crps(y, loc, _one([0.7]), _one([0.0]))
    repeated = gaussian_mixture_crps(y, loc.expand(4, 3, 5), _one([0.7]), torch.zeros(5, dtype=torch.float64))
    assert single.shape == (4, 3)
    torch.testing.assert_close(single, repeated)


@pytest.mark.parametrize(
    "args, error, name",
    [
        ((0.0, _one([0.0]), _one([1.0]), _one([0.0])), TypeError, "y"),
        ((_one(0.0), _one([0.0]), _one([0.0]), _one([0.0])), ValueError, "scale"),
        ((_one(0.0), _one(0.0), _one([1.0]), _one([0.0])), ValueError, "loc"),
        (
            (_one([0.0, 1.0, 2.0]), torch.zeros(2, 2, dtype=torch.float64), _one([1.0]), _one([0.0])),
            ValueError,
            "broadcast",
        ),
        ((_one(float("nan")), _one([0.0]), _one([1.0]), _one([0.0])), ValueError, "y"),
        ((_one(0.0), _one([0.0]), _one([1.0]), _one([-math.inf])), ValueError, "log_weights"),
    ],
)
def test_bad_inputs_are_named(args, error, name):
    for score in (gaussian_mixture_crps, gaussian_mixture_log_density):
        with pytest.raises(error, match=name):
            score(*args)

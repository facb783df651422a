"""The figures of the multi-step board against independent truth: the CRPS of draws against the closed form of a
Gaussian predictive and a hand-computed discrete case, each pair's share of the mean over horizons by hand, and the
paired bootstrap interval on hand examples whose percentiles are known."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from ppl_models.experiments.multistep_scores import PairRecord, pair_shares, paired_bootstrap, verdict


def _gaussian_crps(mu: float, s: float, y: float) -> float:
    """CRPS of N(mu, s^2) at y: s [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)]."""
    z = (y - mu) / s
    return s * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))


@pytest.mark.parametrize(("mu", "s", "y"), [(0.0, 1.0, 0.0), (2.0, 0.5, 3.1), (-1.0, 3.0, -8.0)])
def test_the_crps_of_gaussian_draws_is_the_closed_form_within_monte_carlo_error(mu, s, y):
    samples = 40_000
    draws = mu + s * torch.randn(samples, 1, 1, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    record = PairRecord()
    record([3], torch.tensor([7]), draws, torch.full((1, 1, 1), y, dtype=torch.float64), torch.ones(1, 1, dtype=bool))
    # Monte-Carlo error of E|X - y| is at most s sqrt(1 + z^2) / sqrt(S): 5 standard errors
    tolerance = 5 * s * math.sqrt(1 + ((y - mu) / s) ** 2) / math.sqrt(samples)
    assert record.crps[0][0] == pytest.approx(_gaussian_crps(mu, s, y), abs=tolerance)
    assert (record.series, record.origins) == ([3], [7])


def test_the_crps_of_a_discrete_example_is_the_hand_computed_value_averaged_over_features():
    # feature 1: draws {0, 1, 3} at y = 2: E|X - y| = 4/3, E|X - X'| = 2 (1 + 3 + 2) / 9 = 4/3, CRPS = 4/3 - 2/3 = 2/3;
    # feature 2: draws {5, 5, 5} at y = 4: CRPS = 1; mean over features 5/6. Step 2 has no target.
    draws = torch.tensor([[0.0, 5.0], [1.0, 5.0], [3.0, 5.0]], dtype=torch.float64)[:, None, None, :].expand(3, 1, 2, 2)
    target = torch.tensor([[[2.0, 4.0], [0.0, 0.0]]], dtype=torch.float64)
    record = PairRecord(lag=2)
    record([0], torch.tensor([5]), draws, target, torch.tensor([[True, False]]))
    assert record.crps[0][0] == pytest.approx(5 / 6) and record.crps[0][1] is None
    assert record.origins == [7]  # the origin in the data as read: the forecaster's step plus the lag


def test_each_pairs_share_averages_to_the_mean_crps_over_horizons():
    # pairs: (1 at h=1, 3 at h=2) and (2 at h=1, no target at h=2): per-step means 1.5 and 3, their mean 2.25;
    # shares u_i = (P / H') sum_h c_ih / n_h: (1/2 + 3/1) = 3.5 and 2/2 = 1
    shares = pair_shares([[1.0, 3.0], [2.0, None]])
    assert shares.tolist() == pytest.approx([3.5, 1.0]) and shares.mean() == pytest.approx(2.25)
    assert pair_shares([[1.0, 3.0], [2.0, 6.0]]).tolist() == pytest.approx([2.0, 4.0])  # every h: the pair's mean


def test_the_paired_bootstrap_interval_on_hand_examples():
    # two differences -1, 1: a resample's mean is -1, 0 or 1 with chances 1/4, 1/2, 1/4: the 2.5 % and 97.5 %
    # percentiles are -1 and 1, so the interval holds 0
    low, high = paired_bootstrap([-1.0, 1.0])
    assert (low, high) == (-1.0, 1.0) and verdict(low, high) == "tie"
    # 1, 2, 3: every value alone has chance 1/27 > 2.5 %, so the interval is [1, 3]: all above 0
    low, high = paired_bootstrap([1.0, 2.0, 3.0])
    assert (low, high) == (1.0, 3.0) and verdict(low, high) == "behind"
    assert verdict(*paired_bootstrap([-0.5, -0.2, -0.4])) == "beats"
    assert verdict(*paired_bootstrap([0.0, 0.0])) == "tie"


def test_whole_groups_are_resampled_together():
    # three -1 in group a, three +1 in group b: resampling groups, a resample is all -1 with chance 1/4, so the
    # interval is [-1, 1]; resampling the six pairs, six -1 has chance 1/64 < 2.5 % and one +1 in six 6/64, so the
    # lower end is -2/3
    differences = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    assert paired_bootstrap(differences, list("aaabbb")) == (-1.0, 1.0)
    assert paired_bootstrap(differences)[0] == pytest.approx(-2 / 3)
    # groups of unequal sizes: a resample's mean is its pairs' mean (the sums over the counts)
    assert paired_bootstrap([2.0, 2.0, 2.0, 5.0], [0, 0, 0, 1], resamples=500) == pytest.approx((2.0, 5.0))


@pytest.mark.parametrize(
    ("differences", "groups", "level", "match"),
    [
        ([], None, 0.95, "non-empty"),
        ([1.0, np.nan], None, 0.95, "finite"),
        ([1.0], [0, 1], 0.95, "one label"),
        ([1.0], None, 1.5, "level"),
    ],
)
def test_bad_bootstrap_arguments_are_refused_by_name(differences, groups, level, match):
    with pytest.raises(ValueError, match=match):
        paired_bootstrap(differences, groups, level=level)

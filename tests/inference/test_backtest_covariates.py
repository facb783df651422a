"""A backtest of data read with covariates gives each forecaster only the history before the origin and the known
covariates of the steps ahead: changing a target after the origin changes no forecast from it, changing a known
covariate there changes the forecasts of the rows that read them (a GRU wrapped in CovariateInputs, ARIMAX) and not
those that ignore them (the last value); only the targets are judged."""

from __future__ import annotations

import pytest
import torch

from ppl_models import GRUBaseline
from ppl_models.classical import classical_model
from ppl_models.classical.exogenous import ArimaxForecaster
from ppl_models.classical.sequence_model import ClassicalCovariateModel, ClassicalSequenceModel
from ppl_models.covariate_model import CovariateInputs
from ppl_models.inference.backtest import backtest
from ppl_models.inference.data.covariates import CovariateLayout

LAYOUT = CovariateLayout(("y",), ("c",))
ORIGIN, HORIZON, STEPS = 24, 3, 30


def _data() -> torch.Tensor:
    """``[3, 30, 2]`` rows ``[y_t, c_{t+1}]`` of ``y_t = 3 c_t + noise``, ``c`` white noise, in float64."""
    generator = torch.Generator().manual_seed(0)
    c = torch.randn(3, STEPS + 1, generator=generator, dtype=torch.float64)
    y = 3 * c[:, :STEPS] + 0.1 * torch.randn(3, STEPS, generator=generator, dtype=torch.float64)
    return torch.stack([y, c[:, 1:]], -1)


def _forecasters(x: torch.Tensor) -> dict:
    torch.manual_seed(0)
    gru = CovariateInputs(GRUBaseline(2, emission="gaussian", rnn_dim=4, hidden_dim=4), LAYOUT).double()
    train = x[:, :ORIGIN]
    arimax = ClassicalCovariateModel(ArimaxForecaster(LAYOUT, season=1).fit(train))
    return {
        "gru": gru,
        "arimax": arimax,
        "last-value": ClassicalSequenceModel(classical_model("last-value").fit(train)),
    }


def _forecasts(model, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """The draws ``[S, 3, H, 1]`` from step ``ORIGIN`` of each row, and the backtest's figures."""
    seen = []
    scored = torch.zeros(x.shape[:2], dtype=torch.bool)
    scored[:, ORIGIN:] = True
    torch.manual_seed(1)
    result = backtest(
        model,
        x,
        None,
        scored,
        horizon=HORIZON,
        origins=1,
        num_samples=8,
        covariates=LAYOUT,
        generator=torch.Generator().manual_seed(1),
        on_forecast=lambda rows, start, draws, target, valid: seen.append((start, draws, target)),
    )
    ((start, draws, target),) = seen
    assert start.tolist() == [ORIGIN] * 3 and draws.shape == (8, 3, HORIZON, 1) and target.shape == (3, HORIZON, 1)
    return draws, result.per_horizon


@pytest.mark.parametrize("name", ["gru", "arimax", "last-value"])
def test_targets_after_the_origin_never_reach_a_forecast_and_known_covariates_do(name):
    x = _data()
    model = _forecasters(x)[name]
    draws, figures = _forecasts(model, x)
    targets = x.clone()
    targets[:, ORIGIN:, 0] += 100.0  # every target from the origin on
    assert torch.equal(_forecasts(model, targets)[0], draws)
    covariate = x.clone()
    covariate[:, ORIGIN, 1] += 5.0  # c at step ORIGIN + 1, known in advance: in the row before that step
    changed = _forecasts(model, covariate)[0]
    assert torch.equal(changed[:, :, 0], draws[:, :, 0])  # the first step ahead reads c of ORIGIN, unchanged
    shift = (changed[:, :, 1] - draws[:, :, 1]).abs()
    if name == "last-value":
        assert torch.equal(changed, draws)
    elif name == "arimax":  # y = 3 c + noise: the mean moves by about 3 x 5
        assert shift.min() > 10.0
    else:  # an untrained GRU: the step reads c, by however little
        assert shift.min() > 0
    assert figures["targets"] == [3] * HORIZON  # one value a step: the target alone


def test_arimax_forecasts_follow_the_covariates_ahead():
    x = _data()
    draws, figures = _forecasts(_forecasters(x)["arimax"], x)
    truth = 3 * x[:, ORIGIN - 1 : ORIGIN - 1 + HORIZON, 1]  # 3 c of the steps ahead, in the rows before them
    assert (draws.mean(0)[..., 0] - truth).abs().max() < 0.5

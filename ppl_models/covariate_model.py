"""Covariates as inputs of an exact one-step predictor: :class:`CovariateInputs`.

The data come in the covariate layout of :mod:`ppl_models.inference.data.covariates`: row ``t`` of ``x [B, T, D]``
holds ``[y_t, c_{t+1}, p_t]`` (the ``O`` targets, the future-known covariates one step ahead, the past-only
covariates). A model of the collection that predicts row ``t`` from rows ``< t`` (a GRU over ``u_t = x_{t-1}``, the
recurrent predictors) then reads ``c_{<=t}`` and ``p_{<t}``. :class:`CovariateInputs` wraps such a model, built for
all ``D`` columns, and makes it a model of the targets alone given the covariates:

* its likelihood is the inner predictive's marginal over the first ``O`` columns (the inner emission is diagonal, an
  ``Independent`` distribution, so the marginal drops the other columns' factors): training fits
  ``p(y_t | y_{<t}, c_{<=t}, p_{<t})`` and never the covariates' own law (the inner emission may be one the
  covariates' values lie outside of, a count emission beside real-valued covariates: it never reads them);
* its one-step draws and mean hold the covariates as read (they are inputs, not predictions);
* :meth:`CovariateInputs.forecast_given` draws ``H`` steps given the known covariates of those steps. A past-only
  covariate has no value after the forecast origin, so a forecast of more than one step with one is refused (its
  future values would have to be forecast, which this model does not do); a one-step forecast reads only its
  values up to the origin.
"""

from __future__ import annotations

import pyro.distributions as dist
import torch

from ppl_models.inference.data.covariates import CovariateLayout
from ppl_models.inference.protocol import OneStepPredictive, Unsupported
from ppl_models.inference.validation import check_positive_int, check_sequences

from .exact_predictive_model import ExactPredictiveModel
from .nets import TargetColumns

__all__ = ["CovariateInputs", "reads_covariates"]


def reads_covariates(model) -> bool:
    """Whether ``model`` reads covariates as inputs, so that its forecasts need their values ahead
    (``forecast_given``): a :class:`CovariateInputs`, or a recurrent latent model given a layout
    (:meth:`~ppl_models.inference.rollout.LatentRollout.read_covariates`)."""
    return isinstance(model, CovariateInputs) or getattr(model, "layout", None) is not None


class CovariateInputs(ExactPredictiveModel):
    """An exact one-step predictor of the targets that reads the covariates as inputs.

    Args:
        inner: an :class:`~ppl_models.exact_predictive_model.ExactPredictiveModel` built for all the layout's columns
            (``obs_dim = len(layout.features)``) whose predictive is an ``Independent`` distribution over them; its
            ``scored_columns`` is set to the targets' count, so its own checks of values read the targets only.
        layout: the data's :class:`~ppl_models.inference.data.covariates.CovariateLayout`.
    """

    description = "an exact one-step predictor of the targets, reading covariates as inputs"
    capabilities = ExactPredictiveModel.capabilities - {"generate", "forecast"}
    limitations = {
        **ExactPredictiveModel.limitations,
        "forecast": "it reads covariates: a forecast of the targets needs the covariates' future values "
        "(forecast_given)",
        "generate": "it models the targets given the covariates, not the covariates' own law",
    }

    def __init__(self, inner: ExactPredictiveModel, layout: CovariateLayout):
        super().__init__()
        if not isinstance(inner, ExactPredictiveModel):
            raise TypeError(
                f"inner: expected an exact one-step predictor (ExactPredictiveModel), got {type(inner).__name__}: "
                "a latent model's filter weighs every column, so it would model the covariates, not read them (a "
                "recurrent latent model reads them by its own read_covariates)"
            )
        if inner.obs_dim != len(layout.features):
            raise ValueError(
                f"inner: expected obs_dim {len(layout.features)} (targets and covariates), got {inner.obs_dim}"
            )
        self.inner, self.layout = inner, layout
        inner.scored_columns = layout.modelled  # its own checks of values read the targets only
        self.obs_dim = inner.obs_dim
        #: the leading columns that are modelled and scored
        self.modelled_features = layout.modelled

    def check_values(self, x: torch.Tensor, mask: torch.Tensor, *, name: str = "x") -> None:
        self.inner.check_values(x[..., : self.modelled_features], mask, name=name)

    def predictive_distribution(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """The inner predictive with its log density counting the targets only: batch ``[B, T]``, event ``[D]``."""
        return self._targets_only(self.inner.predictive_distribution(x, mask))

    def _targets_only(self, exact):
        if not isinstance(exact, dist.Independent) or exact.reinterpreted_batch_ndims != 1:
            raise ValueError(
                f"inner: {type(self.inner).__name__}'s predictive is not a diagonal (Independent) distribution, so "
                "its marginal over the targets is not at hand"
            )
        return TargetColumns.leading(exact.base_dist, self.modelled_features).to_event(1)

    @torch.no_grad()
    def predictive(self, x, mask=None, num_samples: int = 100, **settings) -> OneStepPredictive:
        """The inner one-step predictive of the targets, the covariates held as read in its draws and mean."""
        result = super().predictive(x, mask, num_samples, **settings)
        inputs = x[..., self.modelled_features :]
        if result.samples is not None:
            result.samples[..., self.modelled_features :] = inputs
        result.mean[..., self.modelled_features :] = inputs
        return result

    def forecast(self, x, mask=None, horizon: int = 1, num_samples: int = 100, **settings) -> torch.Tensor:
        """Refused: the draws of the targets need the covariates of the steps ahead (:meth:`forecast_given`)."""
        raise self._unsupported("forecast")

    def generate(self, num_steps: int, **settings):
        """Refused: the model has no law of the covariates to draw them from."""
        raise self._unsupported("generate")

    def _unsupported(self, capability: str) -> Unsupported:
        return Unsupported(f"{type(self).__name__} has no {capability}: {self.limitations[capability]}")

    @torch.no_grad()
    def forecast_given(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        future: torch.Tensor,
        horizon: int,
        num_samples: int = 100,
        *,
        num_particles: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``[S, B, H, O]``: draws of the targets of the ``H`` steps after each row's last valid step, given the known
        covariates of those steps ``future [B, >= H, C]`` (in ``x``'s units): ``future[:, h]`` is the value in the
        row before step ``h``, the last valid row's for ``h = 0``.

        Only the valid steps of ``x`` are read: a value after a row's last valid step never enters its forecast.
        ``num_particles`` and ``generator`` are taken as :meth:`forecast` takes them; the draws of an exact
        predictor need neither (they come from torch's global generator).
        """
        x, mask = check_sequences(x, mask, model=self)
        horizon = check_positive_int(horizon, name="horizon")
        num_samples = check_positive_int(num_samples, name="num_samples")
        known = self.layout.known_slice
        future = self.layout.checked_future(x, future, horizon)
        out = x.new_empty(num_samples, x.shape[0], horizon, self.modelled_features)
        for b, length in enumerate(mask.sum(1).tolist()):
            paths = x[b, :length].clone()
            if self.layout.known:
                paths[-1, known] = future[b, 0]  # the last row holds the first step's covariates
            carry = self.inner.carry_start(paths.unsqueeze(0).repeat(num_samples, 1, 1))
            for h in range(horizon):
                draw, _ = self.inner.carry_draw(carry)
                out[:, b, h] = draw[:, : self.modelled_features]
                if h + 1 < horizon:
                    if self.layout.known:
                        draw[:, known] = future[b, h + 1]
                    carry = self.inner.carry_on(carry, draw)
        return out

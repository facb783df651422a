"""The squared one-step error as a training objective (the PSRNN paper's MSE loss)."""

from __future__ import annotations

from .objectives import Objective
from .validation import InputTypeError

__all__ = ["SquaredError"]


class SquaredError(Objective):
    """Minus the one-step squared error: ``bound = -sum_t mean_d (x_td - predict(x)_td)^2`` per sequence ``[B]``.

    Its loss is the mean squared error over valid steps and features, as in the PSRNN paper
    (section 6: "trained ... using the MSE"); best checkpoints are those of the lowest
    validation MSE. Not a log-likelihood (``kind`` is ``neg-mse``): a model's noise scale gets
    no gradient from it. The model needs ``predict(x, mask) -> [B, T, D]`` (a
    :class:`~ppl_models.predictors.OneStepPredictor`).
    """

    kind = "neg-mse"

    def __init__(self, model):
        super().__init__(model)
        if not callable(getattr(model, "predict", None)):
            raise InputTypeError(
                f"objective mse needs a model with predict(x, mask) (a one-step predictor), got {type(model).__name__}"
            )

    def estimate(self, x, mask):
        squared = (x - self.model.predict(x, mask)).pow(2).mean(-1) * mask
        bound = -squared.sum(1)
        return bound, bound

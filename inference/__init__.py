"""Shared inference engines: resampling, particle filtering, objectives, training, calibration."""

from .backtest import Backtest, backtest
from .evaluation import Evaluation, EvaluationOptions, evaluate, one_step_mse
from .forecast import forecast
from .particle_filter import GRADIENT_MODES, FilterFailed, FilterResult, ParticleFilter, ParticleModel, Step
from .pointwise import PosteriorPredictive, posterior_predictive
from .protocol import (
    CAPABILITIES,
    ESTIMATORS,
    UNCONDITION,
    Generation,
    OneStepPredictive,
    Score,
    SequenceModel,
    Unsupported,
    particle_forecast,
    particle_predictive,
)
from .resampling import SCHEMES, effective_sample_size, gather_particles, normalize, resample, resample_adaptive
from .state_space import SEQUENCE_PLATE, MarkovStateSpace

__all__ = [
    "backtest",
    "Backtest",
    "evaluate",
    "Evaluation",
    "EvaluationOptions",
    "one_step_mse",
    "CAPABILITIES",
    "ESTIMATORS",
    "UNCONDITION",
    "Generation",
    "OneStepPredictive",
    "Score",
    "SequenceModel",
    "Unsupported",
    "particle_forecast",
    "particle_predictive",
    "forecast",
    "PosteriorPredictive",
    "posterior_predictive",
    "GRADIENT_MODES",
    "FilterResult",
    "FilterFailed",
    "ParticleFilter",
    "ParticleModel",
    "Step",
    "SCHEMES",
    "effective_sample_size",
    "gather_particles",
    "normalize",
    "resample",
    "resample_adaptive",
    "SEQUENCE_PLATE",
    "MarkovStateSpace",
]

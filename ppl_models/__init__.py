"""The architectures of the collection: each a Pyro model and guide built from modules
that return distributions, usable by the shared engines of :mod:`inference`."""

from .lgssm import KalmanResult, LinearGaussianSSM, TwoStageKalmanFilter
from .predictors import OneStepPredictor, RecurrentPredictor
from .psrnn import PSRNN
from .rnn_baseline import GRUBaseline
from .srnn import SRNN
from .vrnn import VRNN

__all__ = ["LinearGaussianSSM", "KalmanResult", "TwoStageKalmanFilter", "SRNN", "VRNN", "GRUBaseline", "PSRNN",
           "OneStepPredictor", "RecurrentPredictor"]

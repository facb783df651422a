"""The architectures of the collection: each a Pyro model and guide built from modules
that return distributions, usable by the shared engines of :mod:`inference`."""

from .lgssm import KalmanResult, LinearGaussianSSM
from .rnn_baseline import GRUBaseline
from .srnn import SRNN

__all__ = ["LinearGaussianSSM", "KalmanResult", "SRNN", "GRUBaseline"]

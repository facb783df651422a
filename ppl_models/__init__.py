"""The architectures of the collection: each a Pyro model and guide built from modules
that return distributions, usable by the shared engines of :mod:`ppl_models.inference`.

Every class is an :class:`ppl_models.inference.protocol.SequenceModel`: it declares its capabilities
(Pyro programs, exact likelihood, latent guide, particle form, one-step predictive,
generation, forecasts) and states why it lacks the others. :data:`COLLECTION` lists them all;
:func:`catalog` gives each its one-line description (``ppl-models list`` prints it).
"""

from ppl_models.inference.protocol import Generation, OneStepPredictive, SequenceModel

from .lgssm import KalmanResult, LinearGaussianSSM
from .mc_dropout import MCDropoutLSTM
from .pf_rnn import PFGRU, PFLSTM, PFRNNPredictor, PFRNNProgram
from .predictors import OneStepPredictor, RecurrentPredictor
from .psrnn import PSRNN
from .rnn_baseline import GRUBaseline
from .smc_transformer import SMCTransformer
from .srnn import SRNN
from .transformer_forecaster import TransformerForecaster
from .two_stage_kalman import TwoStageKalmanFilter
from .vrnn import VRNN

#: every model class of the collection, in the order of the papers
COLLECTION = (
    SRNN,
    VRNN,
    GRUBaseline,
    SMCTransformer,
    MCDropoutLSTM,
    TransformerForecaster,
    PFLSTM,
    PFGRU,
    PFRNNPredictor,
    PFRNNProgram,
    PSRNN,
    RecurrentPredictor,
    LinearGaussianSSM,
    TwoStageKalmanFilter,
)


def catalog() -> dict[str, str]:
    """``{class name: one-line description}`` of every class in :data:`COLLECTION`."""
    return {cls.__name__: cls.description for cls in COLLECTION}


__all__ = [cls.__name__ for cls in COLLECTION] + [
    "COLLECTION",
    "catalog",
    "SequenceModel",
    "OneStepPredictive",
    "Generation",
    "KalmanResult",
    "OneStepPredictor",
]

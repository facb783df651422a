"""The architectures of the collection: each a Pyro model and guide built from modules
that return distributions, usable by the shared engines of :mod:`ppl_models.inference`.

Every class is an :class:`ppl_models.inference.protocol.SequenceModel`: it declares its capabilities
(Pyro programs, exact likelihood, latent guide, particle form, one-step predictive,
generation, forecasts) and states why it lacks the others. :data:`COLLECTION` lists them all;
:func:`catalog` gives each its one-line description (``ppl-models list`` prints it).
"""

from pathlib import Path as _Path

# The installed package holds inference/ and experiments/ as its subpackages. In a source checkout they are folders
# beside this one (pyproject.toml maps them with package-dir), so the checkout's root joins the package's search
# path: ``ppl_models.inference`` is then the checkout's inference/ whether it is installed, editable or only on
# sys.path (``python -m ppl_models.experiments...`` from the checkout's root).
_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "inference" / "__init__.py").is_file():
    __path__.append(str(_checkout))

from ppl_models.inference.protocol import Generation, OneStepPredictive, SequenceModel

from .lgssm import KalmanResult, LinearGaussianSSM, TwoStageKalmanFilter
from .mc_dropout import MCDropoutLSTM
from .pf_rnn import PFGRU, PFLSTM, PFRNNPredictor, PFRNNProgram
from .predictors import OneStepPredictor, RecurrentPredictor
from .psrnn import PSRNN
from .rnn_baseline import GRUBaseline
from .smc_transformer import SMCTransformer
from .srnn import SRNN
from .transformer_forecaster import TransformerForecaster
from .vrnn import VRNN

#: every model class of the collection, in the order of the papers
COLLECTION = (SRNN, VRNN, GRUBaseline, SMCTransformer, MCDropoutLSTM, TransformerForecaster, PFLSTM, PFGRU,
              PFRNNPredictor, PFRNNProgram, PSRNN, RecurrentPredictor, LinearGaussianSSM, TwoStageKalmanFilter)


def catalog() -> dict[str, str]:
    """``{class name: one-line description}`` of every class in :data:`COLLECTION`."""
    return {cls.__name__: cls.description for cls in COLLECTION}


__all__ = [cls.__name__ for cls in COLLECTION] + ["COLLECTION", "catalog", "SequenceModel", "OneStepPredictive",
                                                  "Generation", "KalmanResult", "OneStepPredictor"]

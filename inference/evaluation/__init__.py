"""One call to judge a trained sequence model on held-out data: :func:`evaluate`.

It computes every log-likelihood estimate the model declares it can give (``exact``, ``elbo``,
``iwae-K``, ``smc-K``; :data:`ppl_models.inference.protocol.ESTIMATORS`), per time step and per sequence,
in nats; the calibration of its one-step-ahead predictive (coverage, CRPS, PIT, NLPD for
real-valued data; Brier score and reliability for binary data); PSIS-LOO / WAIC over the guide's
draws; and, where the data's source is known, each estimate's gap to the exact log-likelihood
under the true parameters. How it judges is an :class:`EvaluationOptions` (or its fields as keywords), what it
judges a :class:`HeldOutData` (or its fields as arguments). The
:class:`Evaluation` it returns holds the figures (:attr:`Evaluation.metrics`, the ``metrics.json`` of a run
folder), the draws behind them (padded like the data, or, for data of skewed lengths, kept at the scored steps only)
and :meth:`~Evaluation.to_inference_data` for ArviZ; the command line prints them as a table
(:func:`ppl_models.experiments.tables.format_table`).

Modules: :mod:`.options` (:class:`EvaluationOptions`), :mod:`.held_out` (:class:`HeldOutData`, the data judged),
:mod:`.judge` (:func:`evaluate`, :func:`evaluate_held_out`), :mod:`.batch_estimates` (the pass over the data in
batches), :mod:`.evaluation_result` (:class:`Evaluation`), :mod:`.figures` (:func:`one_step_mse`,
:func:`gap_to_truth`, :func:`binary_calibration`), :mod:`.memory` (:func:`evaluation_memory`) and
:mod:`.data_layout` (the data in batches, and in its own units). Every public name is
importable from ``ppl_models.inference.evaluation``.
"""

from .evaluation_result import Evaluation
from .figures import EXCESS_STANDARD_ERRORS, binary_calibration, gap_to_truth, one_step_mse
from .held_out import HeldOutData
from .judge import evaluate, evaluate_held_out
from .memory import evaluation_memory
from .options import EVALUATION_PARTICLES, EvaluationOptions

__all__ = [
    "evaluate",
    "evaluate_held_out",
    "HeldOutData",
    "Evaluation",
    "EvaluationOptions",
    "EVALUATION_PARTICLES",
    "evaluation_memory",
    "one_step_mse",
    "gap_to_truth",
    "binary_calibration",
    "EXCESS_STANDARD_ERRORS",
]

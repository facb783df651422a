"""The registry of the papers' headline claims and how each is tested here (``ppl-models reproduce``).

A :class:`Claim` names the paper's figure and metric, the registered experiments or suites that test it
(:data:`ppl_models.experiments.registry.EXPERIMENTS`, :data:`~ppl_models.experiments.suites.SUITES`), the seeds,
the results files under ``docs/results/`` holding our figures, the reader that turns them into a :class:`Reading`
(mean, sd and each compared model's budget) and the :class:`Rule` that turns that into a verdict. A claim not run
says why (``not_run``); one whose figures have no file with their command and seeds is marked ``evidence
incomplete``.

One topic per module:

* :mod:`~ppl_models.experiments.claims.readings`: :class:`Stat`, :class:`Budget`, :class:`Reading`;
* :mod:`~ppl_models.experiments.claims.rules`: the verdict rules :class:`Within`, :class:`Beats`, :class:`Matches`;
* :mod:`.evidence_readers`: results files into a :class:`Reading`; the claim's reproduction
  written by ``ppl-models reproduce`` (``docs/results/reproduce_<claim>.json``, ``"format": "reproduce/1"``: per
  label a list of per-seed runs, read by :func:`seed_runs`), once it exists, is the claim's evidence in place of
  the earlier studies' files;
* :mod:`~ppl_models.experiments.claims.claim`: :class:`Claim`;
* :mod:`~ppl_models.experiments.claims.table`: the claims themselves, :data:`CLAIMS`, and the papers,
  :data:`PAPERS`.
"""

from .claim import Claim
from .evidence_readers import REPRODUCE_FORMAT, seed_runs
from .readings import Budget, Reading, Stat
from .rules import Beats, Matches, Rule, Within
from .table import CLAIMS, PAPERS

__all__ = [
    "Stat",
    "Budget",
    "Reading",
    "Rule",
    "Within",
    "Beats",
    "Matches",
    "Claim",
    "CLAIMS",
    "PAPERS",
    "REPRODUCE_FORMAT",
    "seed_runs",
]

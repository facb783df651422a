"""One headline claim of a paper and how it is tested here (:class:`Claim`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .evidence_readers import REPRODUCE_FORMAT, seed_runs
from .readings import Reading
from .rules import Rule

__all__ = ["Claim"]


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One headline claim of a paper and how it is tested here (built with keyword arguments only).

    Attributes:
        paper: key of :data:`ppl_models.experiments.claims.table.PAPERS`.
        claim: the claim in one sentence.
        paper_figure: the paper's figure, with its metric definition.
        metric: our metric, and how it differs from the paper's where it does.
        tests: registered experiment or suite names that test it.
        seeds: the seeds the claim asks for.
        rule: decides the verdict.
        members: what ``reproduce`` trains for each seed: ``(label, experiment, overrides)``, labels as in the file.
        results: earlier studies' results files under ``docs/results/`` (``()``: none).
        reader: reads the data of those files, one argument per file in the order of ``results``, into a
            :class:`Reading` (:mod:`ppl_models.experiments.claims.evidence_readers`).
        metric_key: the per-run key :func:`~ppl_models.experiments.claims.evidence_readers.seed_runs` reads from the
            claim's reproduction.
        not_run: why the claim is not run, with its cost (empty when it is run).
        incomplete: why there is no evidence yet, shown until the claim has results (empty when it has).
        manual: how to rerun a claim whose figure ``reproduce`` cannot make (e.g. it needs the authors' code).
        study: a module of :mod:`ppl_models.experiments.studies` that makes the claim's figure (e.g. training, then
            ``ppl-models forecast``) and writes its first results file: ``reproduce`` runs its ``main`` with
            ``--seeds N --run-dir DIR --out FILE`` (empty: the claim's members are trained instead).
        rerun_cost: what settling an undecided verdict would cost on these machines (shown beside it).
    """

    paper: str
    claim: str
    paper_figure: str
    metric: str
    tests: tuple[str, ...]
    seeds: tuple[int, ...]
    rule: Rule
    members: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    results: tuple[str, ...] = ()
    reader: Callable[..., Reading] | None = None
    metric_key: str = "test_mse"
    not_run: str = ""
    incomplete: str = ""
    manual: str = ""
    study: str = ""
    rerun_cost: str = ""

    def read(self, files: dict[str, dict]) -> Reading:
        """Our figures from the loaded files ``{name: data}``: the claim's reproduction if given, else its results."""
        reproduction = [data for data in files.values() if data.get("format") == REPRODUCE_FORMAT]
        if reproduction:
            return seed_runs(self.metric_key)(reproduction[0])
        return self.reader(*(files[name] for name in self.results))

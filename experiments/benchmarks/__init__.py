"""Benchmarks of the shared engines (run as modules, e.g. ``python -m
ppl_models.experiments.benchmarks.bootstrap_filter``). They are not part of the product: the command line, the
runner, the claims and the reproductions never import them; they take the commit and the command they record from
:mod:`ppl_models.experiments.claims.provenance`."""

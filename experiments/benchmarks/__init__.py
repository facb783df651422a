"""Benchmarks of the shared engines (run as modules, e.g. ``python -m
ppl_models.experiments.benchmarks.bootstrap_filter``)."""

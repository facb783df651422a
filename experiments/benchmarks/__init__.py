"""Benchmarks of the shared engines (run as modules, e.g. ``python -m experiments.benchmarks.bootstrap_filter``)."""

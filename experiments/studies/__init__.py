"""Studies: one-off analyses, each behind a docs page.

A study reads finished runs (checkpoints, logs, records) and writes the figures or JSON a docs page quotes; run one
as ``python -m ppl_models.experiments.studies.NAME``. Studies are not part of the plumbing: the CLI, runner and tasks
never import them; ``ppl-models reproduce`` runs a claim's study by its name (``Claim.study``).
"""

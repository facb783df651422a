"""The memory an evaluation's sample counts make it hold, estimated before anything is drawn
(:func:`evaluation_memory`, for :func:`~ppl_models.inference.validation.check_memory`)."""

from __future__ import annotations

import torch

from ..training import length_batches
from .data_layout import packed_layout
from .options import EvaluationOptions

__all__ = ["evaluation_memory"]


def evaluation_memory(
    model,
    x: torch.Tensor,
    options: EvaluationOptions,
    *,
    binary: bool,
    mask: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
) -> dict[str, tuple[int, int, str]]:
    """Lower bounds of the memory that the sample counts of ``options`` make an evaluation hold on ``x [N, T, D]``
    (``mask [N, T]``, default every step valid; ``scored [N, T]``, the steps judged, default ``mask``).

    Returns ``{setting: (value, bytes, how)}`` (for :func:`~ppl_models.inference.validation.check_memory`) for
    each setting that applies to ``model`` on binary (or real-valued) data, the bytes counting only the tensors
    that grow with the setting, of ``x``'s element size ``e`` (``b``: sequences a batch):

    * ``predictive_samples`` ``S``: the one-step draws, gathered then put in order, ``2 S N T D e``; where the
      lengths are skewed (:func:`~ppl_models.inference.evaluation.data_layout.packed_layout`), those of the largest
      batch (``B`` steps: its rows times its longest) and, gathered then put in order, those of the ``n`` scored
      steps, ``S (B + 2 n) D e``;
    * ``posterior_draws`` ``S``: replicates and pointwise log-likelihoods, ``2 S N T D e``;
    * ``num_particles`` ``K`` (``smc``): one step's particle predictions of a batch, ``K b D e``;
    * ``iwae_particles`` ``K`` (``iwae``): one log-density per step of ``min(K, particle_chunk)``
      particles, ``K b T e``.
    """
    n, steps, features = (int(size) for size in x.shape)
    size, batch = x.element_size(), min(options.batch_size, n)
    plan = options.plan(model, binary=binary)
    slice_ = f"{steps} steps x {features} features x {size} bytes"
    needs = {}
    if plan.samples:
        needs["predictive_samples"] = _draws_memory(plan.samples, x, mask, scored, options.batch_size)
    if plan.posterior:
        draws = options.posterior_draws
        needs["posterior_draws"] = (
            draws,
            2 * draws * n * steps * features * size,
            f"{draws} draws x 2 (replicates, log-likelihoods) x {n} test sequences x {slice_}",
        )
    if "smc" in plan.wanted:
        k = options.num_particles
        needs["num_particles"] = (
            k,
            k * batch * features * size,
            f"{k} particles x {batch} sequences x {features} features x {size} bytes",
        )
    if "iwae" in plan.wanted:
        chunk = min(options.iwae_particles, options.particle_chunk or options.iwae_particles)
        needs["iwae_particles"] = (
            options.iwae_particles,
            chunk * batch * steps * size,
            f"{chunk} particles a pass x {batch} sequences x {steps} steps x {size} bytes",
        )
    return needs


def _draws_memory(
    draws: int, x: torch.Tensor, mask: torch.Tensor | None, scored: torch.Tensor | None, batch_size: int
) -> tuple[int, int, str]:
    """``predictive_samples``' entry of :func:`evaluation_memory` (``draws`` per step): padded like ``x [N, T, D]``,
    or packed to the ``scored`` steps ``[N, T]`` where ``mask``'s lengths are skewed (``batch_size`` rows a batch at
    most)."""
    n, steps, features = (int(size) for size in x.shape)
    size = x.element_size()
    slice_ = f"{features} features x {size} bytes"
    if mask is None or not packed_layout(mask):
        return (
            draws,
            2 * draws * n * steps * features * size,
            (f"{draws} draws x 2 copies x {n} test sequences x {steps} steps x {slice_}"),
        )
    lengths = mask.sum(1)
    largest = max(len(rows) * int(lengths[rows].max()) for rows in length_batches(mask, batch_size))
    kept = int((mask if scored is None else scored).sum())
    how = f"{draws} draws x ({largest} steps of the largest batch + 2 copies x {kept} scored steps) x {slice_}"
    return draws, draws * (largest + 2 * kept) * features * size, how

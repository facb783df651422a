"""The memory an evaluation's sample counts make it hold, estimated before anything is drawn
(:func:`evaluation_memory`, for :func:`~ppl_models.inference.validation.check_memory`)."""

from __future__ import annotations

import torch

from .options import EvaluationOptions

__all__ = ["evaluation_memory"]


def evaluation_memory(model, x: torch.Tensor, options: EvaluationOptions, *,
                      binary: bool) -> dict[str, tuple[int, int, str]]:  # fmt: skip
    """Lower bounds of the memory that the sample counts of ``options`` make an evaluation hold on ``x [N, T, D]``.

    Returns ``{setting: (value, bytes, how)}`` (for :func:`~ppl_models.inference.validation.check_memory`) for
    each setting that applies to ``model`` on binary (or real-valued) data, the bytes counting only the tensors
    that grow with the setting, of ``x``'s element size ``e`` (``b``: sequences a batch):

    * ``predictive_samples`` ``S``: the one-step draws, gathered then put in order, ``2 S N T D e``;
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
        draws = plan.samples
        needs["predictive_samples"] = (draws, 2 * draws * n * steps * features * size,
                                       f"{draws} draws x 2 copies x {n} test sequences x {slice_}")
    if plan.posterior:
        draws = options.posterior_draws
        needs["posterior_draws"] = (draws, 2 * draws * n * steps * features * size,
                                    f"{draws} draws x 2 (replicates, log-likelihoods) x {n} test sequences "
                                    f"x {slice_}")  # fmt: skip
    if "smc" in plan.wanted:
        k = options.num_particles
        needs["num_particles"] = (k, k * batch * features * size,
                                  f"{k} particles x {batch} sequences x {features} features x {size} bytes")
    if "iwae" in plan.wanted:
        chunk = min(options.iwae_particles, options.particle_chunk or options.iwae_particles)
        needs["iwae_particles"] = (options.iwae_particles, chunk * batch * steps * size,
                                   f"{chunk} particles a pass x {batch} sequences x {steps} steps x {size} bytes")
    return needs

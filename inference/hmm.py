"""The forward algorithm of a discrete hidden Markov model: exact ``log p(x)`` of a known source.

With ``N`` hidden states, an initial distribution ``pi [N]``, a transition matrix
``P [N, N]`` (row ``i``: from state ``i``) and per-step emission log-densities
``log p(x_t | s_t = j)``, the predictive belief ``b_t(j) = p(s_t = j | x_{<t})`` obeys

    b_1 = pi,   log p(x_t | x_<t) = logsumexp_j [log b_t(j) + log p(x_t | j)],
    b_{t+1} = normalise(b_t * p(x_t | .)) @ P,

and ``log p(x) = sum_t log p(x_t | x_<t)``. Known-truth sources (:mod:`ppl_models.experiments.tasks.ring_hmm`,
:mod:`ppl_models.experiments.tasks.hmm_rolls`) score their data with it.
"""

from __future__ import annotations

import torch

__all__ = ["forward_filter"]


def forward_filter(
    log_emission: torch.Tensor, initial: torch.Tensor, transition: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-step ``log p(x_t | x_<t) [B, T]`` (0 at padding) and predictive beliefs ``p(s_t | x_<t) [B, T, N]``.

    Args:
        log_emission: ``[B, T, N]`` log-densities ``log p(x_t | s_t = j)``.
        initial: ``[N]`` distribution of the first state.
        transition: ``[N, N]`` row-stochastic matrix.
        mask: ``[B, T]`` bool, valid steps first; a padded step leaves the belief as it was.
    """
    belief = initial.to(log_emission).expand(log_emission.shape[0], -1)
    transition = transition.to(log_emission)
    log_steps, beliefs = [], []
    for t in range(log_emission.shape[1]):
        beliefs.append(belief)
        joint = belief.log() + log_emission[:, t]
        log_step = joint.logsumexp(-1)
        posterior = (joint - log_step.unsqueeze(-1)).exp()
        belief = torch.where(mask[:, t, None], posterior @ transition, belief)
        log_steps.append(torch.where(mask[:, t], log_step, torch.zeros_like(log_step)))
    return torch.stack(log_steps, 1), torch.stack(beliefs, 1)

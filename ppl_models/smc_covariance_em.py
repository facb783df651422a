"""The SMC Transformer's noise covariances, fitted by EM (Martin et al. 2020, appendix A) rather than by gradient:
:class:`CovarianceEM`, a base of :class:`~ppl_models.smc_transformer.SMCTransformer`, with the EM step from a filter
run (:meth:`CovarianceEM.em_update`), which :meth:`~ppl_models.smc_transformer.SMCTransformer.fine_tuned` also
runs per sequence."""

from __future__ import annotations

import torch

from ppl_models.inference.filter_result import FilterResult

__all__ = ["CovarianceEM", "LATENT_SITES", "MIN_OBS_VARIANCE"]

#: the latent sample sites of one step, in the order they are drawn
LATENT_SITES = ("q", "k", "v", "z")
#: floor of the EM estimates of Σ_obs and Σ_obs,1 (a series with no residual keeps a proper density)
MIN_OBS_VARIANCE = 1e-6


class CovarianceEM:
    """The EM fit of the noise covariances: a base of the SMC Transformer, which sets ``noise_sizes``, ``emission``,
    ``covariance``, ``em_exponent`` and the buffers ``var_{name}`` and ``em_updates``."""

    @torch.no_grad()
    def em_update(self, result: FilterResult, sites=None) -> None:
        """One EM step on the noise covariances from a filter run over a batch.

        For each site ``n`` (``q, k, v, z`` and, Gaussian emission, ``x``):
        ``Σ^p = mean_b (1 / T_b) sum_m w_T^{m,b} sum_t (n_t^m - mean_t^m)^2`` along each final
        particle's genealogy (diagonal; averaged over dimensions when scalar), then
        ``Σ ← (1 - η_p) Σ + η_p Σ^p`` with ``η_p = p^-em_exponent``. For ``Σ_obs`` the sum runs
        over ``t >= 2`` (divided by ``T_b - 1``, over sequences of two steps or more) and
        ``Σ_obs,1`` gets the first step's residuals alone. Per-sequence covariances (a copy made
        by :meth:`fine_tuned`, buffers ``[B, size]``) take each sequence's own estimate instead
        of the batch mean. ``sites`` limits the update to some names of :meth:`variances`.
        """
        if not isinstance(result, FilterResult) or "sq_q" not in result.state:
            raise ValueError("result must be the FilterResult of a ParticleFilter run on this model")
        names = self._check_sites(sites)
        weights = result.log_weights.exp().unsqueeze(-1)
        steps = result.num_steps.to(weights).unsqueeze(-1)  # [B, 1]
        later = steps >= 2
        divisors = {name: steps.clamp(min=1) for name in LATENT_SITES}
        divisors.update(x=(steps - 1).clamp(min=1), x_first=torch.ones_like(steps))
        self.em_updates += 1
        eta = float(self.em_updates) ** -self.em_exponent
        for name in names:
            if name == "x" and not later.any():
                continue
            old = getattr(self, f"var_{name}")
            per_sequence = (weights * result.state[f"sq_{name}"]).sum(0) / divisors[name]  # [B, size]
            if self.covariance == "scalar":
                per_sequence = per_sequence.mean(-1, keepdim=True)
            if old.dim() == 2:  # per-sequence covariances
                estimate = torch.where(later, per_sequence, old) if name == "x" else per_sequence
            elif name == "x":
                estimate = (per_sequence * later).sum(0) / later.sum()
            else:
                estimate = per_sequence.mean(0)
            if name in ("x", "x_first"):  # the observation density needs a positive variance
                estimate = estimate.clamp(min=MIN_OBS_VARIANCE)
            # a new tensor, not an in-place write: the batch's autograd graph still holds the old value
            setattr(self, f"var_{name}", (1 - eta) * old + eta * estimate)

    def _check_sites(self, sites) -> tuple[str, ...]:
        known = tuple(self.variances())
        if sites is None:
            return known
        sites = tuple(sites) if not isinstance(sites, str) else (sites,)
        if not sites or any(name not in known for name in sites):
            raise ValueError(f"sites must name some of {known}, got {sites!r}")
        return sites

    def variances(self) -> dict[str, torch.Tensor]:
        """The current covariances (diagonals) by site name, ``x_first`` for ``Σ_obs,1``."""
        names = [*self.noise_sizes, *(["x_first"] if self.emission == "gaussian" else [])]
        return {name: getattr(self, f"var_{name}") for name in names}

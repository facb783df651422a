"""Scores of a per-step regression predictor on :class:`~ppl_models.experiments.tasks.hourly_windows.RegressionData`.

The point prediction is ``f_out`` of the mean particle, which equals the mean of the particle mixture because
``f_out`` is linear. The predictive distribution is the weighted mixture ``sum_i w_t^i N(f_out(h_t^i), sigma^2)``
with the learned ``sigma`` (``learn_scale=True``); for the LSTM / GRU baselines it is one Gaussian. RMSE, MAE, CRPS,
interval widths and NLPD are reported in the target's original units (and RMSE, CRPS also normalised), with coverage
and the PIT's KS distance from :func:`ppl_models.inference.calibration.calibration_summary` on samples of that
mixture, next to two reference predictors: persistence (the last observed target) and the training mean.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ppl_models.inference.calibration import calibration_summary, pit, plot_pit_ecdf, plot_predictive_bands
from ppl_models.inference.validation import check_choice, check_positive_int

from ..data import SPLITS
from .hourly_windows import RegressionData

__all__ = ["predictive_samples", "evaluate_regression"]


def predictive_samples(predictor, belief, num_samples: int, generator: torch.Generator | None = None):
    """Samples of the particle mixture ``sum_i w_t^i N(f_out(h_t^i), sigma^2)`` and its log density.

    Args:
        predictor: a regression :class:`~ppl_models.pf_rnn.PFRNNPredictor` (one output).
        belief: its :class:`~ppl_models.pf_rnn.ParticleBelief` for a batch (``particles [T, K, B, H]``,
            ``log_weights [T, K, B]``).
        num_samples: ``S``.
        generator: source of the component and noise draws.

    Returns:
        ``(samples [S, B, T, 1], log_density)`` where ``log_density(y [B, T, 1]) -> [B, T]`` is the
        exact log density of the mixture (normalised units).
    """
    check_positive_int(num_samples, name="num_samples")
    loc = predictor.head(belief.particles)  # [T, K, B, 1]
    if loc.shape[-1] != 1:
        raise ValueError(f"predictor must have one output, got {loc.shape[-1]}")
    scale = predictor.log_scale.exp()
    samples = predictor.belief_predictive(belief, num_samples, generator).samples

    def log_density(y: torch.Tensor) -> torch.Tensor:
        component = torch.distributions.Normal(loc, scale).log_prob(y.transpose(0, 1).unsqueeze(1))
        return torch.logsumexp(belief.log_weights.unsqueeze(-1) + component, dim=1).squeeze(-1).T

    return samples, log_density


@torch.no_grad()
def evaluate_regression(
    predictor,
    data: RegressionData,
    split: str = "test",
    *,
    device="cpu",
    seed: int = 0,
    num_samples: int = 200,
    batch_size: int = 256,
    plots_dir: str | Path | None = None,
) -> dict:
    """Metrics of a regression predictor on one split of ``data``, over its observed target hours.

    Keys: ``rmse``, ``rmse_normalized``, ``mae``, ``crps``, ``crps_normalized``, ``nlpd`` (nats per
    hour, density in original units), ``coverage_<level>``, ``width_<level>``, ``pit_ks``,
    ``persistence_rmse`` and ``mean_rmse`` (the two reference predictors), ``sigma`` (the learned
    Gaussian scale, original units), ``mean_ess`` (mean effective sample size of the particle
    weights), ``particle_sd`` (mean weighted standard deviation of the particles' predictions
    ``f_out(h_t^i)``, original units: the spread the particle set adds to ``sigma``; 0 for the
    baselines), ``target``, ``units``, ``<split>_windows``, ``<split>_hours`` (observed hours
    scored). Errors, CRPS and widths are in ``units``. With ``plots_dir``, writes
    ``pit_ecdf.png`` and ``predictive_bands.png`` (the scored hours of the first 7 windows).
    """
    split = check_choice(split, SPLITS, name="split")
    check_positive_int(num_samples, name="num_samples")
    check_positive_int(batch_size, name="batch_size")
    predictor.eval().to(device)
    x, _, y = data.splits[split]
    generator = torch.Generator(device=device).manual_seed(seed)
    means, samples, log_densities, spreads, ess = _predict_in_batches(
        predictor, x, y, num_samples, batch_size, device, generator
    )
    scored = ~torch.isnan(y[..., 0])  # [N, T]
    # pooled metrics: the scored hours as one sequence [1, M, 1], in time order
    observed = data.to_original(y[scored]).view(1, -1, 1)
    predicted = data.to_original(means[scored]).view(1, -1, 1)
    predictive = data.to_original(samples[:, scored]).view(num_samples, 1, -1, 1)
    log_density = log_densities[scored].view(1, -1) - math.log(data.target_std)
    persistence = torch.as_tensor(data.last_observed[split], dtype=y.dtype)[scored]
    persistence = torch.where(torch.isnan(persistence), torch.full_like(persistence, data.target_mean), persistence)
    error = predicted - observed
    summary = calibration_summary(
        predictive, observed, log_pred_density=log_density, generator=torch.Generator().manual_seed(seed)
    )
    rmse = error.square().mean().sqrt().item()
    metrics = {
        "rmse": rmse,
        "rmse_normalized": rmse / data.target_std,
        "mae": error.abs().mean().item(),
        **summary,
        "crps_normalized": summary["crps"] / data.target_std,
        "persistence_rmse": (persistence - observed.flatten()).square().mean().sqrt().item(),
        "mean_rmse": (observed - data.target_mean).square().mean().sqrt().item(),
        "sigma": predictor.log_scale.exp().item() * data.target_std,
        "mean_ess": ess / scored.numel(),
        "particle_sd": spreads[scored].mean().item() * data.target_std,
        "target": data.target,
        "units": data.units,
        "target_std": data.target_std,
        "predictive_samples": num_samples,
        f"{split}_windows": len(x),
        f"{split}_hours": int(scored.sum()),
    }
    if plots_dir is not None:
        _plot_scored_hours(predictive, observed, int(scored[:7].sum()), Path(plots_dir), seed)
    return metrics


def _predict_in_batches(predictor, x, y, num_samples: int, batch_size: int, device, generator: torch.Generator):
    """The predictor on ``x [N, T, D]`` in batches: ``(means [N, T, 1], samples [S, N, T, 1], log_density [N, T],
    particle_sd [N, T], ess)``, normalised units, on the CPU; ``log_density`` of ``y [N, T, 1]`` (NaN read as 0),
    ``ess`` the effective sample size summed over every step of every window."""
    means, samples, log_densities, spreads, ess = [], [], [], [], 0.0
    for start in range(0, len(x), batch_size):
        xb, yb = x[start : start + batch_size].to(device), y[start : start + batch_size].to(device)
        belief = predictor.belief(xb, generator=generator)
        means.append(predictor.head(belief.mean).cpu())
        draws, log_density = predictive_samples(predictor, belief, num_samples, generator)
        samples.append(draws.cpu())
        log_densities.append(log_density(torch.nan_to_num(yb)).cpu())
        ess += float((1.0 / belief.log_weights.exp().square().sum(1)).sum())
        weights, loc = belief.log_weights.exp(), predictor.head(belief.particles)[..., 0]  # [T, K, B]
        centre = (weights * loc).sum(1, keepdim=True)
        spreads.append((weights * (loc - centre).square()).sum(1).sqrt().T.cpu())  # [B, T]
    return torch.cat(means), torch.cat(samples, 1), torch.cat(log_densities), torch.cat(spreads), ess


def _plot_scored_hours(predictive, observed, shown: int, plots_dir: Path, seed: int) -> None:
    """``pit_ecdf.png`` of the PIT of ``observed [1, M, 1]`` under ``predictive [S, 1, M, 1]`` and
    ``predictive_bands.png`` of its first ``shown`` hours, in ``plots_dir``."""
    pit_values = pit(predictive, observed, generator=torch.Generator().manual_seed(seed))
    plot_pit_ecdf(pit_values, plots_dir / "pit_ecdf.png")
    plot_predictive_bands(predictive[:, :, :shown], observed[:, :shown], path=plots_dir / "predictive_bands.png")

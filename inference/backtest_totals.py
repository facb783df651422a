"""The figures of a backtest per step ahead, summed over its origins' forecasts: :class:`Totals` (real-valued data:
CRPS, interval coverage, MSE, MASE) and :class:`BinaryTotals` (0/1 data: the figures of a probability)."""

from __future__ import annotations

import torch

from .calibration import coverage, crps
from .evaluation.figures import binary_calibration

__all__ = ["LEVELS", "Totals", "BinaryTotals"]

#: the levels of the central intervals whose coverage a backtest reports
LEVELS = (0.5, 0.8, 0.95)


class Totals:
    """Sums per step ahead over the origins' forecasts, and the figures they give."""

    def __init__(self, horizon: int):
        self.targets, self.crps, self.squared, self.mase, self.mase_targets = ([0.0] * horizon for _ in range(5))
        self.covered = {level: [0.0] * horizon for level in LEVELS}
        self.mase_left_out = 0

    def add(self, draws, target, valid, scale) -> None:
        """One origin's ``draws [S, B, H, D]``, ``target [B, H, D]``, ``valid [B, H]`` and MASE ``scale [B, D]``."""
        counts = valid.sum(0)
        step_crps = crps(draws, target, valid).nan_to_num()
        squared = (draws.mean(0) - target).pow(2).mean(-1)
        usable = torch.isfinite(scale) & (scale > 0)
        self.mase_left_out += int((~usable).sum())
        ratio = ((_median(draws) - target).abs() / scale[:, None]).where(usable[:, None] & valid[..., None], 0)
        mase_counts = (usable[:, None] & valid[..., None]).sum((0, 2))
        for h in torch.nonzero(counts).flatten().tolist():
            count = int(counts[h])
            self.targets[h] += count
            self.crps[h] += float(step_crps[:, h].sum())
            self.squared[h] += float(squared[:, h][valid[:, h]].sum())
            self.mase[h] += float(ratio[:, h].sum())
            self.mase_targets[h] += int(mase_counts[h])
            rates = coverage(draws[:, :, h : h + 1], target[:, h : h + 1], LEVELS, valid[:, h : h + 1])
            for level in LEVELS:
                self.covered[level][h] += rates[level] * count

    def per_horizon(self) -> dict[str, list]:
        """The figures per step ahead (``None`` where nothing was judged)."""
        figures = {
            "h": list(range(1, len(self.targets) + 1)),
            "targets": [int(n) for n in self.targets],
            "crps": _means(self.crps, self.targets),
        }
        figures.update(
            {f"coverage_{round(100 * level)}": _means(self.covered[level], self.targets) for level in LEVELS}
        )
        figures.update(
            mse=_means(self.squared, self.targets),
            mase=_means(self.mase, self.mase_targets),
            mase_targets=[int(n) for n in self.mase_targets],
        )
        return figures


class BinaryTotals:
    """The probabilities of a 1 and the outcomes per step ahead over the origins' forecasts, and the figures they give
    (:func:`~ppl_models.inference.evaluation.binary_calibration`)."""

    mase_left_out = None

    def __init__(self, horizon: int):
        self.probabilities, self.outcomes = [[] for _ in range(horizon)], [[] for _ in range(horizon)]

    def add(self, draws, target, valid, scale=None) -> None:
        """One origin's 0/1 ``draws [S, B, H, D]``, ``target [B, H, D]`` and ``valid [B, H]``."""
        probability = draws.mean(0)
        for h, (kept, judged) in enumerate(zip(self.probabilities, self.outcomes)):
            kept.append(probability[:, h][valid[:, h]])
            judged.append(target[:, h][valid[:, h]])

    def per_horizon(self) -> dict[str, list]:
        """The figures per step ahead (``None`` where nothing was judged)."""
        names = ("brier", "ece", "mean_probability", "frequency_of_ones")
        figures = {
            "h": list(range(1, len(self.outcomes) + 1)),
            "targets": [sum(len(part) for part in judged) for judged in self.outcomes],
            **{name: [] for name in names},
        }
        for kept, judged, count in zip(self.probabilities, self.outcomes, figures["targets"]):
            found = (
                binary_calibration(
                    torch.cat(kept)[:, None], torch.cat(judged)[:, None], torch.ones(count, 1, dtype=torch.bool)
                )
                if count
                else {}
            )
            for name in names:
                figures[name].append(found.get(name))
        return figures


def _means(totals: list[float], counts: list[float]) -> list[float | None]:
    """``total / count`` per step ahead, ``None`` where the count is 0."""
    return [total / count if count else None for total, count in zip(totals, counts)]


def _median(draws: torch.Tensor) -> torch.Tensor:
    """The draws' median along dim 0 (the mean of the two middle draws for an even count)."""
    ordered = draws.sort(0).values
    return (ordered[(draws.shape[0] - 1) // 2] + ordered[draws.shape[0] // 2]) / 2

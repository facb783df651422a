"""A regime-switching regression task whose exact predictive law is bimodal and known.

A hidden two-state Markov chain ``s_t in {0, 1}`` (uniform start, ``P(s_t = s_{t-1}) = stay``)
emits a noisy input and a target, independent given the state:

* input ``x_t ~ N((2 s_t - 1) input_shift, input_sd^2)`` (weak evidence of the regime);
* target ``y_t ~ N(target_locs[s_t], target_sds[s_t]^2)``.

A predictor sees ``x_{1:t}`` and predicts ``y_t``. The exact predictive law is the two-component
mixture ``p(y_t | x_{1:t}) = sum_s pi_t(s) N(y_t; target_locs[s], target_sds[s]^2)``, with the
filtering posterior ``pi_t = P(s_t | x_{1:t})`` from the forward algorithm
(:meth:`RegimeSwitchingLaw.filter`). Its NLPD and CRPS are the floor no predictor can beat on
average; a Gaussian predictive can at best match the law's first two moments
(:meth:`RegimeSwitchingLaw.moment_matched`), which is the floor of any model with a Gaussian head.
A particle belief can hold both regimes at once, so this task measures whether it does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ppl_models.inference.mixture_scores import gaussian_mixture_crps, gaussian_mixture_log_density
from ppl_models.inference.validation import check_positive_int

from ..data import SPLITS, SupervisedData

__all__ = ["RegimeSwitchingLaw", "RegimeSwitchingData", "regime_switching", "evaluate_regime_switching"]


@dataclass(frozen=True)
class RegimeSwitchingLaw:
    """The source's parameters, its sampler and its exact filter (see the module)."""

    stay: float = 0.95
    input_shift: float = 0.5
    input_sd: float = 1.0
    target_locs: tuple[float, float] = (-2.0, 2.0)
    target_sds: tuple[float, float] = (0.5, 0.5)

    def __post_init__(self):
        if not 0 < self.stay < 1:
            raise ValueError(f"stay must lie in (0, 1), got {self.stay!r}")
        if not self.input_sd > 0 or not all(sd > 0 for sd in self.target_sds):
            raise ValueError(f"input_sd and target_sds must be > 0, got {self.input_sd!r}, {self.target_sds!r}")
        if len(self.target_locs) != 2 or len(self.target_sds) != 2:
            raise ValueError(
                f"target_locs and target_sds must have 2 entries, got {self.target_locs!r}, {self.target_sds!r}"
            )

    def sample(self, sequences: int, steps: int, generator: torch.Generator):
        """``(states [N, T] long, x [N, T], y [N, T])`` in float64."""
        switch = torch.rand(sequences, steps, generator=generator, dtype=torch.float64) > self.stay
        first = torch.rand(sequences, 1, generator=generator, dtype=torch.float64) < 0.5
        flips = torch.cat([first, switch[:, 1:]], dim=1).long()
        states = flips.cumsum(1) % 2
        noise = torch.randn(2, sequences, steps, generator=generator, dtype=torch.float64)
        x = (2 * states - 1) * self.input_shift + self.input_sd * noise[0]
        locs, sds = (
            torch.tensor(self.target_locs, dtype=torch.float64),
            torch.tensor(self.target_sds, dtype=torch.float64),
        )
        y = locs[states] + sds[states] * noise[1]
        return states, x, y

    def filter(self, x: torch.Tensor) -> torch.Tensor:
        """``P(s_t = 1 | x_{1:t})`` for inputs ``x [N, T]``, ``[N, T]`` (forward algorithm, in log-odds)."""
        evidence = 2 * self.input_shift * x / self.input_sd**2  # log N(x; +shift) - log N(x; -shift)
        log_stay, log_switch = x.new_tensor(math.log(self.stay)), x.new_tensor(math.log1p(-self.stay))
        odds, result = torch.zeros_like(x[:, 0]), []
        for t in range(x.shape[1]):
            if t:  # predict: log P(s_t = 1 | x_{<t}) - log P(s_t = 0 | x_{<t})
                odds = torch.logaddexp(log_stay + odds, log_switch) - torch.logaddexp(log_switch + odds, log_stay)
            odds = odds + evidence[:, t]
            result.append(torch.sigmoid(odds))
        return torch.stack(result, 1)

    def mixture(self, posterior: torch.Tensor):
        """The exact predictive ``(loc [..., 2], scale [..., 2], log_weights [..., 2])`` for ``P(s_t = 1)``."""
        like = posterior.unsqueeze(-1)
        loc = like.new_tensor(self.target_locs).expand(like.shape[:-1] + (2,))
        scale = like.new_tensor(self.target_sds).expand(like.shape[:-1] + (2,))
        weights = torch.cat([1 - like, like], dim=-1).clamp(min=1e-300)
        return loc, scale, weights.log()

    def moment_matched(self, posterior: torch.Tensor):
        """The Gaussian with the exact law's mean and variance, as a one-component mixture ``[..., 1]``."""
        loc, scale, log_weights = self.mixture(posterior)
        weights = log_weights.exp()
        mean = (weights * loc).sum(-1, keepdim=True)
        variance = (weights * (scale.square() + loc.square())).sum(-1, keepdim=True) - mean.square()
        return mean, variance.sqrt(), torch.zeros_like(mean)


@dataclass
class RegimeSwitchingData(SupervisedData):
    """The windows of the task: ``splits[split] = (x [N, T, 1], None, y [N, T, 1])`` float32, the
    ``law``, and ``posterior[split] = P(s_t = 1 | x_{1:t})`` ``[N, T]`` float64 (the exact filter)."""

    splits: dict
    law: RegimeSwitchingLaw
    posterior: dict
    description: str = ""


def regime_switching(
    num_train: int = 400,
    num_valid: int = 100,
    num_test: int = 300,
    steps: int = 30,
    stay: float = 0.95,
    input_shift: float = 0.5,
    input_sd: float = 1.0,
    target_gap: float = 2.0,
    target_sds: tuple[float, float] = (0.5, 0.5),
    data_seed: int = 0,
) -> tuple[RegimeSwitchingData, dict]:
    """Sequences of the regime-switching source; targets at ``-target_gap`` (state 0) and ``+target_gap`` (1).

    Returns ``(data, data.splits)``. The splits are independent draws from one generator seeded by
    ``data_seed`` (train, then valid, then test).
    """
    sizes = {
        name: check_positive_int(n, name=f"num_{name}") for name, n in zip(SPLITS, (num_train, num_valid, num_test))
    }
    check_positive_int(steps, name="steps")
    if isinstance(data_seed, bool) or not isinstance(data_seed, int) or data_seed < 0:
        raise ValueError(f"data_seed must be an integer >= 0, got {data_seed!r}")
    if not target_gap > 0:
        raise ValueError(f"target_gap must be > 0, got {target_gap!r}")
    law = RegimeSwitchingLaw(
        stay, input_shift, input_sd, (-float(target_gap), float(target_gap)), tuple(float(sd) for sd in target_sds)
    )
    generator = torch.Generator().manual_seed(data_seed)
    splits, posterior = {}, {}
    for name, size in sizes.items():
        _, x, y = law.sample(size, steps, generator)
        splits[name] = (x.float().unsqueeze(-1), None, y.float().unsqueeze(-1))
        posterior[name] = law.filter(x)
    description = (
        f"regime switching (stay {stay}, input shift {input_shift} / sd {input_sd}, targets "
        f"+-{target_gap} sd {target_sds}), {steps} steps, {num_train}/{num_valid}/{num_test} sequences"
    )
    return RegimeSwitchingData(splits, law, posterior, description), splits


def _scores(y: torch.Tensor, loc, scale, log_weights) -> dict:
    """Mean NLPD, CRPS and the RMSE of the mixture mean over ``y [...]`` (components ``[..., K]``)."""
    mean = (log_weights.exp() * loc).sum(-1)
    return {
        "nlpd": -gaussian_mixture_log_density(y, loc, scale, log_weights).mean().item(),
        "crps": gaussian_mixture_crps(y, loc, scale, log_weights).mean().item(),
        "rmse": (mean - y).square().mean().sqrt().item(),
    }


@torch.no_grad()
def evaluate_regime_switching(
    predictor, data: RegimeSwitchingData, split: str = "test", *, device="cpu", seed: int = 0
) -> dict:
    """Exact scores of a regression predictor's particle mixture and of the two references.

    The predictor's predictive is ``sum_i w_t^i N(f_out(h_t^i), sigma^2)`` (one Gaussian for
    LSTM / GRU). Keys: ``rmse``, ``nlpd`` (nats per step), ``crps`` (exact, :mod:`ppl_models.inference.mixture_scores`);
    the same under ``truth.*`` (the exact law: the floor) and ``best_gaussian.*`` (the
    moment-matched Gaussian of the exact law: the floor of a Gaussian head); ``prob_error``, the
    mean absolute gap between the predictor's and the law's ``P(y_t > 0)``; ``sigma``,
    ``mean_ess``, ``particle_sd`` (weighted spread of ``f_out(h_t^i)``) and ``<split>_steps``.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    predictor.eval().to(device)
    x, _, y = data.splits[split]
    belief = predictor.belief(x.to(device), generator=torch.Generator(device=device).manual_seed(seed))
    loc = predictor.head(belief.particles)[..., 0].permute(2, 0, 1).double().cpu()  # [B, T, K]
    log_weights = belief.log_weights.permute(2, 0, 1).double().cpu()
    scale = predictor.log_scale.exp().double().cpu().expand(loc.shape)
    target = y[..., 0].double()
    weights = log_weights.exp()
    centre = (weights * loc).sum(-1, keepdim=True)
    law = data.law
    truth = law.mixture(data.posterior[split])
    model_positive = (weights * torch.special.ndtr(loc / scale)).sum(-1)
    truth_positive = (truth[2].exp() * torch.special.ndtr(truth[0] / truth[1])).sum(-1)
    return {
        **_scores(target, loc, scale, log_weights),
        "truth": _scores(target, *truth),
        "best_gaussian": _scores(target, *law.moment_matched(data.posterior[split])),
        "prob_error": (model_positive - truth_positive).abs().mean().item(),
        "sigma": predictor.log_scale.exp().item(),
        "mean_ess": (1 / weights.square().sum(-1)).mean().item(),
        "particle_sd": (weights * (loc - centre).square()).sum(-1).sqrt().mean().item(),
        f"{split}_steps": target.numel(),
    }

"""Losses of discriminative particle filters (PF-RNNs, Ma et al. 2020), per sequence, and their objective.

A belief is a weighted particle set per step: per-particle target distributions
``p(y_t | h_t^i)`` and normalised log-weights ``log w_t^i`` (``[T, K, B]`` layouts, as the
particle filter records them). The losses, each ``[B]`` (summed over a sequence's targets):

* :func:`prediction_loss`, eq. 4: the task loss of the prediction from the mean particle
  (squared error summed over outputs, or cross-entropy);
* :func:`particle_elbo_loss`, eq. 5: ``-sum_t log sum_i w_t^i p(y_t | h_t^i)``. The paper
  writes ``1/K sum_i`` over the particles *after* a resampling from ``w_t``; its
  expectation over that draw is the weighted sum used here, which has no resampling noise;
* :func:`belief_loss`, the workshop paper's ``sum_t sum_i w_t^i loss(y_t, h_t^i)``.

:class:`DiscriminativeLoss` combines them (``L_pred + beta L_ELBO``, plus an optional belief
term) for the shared :class:`~ppl_models.inference.training.Trainer`, which passes it supervised
batches ``(x, mask, y)``.
"""

from __future__ import annotations

import math

import torch
from pyro.distributions import Normal
from torch import nn
from torch.nn import functional as F

from .objectives import ObjectiveOutput
from .validation import check_choice, check_sequences, value_checks_enabled

__all__ = ["TARGETS", "prediction_loss", "particle_elbo_loss", "belief_loss", "DiscriminativeLoss", "check_targets"]

TARGETS = ("sequence", "last")


def _task_loss(
    prediction: torch.Tensor, y: torch.Tensor, task: str, output_weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Squared error summed over the last dim, optionally weighted per output (regression), or
    cross-entropy of logits (classification)."""
    if task == "classification":
        return F.cross_entropy(prediction.movedim(-1, 0).unsqueeze(0), y.unsqueeze(0), reduction="none").squeeze(0)
    error = (prediction - y).square()
    return (error if output_weights is None else error * output_weights).sum(-1)


def prediction_loss(
    prediction: torch.Tensor,
    y: torch.Tensor,
    valid: torch.Tensor,
    task: str,
    output_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eq. 4 per sequence ``[B]``.

    Args:
        prediction: ``[B, N, O]`` predictions (class logits) at ``N`` target steps.
        y: ``[B, N, O]`` targets (regression) or ``[B, N]`` class indices.
        valid: ``[B, N]`` bool, which targets count, or float weights of the steps.
        task: ``"regression"`` or ``"classification"``.
        output_weights: ``[O]`` weights of the outputs' squared errors (regression; default all 1).
    """
    return (_task_loss(prediction, y, task, output_weights) * valid).sum(1)


def particle_elbo_loss(log_prob: torch.Tensor, log_weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Eq. 5 per sequence ``[B]``: ``-sum_t log sum_i w_t^i p(y_t | h_t^i)``.

    Args:
        log_prob: ``[N, K, B]`` ``log p(y_t | h_t^i)`` at ``N`` target steps.
        log_weights: ``[N, K, B]`` normalised log-weights.
        valid: ``[B, N]`` bool, or float weights of the steps.
    """
    return -(torch.logsumexp(log_weights + log_prob, dim=1).T * valid).sum(1)


def belief_loss(particle_loss: torch.Tensor, log_weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Workshop paper's belief loss per sequence ``[B]``: ``sum_t sum_i w_t^i loss_t^i`` (losses ``[N, K, B]``)."""
    return ((log_weights.exp() * particle_loss).sum(1).T * valid).sum(1)


def check_targets(
    y, x: torch.Tensor, target: str, task: str, output_size: int, *, allow_missing: bool = False
) -> torch.Tensor:
    """Validate targets for inputs ``x [B, T, D]``; returns ``y``.

    ``target="sequence"``: ``[B, T, O]`` (regression) or ``[B, T]`` class indices; ``"last"``:
    ``[B, O]`` or ``[B]``. Regression targets must be finite floats (or NaN, a missing target,
    with ``allow_missing``), class indices in ``[0, O)``.
    """
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
    batch, steps = x.shape[:2]
    lead = (batch, steps) if target == "sequence" else (batch,)
    expected = lead + ((output_size,) if task == "regression" else ())
    if tuple(y.shape) != expected:
        what = "[B, T" if target == "sequence" else "[B"
        what += ", O]" if task == "regression" else "] class indices"
        raise ValueError(
            f"y must have shape {what} = {expected} for target={target!r}, task={task!r}, got {tuple(y.shape)}"
        )
    if task == "classification":
        if y.dtype != torch.long:
            raise TypeError(f"classification targets y must be int64 class indices, got dtype {y.dtype}")
        if value_checks_enabled() and bool(((y < 0) | (y >= output_size)).any()):
            raise ValueError(f"class indices in y must lie in [0, {output_size}), got {int(y.min())}..{int(y.max())}")
    elif not y.is_floating_point() or (
        value_checks_enabled() and (bool(torch.isinf(y).any()) or (not allow_missing and bool(torch.isnan(y).any())))
    ):
        raise ValueError(
            "regression targets y must be finite floating-point values" + (" or NaN (missing)" if allow_missing else "")
        )
    return y


def _check_output_weights(output_weights, model: nn.Module) -> torch.Tensor:
    """``[O]`` float tensor of positive weights, one per regression output of ``model``."""
    if getattr(model, "task", "regression") != "regression":
        raise ValueError("output_weights applies to regression only")
    if not isinstance(output_weights, (list, tuple)) or not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0 for w in output_weights
    ):
        raise ValueError(f"output_weights must be a list of finite numbers > 0, got {output_weights!r}")
    if len(output_weights) != model.output_size:
        raise ValueError(
            f"output_weights must have one entry per output ({model.output_size}), got {len(output_weights)}"
        )
    return torch.tensor([float(w) for w in output_weights])


def _step_weights(valid: torch.Tensor, time_decay: float) -> torch.Tensor:
    """``[B, N]`` weights ``exp(time_decay * t)`` of the valid steps, with mean 1 over each sequence's valid steps."""
    if time_decay == 0.0:
        return valid
    logits = time_decay * torch.arange(valid.shape[1], device=valid.device, dtype=torch.float32)
    raw = torch.exp(logits - logits.max()) * valid  # no overflow on long sequences
    return raw * valid.sum(1, keepdim=True) / raw.sum(1, keepdim=True).clamp(min=1e-30)


class DiscriminativeLoss(nn.Module):
    """``pred_weight L_pred + elbo_weight L_ELBO + belief_weight L_belief`` for a PF-RNN predictor.

    Args:
        model: a :class:`~ppl_models.pf_rnn.PFRNNPredictor` (or any module with ``belief(x, mask, outputs=True)``,
            a belief holding the head's value of each particle, ``outputs [T, K, B, O]``; ``head``,
            ``output_distribution``, ``task`` and ``output_size``).
        target: ``"sequence"`` (a target at every valid step, as in regression and localization)
            or ``"last"`` (one per sequence, at its last valid step, as in classification).
        pred_weight, elbo_weight, belief_weight: the weights; the paper's ``L_pred + beta L_ELBO``
            with ``beta = 1`` is the default.
        missing_targets: regression only: a NaN in ``y`` marks a step without a target (e.g. a
            gap in a measured series): that step is not scored, while its input still updates the
            belief. Off by default (NaN targets are then an error).
        time_decay: target step ``t`` (0-based) of a sequence weighs ``exp(time_decay * t)``,
            normalised to a mean of 1 over the sequence's scored steps (the PF-RNN code's
            ``bpdecay``; 0, the default, weighs every step alike). Applies to every term.
        output_weights: regression only: a weight ``w_o > 0`` per output. The squared errors
            (prediction and belief terms) are multiplied by it, and the ELBO's Gaussian has
            precision ``w_o`` times the model's (the same weighted squared error inside it).

    ``forward(x, mask, y)`` returns an :class:`~ppl_models.inference.objectives.ObjectiveOutput` whose
    ``loss`` is the combination divided by the number of targets, whose ``bound`` is minus the
    combination per sequence (so that the Trainer's "higher is better" validation works), and
    ``num_steps`` the targets per sequence. ``kind`` is ``"-loss"``.
    """

    kind = "-loss"

    def __init__(
        self,
        model: nn.Module,
        *,
        target: str = "sequence",
        pred_weight: float = 1.0,
        elbo_weight: float = 1.0,
        belief_weight: float = 0.0,
        missing_targets: bool = False,
        time_decay: float = 0.0,
        output_weights: list[float] | None = None,
    ):
        super().__init__()
        if not isinstance(missing_targets, bool):
            raise TypeError(f"missing_targets must be a bool, got {missing_targets!r}")
        if missing_targets and getattr(model, "task", "regression") != "regression":
            raise ValueError("missing_targets applies to regression only")
        self.missing_targets = missing_targets
        self.model = model
        self.target = check_choice(target, TARGETS, name="target")
        weights = {"pred_weight": pred_weight, "elbo_weight": elbo_weight, "belief_weight": belief_weight}
        for name, value in weights.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if not any(weights.values()):
            raise ValueError("at least one of pred_weight, elbo_weight, belief_weight must be positive")
        self.pred_weight, self.elbo_weight, self.belief_weight = (
            float(pred_weight),
            float(elbo_weight),
            float(belief_weight),
        )
        self.kl_factor = 1.0  # the Trainer sets it; these losses have no KL term
        if isinstance(time_decay, bool) or not isinstance(time_decay, (int, float)) or not math.isfinite(time_decay):
            raise ValueError(f"time_decay must be a finite number, got {time_decay!r}")
        self.time_decay = float(time_decay)
        self.register_buffer(
            "output_weights", None if output_weights is None else _check_output_weights(output_weights, model)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, y: torch.Tensor) -> ObjectiveOutput:
        x, mask = check_sequences(x, mask)
        model = self.model
        y = check_targets(y, x, self.target, model.task, model.output_size, allow_missing=self.missing_targets)
        belief = model.belief(x, mask, outputs=True)
        mean, outputs, log_w, valid = belief.mean, belief.outputs, belief.log_weights, mask
        if self.target == "last":
            last = mask.sum(1) - 1  # [B]
            mean = mean.gather(1, last.view(-1, 1, 1).expand(-1, 1, mean.shape[-1]))
            outputs = outputs.gather(0, last.view(1, 1, -1, 1).expand(1, *outputs.shape[1:]))
            log_w = log_w.gather(0, last.view(1, 1, -1).expand(1, log_w.shape[1], -1))
            y, valid = y.unsqueeze(1), torch.ones_like(mask[:, :1])
        if self.missing_targets:
            valid = valid & ~torch.isnan(y).any(-1)
            y = torch.nan_to_num(y, nan=0.0)  # not scored (valid is False there)
        steps = _step_weights(valid, self.time_decay)
        weights = self.output_weights
        per_sequence = x.new_zeros(x.shape[0])
        if self.pred_weight:
            loss = prediction_loss(model.head(mean), y, steps, model.task, weights)
            per_sequence = per_sequence + self.pred_weight * loss
        y_particles = y.transpose(0, 1).unsqueeze(1)  # [N, 1, B, ...]: broadcast over particles
        if self.elbo_weight:
            distribution = model.output_distribution(outputs)
            if weights is not None:  # precision w_o times the model's: scale / sqrt(w_o)
                base = distribution.base_dist
                distribution = Normal(base.loc, base.scale * weights.rsqrt()).to_event(1)
            log_prob = distribution.log_prob(y_particles)
            per_sequence = per_sequence + self.elbo_weight * particle_elbo_loss(log_prob, log_w, steps)
        if self.belief_weight:
            losses = _task_loss(outputs, y_particles.expand(outputs.shape[:3] + y.shape[2:]), model.task, weights)
            per_sequence = per_sequence + self.belief_weight * belief_loss(losses, log_w, steps)
        num_targets = valid.sum(1)
        loss = per_sequence.sum() / num_targets.sum().clamp(min=1)
        return ObjectiveOutput(loss=loss, bound=-per_sequence, num_steps=num_targets)

"""The settings of a training run (:class:`TrainConfig`) and the optimizer and learning-rate schedule they build."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from ..validation import check_choice

__all__ = [
    "OPTIMIZERS",
    "LR_SCHEDULES",
    "PER_STEP_SCHEDULES",
    "RESUMABLE_CHANGES",
    "TrainConfig",
    "make_optimizer",
    "make_scheduler",
]

OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
LR_SCHEDULES = ("constant", "cosine", "exponential", "step", "transformer")
#: schedules stepped after every optimizer step (the others after every epoch)
PER_STEP_SCHEDULES = ("transformer",)

#: config fields that may change between a run and its resumption
RESUMABLE_CHANGES = frozenset({"epochs", "progress", "cuda_graph", "norm_refresh_batches"})


def _integer(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"TrainConfig.{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _number(name: str, value, minimum: float, maximum: float = math.inf, *, open_left: bool = False) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (``(minimum, maximum]`` with ``open_left``)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (
        not is_number
        or not math.isfinite(value)
        or value > maximum
        or value < minimum
        or (open_left and value == minimum)
    ):
        left, right = "(" if open_left else "[", ")" if maximum == math.inf else "]"
        raise ValueError(
            f"TrainConfig.{name} must be a finite number in {left}{minimum}, {maximum}{right}, got {value!r}"
        )
    return float(value)


@dataclass
class TrainConfig:
    """Settings of a training run; each field is a key of a config file's training table.

    Attributes:
        epochs: passes over the training set.
        batch_size: sequences per minibatch (per process under ``torchrun``).
        optimizer: ``"adam"``, ``"adamw"``, ``"sgd"`` or ``"rmsprop"`` (torch's defaults otherwise).
        lr: initial learning rate (``0`` is allowed: parameters then stay put).
        weight_decay: L2 penalty (Adam, SGD) or decoupled decay (AdamW).
        momentum: SGD and RMSprop momentum (ignored by the Adam variants).
        optimizer_eps: the ``eps`` of Adam, AdamW and RMSprop, added to the root of their second moment (``None``:
            torch's default, 1e-8).
        lr_schedule: learning-rate schedule: per epoch ``"constant"``, ``"cosine"`` (to 0 over
            ``epochs``), ``"exponential"`` (times ``lr_gamma`` each epoch) or ``"step"`` (times
            ``lr_gamma`` every ``lr_step_epochs`` epochs); per optimizer step ``"transformer"``
            (Vaswani et al. 2017: ``lr * min(s / w, sqrt(w / s))`` at step ``s`` (1-based) with
            ``w = warmup_steps``: a linear warm-up to ``lr``, then decay as ``1 / sqrt(s)``).
        lr_gamma: decay factor in ``(0, 1]`` of the exponential and step schedules.
        lr_step_epochs: epochs between decays of the step schedule.
        lr_delay_epochs: epochs the exponential or step schedule waits before it starts: the factor at epoch
            ``e`` (0-based) is the schedule's at ``max(0, e - lr_delay_epochs)``, so epochs ``0 ..
            lr_delay_epochs`` run at ``lr`` (``None``: no wait).
        warmup_steps: ``w`` of the transformer schedule.
        clip_norm: largest global L2 norm of the gradient (``None``: no clipping).
        kl_start: KL weight at the first optimizer step, in ``[0, 1]`` (``1``: no annealing).
        kl_anneal_steps: optimizer steps over which the KL weight rises linearly to 1.
        valid_every: validate every this many epochs (and after the last epoch).
        patience: stop after this many validations in a row without a higher validation bound
            per time step (``None``: never stop early; needs validation data otherwise).
        min_delta: a validation bound is higher (a new best checkpoint, and patience restarts) only when it
            exceeds the best so far by more than this, in nats per time step (``0``: any rise), so that a run whose
            bound creeps up by round-off-sized steps stops and its best epoch is the last real gain.
        seed: seed of the shuffling and of the random numbers the objective draws (``>= 0``).
        progress: show a progress bar (rank 0 only).
        cuda_graph: on a CUDA device, record each training step (forward, backward, clipping,
            optimizer update) as a CUDA graph per batch shape and replay it
            (:meth:`~ppl_models.inference.training.cuda_graphs.GraphedCall.training_step`): the
            objective must then read no tensor values on the host. Its warm-up makes the first
            batch of each shape three extra optimizer steps. Needs a constant learning rate and no
            KL annealing (both are recorded into the graph). Elsewhere (CPU, or under
            ``torchrun``) steps run eagerly.
        streams: truncated backpropagation through time over ``streams`` continuous streams (``None``: shuffled
            minibatches of independent sequences). The training rows are then consecutive chunks of one text, in
            order; they are cut into ``streams`` contiguous streams of ``N // streams`` rows each (stream ``s``: rows
            ``s C .. s C + C - 1``, ``C = N // streams``; the last ``N mod streams`` rows are left out), and batch
            ``c`` holds row ``c`` of every stream, in order, unshuffled. Each batch starts from the state the
            previous batch of its streams ended in, detached (the model must carry its state:
            :class:`~ppl_models.inference.training.carried_state.CarriesState`); every epoch starts the streams
            afresh from the model's initial state. ``batch_size`` then sets only the validation batches. Under
            ``torchrun`` the streams are dealt out to the ranks (``streams`` a multiple of the processes).
        norm_refresh_batches: before each validation (and after the last epoch), re-estimate the
            batch norms' running statistics at the current weights from this many training
            batches (:func:`~ppl_models.inference.training.norm_refresh.refresh_norm_statistics`);
            ``0``: keep the running averages taken during training, which lag the moving weights.
    """

    epochs: int = 10
    batch_size: int = 32
    optimizer: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0
    lr_schedule: str = "constant"
    lr_gamma: float = 0.9
    lr_step_epochs: int = 10
    lr_delay_epochs: int | None = None
    warmup_steps: int = 4000
    clip_norm: float | None = None
    kl_start: float = 1.0
    kl_anneal_steps: int = 0
    valid_every: int = 1
    patience: int | None = None
    min_delta: float = 0.0
    seed: int = 0
    progress: bool = True
    cuda_graph: bool = False
    norm_refresh_batches: int = 0
    streams: int | None = None
    optimizer_eps: float | None = None

    def __post_init__(self):
        for name, minimum in (
            ("epochs", 1),
            ("batch_size", 1),
            ("lr_step_epochs", 1),
            ("warmup_steps", 1),
            ("kl_anneal_steps", 0),
            ("valid_every", 1),
            ("seed", 0),
            ("norm_refresh_batches", 0),
        ):
            _integer(name, getattr(self, name), minimum)
        if self.patience is not None:
            _integer("patience", self.patience, 1)
        if self.streams is not None:
            _integer("streams", self.streams, 1)
            if self.cuda_graph:
                raise ValueError("TrainConfig.cuda_graph cannot record a state carried between batches (streams)")
        if self.lr_delay_epochs is not None:
            _integer("lr_delay_epochs", self.lr_delay_epochs, 0)
            if self.lr_schedule not in ("exponential", "step"):
                raise ValueError(
                    f"TrainConfig.lr_delay_epochs needs lr_schedule 'exponential' or 'step', got {self.lr_schedule!r}"
                )
        check_choice(self.optimizer, OPTIMIZERS, name="TrainConfig.optimizer")
        check_choice(self.lr_schedule, LR_SCHEDULES, name="TrainConfig.lr_schedule")
        self.lr = _number("lr", self.lr, 0.0)
        self.weight_decay = _number("weight_decay", self.weight_decay, 0.0)
        self.momentum = _number("momentum", self.momentum, 0.0, 1.0)
        self.lr_gamma = _number("lr_gamma", self.lr_gamma, 0.0, 1.0, open_left=True)
        self.kl_start = _number("kl_start", self.kl_start, 0.0, 1.0)
        self.min_delta = _number("min_delta", self.min_delta, 0.0)
        if self.clip_norm is not None:
            self.clip_norm = _number("clip_norm", self.clip_norm, 0.0, open_left=True)
        if self.optimizer_eps is not None:
            self.optimizer_eps = _number("optimizer_eps", self.optimizer_eps, 0.0, open_left=True)
            if self.optimizer == "sgd":
                raise ValueError("TrainConfig.optimizer_eps is an Adam, AdamW or RMSprop setting; SGD has none")
        for name in ("progress", "cuda_graph"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"TrainConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if self.cuda_graph and (self.lr_schedule != "constant" or self.kl_anneal_steps):
            raise ValueError(
                "TrainConfig.cuda_graph needs lr_schedule='constant' and kl_anneal_steps=0 "
                f"(a graph records them), got {self.lr_schedule!r} and {self.kl_anneal_steps}"
            )

    @classmethod
    def from_dict(cls, values: Mapping) -> TrainConfig:
        """Build from a mapping (a TOML table with overrides); unknown keys raise ``ValueError``."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {unknown}; the keys are {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict:
        """The fields as a plain dict (``from_dict(to_dict())`` round-trips); ``streams`` and ``optimizer_eps`` only
        where set, so a run without them records (and resumes from) the same settings as before the fields existed."""
        values = dataclasses.asdict(self)
        for name in ("streams", "optimizer_eps"):
            if values[name] is None:
                del values[name]
        return values

    def kl_factor(self, step: int) -> float:
        """KL weight at optimizer step ``step`` (0-based).

        ``kl_start + (1 - kl_start) * min(1, step / kl_anneal_steps)``, or 1 when ``kl_anneal_steps`` is 0.
        """
        if self.kl_anneal_steps == 0:
            return 1.0
        return self.kl_start + (1.0 - self.kl_start) * min(1.0, step / self.kl_anneal_steps)


def make_optimizer(
    parameters: list[nn.Parameter], config: TrainConfig, *, capturable: bool = False
) -> torch.optim.Optimizer:
    """The configured optimizer; ``capturable`` (for CUDA graphs) keeps its step counts on the device."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
    eps = {} if config.optimizer_eps is None else {"eps": config.optimizer_eps}
    if config.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            parameters,
            lr=config.lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            capturable=capturable,
            **eps,
        )
    optimizer = torch.optim.Adam if config.optimizer == "adam" else torch.optim.AdamW
    return optimizer(parameters, lr=config.lr, weight_decay=config.weight_decay, capturable=capturable, **eps)


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LRScheduler:
    """The configured learning-rate schedule of ``optimizer`` (:data:`PER_STEP_SCHEDULES` step per optimizer step)."""
    schedules = torch.optim.lr_scheduler
    if config.lr_delay_epochs is not None:
        return schedules.LambdaLR(optimizer, functools.partial(_delayed_factor, config=config))
    if config.lr_schedule == "cosine":
        return schedules.CosineAnnealingLR(optimizer, T_max=config.epochs)
    if config.lr_schedule == "exponential":
        return schedules.ExponentialLR(optimizer, gamma=config.lr_gamma)
    if config.lr_schedule == "step":
        return schedules.StepLR(optimizer, step_size=config.lr_step_epochs, gamma=config.lr_gamma)
    if config.lr_schedule == "transformer":
        return schedules.LambdaLR(optimizer, functools.partial(_transformer_factor, warmup=config.warmup_steps))
    return schedules.ConstantLR(optimizer, factor=1.0, total_iters=0)


def _delayed_factor(epoch: int, *, config: TrainConfig) -> float:
    """The exponential or step schedule's factor at ``max(0, epoch - lr_delay_epochs)``."""
    started = max(0, epoch - config.lr_delay_epochs)
    if config.lr_schedule == "step":
        started //= config.lr_step_epochs
    return config.lr_gamma**started


def _transformer_factor(step: int, *, warmup: int) -> float:
    """``min(s / w, sqrt(w / s))`` at 1-based step ``s = step + 1``."""
    s = step + 1
    return min(s / warmup, math.sqrt(warmup / s))

"""The training loop shared by every model: a :class:`Trainer` minimising an
:class:`~ppl_models.inference.objectives.Objective`.

One epoch shuffles the training sequences (the order depends only on the seed and the epoch),
takes minibatches (each cut to its longest sequence), steps the optimizer (with optional
gradient clipping and KL annealing), steps the learning-rate schedule, and validates: the
objective's bound per time step, pooled over the validation set (taken in batches of similar
length), drives early stopping and the best checkpoint. A run folder holds
``metrics.jsonl`` and ``checkpoints/{last,best}.pt``; ``fit(resume=True)`` continues from
``last.pt`` and ends with the same parameters and metrics as a run that was never stopped.

Under ``torchrun`` (any launcher that initialises ``torch.distributed``) the same code wraps the
objective in ``DistributedDataParallel``, deals each epoch's sequences out to the ranks, sums
metrics across ranks, and lets rank 0 alone write the run folder and show progress.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyro.util
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from .graphs import GraphedCall
from .io import append_jsonl, remove_stale_temporaries, save_torch, write_text
from .validation import check_choice, check_flag, check_sequences

__all__ = ["OPTIMIZERS", "LR_SCHEDULES", "RESUMABLE_CHANGES", "TrainConfig", "Trainer", "TrainingDiverged",
           "epoch_batches", "refresh_norm_statistics",
           "length_batches", "trim_padding", "load_checkpoint", "load_best", "check_experiment"]

OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
LR_SCHEDULES = ("constant", "cosine", "exponential", "step", "transformer")
_PER_STEP_SCHEDULES = ("transformer",)

#: config fields that may change between a run and its resumption
RESUMABLE_CHANGES = frozenset({"epochs", "progress", "cuda_graph", "norm_refresh_batches"})
#: a step that fails after the parameters' norm grew this many times since the start of ``fit`` is a divergence
_BLOWN_UP = 100.0
#: first key of a derived seed, so the shuffling stream and the model's stream never coincide
_SHUFFLE_STREAM, _MODEL_STREAM, _NORM_STREAM = 0, 1, 2


def _integer(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"TrainConfig.{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _number(name: str, value, minimum: float, maximum: float = math.inf, *, open_left: bool = False) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (``(minimum, maximum]`` with ``open_left``)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value > maximum or value < minimum or (
            open_left and value == minimum):
        left, right = "(" if open_left else "[", ")" if maximum == math.inf else "]"
        raise ValueError(f"TrainConfig.{name} must be a finite number in {left}{minimum}, {maximum}{right}, "
                         f"got {value!r}")
    return float(value)


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; the run folder keeps its last good checkpoint."""


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
        lr_schedule: learning-rate schedule: per epoch ``"constant"``, ``"cosine"`` (to 0 over
            ``epochs``), ``"exponential"`` (times ``lr_gamma`` each epoch) or ``"step"`` (times
            ``lr_gamma`` every ``lr_step_epochs`` epochs); per optimizer step ``"transformer"``
            (Vaswani et al. 2017: ``lr * min(s / w, sqrt(w / s))`` at step ``s`` (1-based) with
            ``w = warmup_steps``: a linear warm-up to ``lr``, then decay as ``1 / sqrt(s)``).
        lr_gamma: decay factor in ``(0, 1]`` of the exponential and step schedules.
        lr_step_epochs: epochs between decays of the step schedule.
        warmup_steps: ``w`` of the transformer schedule.
        clip_norm: largest global L2 norm of the gradient (``None``: no clipping).
        kl_start: KL weight at the first optimizer step, in ``[0, 1]`` (``1``: no annealing).
        kl_anneal_steps: optimizer steps over which the KL weight rises linearly to 1.
        valid_every: validate every this many epochs (and after the last epoch).
        patience: stop after this many validations in a row without a higher validation bound
            per time step (``None``: never stop early; needs validation data otherwise).
        seed: seed of the shuffling and of the random numbers the objective draws (``>= 0``).
        progress: show a progress bar (rank 0 only).
        cuda_graph: on a CUDA device, record each training step (forward, backward, clipping,
            optimizer update) as a CUDA graph per batch shape and replay it
            (:meth:`ppl_models.inference.graphs.GraphedCall.training_step`): the objective must then read no
            tensor values on the host. Its warm-up makes the first batch of each shape three
            extra optimizer steps. Needs a constant learning rate and no KL annealing (both are
            recorded into the graph). Elsewhere (CPU, or under ``torchrun``) steps run eagerly.
        norm_refresh_batches: before each validation (and after the last epoch), re-estimate the
            batch norms' running statistics at the current weights from this many training
            batches (:func:`refresh_norm_statistics`); ``0``: keep the running averages taken
            during training, which lag the moving weights.
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
    warmup_steps: int = 4000
    clip_norm: float | None = None
    kl_start: float = 1.0
    kl_anneal_steps: int = 0
    valid_every: int = 1
    patience: int | None = None
    seed: int = 0
    progress: bool = True
    cuda_graph: bool = False
    norm_refresh_batches: int = 0

    def __post_init__(self):
        for name, minimum in (("epochs", 1), ("batch_size", 1), ("lr_step_epochs", 1), ("warmup_steps", 1),
                              ("kl_anneal_steps", 0),
                              ("valid_every", 1), ("seed", 0), ("norm_refresh_batches", 0)):
            _integer(name, getattr(self, name), minimum)
        if self.patience is not None:
            _integer("patience", self.patience, 1)
        check_choice(self.optimizer, OPTIMIZERS, name="TrainConfig.optimizer")
        check_choice(self.lr_schedule, LR_SCHEDULES, name="TrainConfig.lr_schedule")
        self.lr = _number("lr", self.lr, 0.0)
        self.weight_decay = _number("weight_decay", self.weight_decay, 0.0)
        self.momentum = _number("momentum", self.momentum, 0.0, 1.0)
        self.lr_gamma = _number("lr_gamma", self.lr_gamma, 0.0, 1.0, open_left=True)
        self.kl_start = _number("kl_start", self.kl_start, 0.0, 1.0)
        if self.clip_norm is not None:
            self.clip_norm = _number("clip_norm", self.clip_norm, 0.0, open_left=True)
        for name in ("progress", "cuda_graph"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"TrainConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if self.cuda_graph and (self.lr_schedule != "constant" or self.kl_anneal_steps):
            raise ValueError("TrainConfig.cuda_graph needs lr_schedule='constant' and kl_anneal_steps=0 "
                             f"(a graph records them), got {self.lr_schedule!r} and {self.kl_anneal_steps}")

    @classmethod
    def from_dict(cls, values: Mapping) -> TrainConfig:
        """Build from a mapping (a TOML table with overrides); unknown keys raise ``ValueError``."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {unknown}; the keys are {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict:
        """The fields as a plain dict (``from_dict(to_dict())`` round-trips)."""
        return dataclasses.asdict(self)

    def kl_factor(self, step: int) -> float:
        """KL weight at optimizer step ``step`` (0-based).

        ``kl_start + (1 - kl_start) * min(1, step / kl_anneal_steps)``, or 1 when ``kl_anneal_steps`` is 0.
        """
        if self.kl_anneal_steps == 0:
            return 1.0
        return self.kl_start + (1.0 - self.kl_start) * min(1.0, step / self.kl_anneal_steps)


def _derived_seed(*keys: int) -> int:
    """A 32-bit seed mixed from non-negative integers (distinct keys give unrelated seeds)."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


def epoch_batches(
    num_items: int, batch_size: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1
) -> list[torch.Tensor]:
    """Minibatch indices (CPU ``int64`` tensors) of one epoch for one process.

    A permutation of ``range(num_items)`` drawn from a generator seeded by ``(seed, epoch)``,
    the same on every rank, is padded by wrapping around to a multiple of ``world_size``, dealt
    out (``rank::world_size``) and cut into batches of ``batch_size`` (the last may be smaller),
    so every rank gets the same number of batches and together they cover every item.
    """
    generator = torch.Generator().manual_seed(_derived_seed(_SHUFFLE_STREAM, seed, epoch))
    order = torch.randperm(num_items, generator=generator)
    total = math.ceil(num_items / world_size) * world_size
    order = order.repeat(math.ceil(total / num_items))[:total]
    return list(order[rank::world_size].split(batch_size))


@torch.no_grad()
def refresh_norm_statistics(module: nn.Module, batches, *, seed: int = 0) -> int:
    """Re-estimate the running statistics of ``module``'s batch norms at its current weights.

    Running averages taken during training lag the moving weights. Each submodule with running
    statistics (a ``reset_running_stats`` method and a ``running_mean`` buffer: ``nn.BatchNorm*``,
    :class:`~ppl_models.pf_rnn.StepBatchNorm`) is reset, then ``module(*batch)`` runs in training
    mode, without gradients, on each of ``batches`` (tuples of tensors), every batch weighing the
    same (momentum ``1 / (i + 1)`` at batch ``i``): the statistics become the average of the
    batches' own. Draws come from ``seed``; the caller's random streams, modes and momenta are
    restored. Returns the number of norm layers refreshed.
    """
    norms = [m for m in module.modules()
             if callable(getattr(m, "reset_running_stats", None)) and getattr(m, "running_mean", None) is not None]
    modes = {m: m.training for m in module.modules()}
    momenta = [m.momentum for m in norms]
    state = _rng_state()
    try:
        pyro.util.set_rng_seed(seed)
        module.train()
        for norm in norms:
            norm.reset_running_stats()
        for index, batch in enumerate(batches if norms else ()):
            for norm in norms:
                norm.momentum = 1.0 / (index + 1)
            module(*batch)
    finally:
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum
        for m, mode in modes.items():
            m.training = mode
        _set_rng_state(state)
    return len(norms)


def length_batches(mask: torch.Tensor, batch_size: int, *, rank: int = 0, world_size: int = 1) -> list[torch.Tensor]:
    """Evaluation batches (CPU ``int64`` index tensors): rows of ``mask [N, T]`` longest first.

    Sequences of similar length share a batch, so :func:`trim_padding` leaves little padding;
    the rows are dealt out ``rank::world_size`` before being cut into ``batch_size`` batches.
    """
    order = mask.sum(1).cpu().argsort(descending=True, stable=True)
    return list(order[rank::world_size].split(batch_size))


def trim_padding(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [B, T', D], mask [B, T'])`` without the trailing steps that are padding in every row.

    A model that respects its mask gives the same result on the trimmed batch; the time it
    spends is that of the longest sequence in the batch rather than of the whole data set.
    """
    valid = mask.any(0).nonzero()
    steps = int(valid[-1]) + 1 if len(valid) else 1
    return x[:, :steps], mask[:, :steps]


def _batches_per_epoch(num_items: int, batch_size: int, world_size: int) -> int:
    return math.ceil(math.ceil(num_items / world_size) / batch_size)


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _resolve_device(device, objective: nn.Module) -> torch.device:
    """``None``: the device of the objective's first parameter (CPU if it has none)."""
    if device is None:
        parameter = next(objective.parameters(), None)
        return torch.device("cpu") if parameter is None else parameter.device
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got {device!r}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device is {device!r} but CUDA is not available here (torch.cuda.is_available() is False)")
    if device.type == "cuda" and device.index is None:  # one GPU per process under torchrun
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    return device


def _check_data(data, name: str, model: nn.Module | None = None) -> tuple[torch.Tensor, ...]:
    """Validate ``(x [N, T, D], mask [N, T] or None)`` or ``(x, mask, y [N, ...])``; return it with the mask filled.

    With ``model`` (the objective's), ``x`` is checked against it as at every step (dtype,
    feature size, values), so a mismatch is refused before training, not after an epoch.
    """
    if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
        raise ValueError(f"{name} must be a pair (x [N, T, D], mask [N, T]) or a triple (x, mask, y [N, ...]) "
                         f"of supervised data, got {type(data).__name__}"
                         + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else ""))
    x, mask = check_sequences(data[0], data[1], name=f"{name}[0]", model=model)
    if len(data) == 2:
        return x, mask
    y = data[2]
    if not isinstance(y, torch.Tensor) or y.dim() == 0 or y.shape[0] != x.shape[0]:
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"{name}[2] (targets y) must be a tensor with N = {x.shape[0]} rows like x, got {got}")
    return x, mask, y


def _make_optimizer(parameters: list[nn.Parameter], config: TrainConfig, *, capturable: bool = False
                    ) -> torch.optim.Optimizer:  # fmt: skip
    """The configured optimizer; ``capturable`` (for CUDA graphs) keeps its step counts on the device."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
    if config.optimizer == "rmsprop":
        return torch.optim.RMSprop(parameters, lr=config.lr, momentum=config.momentum,
                                   weight_decay=config.weight_decay, capturable=capturable)  # fmt: skip
    optimizer = torch.optim.Adam if config.optimizer == "adam" else torch.optim.AdamW
    return optimizer(parameters, lr=config.lr, weight_decay=config.weight_decay, capturable=capturable)


def _make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LRScheduler:
    schedules = torch.optim.lr_scheduler
    if config.lr_schedule == "cosine":
        return schedules.CosineAnnealingLR(optimizer, T_max=config.epochs)
    if config.lr_schedule == "exponential":
        return schedules.ExponentialLR(optimizer, gamma=config.lr_gamma)
    if config.lr_schedule == "step":
        return schedules.StepLR(optimizer, step_size=config.lr_step_epochs, gamma=config.lr_gamma)
    if config.lr_schedule == "transformer":
        return schedules.LambdaLR(optimizer, functools.partial(_transformer_factor, warmup=config.warmup_steps))
    return schedules.ConstantLR(optimizer, factor=1.0, total_iters=0)


def _transformer_factor(step: int, *, warmup: int) -> float:
    """``min(s / w, sqrt(w / s))`` at 1-based step ``s = step + 1``."""
    s = step + 1
    return min(s / warmup, math.sqrt(warmup / s))


def _rng_state() -> dict:
    """This process's RNG states (torch CPU, CUDA, numpy, ``random``) as plain tensors and Python values."""
    state = pyro.util.get_rng_state()
    kind, keys, position, has_gauss, cached = state["numpy"]
    state["numpy"] = (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached)
    state["cuda"] = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return state


def _set_rng_state(state: dict) -> None:
    kind, keys, position, has_gauss, cached = state["numpy"]
    numpy_state = (kind, keys.numpy().astype(np.uint32), position, has_gauss, cached)
    pyro.util.set_rng_state({"torch": state["torch"].cpu(), "random": state["random"], "numpy": numpy_state})
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _copy_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s state dict (parameters and buffers), on their devices."""
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def _write_metrics(path: Path, history: list[dict]) -> None:
    """Atomically rewrite ``metrics.jsonl`` with ``history`` (the format of
    :func:`~ppl_models.inference.io.append_jsonl`)."""
    write_text(path, "".join(json.dumps(record, sort_keys=True) + "\n" for record in history))


def check_experiment(saved: Mapping | None, given: Mapping | None, path) -> None:
    """Raise ``ValueError`` naming the differing keys if a checkpoint's ``experiment`` is not ``given``.

    Either being ``None`` (a checkpoint from before experiments were saved, or a caller that
    gives none) passes.
    """
    if saved is None or given is None:
        return
    given = json.loads(json.dumps(given))
    if saved != given:
        changed = sorted(key for key in {*saved, *given} if saved.get(key) != given.get(key))
        raise ValueError(f"cannot resume: the experiment differs from the one saved in {path} (in {changed}); "
                         "pass the same experiment and --set overrides as the first run")


def _check_resumable(saved: dict, config: TrainConfig) -> None:
    """Raise ``ValueError`` if ``config`` differs from the checkpoint's in a way that breaks the run."""
    current = config.to_dict()
    changed = sorted(k for k in current if saved.get(k) != current[k])
    allowed = RESUMABLE_CHANGES - ({"epochs"} if config.lr_schedule == "cosine" else set())
    if set(changed) - allowed:
        was = {k: saved.get(k) for k in changed}
        raise ValueError(f"cannot resume: TrainConfig fields {changed} differ from the checkpoint's {was}; "
                         f"only {sorted(allowed)} may change")


class Trainer:
    """Fits an objective by minibatch gradient descent, alone or under ``torchrun``.

    Args:
        objective: the :class:`~ppl_models.inference.objectives.Objective` to minimise (an ``nn.Module``
            whose ``forward(x [B, T, D], mask [B, T])`` returns ``loss``, ``bound [B]`` and
            ``num_steps [B]``, with a ``kl_factor`` attribute).
        train_data: ``(x [N, T, D], mask [N, T])``, padded, valid steps first (``mask`` may be
            ``None``: all steps valid), or ``(x, mask, y)`` with targets ``y [N, ...]`` for a
            supervised objective, called as ``objective(x, mask, y)``. It may stay on the CPU;
            minibatches move to ``device``.
        valid_data: optional pair of the same form, for validation, ``best.pt`` and early stopping.
        config: a :class:`TrainConfig` (default: its defaults).
        run_dir: folder of ``metrics.jsonl`` and ``checkpoints/``; ``None`` writes nothing.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a ``torch.device``, or ``None`` for the device
            of the objective's parameters. Under ``torchrun``, ``"cuda"`` means ``cuda:LOCAL_RANK``.
        monitor: optional callable returning ``{name: float}``, called without gradients after
            each validation (model in eval mode); its result is the epoch record's ``monitor``
            entry (e.g. a held-out MSE to draw against epochs).
        experiment: optional JSON-like description of everything else the run depends on (data,
            model, objective settings); saved in every checkpoint, and ``fit(resume=True)``
            refuses a checkpoint saved with a different one.

    Under ``torch.distributed`` every rank must build its Trainer with the same arguments.
    After :meth:`fit`, ``history``, ``epoch`` (epochs done), ``step`` (optimizer steps),
    ``best_metric`` (best validation bound per step), ``bad_validations`` and ``stopped_early``
    describe the run, and the objective holds the parameters of the best validation epoch.
    """

    def __init__(self, objective: nn.Module, train_data, valid_data=None, config: TrainConfig | None = None,
                 run_dir: str | os.PathLike | None = None, device=None,
                 monitor: Callable[[], dict] | None = None, experiment: Mapping | None = None):  # fmt: skip
        if not isinstance(objective, nn.Module):
            raise TypeError(f"objective must be an nn.Module (an Objective), got {type(objective).__name__}")
        self.config = TrainConfig() if config is None else config
        if not isinstance(self.config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(self.config).__name__}")
        model = getattr(objective, "model", None)
        self.train_data = _check_data(train_data, "train_data", model)
        self.valid_data = None if valid_data is None else _check_data(valid_data, "valid_data", model)
        if self.config.patience is not None and self.valid_data is None:
            raise ValueError("TrainConfig.patience needs valid_data: early stopping watches the validation bound")
        if monitor is not None and not callable(monitor):
            raise TypeError(f"monitor must be callable or None, got {type(monitor).__name__}")
        self.monitor = monitor
        self.experiment = None if experiment is None else json.loads(json.dumps(experiment))
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.rank, self.world_size = (dist.get_rank(), dist.get_world_size()) if _distributed() else (0, 1)
        self.device = _resolve_device(device, objective)
        self.objective = objective.to(self.device)
        self.parameters = [p for p in objective.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError("objective has no trainable parameters (none with requires_grad)")
        self.module = self._wrap(self.objective)
        self.graphed = self.config.cuda_graph and self.device.type == "cuda" and not _distributed()
        self.graphs: dict[tuple, GraphedCall] = {}  # one recorded step per batch shape
        self.optimizer = _make_optimizer(self.parameters, self.config, capturable=self.graphed)
        self.scheduler = _make_scheduler(self.optimizer, self.config)
        self.history: list[dict] = []
        self.epoch = 0
        self.step = 0
        self.best_metric: float | None = None
        self.bad_validations = 0
        self.stopped_early = False
        self._best_state: dict | None = None  # the objective's state at the best validation of this session
        self._last_state: dict | None = None  # the state the best one replaced at the end of fit, to continue from

    # --- public ---------------------------------------------------------------------------
    def fit(self, resume: bool = False, *, restore_best: bool = True) -> list[dict]:
        """Train until ``config.epochs`` epochs are done or early stopping; return the history.

        The objective ends with the parameters (and buffers) of the epoch with the best validation
        bound, those of ``best.pt``, where there was validation; ``restore_best=False`` leaves those
        of the last epoch (``last.pt``). A later ``fit`` of the same Trainer continues from the last
        epoch either way.

        Args:
            resume: continue from ``run_dir/checkpoints/last.pt`` (parameters, optimizer, schedule,
                counters, history and RNG states), or start afresh if there is none yet. A fresh
                start seeds the RNGs from ``config.seed``, empties ``metrics.jsonl`` and deletes
                the folder's old checkpoints.
            restore_best: end with the best validation epoch's parameters rather than the last's.

        Returns:
            One dict per epoch (all epochs of the run, those before a resume too): ``epoch``
            (1-based), ``step``, ``train_loss`` (mean minibatch loss), ``train_bound_per_step``,
            ``valid_bound_per_step`` (``None`` when not validated), ``bound_kind``, ``lr``,
            ``kl_factor`` (at the epoch's last step), ``seconds`` and, with a ``monitor``, ``monitor``.
        """
        check_flag(restore_best, name="restore_best")
        if resume and self.run_dir is None:
            raise ValueError("resume=True needs a run_dir to read checkpoints/last.pt from")
        if self.run_dir is not None and self.rank == 0:
            remove_stale_temporaries(self.run_dir / "checkpoints")
        if resume and self._checkpoint_path("last").exists():
            self._restore(load_checkpoint(self._checkpoint_path("last")))
        elif self.step == 0:
            self._begin()
        elif self._last_state is not None:  # a previous fit ended on the best epoch: go on from the last
            self.objective.load_state_dict(self._last_state)
        self._last_state = None
        self._start_norm = self._parameter_norm()
        per_epoch = _batches_per_epoch(len(self.train_data[0]), self.config.batch_size, self.world_size)
        show = self.config.progress and self.rank == 0
        with tqdm(total=self.config.epochs * per_epoch, initial=self.epoch * per_epoch, disable=not show,
                  unit="step", dynamic_ncols=True) as bar:
            while self.epoch < self.config.epochs and not self.stopped_early:
                self._run_epoch(bar)
        self.objective.kl_factor = 1.0
        if _distributed():
            dist.barrier()  # every rank returns once rank 0 has written the run folder
        if restore_best:
            self._restore_best()
        return self.history

    def _restore_best(self) -> None:
        """Load the best validation epoch's state (this session's copy, else ``best.pt``), keeping the last one."""
        best = self._best_state
        path = None if self.run_dir is None else self._checkpoint_path("best")
        if best is None and self.best_metric is not None and path is not None and path.exists():
            best = load_checkpoint(path)["objective"]  # the best epoch came before a resume
        if best is None:
            return
        self._last_state = _copy_state(self.objective)
        self.objective.load_state_dict(best)

    # --- one epoch --------------------------------------------------------------------------
    def _run_epoch(self, bar: tqdm) -> None:
        start = time.perf_counter()
        lr = self.optimizer.param_groups[0]["lr"]
        bar.set_description(f"epoch {self.epoch + 1}/{self.config.epochs}")
        train_loss, train_bound = self._train_epoch(bar)
        kl_factor = float(self.objective.kl_factor)
        if self.config.norm_refresh_batches and (self._validation_due() or self.epoch + 1 == self.config.epochs):
            self._refresh_norms()
        try:
            valid_bound = self._validate() if self._validation_due() else None
        except (ValueError, RuntimeError) as error:
            self._raise_if_blown_up(error, "validation")
            raise
        if self.config.lr_schedule not in _PER_STEP_SCHEDULES:
            self.scheduler.step()
        self.epoch += 1
        improved = self._update_early_stopping(valid_bound)
        record = {
            "epoch": self.epoch, "step": self.step, "train_loss": train_loss, "train_bound_per_step": train_bound,
            "valid_bound_per_step": valid_bound, "bound_kind": getattr(self.objective, "kind", "objective"),
            "lr": lr, "kl_factor": kl_factor, "seconds": time.perf_counter() - start,
        }
        if self.monitor is not None and valid_bound is not None:
            with torch.no_grad():
                record["monitor"] = {k: float(v) for k, v in self.monitor().items()}
        self.history.append(record)
        if valid_bound is not None:
            bar.set_postfix(loss=f"{train_loss:.4g}", valid=f"{valid_bound:.4g}")
        if improved:
            self._best_state = _copy_state(self.objective)
        if self.run_dir is not None:
            self._save(improved)

    def _train_epoch(self, bar: tqdm) -> tuple[float, float]:
        """One pass over this rank's share; returns (mean minibatch loss, bound per step), over all ranks."""
        self.module.train()
        config = self.config
        batches = epoch_batches(len(self.train_data[0]), config.batch_size, seed=config.seed, epoch=self.epoch,
                                rank=self.rank, world_size=self.world_size)
        totals = torch.zeros(4, dtype=torch.float64, device=self.device)  # loss sum, batches, bound sum, steps
        first_bad = torch.full((), -1, dtype=torch.long, device=self.device)  # no device read per step
        for number, index in enumerate(batches, 1):
            try:
                out = self._train_step(self._batch(self.train_data, index))
            except (ValueError, RuntimeError) as error:  # e.g. a filter or a Cholesky refusing blown-up parameters
                self._raise_if_blown_up(error, f"step {number} of the epoch")
                raise
            loss = out.loss.detach().double()
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), number, first_bad)
            totals += torch.stack([loss, totals.new_ones(()),
                                   out.bound.detach().sum().double(), out.num_steps.sum().double()])
            bar.update()
            if not bar.disable:
                bar.set_postfix(loss=f"{(totals[0] / totals[1]).item():.4g}", refresh=False)
        if _distributed():
            dist.all_reduce(first_bad, op=dist.ReduceOp.MAX)
        bad_batch = int(first_bad.clamp(min=0))
        if bad_batch:
            self._diverged(f"step {bad_batch} of the epoch", "the loss was NaN or inf")
        totals = self._sum_over_ranks(totals)
        return (totals[0] / totals[1]).item(), (totals[2] / totals[3]).item()

    @torch.no_grad()
    def _parameter_norm(self) -> float:
        """Global L2 norm of the trainable parameters (``inf`` or ``nan`` if any is)."""
        return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p) for p in self.parameters])))

    def _raise_if_blown_up(self, error: BaseException, where: str) -> None:
        """Raise :class:`TrainingDiverged` from ``error`` if the parameters are non-finite or blew up since ``fit``."""
        norm, start = self._parameter_norm(), self._start_norm
        if math.isfinite(norm) and norm <= _BLOWN_UP * max(start, 1e-12):
            return
        reason = " ".join(str(error).split())[:200]
        self._diverged(where, f"the parameters' norm went from {start:.3g} (start of fit) to {norm:.3g} and this "
                              f"failed ({type(error).__name__}: {reason})", error)

    def _diverged(self, where: str, what: str, cause: BaseException | None = None) -> None:
        """Raise :class:`TrainingDiverged` for ``where`` (a step, or the validation) of the current epoch."""
        config = self.config
        kept = f"checkpoints/last.pt of epoch {self.epoch} is kept" if self.epoch else "no checkpoint was written"
        raise TrainingDiverged(
            f"training diverged at epoch {self.epoch + 1}, {where}: {what}; likely causes: a "
            f"learning rate too high (lr={config.lr:g}), no or loose gradient clipping (clip_norm={config.clip_norm}), "
            f"or extreme values in the data; {kept}") from cause

    def _train_step(self, batch: tuple[torch.Tensor, ...]):
        """One optimizer step on a minibatch ``(x [B, T, D], mask [B, T][, y])``; returns the ObjectiveOutput."""
        self.objective.kl_factor = self.config.kl_factor(self.step)
        if self.graphed:
            out = self._graphed_step(batch)
        else:
            self.optimizer.zero_grad(set_to_none=True)
            out = self.module(*batch)
            out.loss.backward()
            if self.config.clip_norm is not None:
                nn.utils.clip_grad_norm_(self.parameters, self.config.clip_norm)
            self.optimizer.step()
        self.step += 1
        if self.config.lr_schedule in _PER_STEP_SCHEDULES:
            self.scheduler.step()
        return out

    def _graphed_step(self, batch: tuple[torch.Tensor, ...]):
        """The step replayed from the CUDA graph recorded for this batch shape (recorded on first sight)."""
        shape = tuple(tuple(t.shape) for t in batch)
        if shape not in self.graphs:
            self.graphs[shape] = GraphedCall.training_step(self.module, self.optimizer, batch,
                                                           clip_norm=self.config.clip_norm, parameters=self.parameters)
        return self.graphs[shape](*batch)

    def _refresh_norms(self) -> None:
        """:func:`refresh_norm_statistics` from the first batches of a fixed shuffle of the training data."""
        generator = torch.Generator().manual_seed(_derived_seed(_NORM_STREAM, self.config.seed))
        order = torch.randperm(len(self.train_data[0]), generator=generator)
        batches = order[:self.config.norm_refresh_batches * self.config.batch_size].split(self.config.batch_size)
        refresh_norm_statistics(self.objective, (self._batch(self.train_data, index) for index in batches),
                                seed=_derived_seed(_NORM_STREAM, self.config.seed, self.epoch))  # fmt: skip

    @torch.no_grad()
    def _validate(self) -> float:
        """Validation bound per time step, ``sum(bound) / sum(num_steps)`` over the whole set, at ``kl_factor`` 1."""
        self.objective.eval()
        self.objective.kl_factor = 1.0
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)
        for index in length_batches(self.valid_data[1], self.config.batch_size, rank=self.rank,
                                    world_size=self.world_size):
            out = self.objective(*self._batch(self.valid_data, index))
            totals += torch.stack([out.bound.sum().double(), out.num_steps.sum().double()])
        totals = self._sum_over_ranks(totals)
        return (totals[0] / totals[1]).item()

    def _validation_due(self) -> bool:
        done = self.epoch + 1
        return self.valid_data is not None and (done % self.config.valid_every == 0 or done == self.config.epochs)

    def _update_early_stopping(self, valid_bound: float | None) -> bool:
        """Record a validation result; return whether it is a new best."""
        if valid_bound is None:
            return False
        if not math.isnan(valid_bound) and (self.best_metric is None or valid_bound > self.best_metric):
            self.best_metric, self.bad_validations = valid_bound, 0
            return True
        self.bad_validations += 1
        patience = self.config.patience
        self.stopped_early = patience is not None and self.bad_validations >= patience
        return False

    # --- helpers -------------------------------------------------------------------------
    def _wrap(self, objective: nn.Module) -> nn.Module:
        """``DistributedDataParallel(objective)`` under ``torch.distributed``, else the objective itself.

        ``find_unused_parameters`` is on because objectives often leave some parameters out
        (an exact likelihood ignores the guide's).
        """
        if not _distributed():
            return objective
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(objective, device_ids=device_ids, find_unused_parameters=True)

    def _batch(self, data: tuple[torch.Tensor, ...], index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Rows ``index`` of ``(x [N, T, D], mask [N, T][, y [N, ...]])``, moved to the training device.

        A pair ``(x, mask)`` is cut to its batch's longest sequence (:func:`trim_padding`); a
        supervised triple keeps its length, since its targets may be indexed by time step.
        """
        batch = tuple(t[index.to(t.device)] for t in data)
        if len(batch) == 2:
            batch = trim_padding(*batch)
        return tuple(t.to(self.device, non_blocking=True) for t in batch)

    def _sum_over_ranks(self, totals: torch.Tensor) -> torch.Tensor:
        if _distributed():
            dist.all_reduce(totals)
        return totals

    def _checkpoint_path(self, which: str) -> Path:
        return self.run_dir / "checkpoints" / f"{which}.pt"

    def _begin(self) -> None:
        """Fresh start: seed every RNG from ``(seed, rank)``, empty the metrics log, delete old checkpoints."""
        pyro.set_rng_seed(_derived_seed(_MODEL_STREAM, self.config.seed, self.rank))
        if self.run_dir is not None and self.rank == 0:
            _write_metrics(self.run_dir / "metrics.jsonl", [])
            for which in ("last", "best"):
                self._checkpoint_path(which).unlink(missing_ok=True)

    def _save(self, improved: bool) -> None:
        """Append the epoch's metrics and write ``last.pt`` (and ``best.pt`` if ``improved``); rank 0 writes."""
        rng = [_rng_state()]
        if _distributed():
            rng = [None] * self.world_size
            dist.all_gather_object(rng, _rng_state())
        if self.rank != 0:
            return
        append_jsonl(self.run_dir / "metrics.jsonl", self.history[-1])
        checkpoint = {
            "objective": self.objective.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "epoch": self.epoch, "step": self.step,
            "best_metric": self.best_metric, "bad_validations": self.bad_validations,
            "stopped_early": self.stopped_early, "history": self.history, "config": self.config.to_dict(),
            "rng": rng, "experiment": self.experiment,
        }
        # best before last: a crash between the two leaves last.pt one epoch behind, and resuming
        # from it redoes that epoch and writes best.pt again (the other order left a stale best.pt)
        if improved:
            save_torch(self._checkpoint_path("best"), checkpoint)
        save_torch(self._checkpoint_path("last"), checkpoint)

    def _restore(self, checkpoint: dict) -> None:
        """Load a ``last.pt`` checkpoint into the objective, optimizer, schedule, counters and RNGs."""
        _check_resumable(checkpoint["config"], self.config)
        check_experiment(checkpoint.get("experiment"), self.experiment, self._checkpoint_path("last"))
        self.objective.load_state_dict(checkpoint["objective"])
        self._best_state = None  # best.pt holds the best epoch before this resumption
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        self.epoch, self.step = checkpoint["epoch"], checkpoint["step"]
        self.best_metric, self.bad_validations = checkpoint["best_metric"], checkpoint["bad_validations"]
        self.stopped_early = checkpoint["stopped_early"]
        self.history = list(checkpoint["history"])
        if self.rank == 0:
            _write_metrics(self.run_dir / "metrics.jsonl", self.history)
        rng = checkpoint["rng"]
        if len(rng) == self.world_size:
            _set_rng_state(rng[self.rank])
        else:
            warnings.warn(f"checkpoint was written by {len(rng)} processes, resuming with {self.world_size}: "
                          "RNG states are reseeded, so the run will not repeat an uninterrupted one", stacklevel=3)
            pyro.set_rng_seed(_derived_seed(_MODEL_STREAM, self.config.seed, self.rank, self.epoch))


def load_checkpoint(path: str | os.PathLike, module: nn.Module | None = None, *, map_location="cpu") -> dict:
    """Read a checkpoint written by :class:`Trainer`; if ``module`` is given, load its weights into it.

    ``module`` may be the trained objective or its bare model (then the ``model.`` entries load).
    Loading uses ``torch.load(weights_only=True)``: tensors and plain Python values only.

    Returns:
        The checkpoint dict: ``objective`` (state dict), ``optimizer``, ``scheduler``, ``epoch``,
        ``step``, ``best_metric``, ``bad_validations``, ``stopped_early``, ``history``, ``config``,
        ``rng`` (one entry per process).
    """
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as error:  # torch.load fails in many ways on a bad file; none is the caller's bug
        raise ValueError(f"{path} is not a readable checkpoint (empty, truncated, corrupt or not written by "
                         f"Trainer; torch.load raised {type(error).__name__})") from error
    if not isinstance(checkpoint, dict) or "objective" not in checkpoint:
        raise ValueError(f"{path} is not a Trainer checkpoint (no 'objective' entry)")
    if module is not None:
        state = checkpoint["objective"]
        if set(state) != set(module.state_dict()):
            state = {k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")}
        module.load_state_dict(state)
    return checkpoint


def load_best(run_dir: str | os.PathLike, module: nn.Module | None = None, *, map_location="cpu") -> dict:
    """:func:`load_checkpoint` of ``run_dir/checkpoints/best.pt`` (the highest validation bound per step)."""
    path = Path(run_dir) / "checkpoints" / "best.pt"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: best.pt is written only when the Trainer has valid_data")
    return load_checkpoint(path, module, map_location=map_location)

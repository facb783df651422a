"""The training loop shared by every model: a :class:`Trainer` minimising an
:class:`~ppl_models.inference.objectives.Objective`.

One epoch shuffles the training sequences (the order depends only on the seed and the epoch),
takes minibatches (each cut to its longest sequence; with ``TrainConfig.streams``, truncated BPTT instead: the rows
are consecutive chunks of continuous streams, taken in order, each batch starting from the state the previous one
ended in, :mod:`.carried_state`), steps the optimizer (with optional
gradient clipping and KL annealing), steps the learning-rate schedule, and validates: the
objective's bound per time step, pooled over the validation set (taken in batches of similar
length, :mod:`.validation_pass`), drives early stopping and the best checkpoint. A run folder holds
``metrics.jsonl`` and ``checkpoints/{last,best}.pt`` (:mod:`.trainer_state`); ``fit(resume=True)`` continues from
``last.pt`` and ends with the same parameters and metrics as a run that was never stopped (streams carry no state
across epochs, and checkpoints fall between epochs, so a checkpoint holds no carried state). A loss that becomes NaN
or infinite, or parameters that blow up, end the run with :class:`TrainingDiverged` (:mod:`.divergence`).

Under ``torchrun`` (any launcher that initialises ``torch.distributed``) the same code wraps the
objective in ``DistributedDataParallel``, deals each epoch's sequences out to the ranks, sums
metrics across ranks, and lets rank 0 alone write the run folder and show progress (:mod:`.progress`: a bar on a
terminal, a line every few seconds in a log).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from ..atomic_files import remove_stale_temporaries
from ..validation import check_flag, check_scored
from .batches import batches_per_epoch, check_data, check_streams, epoch_batches, stream_batches, trim_padding
from .carried_state import detached, require_carried_state
from .checkpoints import load_checkpoint
from .cuda_graphs import GraphedCall
from .distributed import distributed, rank_and_size, resolve_device, sum_over_ranks, wrap
from .divergence import TrainingDiverged, blown_up, diverged, parameter_norm
from .norm_refresh import refresh_norm_statistics
from .progress import Progress, training_progress
from .rng import NORM_STREAM, derived_seed
from .settings import PER_STEP_SCHEDULES, TrainConfig, make_optimizer, make_scheduler
from .trainer_state import RunState, copy_state
from .validation_pass import validation_bound

__all__ = ["Trainer", "TrainingDiverged"]


class Trainer(RunState):
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
        valid_scored: optional ``[N, T]`` bool mask of the validation steps to score
            (:func:`~ppl_models.inference.validation.check_scored`): the others, each row's first valid steps, are
            its context (a held-out segment's history), read but not scored; the validation bound is then the
            objective's estimate of ``log p(x)`` less its estimate of ``log p(context)`` (exact for an exact
            likelihood), per scored step.
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

    def __init__(
        self,
        objective: nn.Module,
        train_data,
        valid_data=None,
        config: TrainConfig | None = None,
        run_dir: str | os.PathLike | None = None,
        device=None,
        monitor: Callable[[], dict] | None = None,
        experiment: Mapping | None = None,
        valid_scored: torch.Tensor | None = None,
    ):
        if not isinstance(objective, nn.Module):
            raise TypeError(f"objective must be an nn.Module (an Objective), got {type(objective).__name__}")
        self.config = TrainConfig() if config is None else config
        if not isinstance(self.config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(self.config).__name__}")
        model = getattr(objective, "model", None)
        self.train_data = check_data(train_data, "train_data", model)
        self.valid_data = None if valid_data is None else check_data(valid_data, "valid_data", model)
        if valid_scored is not None and (self.valid_data is None or len(self.valid_data) != 2):
            raise ValueError("valid_scored needs valid_data (x, mask) of a density objective")
        self.valid_scored = (
            None if valid_scored is None else check_scored(valid_scored, self.valid_data[1], name="valid_scored")
        )
        if self.config.patience is not None and self.valid_data is None:
            raise ValueError("TrainConfig.patience needs valid_data: early stopping watches the validation bound")
        if monitor is not None and not callable(monitor):
            raise TypeError(f"monitor must be callable or None, got {type(monitor).__name__}")
        self.monitor = monitor
        self.experiment = None if experiment is None else json.loads(json.dumps(experiment))
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.rank, self.world_size = rank_and_size()
        if self.config.streams is not None:
            self._check_streams(model)
        self.device = resolve_device(device, objective)
        self.objective = objective.to(self.device)
        self.parameters = [p for p in objective.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError("objective has no trainable parameters (none with requires_grad)")
        self.module = wrap(self.objective, self.device)
        self.graphed = self.config.cuda_graph and self.device.type == "cuda" and not distributed()
        self.graphs: dict[tuple, GraphedCall] = {}  # one recorded step per batch shape
        self.optimizer = make_optimizer(self.parameters, self.config, capturable=self.graphed)
        self.scheduler = make_scheduler(self.optimizer, self.config)
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
        self._start_norm = parameter_norm(self.parameters)
        num_items, streams = len(self.train_data[0]), self.config.streams
        if streams is None:
            per_epoch = batches_per_epoch(num_items, self.config.batch_size, self.world_size)
        else:
            per_epoch = num_items // streams
        show = self.config.progress and self.rank == 0
        with training_progress(self.config.epochs * per_epoch, self.epoch * per_epoch, show=show) as progress:
            while self.epoch < self.config.epochs and not self.stopped_early:
                self._run_epoch(progress)
        self.objective.kl_factor = 1.0
        if distributed():
            dist.barrier()  # every rank returns once rank 0 has written the run folder
        if restore_best:
            self._restore_best()
        return self.history

    # --- one epoch --------------------------------------------------------------------------
    def _run_epoch(self, progress: Progress) -> None:
        start = time.perf_counter()
        lr = self.optimizer.param_groups[0]["lr"]
        progress.start_epoch(self.epoch + 1, self.config.epochs)
        train_loss, train_bound = self._train_epoch(progress)
        kl_factor = float(self.objective.kl_factor)
        if self.config.norm_refresh_batches and (self._validation_due() or self.epoch + 1 == self.config.epochs):
            self._refresh_norms()
        try:
            valid_bound = self._validate() if self._validation_due() else None
        except (ValueError, RuntimeError) as error:
            self._raise_if_blown_up(error, "validation")
            raise
        if self.config.lr_schedule not in PER_STEP_SCHEDULES:
            self.scheduler.step()
        self.epoch += 1
        improved = self._update_early_stopping(valid_bound)
        record = {
            "epoch": self.epoch,
            "step": self.step,
            "train_loss": train_loss,
            "train_bound_per_step": train_bound,
            "valid_bound_per_step": valid_bound,
            "best": improved,
            "bound_kind": getattr(self.objective, "kind", "objective"),
            "lr": lr,
            "kl_factor": kl_factor,
            "seconds": time.perf_counter() - start,
        }
        if self.monitor is not None and valid_bound is not None:
            with torch.no_grad():
                record["monitor"] = {k: float(v) for k, v in self.monitor().items()}
        self.history.append(record)
        progress.end_epoch(train_loss, valid_bound)
        if improved:
            self._best_state = copy_state(self.objective)
        if self.run_dir is not None:
            self._save(improved)

    def _train_epoch(self, progress: Progress) -> tuple[float, float]:
        """One pass over this rank's share; returns (mean minibatch loss, bound per step), over all ranks."""
        self.module.train()
        batches = self._epoch_batches()
        carried = None  # with streams: the state the previous batch of the streams ended in, detached
        totals = torch.zeros(4, dtype=torch.float64, device=self.device)  # loss sum, batches, bound sum, steps
        first_bad = torch.full((), -1, dtype=torch.long, device=self.device)  # no device read per step

        def running_loss() -> float:
            return (totals[0] / totals[1]).item()

        for number, index in enumerate(batches, 1):
            try:
                if self.config.streams is None:
                    out = self._train_step(self._batch(self.train_data, index))
                else:
                    with self.objective.model.carrying(carried) as box:
                        out = self._train_step(self._batch(self.train_data, index))
                    if box.final is None:
                        raise ValueError(
                            f"TrainConfig.streams: {type(self.objective.model).__name__} handed on no state under the "
                            f"{type(self.objective).__name__} objective (it carries its state in another objective's "
                            "pass only); train it without streams or with that objective"
                        )
                    carried = detached(box.final)
            except (ValueError, RuntimeError) as error:  # e.g. a filter or a Cholesky refusing blown-up parameters
                self._raise_if_blown_up(error, f"step {number} of the epoch")
                raise
            loss = out.loss.detach().double()
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), number, first_bad)
            totals += torch.stack(
                [loss, totals.new_ones(()), out.bound.detach().sum().double(), out.num_steps.sum().double()]
            )
            progress.advance(running_loss)
        if distributed():
            dist.all_reduce(first_bad, op=dist.ReduceOp.MAX)
        bad_batch = int(first_bad.clamp(min=0))
        if bad_batch:
            raise diverged(self.config, self.epoch, f"step {bad_batch} of the epoch", "the loss was NaN or inf")
        totals = sum_over_ranks(totals)
        return (totals[0] / totals[1]).item(), (totals[2] / totals[3]).item()

    def _epoch_batches(self) -> list[torch.Tensor]:
        """This rank's batch indices of the epoch: shuffled minibatches, or with ``streams`` the streams' chunks in
        order (:func:`~.batches.stream_batches`)."""
        if self.config.streams is not None:
            return stream_batches(
                len(self.train_data[0]), self.config.streams, rank=self.rank, world_size=self.world_size
            )
        return epoch_batches(
            len(self.train_data[0]),
            self.config.batch_size,
            seed=self.config.seed,
            epoch=self.epoch,
            rank=self.rank,
            world_size=self.world_size,
        )

    def _check_streams(self, model) -> None:
        """Refuse ``streams`` for a model that cannot carry its state, supervised data, or a padded chunk that is
        not the last of its stream (the state it hands on would have read the padding)."""
        require_carried_state(model)
        if len(self.train_data) != 2:
            raise ValueError("TrainConfig.streams needs train_data (x, mask) of a density objective, not (x, mask, y)")
        mask = self.train_data[1]
        chunks = check_streams(len(mask), self.config.streams, self.world_size)
        starts = torch.arange(self.config.streams) * chunks
        handing_on = (starts[:, None] + torch.arange(chunks - 1)).flatten()  # every chunk but each stream's last
        if not bool(mask[handing_on.to(mask.device)].all()):
            raise ValueError(
                "TrainConfig.streams: a training row with padding hands its state on to the next chunk of its stream; "
                "only each stream's last chunk may be shorter"
            )

    def _raise_if_blown_up(self, error: BaseException, where: str) -> None:
        """Raise :class:`TrainingDiverged` from ``error`` if the parameters are non-finite or blew up since ``fit``."""
        what = blown_up(error, parameter_norm(self.parameters), self._start_norm)
        if what is not None:
            raise diverged(self.config, self.epoch, where, what) from error

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
        if self.config.lr_schedule in PER_STEP_SCHEDULES:
            self.scheduler.step()
        return out

    def _graphed_step(self, batch: tuple[torch.Tensor, ...]):
        """The step replayed from the CUDA graph recorded for this batch shape (recorded on first sight)."""
        shape = tuple(tuple(t.shape) for t in batch)
        if shape not in self.graphs:
            self.graphs[shape] = GraphedCall.training_step(
                self.module, self.optimizer, batch, clip_norm=self.config.clip_norm, parameters=self.parameters
            )
        return self.graphs[shape](*batch)

    def _refresh_norms(self) -> None:
        """:func:`refresh_norm_statistics` from the first batches of a fixed shuffle of the training data."""
        generator = torch.Generator().manual_seed(derived_seed(NORM_STREAM, self.config.seed))
        order = torch.randperm(len(self.train_data[0]), generator=generator)
        batches = order[: self.config.norm_refresh_batches * self.config.batch_size].split(self.config.batch_size)
        refresh_norm_statistics(
            self.objective,
            (self._batch(self.train_data, index) for index in batches),
            seed=derived_seed(NORM_STREAM, self.config.seed, self.epoch),
        )

    def _validate(self) -> float:
        """Validation bound per time step over the whole set (the scored steps given their context, with
        ``valid_scored``): :func:`~.validation_pass.validation_bound`."""
        return validation_bound(
            self.objective,
            self.valid_data,
            self.valid_scored,
            self._batch,
            batch_size=self.config.batch_size,
            device=self.device,
            rank=self.rank,
            world_size=self.world_size,
        )

    def _validation_due(self) -> bool:
        done = self.epoch + 1
        return self.valid_data is not None and (done % self.config.valid_every == 0 or done == self.config.epochs)

    def _update_early_stopping(self, valid_bound: float | None) -> bool:
        """Record a validation result; return whether it is a new best."""
        if valid_bound is None:
            return False
        if not math.isnan(valid_bound) and (
            self.best_metric is None or valid_bound > self.best_metric + self.config.min_delta
        ):
            self.best_metric, self.bad_validations = valid_bound, 0
            return True
        self.bad_validations += 1
        patience = self.config.patience
        self.stopped_early = patience is not None and self.bad_validations >= patience
        return False

    # --- helpers -------------------------------------------------------------------------
    def _batch(self, data: tuple[torch.Tensor, ...], index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Rows ``index`` of ``(x [N, T, D], mask [N, T][, y [N, ...]])``, moved to the training device.

        A pair ``(x, mask)`` is cut to its batch's longest sequence (:func:`trim_padding`); a
        supervised triple keeps its length, since its targets may be indexed by time step.
        """
        batch = tuple(t[index.to(t.device)] for t in data)
        if len(batch) == 2:
            batch = trim_padding(*batch)
        return tuple(t.to(self.device, non_blocking=True) for t in batch)

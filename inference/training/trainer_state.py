"""A :class:`~ppl_models.inference.training.Trainer`'s state in its run folder: the fresh start, the checkpoints
written after each epoch (``checkpoints/{last,best}.pt`` and ``metrics.jsonl``), the resumption from ``last.pt``
and the return to the best validation epoch's parameters (:class:`RunState`, which the Trainer inherits)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyro
import torch
import torch.distributed as dist
from torch import nn

from ..atomic_files import append_jsonl, save_torch
from .checkpoints import check_experiment, check_resumable, load_checkpoint, write_metrics
from .distributed import distributed
from .rng import MODEL_STREAM, derived_seed, rng_state, set_rng_state

__all__ = ["RunState", "copy_state"]


def copy_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s state dict (parameters and buffers), on their devices."""
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


class RunState:
    """The run-folder half of the Trainer: its ``objective``, ``optimizer``, ``scheduler``, ``config``, counters,
    ``history``, ``run_dir``, ``rank`` and ``world_size`` in and out of the checkpoints."""

    def _restore_best(self) -> None:
        """Load the best validation epoch's state (this session's copy, else ``best.pt``), keeping the last one."""
        best = self._best_state
        path = None if self.run_dir is None else self._checkpoint_path("best")
        if best is None and self.best_metric is not None and path is not None and path.exists():
            best = load_checkpoint(path)["objective"]  # the best epoch came before a resume
        if best is None:
            return
        self._last_state = copy_state(self.objective)
        self.objective.load_state_dict(best)

    def _checkpoint_path(self, which: str) -> Path:
        return self.run_dir / "checkpoints" / f"{which}.pt"

    def _begin(self) -> None:
        """Fresh start: seed every RNG from ``(seed, rank)``, empty the metrics log, delete old checkpoints."""
        pyro.set_rng_seed(derived_seed(MODEL_STREAM, self.config.seed, self.rank))
        if self.run_dir is not None and self.rank == 0:
            write_metrics(self.run_dir / "metrics.jsonl", [])
            for which in ("last", "best"):
                self._checkpoint_path(which).unlink(missing_ok=True)

    def _save(self, improved: bool) -> None:
        """Append the epoch's metrics and write ``last.pt`` (and ``best.pt`` if ``improved``); rank 0 writes."""
        rng = [rng_state()]
        if distributed():
            rng = [None] * self.world_size
            dist.all_gather_object(rng, rng_state())
        if self.rank != 0:
            return
        append_jsonl(self.run_dir / "metrics.jsonl", self.history[-1])
        checkpoint = {
            "objective": self.objective.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "best_metric": self.best_metric,
            "bad_validations": self.bad_validations,
            "stopped_early": self.stopped_early,
            "history": self.history,
            "config": self.config.to_dict(),
            "rng": rng,
            "experiment": self.experiment,
        }
        # best before last: a crash between the two leaves last.pt one epoch behind, and resuming
        # from it redoes that epoch and writes best.pt again (the other order left a stale best.pt)
        if improved:
            save_torch(self._checkpoint_path("best"), checkpoint)
        save_torch(self._checkpoint_path("last"), checkpoint)

    def _restore(self, checkpoint: dict) -> None:
        """Load a ``last.pt`` checkpoint into the objective, optimizer, schedule, counters and RNGs."""
        check_resumable(checkpoint["config"], self.config)
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
            write_metrics(self.run_dir / "metrics.jsonl", self.history)
        rng = checkpoint["rng"]
        if len(rng) == self.world_size:
            set_rng_state(rng[self.rank])
        else:
            warnings.warn(
                f"checkpoint was written by {len(rng)} processes, resuming with {self.world_size}: "
                "RNG states are reseeded, so the run will not repeat an uninterrupted one",
                stacklevel=3,
            )
            pyro.set_rng_seed(derived_seed(MODEL_STREAM, self.config.seed, self.rank, self.epoch))

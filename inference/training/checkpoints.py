"""A run folder's files: the checkpoints a :class:`~ppl_models.inference.training.trainer.Trainer` writes
(``checkpoints/{last,best}.pt``), its metrics log (``metrics.jsonl``), and the checks before a run resumes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from ..atomic_files import write_text
from .settings import RESUMABLE_CHANGES, TrainConfig

__all__ = ["load_checkpoint", "load_best", "check_experiment", "check_resumable", "write_metrics"]


def load_checkpoint(path: str | os.PathLike, module: nn.Module | None = None, *, map_location="cpu") -> dict:
    """Read a checkpoint written by the Trainer; if ``module`` is given, load its weights into it.

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
        raise ValueError(
            f"{path} is not a readable checkpoint (empty, truncated, corrupt or not written by "
            f"Trainer; torch.load raised {type(error).__name__})"
        ) from error
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
        raise ValueError(
            f"cannot resume: the experiment differs from the one saved in {path} (in {changed}); "
            "pass the same experiment and --set overrides as the first run"
        )


def check_resumable(saved: dict, config: TrainConfig) -> None:
    """Raise ``ValueError`` if ``config`` differs from the checkpoint's in a way that breaks the run."""
    current = config.to_dict()
    changed = sorted(k for k in current if saved.get(k) != current[k])
    allowed = RESUMABLE_CHANGES - ({"epochs"} if config.lr_schedule == "cosine" else set())
    if set(changed) - allowed:
        was = {k: saved.get(k) for k in changed}
        raise ValueError(
            f"cannot resume: TrainConfig fields {changed} differ from the checkpoint's {was}; "
            f"only {sorted(allowed)} may change"
        )


def write_metrics(path: Path, history: list[dict]) -> None:
    """Atomically rewrite ``metrics.jsonl`` with ``history`` (the format of
    :func:`~ppl_models.inference.atomic_files.append_jsonl`)."""
    write_text(path, "".join(json.dumps(record, sort_keys=True) + "\n" for record in history))

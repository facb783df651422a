"""Training: the loop every model shares (:class:`Trainer`), its settings, data batches, checkpoints and CUDA graphs.

Modules: :mod:`.config` (:class:`TrainConfig`, the optimizers and learning-rate schedules), :mod:`.trainer`
(:class:`Trainer`, :class:`TrainingDiverged`), :mod:`.batches` (the data a Trainer takes, epoch, stream and
evaluation batches, :func:`trim_padding`), :mod:`.carried_state` (:class:`CarriesState`: a model's state carried from
batch to batch, truncated BPTT over streams), :mod:`.checkpoints` (:func:`load_checkpoint`, :func:`load_best`, the
checks before a run resumes), :mod:`.norm_refresh` (:func:`refresh_norm_statistics`), :mod:`.cuda_graphs`
(:class:`GraphedCall`: a training step or a filter run recorded once and replayed), :mod:`.distributed` (the device
and the ranks under ``torchrun``) and :mod:`.rng` (the run's random streams). Every public name is importable from
``ppl_models.inference.training``.
"""

from .batches import epoch_batches, length_batches, stream_batches, trim_padding
from .carried_state import CarriedState, CarriesState
from .checkpoints import check_experiment, load_best, load_checkpoint
from .cuda_graphs import GraphedCall
from .norm_refresh import refresh_norm_statistics
from .settings import LR_SCHEDULES, OPTIMIZERS, RESUMABLE_CHANGES, TrainConfig
from .trainer import Trainer, TrainingDiverged

__all__ = [
    "OPTIMIZERS",
    "LR_SCHEDULES",
    "RESUMABLE_CHANGES",
    "TrainConfig",
    "Trainer",
    "TrainingDiverged",
    "epoch_batches",
    "stream_batches",
    "CarriedState",
    "CarriesState",
    "refresh_norm_statistics",
    "length_batches",
    "trim_padding",
    "load_checkpoint",
    "load_best",
    "check_experiment",
    "GraphedCall",
]

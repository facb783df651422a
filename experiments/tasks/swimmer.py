"""The Swimmer robot's trajectories (the PSRNN paper's data set), from the shared data folder."""

from __future__ import annotations

import os

import torch

from ..data import SequenceData, load_mat

__all__ = ["swimmer", "SWIMMER_OBSERVATIONS"]


SWIMMER_OBSERVATIONS = (0, 1, 8, 9, 10)  # observation columns of the trajectories (see the data README)


def swimmer(
    train: str = "1.0", valid: str = "0.5", test: str = "0.8", data_dir: str | os.PathLike | None = None
) -> SequenceData:
    """Swimmer robot trajectories ``[25, 100, 5]`` per split: the observation columns, real-valued.

    Each split is one file ``swimmers_trajs_<mix>.mat`` (the policy's exploration mix; the
    convention is to train on 1.0 and test on 0.8). Values are standardised by the training
    split's per-column mean and standard deviation.
    """
    names = {"train": train, "valid": valid, "test": test}
    arrays = {}
    for split, mix in names.items():
        if mix not in ("0.0", "0.5", "0.8", "1.0"):
            raise ValueError(f"{split} must be one of '0.0', '0.5', '0.8', '1.0', got {mix!r}")
        trajs = load_mat(f"swimmer/swimmers_trajs_{mix}.mat", data_dir)["trajs"]
        arrays[split] = torch.as_tensor(trajs[..., list(SWIMMER_OBSERVATIONS)], dtype=torch.float32)
    mean, std = arrays["train"].mean((0, 1)), arrays["train"].std((0, 1))
    splits = [((v - mean) / std, torch.ones(v.shape[:2], dtype=torch.bool)) for v in arrays.values()]
    return SequenceData(*splits, description=f"Swimmer observations (train {train}, valid {valid}, test {test})")

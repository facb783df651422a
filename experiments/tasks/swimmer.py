"""The Swimmer robot's trajectories (the PSRNN paper's data set), from the shared data folder."""

from __future__ import annotations

import os

import torch

from ..data import ExperimentData, check_values, load_mat, mat_array

__all__ = ["swimmer", "SWIMMER_OBSERVATIONS"]


SWIMMER_OBSERVATIONS = (0, 1, 8, 9, 10)  # observation columns of the trajectories (see the data README)


PAPER_TRAIN = 20  # the PSRNN paper's 20/5 split of 25 trajectories of one policy


def swimmer(
    train: str = "1.0",
    valid: str = "0.5",
    test: str = "0.8",
    data_dir: str | os.PathLike | None = None,
    paper_split: bool = False,
) -> ExperimentData:
    """Swimmer robot trajectories ``[25, 100, 5]`` per split: the observation columns, real-valued.

    Each split is one file ``swimmers_trajs_<mix>.mat`` (the policy's exploration mix; the
    convention is to train on 1.0 and test on 0.8). With ``paper_split`` the ``train`` file's
    25 trajectories are split 20/5 into train and test, as in the PSRNN paper (``test`` is then
    unused; validation stays the ``valid`` file). Values are standardised by the training
    split's per-column mean and standard deviation.

    Each file must hold an array ``trajs`` of shape ``[N, T, >= 11]`` (``N > 20`` for the paper's
    split) of finite numbers; extreme values warn (:func:`ppl_models.experiments.data.check_values`).
    """
    if not isinstance(paper_split, bool):
        raise TypeError(f"paper_split must be a bool, got {paper_split!r}")
    names = {"train": train, "valid": valid, "test": train if paper_split else test}
    arrays = {}
    for split, mix in names.items():
        if mix not in ("0.0", "0.5", "0.8", "1.0"):
            raise ValueError(f"{split} must be one of '0.0', '0.5', '0.8', '1.0', got {mix!r}")
        relative = f"swimmer/swimmers_trajs_{mix}.mat"
        where = f"{relative}: array 'trajs'"
        least = PAPER_TRAIN + 1 if paper_split and split != "valid" else 1
        trajs = mat_array(
            load_mat(relative, data_dir, arrays=("trajs",))["trajs"],
            where,
            ndim=3,
            min_shape=(least, 2, max(SWIMMER_OBSERVATIONS) + 1),
        )
        observed = trajs[..., list(SWIMMER_OBSERVATIONS)]
        check_values(observed, where, [f"trajs[..., {c}]" for c in SWIMMER_OBSERVATIONS])
        arrays[split] = torch.as_tensor(observed, dtype=torch.float32)
    if paper_split:
        arrays["train"], arrays["test"] = arrays["train"][:PAPER_TRAIN], arrays["test"][PAPER_TRAIN:]
    mean, std = arrays["train"].mean((0, 1)), arrays["train"].std((0, 1))
    if not bool((std > 0).all()):
        raise ValueError(
            f"swimmer/swimmers_trajs_{train}.mat: observation columns {SWIMMER_OBSERVATIONS} of "
            f"the training split must vary (standard deviations {std.tolist()})"
        )
    splits = [((v - mean) / std, torch.ones(v.shape[:2], dtype=torch.bool)) for v in arrays.values()]
    where = (
        f"train {train}[:20], valid {valid}, test {train}[20:]"
        if paper_split
        else f"train {train}, valid {valid}, test {test}"
    )
    return ExperimentData(*splits, description=f"Swimmer observations ({where})")

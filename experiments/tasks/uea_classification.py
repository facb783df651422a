"""A real sequence-classification task for PF-RNNs: JapaneseVowels (UEA archive, bundled with sktime).

Nine male speakers each utter the vowel pair /ae/; each utterance is a sequence of 7 to 29
frames of 12 LPC cepstrum coefficients, and the class is the speaker. The official split is
270 training and 370 test utterances. The data ships inside the optional dependency
``sktime`` (``pip install 'ppl-models[classification]'``); nothing is downloaded.

Preprocessing (:func:`japanese_vowels`): utterances padded at the end to the longest one, with a
mask; a random ``valid_fraction`` of the training utterances (stratified by class, seeded)
validates; each coefficient is standardised by the mean and standard deviation (``ddof=0``)
over the valid frames of the remaining training utterances. The PF-RNN predicts the class at
the last valid frame from the belief there (``DiscriminativeLoss(target="last")``), as the
paper does for its classification tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ppl_models.inference.calibration import brier_score, plot_reliability, reliability_curve
from ppl_models.inference.validation import check_choice, check_positive_int

from ..data import SPLITS, SupervisedData, pad_sequences

__all__ = ["ClassificationData", "japanese_vowels", "evaluate_classification"]


@dataclass
class ClassificationData(SupervisedData):
    """Splits ``{name: (x [N, T, D], mask [N, T], y [N] int64)}``, class names and the input statistics."""

    splits: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    classes: tuple[str, ...]
    mean: torch.Tensor
    std: torch.Tensor
    description: str = ""

    @property
    def num_classes(self) -> int:
        return len(self.classes)


@lru_cache(maxsize=2)
def _load_sktime(split: str) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """sktime's JapaneseVowels ``split`` as ``([T_i, 12] arrays, labels)``, cached (sktime's reader is slow)."""
    try:
        from sktime.datasets import load_japanese_vowels
    except ModuleNotFoundError as error:  # optional dependency
        raise ModuleNotFoundError(
            "the JapaneseVowels task needs sktime: pip install 'ppl-models[classification]'"
        ) from error
    frame, labels = load_japanese_vowels(split=split, return_X_y=True)
    sequences = tuple(
        np.stack([np.asarray(frame.iloc[i, c], dtype=float) for c in range(frame.shape[1])], -1)
        for i in range(len(frame))
    )
    return sequences, np.asarray(labels).astype(str)


def japanese_vowels(
    valid_fraction: float = 0.2,
    seed: int = 0,
    max_sequences: int | None = None,
) -> tuple[ClassificationData, dict]:
    """The JapaneseVowels task: ``(data, splits)``, ``splits[s] = (x [N, 29, 12], mask [N, 29], y [N])``.

    Args:
        valid_fraction: share of each class's training utterances held out for validation, in (0, 1).
        seed: seed of that draw.
        max_sequences: keep only the first this many utterances of each split (quick runs).
    """
    if isinstance(valid_fraction, bool) or not isinstance(valid_fraction, (int, float)):
        raise TypeError(f"valid_fraction must be a number in (0, 1), got {valid_fraction!r}")
    if not 0 < valid_fraction < 1:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if max_sequences is not None:
        check_positive_int(max_sequences, name="max_sequences")
    train_seqs, train_labels = _load_sktime("train")
    test_seqs, test_labels = _load_sktime("test")
    classes = tuple(sorted(set(train_labels), key=lambda c: (len(c), c)))
    index = {c: i for i, c in enumerate(classes)}
    rng = np.random.default_rng(seed)
    held_out = np.zeros(len(train_labels), dtype=bool)
    for c in classes:  # stratified: the same share of every speaker
        members = np.flatnonzero(train_labels == c)
        held_out[rng.choice(members, max(1, round(valid_fraction * len(members))), replace=False)] = True
    parts = {
        "train": [i for i in range(len(train_labels)) if not held_out[i]],
        "valid": [i for i in range(len(train_labels)) if held_out[i]],
    }
    chosen = {
        "train": ([train_seqs[i] for i in parts["train"]], train_labels[parts["train"]]),
        "valid": ([train_seqs[i] for i in parts["valid"]], train_labels[parts["valid"]]),
        "test": (test_seqs, test_labels),
    }
    longest = max(len(s) for s in (*train_seqs, *test_seqs))
    frames = np.concatenate(chosen["train"][0])
    mean = torch.as_tensor(frames.mean(0), dtype=torch.float32)
    std = torch.as_tensor(frames.std(0), dtype=torch.float32)
    splits = {}
    for split, (sequences, labels) in chosen.items():
        sequences, labels = sequences[:max_sequences], labels[:max_sequences]
        x, mask = pad_sequences([(s - mean.numpy()) / std.numpy() for s in sequences])
        if x.shape[1] < longest:  # one length for every split
            x = torch.cat([x, x.new_zeros(len(x), longest - x.shape[1], x.shape[2])], 1)
            mask = torch.cat([mask, mask.new_zeros(len(mask), longest - mask.shape[1])], 1)
        splits[split] = (x, mask, torch.as_tensor([index[c] for c in labels], dtype=torch.long))
    counts = "/".join(str(len(splits[s][2])) for s in SPLITS)
    data = ClassificationData(
        splits,
        classes,
        mean,
        std,
        f"JapaneseVowels: 12 LPC coefficients, 7-29 frames, 9 speakers, {counts} train/valid/test utterances",
    )
    return data, splits


@torch.no_grad()
def evaluate_classification(
    predictor,
    data: ClassificationData,
    split: str = "test",
    *,
    device="cpu",
    seed: int = 0,
    plots_dir: str | Path | None = None,
) -> dict:
    """Last-step class predictions on one split.

    Keys: ``accuracy`` (argmax of ``f_out(mean particle)``, the paper's predictor),
    ``mixture_accuracy``, ``nll`` (mean negative log probability of the true class under the
    particle mixture ``sum_i w^i softmax(f_out(h^i))``, nats), ``brier`` (squared error of those
    class probabilities against the one-hot label, averaged over classes and utterances; x C for
    the usual multi-class Brier score), ``<split>_sequences``. With ``plots_dir``, writes
    ``reliability.png`` (one-vs-rest over all classes).
    """
    split = check_choice(split, SPLITS, name="split")
    predictor.eval().to(device)
    x, mask, y = data.splits[split]
    x, mask = x.to(device), mask.to(device)
    belief = predictor.belief(x, mask, generator=torch.Generator(device=device).manual_seed(seed))
    last = mask.sum(1) - 1  # [N]
    rows = torch.arange(len(x), device=device)
    logits = predictor.head(belief.mean[rows, last]).cpu()  # [N, C]
    particle_probs = predictor.head(belief.particles[last, :, rows]).softmax(-1)  # [N, K, C]
    weights = belief.log_weights[last, :, rows].exp()  # [N, K]
    probs = (weights.unsqueeze(-1) * particle_probs).sum(1).clamp(0.0, 1.0).cpu()  # [N, C]; clamp float32 rounding
    one_hot = torch.nn.functional.one_hot(y, data.num_classes).float()
    metrics = {
        "accuracy": (logits.argmax(-1) == y).float().mean().item(),
        "mixture_accuracy": (probs.argmax(-1) == y).float().mean().item(),
        "nll": -probs.gather(1, y.unsqueeze(1)).clamp(min=1e-12).log().mean().item(),
        "brier": brier_score(probs.unsqueeze(1), one_hot.unsqueeze(1)),
        f"{split}_sequences": len(y),
    }
    if plots_dir is not None:
        curve = reliability_curve(probs.unsqueeze(1), one_hot.unsqueeze(1))
        plot_reliability(curve, Path(plots_dir) / "reliability.png")
    return metrics

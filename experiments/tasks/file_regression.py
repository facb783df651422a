"""A user's own table as a supervised regression task (``[data] name = "file"``) and its evaluation.

:func:`file_regression` reads a long-format ``.csv`` / ``.parquet`` table through
:class:`ppl_models.inference.data.datasets.SequenceDataset`: the ``targets`` columns are the ``y`` a
:class:`~ppl_models.pf_rnn.PFRNNPredictor` predicts at every step, the ``features`` columns
(default: every other numeric column) its inputs ``x``. The table is split (by series, by time
or by a split column), the inputs standardised on the training split, the targets by their own
training mean and standard deviation (:attr:`~ppl_models.inference.data.datasets.DataSplits.target_standardizer`).
Series of unequal lengths are padded with a mask, which the PF-RNN filter and
:class:`~ppl_models.inference.discriminative.DiscriminativeLoss` honour (padding at the end, state carried
over it, padded steps never scored).

:func:`evaluate_file_regression` judges the predictive of the particle mixture
``sum_i w_t^i N(f_out(h_t^i), sigma^2)`` (one Gaussian for the LSTM / GRU baselines) in the
targets' own units: ``rmse`` and ``mae`` of its mean, and ``crps``, coverage, widths and
``pit_ks`` from :func:`ppl_models.inference.calibration.calibration_summary` on its draws, with the exact
``nlpd`` of the mixture (change of variables back to the targets' units).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ppl_models.inference.calibration import calibration_summary, pit, plot_pit_ecdf, plot_predictive_bands
from ppl_models.inference.data import FileSpec, Standardizer
from ppl_models.inference.keyword_settings import field_names, sorted_keywords
from ppl_models.inference.validation import SettingError, check_choice, check_positive_int

from ..data import SPLITS, SupervisedData
from .own_file import read_dataset

__all__ = ["FileRegressionData", "file_regression", "spec_regression", "evaluate_file_regression"]

TABLES = (".csv", ".parquet")
#: the settings :func:`file_regression` takes as keywords: the fields of a ``FileSpec`` but those it sets itself
SETTINGS = field_names(FileSpec, without=("targets", "degenerate"))
#: the message of a regression without targets (a template of :class:`~ppl_models.inference.validation.SettingError`)
MISSING_TARGETS = (
    "data.targets: a PF-RNN predicts targets columns from the feature columns: give {data.targets} "
    "(e.g. {data.targets=['y']})"
)


@dataclass
class FileRegressionData(SupervisedData):
    """A user's table as regression splits, and what maps predictions back to the targets' units.

    Attributes:
        splits: ``{"train" | "valid" | "test": (x [N, T, D], mask [N, T] or None, y [N, T, O])}``,
            float32, in standard units; ``mask`` is ``None`` where every sequence has every step.
        features, targets: the column names of ``x`` and ``y``.
        standardizer, target_standardizer: fit on the training split (inputs, targets).
        split_record: what went where (:meth:`~ppl_models.inference.data.datasets.DataSplits.to_dict`).
        description: one line for logs.
    """

    splits: dict
    features: list[str]
    targets: list[str]
    standardizer: Standardizer
    target_standardizer: Standardizer
    split_record: dict
    description: str


def file_regression(
    path: str | os.PathLike, targets: str | list[str] | None = None, spec: FileSpec | None = None, **settings
) -> tuple[FileRegressionData, dict]:
    """The ``[data] name = "file"`` builder of a regression: :func:`spec_regression` of ``spec`` (a
    :class:`~ppl_models.inference.data.spec.FileSpec`, default its defaults) with ``settings`` (its fields as
    keywords) and ``targets`` (a column name or a list of them; default the spec's) in place. Every input column is
    kept (``degenerate="keep"``: a constant input decides no score); an unknown keyword is a ``TypeError`` naming it.
    """
    (settings,) = sorted_keywords("file_regression", settings, {"FileSpec": SETTINGS})
    targets = _target_columns(spec.targets if targets is None and spec is not None else targets)
    return spec_regression(path, FileSpec.of(spec, **settings, targets=targets, degenerate="keep"))


def _target_columns(targets) -> list[str]:
    """``targets`` (a column name or a list of them) as a list; an error naming ``data.targets`` otherwise."""
    if targets is None or (isinstance(targets, (list, tuple)) and not targets):
        raise SettingError("targets", MISSING_TARGETS)
    if isinstance(targets, str) and targets.startswith("["):  # the shell ate the quotes of --set data.targets=["y"]
        raise ValueError(
            f"data.targets: got the text {targets!r}, not a list: quote it for the shell, --set 'data.targets=[\"y\"]'"
        )
    targets = [targets] if isinstance(targets, str) else targets
    if not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) for t in targets):
        raise TypeError(f"data.targets: expected a list of column names, got {targets!r}")
    return targets


def spec_regression(path: str | os.PathLike, spec: FileSpec) -> tuple[FileRegressionData, dict]:
    """The ``spec.targets`` columns of the table at ``path`` predicted from its feature columns: ``(data, splits)``.

    ``spec`` names the columns and the split as for
    :meth:`~ppl_models.inference.data.datasets.SequenceDataset.from_file` and
    :meth:`~ppl_models.inference.data.datasets.SequenceDataset.split`; its ``window`` / ``stride`` cut training
    windows, validation and test into consecutive windows. ``splits[s] = (x [N, T, D], mask or None, y [N, T, O])``
    in standard units.
    """
    if not spec.targets:
        raise SettingError("targets", MISSING_TARGETS)
    if Path(path).suffix.lower() not in TABLES:
        raise ValueError(f"{path}: targets are columns of a table: expected a {' or '.join(TABLES)} file")
    dataset = read_dataset(path, spec)
    parts = dataset.split(by=spec.split_by, fractions=spec.split_fractions, seed=spec.split_seed, context=False)
    if spec.window is not None:
        parts = parts.windows(spec.window, spec.stride, held_out="cover")
    splits = {}
    for name, part in zip(SPLITS, parts):
        x, mask = part.padded(parts.standardizer)
        splits[name] = (x, None if bool(mask.all()) else mask, part.padded_targets(parts.target_standardizer))
    counts = "/".join(str(len(part)) for part in parts)
    description = (
        f"{path}: {', '.join(dataset.target_names)} from {', '.join(dataset.features)}, "
        f"{counts} train/valid/test sequences"
    )
    data = FileRegressionData(
        splits,
        list(dataset.features),
        list(dataset.target_names),
        parts.standardizer,
        parts.target_standardizer,
        parts.to_dict(),
        description,
    )
    return data, splits


@torch.no_grad()
def evaluate_file_regression(
    predictor,
    data: FileRegressionData,
    split: str = "test",
    *,
    device="cpu",
    seed: int = 0,
    num_samples: int = 200,
    batch_size: int = 256,
    plots_dir: str | Path | None = None,
) -> dict:
    """Metrics of a regression predictor on one split of ``data``, over its valid steps, in the targets' units.

    Keys: ``rmse``, ``mae`` (of the predictive mean), ``crps``, ``coverage_<level>``,
    ``width_<level>``, ``pit_ks`` (pooled over steps and targets), ``nlpd`` (nats per step per
    target: the mixture's joint log density of the ``O`` targets over ``O``), ``mean_rmse`` (the
    reference of predicting the training mean), ``sigma`` (learned scale per target),
    ``mean_ess`` (effective sample size of the particle weights), ``targets``,
    ``<split>_sequences``, ``<split>_steps``; with several targets also ``by_target`` (the same
    metrics per target, its ``nlpd`` from its marginal). With ``plots_dir``, writes
    ``pit_ecdf.png`` and ``predictive_bands.png`` (the first sequence, first target).
    """
    split = check_choice(split, SPLITS, name="split")
    check_positive_int(num_samples, name="num_samples")
    check_positive_int(batch_size, name="batch_size")
    predictor.eval().to(device)
    x, mask, y = data.splits[split]
    mask = torch.ones(x.shape[:2], dtype=torch.bool) if mask is None else mask
    generator = torch.Generator(device=device).manual_seed(seed)
    means, draws, log_w, log_prob, ess = _mixture(predictor, x, mask, y, generator, num_samples, batch_size)
    units = data.target_standardizer
    observed, predicted = units.inverse(y), units.inverse(means)
    predictive = units.inverse(draws)  # [S, N, T, O]
    log_jacobian = torch.tensor(units.scale, dtype=log_prob.dtype).log()  # [O]: y = mean + scale z
    joint = torch.logsumexp(log_w + log_prob.sum(-1), 1)  # [N, T]: the mixture's density of the O targets
    joint = (joint - log_jacobian.sum()) / len(data.targets)  # per target, in the targets' units
    metrics = _scores(predicted, observed, predictive, mask, joint, units.mean, seed)
    if len(data.targets) > 1:
        marginal = torch.logsumexp(log_w.unsqueeze(-1) + log_prob, 1) - log_jacobian  # [N, T, O]
        metrics["by_target"] = {
            name: _scores(
                predicted[..., [o]],
                observed[..., [o]],
                predictive[..., [o]],
                mask,
                marginal[..., o],
                units.mean[o : o + 1],
                seed,
            )
            for o, name in enumerate(data.targets)
        }
    scale = predictor.log_scale.exp().cpu()
    metrics.update(
        sigma={name: float(scale[o]) * units.scale[o] for o, name in enumerate(data.targets)},
        mean_ess=ess / int(mask.sum()),
        targets=list(data.targets),
        predictive_samples=num_samples,
        **{f"{split}_sequences": len(x), f"{split}_steps": int(mask.sum())},
    )
    if plots_dir is not None:
        plots_dir = Path(plots_dir)
        plot_pit_ecdf(
            pit(predictive, observed, mask, generator=torch.Generator().manual_seed(seed)), plots_dir / "pit_ecdf.png"
        )
        plot_predictive_bands(predictive, observed, mask=mask, path=plots_dir / "predictive_bands.png")
    return metrics


def _mixture(predictor, x, mask, y, generator, num_samples: int, batch_size: int) -> tuple:
    """The predictor's particle mixture on ``x [N, T, D]`` (``mask [N, T]``), ``batch_size`` sequences at a time, in
    standard units: ``(means [N, T, O], draws [S, N, T, O], log weights [N, K, T], log densities of y [N, K, T, O],
    the effective sample size summed over the valid steps)``."""
    device = generator.device
    means, draws, log_weights, log_probs, ess = [], [], [], [], 0.0
    for start in range(0, len(x), batch_size):
        xb, mb, yb = (t[start : start + batch_size].to(device) for t in (x, mask, y))
        belief = predictor.belief(xb, mb, generator=generator)
        predictive = predictor.belief_predictive(belief, num_samples, generator)
        means.append(predictive.mean.cpu())
        draws.append(predictive.samples.cpu())
        component = predictor.particle_distribution(belief.particles).base_dist  # N(f_out(h_t^i), sigma) per target
        log_probs.append(component.log_prob(yb.transpose(0, 1).unsqueeze(1)).transpose(0, 2).cpu())  # [B, K, T, O]
        log_weights.append(belief.log_weights.transpose(0, 2).cpu())  # [B, K, T]
        ess += float((1.0 / belief.log_weights.exp().square().sum(1)).T[mb].sum())
    return torch.cat(means), torch.cat(draws, 1), torch.cat(log_weights), torch.cat(log_probs), ess


def _scores(predicted, observed, predictive, mask, log_density, mean: list[float], seed: int) -> dict:
    """rmse, mae, the calibration summary (with nlpd) and the training-mean reference over the valid steps."""
    error = (predicted - observed)[mask]  # [M, O]
    reference = observed[mask] - torch.tensor(mean, dtype=observed.dtype)
    summary = calibration_summary(
        predictive, observed, mask, log_density, generator=torch.Generator().manual_seed(seed)
    )
    return {
        "rmse": error.square().mean().sqrt().item(),
        "mae": error.abs().mean().item(),
        **summary,
        "mean_rmse": reference.square().mean().sqrt().item(),
    }

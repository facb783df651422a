"""Which likelihood fits a user's file (:func:`resolve_likelihood`): Bernoulli for 0/1 data, a count likelihood for
non-negative integers, a log-normal or a Gaussian for real values; the splits read, transformed and standardised to
suit it.

``likelihood`` (the ``[data]`` key, ``--likelihood``) is one of :data:`LIKELIHOODS`:

* ``"auto"`` (the default): binary data is Bernoulli; data whose every forecast value is a non-negative integer
  (and not only 0 and 1; covariates may be any real value) is a count, negative binomial where the training split
  is overdispersed (:func:`dispersion_index` above :data:`DISPERSION_THRESHOLD` in a target), else Poisson, unless
  no training value of the targets is below
  :data:`LARGE_COUNT` (large counts are read as real values); anything else is real-valued, its transform chosen
  on the validation split (:func:`~ppl_models.inference.data.transform_choice.resolve_transform`), which makes it
  log-normal where the transform chosen takes logs. A transform given (``data.transform`` other than ``"auto"`` or
  ``"none"``) asks for real values: the data is then modelled as real-valued, counts too.
* ``"poisson"``, ``"negbin"``: a count likelihood (refused unless every value is a non-negative integer).
* ``"lognormal"``: a Gaussian of ``log x`` (every value positive): the transform takes logs (``"auto"`` chooses
  among the transforms with log), so every model takes it, and its densities and draws in the data's units carry
  the Jacobian ``1 / x`` and are positive.
* ``"gaussian"``: real values, the transform chosen among those without log.
* ``"real"``: real values, counts too, Gaussian or log-normal as the transform chosen takes logs.

Counts are neither transformed nor standardised (a count likelihood reads the integers themselves; covariates beside
them are standardised, as inputs); the models
with a count emission (:data:`~ppl_models.nets.COUNT_EMISSIONS`) then take the likelihood's name as theirs, and
:func:`count_scale` as the scale their nets read the counts by (DeepAR's: one plus each feature's training mean).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..validation import SettingError
from .spec import setting_choice
from .splits import SPLITS, DataSplits
from .standardize import Standardizer
from .transform_choice import resolve_transform
from .transforms import SeriesTransform, binary_splits

__all__ = [
    "LIKELIHOODS",
    "COUNT_LIKELIHOODS",
    "DISPERSION_THRESHOLD",
    "LARGE_COUNT",
    "resolve_likelihood",
    "dispersion_index",
    "first_non_count",
    "count_scale",
]

#: the values of ``likelihood``
LIKELIHOODS = ("auto", "gaussian", "poisson", "negbin", "lognormal", "real")
#: the likelihoods of non-negative integer data
COUNT_LIKELIHOODS = ("poisson", "negbin")
#: a count feature whose :func:`dispersion_index` on the training split is above this is overdispersed: ``"auto"``
#: then chooses a negative binomial (a Poisson's index is 1; 1.5 leaves room for its sampling error on short series)
DISPERSION_THRESHOLD = 1.5
#: integer data none of whose training values is below this is read as real values by ``"auto"``: a count's
#: discreteness hardly matters there (a Poisson of rate 20 has sd 4.5), and real values are transformed and
#: standardised, which the count emissions' nets, reading the integers as they are, lack (on monthly airline
#: passengers, 104 to 622 thousand, they fell far below the last value)
LARGE_COUNT = 20
#: the transform specs that leave the data as it is, or let the likelihood decide
_OPEN_TRANSFORMS = ("auto", "none")


def resolve_likelihood(
    spec: str,
    splits: DataSplits,
    transform: str = "auto",
    *,
    season: int | None = None,
    window: int | None = None,
    prefix: str = "",
) -> tuple[DataSplits, dict, dict]:
    """``(splits, transform record, likelihood record)``: ``splits`` (as read) prepared for likelihood ``spec`` (one
    of :data:`LIKELIHOODS`) with ``transform`` (:func:`~ppl_models.inference.data.transform_choice.resolve_transform`,
    with ``season``, ``window`` and ``prefix``). The likelihood record holds its ``name`` (``"bernoulli"``,
    ``"gaussian"``, ``"lognormal"``, ``"poisson"`` or ``"negbin"``), ``why`` in one line, for counts the
    training split's :func:`dispersion_index` per feature and :func:`count_scale`, and for large counts read as real
    values (:data:`LARGE_COUNT`) their smallest training value (``large_counts``). A likelihood the data cannot take
    is a :class:`~ppl_models.inference.validation.SettingError` naming ``likelihood``."""
    setting_choice(spec, "likelihood", LIKELIHOODS)
    open_transform = isinstance(transform, str) and transform.strip().lower() in _OPEN_TRANSFORMS
    if binary_splits(splits):
        if spec != "auto":
            raise SettingError("likelihood", f"{{likelihood}} {spec!r}: the data is binary (0/1), which is Bernoulli")
        return (
            *resolve_transform(transform, splits, season=season, window=window, prefix=prefix),
            {"name": "bernoulli", "why": "every value is 0 or 1"},
        )
    non_count = first_non_count(splits, covariates=_binary_targets(splits))
    smallest = _smallest_training_value(splits) if non_count is None else None
    large = smallest is not None and smallest >= LARGE_COUNT
    if spec in COUNT_LIKELIHOODS or (spec == "auto" and non_count is None and open_transform and not large):
        if non_count is not None:
            raise SettingError("likelihood", f"{{likelihood}} {spec!r} needs counts: {non_count}")
        if not open_transform:
            raise SettingError(
                "transform",
                f"{{transform}} {transform!r}: counts are modelled as they are (a {spec} likelihood reads the "
                f"integers themselves); leave {{transform}} at 'auto' or give {{likelihood='gaussian'}}",
            )
        return _as_counts(splits, spec, transform)
    logs = {"lognormal": True, "gaussian": False}.get(spec)
    if logs:
        _check_positive(splits)
    applied, record = resolve_transform(transform, splits, season=season, window=window, prefix=prefix, logs=logs)
    taken = bool(getattr(applied.transform, "log", False))
    if logs is not None and taken != logs:
        raise SettingError(
            "transform",
            f"{{transform}} {transform!r}: {{likelihood={spec!r}}} is a Gaussian of "
            f"{'log x' if logs else 'x'}: give a transform {'with' if logs else 'without'} log, or 'auto'",
        )
    name = "lognormal" if taken else "gaussian"
    if spec != "auto":
        why = f"given by the likelihood setting; transform {record['name']!r}"
    elif non_count is None and not open_transform:
        why = f"counts, but the transform {transform!r} given asks for real values"
    elif non_count is None:
        why = (
            f"integers, but large counts (none below {LARGE_COUNT} on the training split, the smallest "
            f"{smallest:g}): real values; transform {record['name']!r} chosen on the validation split"
        )
        return applied, record, {"name": name, "why": why, "large_counts": smallest}
    else:
        why = f"real values; transform {record['name']!r}" + (" chosen on the validation split" * open_transform)
    return applied, record, {"name": name, "why": why}


def _smallest_training_value(splits: DataSplits) -> float:
    """The smallest value of the forecast features (not the covariates) on the training split."""
    columns = splits.train.forecast_columns
    return float(min(values[:, :columns].min() for values in splits.train.sequences))


def first_non_count(splits: DataSplits, *, covariates: bool = False) -> str | None:
    """Where the forecast columns of ``splits`` (with ``covariates``, every column) hold a value that is not a
    non-negative integer, in words (the first such feature, value and series), or ``None`` where every value is one.
    Covariates are inputs, not scored: counts beside a real-valued covariate are counts."""
    for split, part in zip(SPLITS, splits):
        columns = part.obs_dim if covariates else part.forecast_columns
        for row, values in zip(part.ids, part.sequences):
            values = values[:, :columns]
            bad = (values < 0) | (values != np.round(values))
            if bad.any():
                step, feature = np.argwhere(bad)[0]
                return (
                    f"feature {part.features[feature]!r} holds {values[step, feature]:g} in series {row!r} of the "
                    f"{split} split"
                )
    return None


def dispersion_index(sequences: list[np.ndarray]) -> np.ndarray:
    """``[D]``: per feature of count rows ``[T_i, D]``, ``sum (x_t - x_{t-1})^2 / sum (x_t + x_{t-1})`` over every
    pair of consecutive steps: 1 for a Poisson of a rate that changes slowly (the squared change of two draws has
    mean ``2 lambda``, their sum too), above 1 for overdispersed counts; 1 for a feature that is always 0."""
    pairs = [(row[1:] - row[:-1], row[1:] + row[:-1]) for row in sequences if len(row) > 1]
    squared = sum(np.square(change).sum(0) for change, _ in pairs)
    level = sum(total.sum(0) for _, total in pairs)
    return np.where(level > 0, squared / np.where(level > 0, level, 1.0), 1.0)


def _binary_targets(splits: DataSplits) -> bool:
    """Whether every forecast value is 0 or 1: such targets beside covariates that are not are read as real values
    (binary data is decided on every column, ``SequenceDataset.binary``), not as counts."""
    return all(np.isin(v[:, : part.forecast_columns], (0.0, 1.0)).all() for part in splits for v in part.sequences)


def _as_counts(splits: DataSplits, spec: str, transform: str) -> tuple[DataSplits, dict, dict]:
    """``splits`` as counts: the targets neither transformed nor standardised, the covariates standardised (inputs
    only); Poisson or negative binomial by ``spec`` (``"auto"``: by :func:`dispersion_index` of the targets)."""
    targets = splits.train.forecast_columns
    features = list(splits.train.features)[:targets]
    index = dispersion_index([row[:, :targets] for row in splits.train.sequences])
    worst = int(np.argmax(index))
    if spec == "auto":
        spec = "negbin" if index[worst] > DISPERSION_THRESHOLD else "poisson"
        why = (
            f"counts (every forecast value a non-negative integer); the largest dispersion index on the training "
            f"split (squared step changes over twice the level) is {index[worst]:.3g} ({features[worst]!r}), "
            f"{'above' if spec == 'negbin' else 'not above'} {DISPERSION_THRESHOLD}"
        )
    else:
        why = "given by the likelihood setting"
    fitted = splits.standardizer
    counts = Standardizer(
        [0.0] * targets + fitted.mean[targets:], [1.0] * targets + fitted.scale[targets:], list(fitted.features)
    )
    applied = SeriesTransform().apply(dataclasses.replace(splits, standardizer=counts))
    record = {
        **SeriesTransform().to_dict(),
        "spec": transform,
        "season": None,
        "chosen_by": "counts are modelled as they are: a count likelihood reads the integers themselves",
    }
    dispersion = {feature: float(value) for feature, value in zip(features, index)}
    scale = count_scale([row[:, :targets] for row in splits.train.sequences])
    scale += [1.0] * (splits.train.obs_dim - targets)  # the covariates, standardised: read as they are
    return applied, record, {"name": spec, "why": why, "dispersion_index": dispersion, "count_scale": scale}


def count_scale(sequences: list[np.ndarray]) -> list[float]:
    """``[D]``: one plus each feature's mean over count rows ``[T_i, D]`` (the training split's), the scale a count
    emission's nets read the counts by (:class:`~ppl_models.nets.CountScale`; DeepAR's ``1 + mean``)."""
    values = np.concatenate([row for row in sequences if len(row)], axis=0)
    return [1.0 + float(mean) for mean in values.mean(axis=0)]


def _check_positive(splits: DataSplits) -> None:
    """Refuse a log-normal likelihood on data with a forecast value <= 0 (covariates are not logged), naming the
    first."""
    for split, part in zip(SPLITS, splits):
        for row, values in zip(part.ids, part.sequences):
            forecast = values[:, : part.forecast_columns]
            if (forecast <= 0).any():
                step, feature = np.argwhere(forecast <= 0)[0]
                raise SettingError(
                    "likelihood",
                    f"{{likelihood}} 'lognormal' needs values > 0: feature {part.features[feature]!r} holds "
                    f"{values[step, feature]:g} in series {row!r} of the {split} split",
                )

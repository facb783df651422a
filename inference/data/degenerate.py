"""Features that carry no series of their own: constant ones, ones constant within every series, and exact linear
functions of the others.

Such a feature decides a likelihood comparison by itself: a forecaster that predicts it exactly (last value on a
constant column, a VAR on a column that is ``2 a + 1``) gets a predictive variance at its floor and an arbitrarily
high density there, whatever it does on the features that move. :func:`degenerate_features` finds them on a data set's
valid steps; readers leave them out of the modelled (and so of the scored) features, the same for every model, and
name them in one warning.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["degenerate_features", "COLLINEAR_TOLERANCE"]

#: a feature whose variance left after regressing it on the features kept before it (with an intercept) is below
#: this share of its own variance is an exact linear function of them (float64 rounding of values read from text)
COLLINEAR_TOLERANCE = 1e-10


def degenerate_features(sequences: Sequence[np.ndarray], features: Sequence[str]) -> dict[str, str]:
    """``{feature: why it is left out}`` of the sequences ``[T_i, D]`` (every step valid), in feature order.

    A feature is left out when it is constant over every step (``"constant (every value 3)"``), constant within each
    series while the series differ (``"constant within each series ..."``: a series attribute, not a series), or
    an exact linear function of the features before it that are kept (``"an exact linear function of ..."``, the
    fit given in the data's units). Returns ``{}`` where every feature moves on its own.
    """
    values = np.concatenate(sequences)
    reasons = {}
    for d, name in enumerate(features):
        if _flat(values[:, d]):
            reasons[name] = f"constant (every value {values[0, d]:.6g})"
        elif len(sequences) > 1 and all(_flat(s[:, d]) for s in sequences):
            reasons[name] = "constant within each series (a series attribute, not a series of its own)"
    kept = [d for d, name in enumerate(features) if name not in reasons]
    for d, fit in _collinear(values, kept).items():
        reasons[features[d]] = "an exact linear function of the others (" + _formula(features, d, fit) + ")"
    return {name: reasons[name] for name in features if name in reasons}


def _flat(column: np.ndarray) -> bool:
    """Whether ``column [n]`` has no spread beyond float64 rounding."""
    return not column.std() > 4 * np.finfo(np.float64).eps * np.abs(column).max()


def _collinear(values: np.ndarray, columns: list[int]) -> dict[int, tuple[float, dict[int, float]]]:
    """``{d: (intercept, {k: coefficient})}`` of the ``columns`` of ``values [n, D]`` that are an exact linear function
    of the columns before them that are not themselves such functions (greedy, in order); terms worth less than
    :data:`COLLINEAR_TOLERANCE` of the column's size are left out of the fit."""
    found, basis = {}, []
    for d in columns:
        if basis:
            design = np.c_[np.ones(len(values)), values[:, basis]]
            coefficients, *_ = np.linalg.lstsq(design, values[:, d], rcond=None)
            residual = values[:, d] - design @ coefficients
            if residual.var() < COLLINEAR_TOLERANCE * values[:, d].var():
                size = COLLINEAR_TOLERANCE * np.abs(values[:, d]).max()
                terms = {k: float(c) for k, c in zip(basis, coefficients[1:]) if abs(c) * values[:, k].std() > size}
                found[d] = (float(coefficients[0]) if abs(coefficients[0]) > size else 0.0, terms)
                continue
        basis.append(d)
    return found


def _formula(features: Sequence[str], d: int, fit: tuple[float, dict[int, float]]) -> str:
    """``"b = 2 temp + 1"``: feature ``d`` as its fit ``(intercept, {k: coefficient})``."""
    intercept, coefficients = fit
    terms = [f"{c:.4g} {features[k]}" for k, c in coefficients.items()] + ([f"{intercept:.4g}"] if intercept else [])
    return f"{features[d]} = " + " + ".join(terms or ["0"]).replace("+ -", "- ")

"""What a leaderboard says is wrong: flags on its rows and warnings about its data.

A row is flagged (``flags`` in ``leaderboard.json``, a column of ``leaderboard.md``) when

* it failed (``failed``: its one-line reason; it has no figures);
* its held-out figure or MSE is not finite;
* it is far below the last-value row (:data:`FAR_BELOW_NATS` nats per step, or :data:`FAR_ABOVE_MSE` times its
  one-step MSE): a forecast that ignores everything but the last value does better;
* its 80 % intervals are far off on the validation split (coverage below :data:`COVERAGE_RANGE` [0] or above [1]);
* it was still improving when it stopped: its best epoch within its patience of its last one;
* its fit went wrong in a way its row records (``fit_issues`` of a classical row: an optimiser that did not converge).

A flagged row is never ranked first: where the highest held-out figure is a flagged row's, the best row without a
flag leads and :func:`ranking_note` says why (``ranking`` in ``leaderboard.json``, a line of ``leaderboard.md``).

A board warns (``warnings``) when a share of the test values beyond :data:`OUTSIDE_SHARE` lies outside the range
the training split spans, feature by feature: a model that has never seen such values extrapolates.
"""

from __future__ import annotations

import math

__all__ = [
    "FAR_BELOW_NATS",
    "FAR_ABOVE_MSE",
    "COVERAGE_RANGE",
    "OUTSIDE_SHARE",
    "FLAG_KINDS",
    "flag_rows",
    "row_flags",
    "ranking_note",
    "flag_kind",
    "board_warnings",
]

#: nats per step below the last-value row from which a row is flagged
FAR_BELOW_NATS = 1.0
#: times the last-value row's one-step MSE from which a row is flagged
FAR_ABOVE_MSE = 4.0
#: the validation coverage of the central 80 % interval outside which a row is flagged
COVERAGE_RANGE = (0.5, 0.98)
#: the share of test values outside the training range (per feature) from which a board warns
OUTSIDE_SHARE = 0.05


def flag_rows(rows: list[dict]) -> list[dict]:
    """``rows`` with their ``flags`` (:func:`row_flags`, against the ``last-value`` row where there is one, unless it
    failed), ranked by held-out nats per step, rows with non-finite figures after them and failed rows last; the
    best row without a flag first where a flagged one would lead."""
    reference = next((row for row in rows if row["model"] == "last-value" and not row.get("failed")), None)
    flagged = [{**row, "flags": row_flags(row, reference)} for row in rows]
    ranked = sorted(
        flagged,
        key=lambda row: (
            bool(row.get("failed")),
            not _finite(row["nats_per_step"]),
            -row["nats_per_step"] if _finite(row["nats_per_step"]) else 0.0,
        ),
    )
    leader = next((row for row in ranked if not row["flags"] and _finite(row["nats_per_step"])), None)
    if leader is None or leader is ranked[0]:
        return ranked
    return [leader, *(row for row in ranked if row is not leader)]


def ranking_note(rows: list[dict]) -> str | None:
    """Why the first of ranked ``rows`` (:func:`flag_rows`) is not the one with the highest held-out figure, in one
    line; ``None`` where it is."""
    scored = [row for row in rows if not row.get("failed") and _finite(row["nats_per_step"])]
    if not scored:
        return None
    best = max(scored, key=lambda row: row["nats_per_step"])
    if best is rows[0]:
        return None
    above = [row for row in scored if row["nats_per_step"] > rows[0]["nats_per_step"]]
    why = "; ".join(f"{row['model']}: {', '.join(row['flags'])}" for row in above)
    first = rows[0]["model"]
    return f"{first} is ranked first as the best row without a flag; those above it are flagged ({why})"


def row_flags(row: dict, reference: dict | None = None) -> list[str]:
    """What is wrong with one board row, in words (empty: nothing seen)."""
    if row.get("failed"):
        return [f"failed: {row['failed']}"]
    flags = []
    if not _finite(row["nats_per_step"]) or (row.get("mse") is not None and not _finite(row["mse"])):
        flags.append("non-finite held-out figure")
    elif reference is not None and row is not reference and row["model"] != reference["model"]:
        gap = reference["nats_per_step"] - row["nats_per_step"]
        if gap > FAR_BELOW_NATS:
            flags.append(f"{gap:.2f} nats/step below the last value")
        if row.get("mse") is not None and reference.get("mse") and row["mse"] > FAR_ABOVE_MSE * reference["mse"]:
            flags.append(f"one-step MSE {row['mse'] / reference['mse']:.1f}x the last value's")
    coverage = (row.get("validation") or {}).get("coverage_0.8")
    if coverage is not None and not COVERAGE_RANGE[0] <= coverage <= COVERAGE_RANGE[1]:
        flags.append(f"validation coverage at 80 % is {coverage:.2f}")
    best, last, patience = row.get("best_epoch"), row.get("epochs_run"), row.get("patience")
    if best is not None and last is not None and last - best < (patience or 1):
        flags.append(f"still improving (best epoch {best} of {last})")
    flags += [f"fit: {issue}" for issue in row.get("fit_issues") or ()]
    return flags


#: the kinds of flag, each the start of its text in :func:`row_flags`' words -> its name over seeds
FLAG_KINDS = {
    "failed:": "failed",
    "non-finite": "non-finite figure",
    "nats/step below": "far below the last value",
    "one-step MSE": "MSE far above the last value's",
    "validation coverage": "validation coverage off",
    "multi-step coverage": "multi-step coverage off",
    "still improving": "still improving",
    "fit:": "fit did not converge",
}


def flag_kind(flag: str) -> str:
    """The kind of a flag of :func:`row_flags` (:data:`FLAG_KINDS`), its numbers left out."""
    return next(name for words, name in FLAG_KINDS.items() if words in flag)


def board_warnings(data) -> list[str]:
    """Warnings about ``data`` (:class:`~ppl_models.experiments.data.ExperimentData`): each feature of the file left
    out of every row (constant, or an exact linear function of others: the split record's ``left_out``), and each
    feature whose scored test values (as read, before a transform) lie outside the training split's range in a share
    above :data:`OUTSIDE_SHARE`."""
    left_out = [
        f"{name}: left out of every row, since it is {why}"
        for name, why in (data.split_record or {}).get("left_out", {}).items()
    ]
    if data.binary:
        return left_out
    source = data.levels if data.levels is not None else data  # the data as read, before any transform
    x, mask = source.train
    low, high = x[mask].amin(0), x[mask].amax(0)
    test, test_mask = source.test
    scored = source.scored["test"] if data.levels is not None else data.scored_mask("test")
    values = test[test_mask if scored is None else scored]  # [n, D], standardised: monotone in the data's units
    names = (data.split_record or {}).get("standardizer", {}).get("features") or [
        f"feature {d}" for d in range(x.shape[-1])
    ]
    warnings = left_out
    for d, name in enumerate(names):
        above, below = (values[:, d] > high[d]).double().mean().item(), (values[:, d] < low[d]).double().mean().item()
        if above + below > OUTSIDE_SHARE:
            warnings.append(
                f"{name}: {100 * (above + below):.0f} % of the test values lie outside the training "
                f"range ({100 * above:.0f} % above its maximum, {100 * below:.0f} % below its minimum): "
                "a model of the levels extrapolates there (the transform chosen for the collection's "
                "models is in data_split.json)"
            )
    return warnings


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)

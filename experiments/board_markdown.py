"""The Markdown page of a board (``leaderboard.md``): its explanation, warnings, ranking note and one row per model
or classical forecaster (:func:`board_markdown`), with figures written as the tables write them (:func:`number`)."""

from __future__ import annotations

from .tables import figure

__all__ = ["board_markdown", "number"]


def board_markdown(
    rows: list[dict], path, not_run: dict[str, str], warnings: list[str], same: dict[str, str], ranking: str | None
) -> str:
    binary = all(row["crps"] is None for row in rows if not row.get("failed"))
    spread = ("Brier", "ECE") if binary else ("CRPS", "cov. 50%", "cov. 80%", "cov. 95%", "PIT KS")
    keys = ("brier", "ece") if binary else ("crps", "coverage_0.5", "coverage_0.8", "coverage_0.95", "pit_ks")
    head = (
        "model",
        "kind",
        "transform",
        "season",
        "form",
        "held-out nats / step",
        "estimator",
        *spread,
        "one-step MSE",
        "train + eval s",
        "best / last epoch",
        "parameters",
        "flags",
    )
    lines = [
        f"# Leaderboard: {path}",
        "",
        "Held-out (test split) figures in the data's own units, on the same scored steps for every row (a "
        "held-out segment of a series is predicted given all of the series' earlier steps); each model of the "
        "collection at its recipe, each classical forecaster (statsforecast, statsmodels) fitted on the training "
        "split and on each series' history. Transform: the one the row models (the collection's chosen on the "
        "validation split; the classical rows take its log and do their own differencing); season: the one it "
        "uses; form: the model and its likelihood (a count column gets a Poisson or negative binomial one), or the "
        "classical forms chosen per series (how many series took each). Higher nats "
        "per step is better (a bound where the model has no exact likelihood). Coverage is the share of test "
        "values inside the central interval of that level (ideal: the level); PIT KS is 0 for a calibrated "
        "predictive. Flags: a row that failed (its reason), a row far below the last value, with validation "
        "coverage at 80 % below 0.5 or above 0.98, with non-finite figures, still improving when it stopped, or "
        "whose fit did not converge; a flagged row is never ranked first.",
        "",
    ]
    lines += [f"**Warning:** {warning}" for warning in warnings] + ([""] if warnings else [])
    lines += [f"**Ranking:** {ranking}", ""] if ranking else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        epochs = "-" if row["best_epoch"] is None else f"{row['best_epoch']} / {row['epochs_run']}"
        seconds, size = row["train_seconds"], row["num_parameters"]  # None in a failed row
        cells = (
            " = ".join([row["model"], *row.get("same_as", ())]),
            row["kind"],
            row.get("transform") or "-",
            "-" if row.get("season") is None else str(row["season"]),
            row.get("form") or "-",
            number(row["nats_per_step"]),
            row["estimator"] or "-",
            *(number(row[k]) for k in keys),
            number(row["mse"]),
            "-" if seconds is None else f"{seconds:.0f}",
            epochs,
            "-" if size is None else f"{size:,}",
            "; ".join(row["flags"]) or "-",
        )
        lines.append("| " + " | ".join(cells) + " |")
    failed = [row["model"] for row in rows if row.get("failed")]
    if failed:
        lines += [
            "",
            f"Failed: {', '.join(failed)} (the reason in the flags); run the same command again to try again "
            "(finished runs are kept).",
        ]
    if same:
        lines += ["", "One row for two:", "", *(f"- {why}" for why in same.values())]
    if not_run:
        lines += ["", "Not run:", "", *(f"- not run: {reason}" for reason in not_run.values())]
    return "\n".join(lines) + "\n"


def number(value) -> str:
    """A figure as the tables write it, ``-`` for none."""
    return "-" if value is None else figure(value)

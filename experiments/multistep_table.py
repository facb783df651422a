"""The multi-step table of ``leaderboard.md``, from the ``multistep`` section of ``leaderboard.json``
(:func:`~ppl_models.experiments.multistep_board.multistep_section`)."""

from __future__ import annotations

from .board_markdown import number

__all__ = ["multistep_markdown"]


def multistep_markdown(section: dict) -> str:
    """The section ``## Multi-step forecasts``: what was done in words, then per row its CRPS per step ahead, their
    mean, the 80 % coverage (mean over horizons), the difference from the reference with its interval, the verdict
    and the flags."""
    horizon, reference, interval = section["horizon"], section["reference"], section["interval"]
    used = [len(row) for row in section["origin_steps"]]
    versus = f"vs {reference}: difference [{round(100 * interval['level'])} % interval]" if reference else "vs -"
    head = ("model", "kind", *(f"CRPS h={h}" for h in range(1, horizon + 1)), "mean CRPS", "cov. 80%", versus)
    head += ("verdict", "flags")
    lines = [
        "",
        f"## Multi-step forecasts: {horizon} steps ahead",
        "",
        f"{section['forecasts']} forecasts per row from {_span(used)} origins per test series ({len(used)} series; "
        f"at most {section['origins']} asked), the same for every row, each given only the series' steps before "
        "its origin: the collection's models filtered on that history, the classical rows fitted again on it. "
        f"CRPS of {section['samples']} draws per step ahead h, in the data's units, mean over series, origins and "
        "features (lower is better); mean CRPS: its mean over h; cov. 80%: the share of targets inside the draws' "
        "central 80 % interval, mean over h. "
        + (
            f"Against {reference}, the classical row of lowest mean CRPS: the difference in mean CRPS (negative: "
            f"lower than {reference}'s) with its {_interval(interval)}; beats or behind where the interval lies "
            "below or above 0, tie where it holds 0. "
            if reference
            else "No classical row was scored, so no row is compared. "
        )
        + "Ranked by mean CRPS; a row flagged for coverage is never ranked first.",
        "",
    ]
    lines += [f"**Ranking:** {section['ranking']}", ""] if section["ranking"] else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in section["rows"]:
        if row.get("failed"):
            cells = [row["model"], row["kind"], *["-"] * (horizon + 4), "; ".join(row["flags"])]
        else:
            cells = [
                row["model"],
                row["kind"],
                *(number(value) for value in row["per_horizon"]["crps"]),
                number(row["crps_mean"]),
                number(row["coverage_80_mean"]),
                *_versus_cells(row["versus"]),
                "; ".join(row["flags"]) or "-",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _versus_cells(versus: dict | None) -> tuple[str, str]:
    """The cells of a row's comparison with the reference: the difference and its interval, and the verdict."""
    if versus is None:
        return "-", "-"
    if versus["verdict"] == "reference":
        return "0 (the reference)", "reference"
    low, high = versus["low"], versus["high"]
    return f"{number(versus['difference'])} [{number(low)}, {number(high)}]", versus["verdict"]


def _interval(interval: dict) -> str:
    """The interval's method in words."""
    unit = "whole test series" if interval["resampled"] == "series" else "(series, origin) pairs"
    return (
        f"{round(100 * interval['level'])} % paired bootstrap interval ({interval['resamples']} resamples of "
        f"{unit}, percentile)"
    )


def _span(counts: list[int]) -> str:
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low} to {high}"

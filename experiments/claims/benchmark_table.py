"""The tables of a benchmark's results file on a docs page (``<!-- speed:NAME -->`` blocks, from
``docs/results/NAME.json``): its timed rows, its comparisons and where and how it was measured, so that no timing is
typed by hand.

A benchmark file holds ``rows`` (``{row: {"median_s", "best_s", "times_s", ...}}``), optionally ``comparisons``
(``{what: {figure: number or None}}``, such as speed-ups and ratios), and its ``command`` (or ``commands``),
``machine`` (with ``git_commit``), ``threads`` and load averages. The speed-targets file
(``experiments/benchmarks/speed_targets.py``) holds instead sections of timed rows (:data:`SECTIONS`) and its
``ratios`` beside their ``targets`` (``{ratio: {"bound", "kind": "max" or "min", "met"}}``).
"""

from __future__ import annotations

__all__ = ["benchmark_table"]


#: the sections of timed rows of a speed-targets file: (key, the key of its rows, its title)
SECTIONS = (
    ("pf_rnn", "rows", "PF-RNN layers and steps"),
    ("bootstrap_filter", "rows", "bootstrap filter"),
    ("srnn_step", "methods", "SRNN training step"),
)


def benchmark_table(name: str, files: dict) -> list[str]:
    """The Markdown lines of the benchmark ``docs/results/<name>.json``, or how to make it."""
    file = f"{name}.json"
    if file not in files:
        return [f"Not measured yet: no docs/results/{file}."]
    record = files[file]
    if "ratios" in record:
        return [*_targets_table(record), "", _provenance(record, file)]
    if "goals" in record:
        lines = _goals_table(record["goals"])
        if "same_leaderboard_on_rerun" in record:  # the README board's rerun
            same = "yes" if record["same_leaderboard_on_rerun"] else "**no**"
            lines += ["", f"The rerun wrote the same `leaderboard.md`: {same}."]
        return [*lines, "", _provenance(record, file)]
    lines = _timed_rows(record["rows"])
    comparisons = record.get("comparisons") or {}
    if comparisons:
        figures = list(dict.fromkeys(key for entry in comparisons.values() for key in entry))
        lines += [
            "",
            "| | " + " | ".join(f.replace("_", " ") for f in figures) + " |",
            "|---" * (len(figures) + 1) + "|",
        ]
        for what, entry in comparisons.items():
            lines.append(f"| {what} | " + " | ".join(_number(entry.get(f)) for f in figures) + " |")
    if "same_metrics_every_round" in record:  # a paired run of whole commands
        same = "yes" if record["same_metrics_every_round"] else "**no**"
        lines += ["", f"Both trees wrote the same `metrics.json` in every round: {same}."]
    return [*lines, "", _provenance(record, file)]


def _timed_rows(rows: dict, prefix: str = "") -> list[str]:
    """The table of timed rows (median, best, runs), each row's name after ``prefix``."""
    lines = ["| row | median | best | runs |", "|---|---:|---:|---:|"]
    for row, timing in rows.items():
        runs = len(timing.get("times_s", ())) or "-"
        lines.append(f"| {prefix}{row} | {timing['median_s']:.3g} s | {timing['best_s']:.3g} s | {runs} |")
    return lines


def _targets_table(record: dict) -> list[str]:
    """The ratios of a speed-targets file beside their targets (met or missed), then its timed rows."""
    targets = record.get("targets", {})
    lines = ["| ratio | measured | target | |", "|---|---:|---|---|"]
    for ratio, value in record["ratios"].items():
        target = targets.get(ratio)
        bound = "-" if target is None else f"{'≤' if target['kind'] == 'max' else '≥'} {target['bound']:g}x"
        verdict = "" if target is None else ("met" if target["met"] else "**missed**")
        lines.append(f"| {ratio} | {value:.2f}x | {bound} | {verdict} |")
    for key, rows, title in SECTIONS:
        if key in record:
            threads = record[key].get("threads")
            prefix = f"{title} ({threads} thread(s)): " if threads else f"{title}: "
            lines += ["", *_timed_rows(record[key][rows], prefix)]
    memory = record.get("pf_rnn", {}).get("memory", {})
    if memory:
        lines += [
            "",
            "Peak memory growth: " + "; ".join(f"{row} {m['peak_growth_mb']:.0f} MB" for row, m in memory.items()),
        ]
    return lines


def _goals_table(goals: dict) -> list[str]:
    """Each measurement beside its goal (an upper bound): met, missed by how much, or failed and why."""
    lines = ["| measurement | measured | goal | |", "|---|---:|---|---|"]
    for key, goal in goals.items():
        unit = goal.get("unit", "")
        shown = "-" if goal["measured"] is None else f"{goal['measured']:.3g}{' ' + unit if unit else ''}"
        if "failed" in goal:
            verdict = f"**failed: {goal['failed']}**"
        elif goal["met"]:
            verdict = "met"
        else:
            verdict = f"**missed by {goal['measured'] - goal['bound']:.3g}{' ' + unit if unit else ''}**"
        lines.append(
            f"| {goal.get('label', key)} | {shown} | ≤ {goal['bound']:g}{' ' + unit if unit else ''} | {verdict} |"
        )
    return lines


def _number(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _provenance(record: dict, file: str) -> str:
    """One line: the command, the commit, the threads and the machine's load while it ran, the file."""
    commands = record.get("commands") or [record.get("command", "")]
    machine = record.get("machine", {})
    start, end = record.get("load_average_start"), record.get("load_average_end")
    load = f"; load average {start[0]:.1f} -> {end[0]:.1f}" if start and end else ""
    commit = str(machine.get("git_commit", "unrecorded"))[:7]
    threads = record.get("threads", machine.get("torch_threads", "?"))
    return (
        f"`{commands[0]}`; commit {commit}, {threads} thread(s), {machine.get('logical_cpus', '?')} logical CPUs"
        f"{load}. File: [{file}](results/{file})."
    )

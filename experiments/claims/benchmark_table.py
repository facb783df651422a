"""The tables of a benchmark's results file on a docs page (``<!-- speed:NAME -->`` blocks, from
``docs/results/NAME.json``): its timed rows, its comparisons and where and how it was measured, so that no timing is
typed by hand.

A benchmark file holds ``rows`` (``{row: {"median_s", "best_s", "times_s", ...}}``), optionally ``comparisons``
(``{what: {figure: number or None}}``, such as speed-ups and ratios), and its ``command`` (or ``commands``),
``machine`` (with ``git_commit``), ``threads`` and load averages.
"""

from __future__ import annotations

__all__ = ["benchmark_table"]


def benchmark_table(name: str, files: dict) -> list[str]:
    """The Markdown lines of the benchmark ``docs/results/<name>.json``, or how to make it."""
    file = f"{name}.json"
    if file not in files:
        return [f"Not measured yet: no docs/results/{file}."]
    record = files[file]
    lines = ["| row | median | best | runs |", "|---|---:|---:|---:|"]
    for row, timing in record["rows"].items():
        runs = len(timing.get("times_s", ())) or "-"
        lines.append(f"| {row} | {timing['median_s']:.3g} s | {timing['best_s']:.3g} s | {runs} |")
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
    return [*lines, "", _provenance(record, file)]


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

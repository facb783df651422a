"""The figures of an evaluation as the command line prints them: :func:`format_table` renders the ``metrics`` of
:func:`ppl_models.inference.evaluate` (a run folder's ``metrics.json``) as text, or as the Markdown of
``metrics.md``."""

from __future__ import annotations

__all__ = ["format_table", "figure"]

#: the title of the gaps to a known truth
GAP_TITLE = "Gap to the truth: estimate minus exact (true parameters), nats per step, with its standard error"


def format_table(metrics: dict, *, markdown: bool = False) -> str:
    """``metrics`` (an :attr:`~ppl_models.inference.evaluation.Evaluation.metrics`) as a text or Markdown table:
    the estimators in nats, the gaps to a known truth, then the calibration."""
    rows = [("estimator", "nats / step", "nats / sequence")]
    rows += [(k, f"{v['per_step']:.4f}", f"{v['per_sequence']:.2f}") for k, v in metrics["loglik"].items()]
    head = f"{metrics['data']}: {metrics['test_sequences']} test sequences, {metrics['test_steps']} steps"
    skipped = [f"not estimated: {name} ({reason})" for name, reason in metrics.get("skipped_estimators", {}).items()]
    gaps = [
        (k, f"{v['gap_per_step']:+.4f}", f"{v['standard_error_per_step']:.4f}{' above' * v['above_truth']}")
        for k, v in metrics.get("gap_to_truth", {}).items()
    ]
    source = metrics.get("calibration_source", "the one-step predictive mean")
    render = _markdown if markdown else _text
    return render(head, rows, skipped, gaps, _calibration_rows(metrics), source)


def figure(value: float, decimals: int = 4) -> str:
    """``value`` with ``decimals`` decimals, or in scientific notation where those would show fewer than three
    significant digits of a non-zero value (data on a tiny scale: ``1.234e-13``, not ``0.0000``)."""
    if value != 0 and abs(value) < 10.0 ** (2 - decimals):
        return f"{value:.{decimals - 1}e}"
    return f"{value:.{decimals}f}"


def _calibration_rows(metrics: dict) -> list[tuple[str, str]]:
    """``(name, value)`` of the one-step MSE, the calibration metrics and those against the truth."""
    rows = [("one-step mse", figure(metrics["mse"], 5))] if "mse" in metrics else []
    rows += [(k, figure(v)) for k, v in metrics.get("calibration", {}).items()]
    return rows + [(f"truth: {k}", figure(v)) for k, v in metrics.get("truth_metrics", {}).items()]


def _markdown(head: str, rows: list, skipped: list, gaps: list, cal: list, source: str) -> str:
    lines = [f"# Results\n\n{head}\n", "| " + " | ".join(rows[0]) + " |", "|---|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    lines += ["", *skipped] if skipped else []
    if gaps:
        lines += ["", f"{GAP_TITLE}.", "", "| estimator | gap / step | standard error |", "|---|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in gaps]
    if cal:
        lines += ["", f"Calibration: {source}.", "", "| metric | value |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in cal]
    return "\n".join(lines) + "\n"


def _text(head: str, rows: list, skipped: list, gaps: list, cal: list, source: str) -> str:
    width = max(len(r[0]) for r in rows + cal) + 2
    lines = [head] + [f"{r[0]:<{width}}{r[1]:>16}{r[2]:>18}" for r in rows] + skipped
    if gaps:
        lines += ["", GAP_TITLE.lower()] + [f"{k:<{width}}{g:>16}{'± ' + e:>18}" for k, g, e in gaps]
    if cal:
        lines += ["", f"calibration: {source}"]
        lines += [f"{k:<{width}}{v:>16}" for k, v in cal]
    return "\n".join(lines)

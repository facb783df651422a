"""The table of a paired A/B study (``<!-- ab:NAME -->`` blocks of the docs pages): per series, model and figure,
each arm over seeds and their difference seed by seed, read from the study's results file (:data:`AB_STUDIES`)."""

from __future__ import annotations

from .readings import Stat

__all__ = ["AB_STUDIES", "ab_table"]

#: study -> (its results file, its command, the arms in the table's order, {figure: (label, higher is better)})
AB_STUDIES = {
    "count-scale": (
        "count_scale_cpu.json",
        "python -m ppl_models.experiments.studies.count_scale --seeds 3 --out runs/count-scale",
        ("scaled", "unscaled"),
        {
            "nats_per_step": ("held-out nats / step", True),
            "crps": ("one-step CRPS", False),
            "crps_mean": ("mean CRPS over the horizons", False),
        },
    ),
}


def _mean_sd(values: list[float]) -> str:
    stat = Stat(tuple(values))
    return f"{stat.mean:.4g}" + ("" if stat.sd is None else f" ± {stat.sd:.2g}")


def ab_table(name: str, files: dict) -> list[str]:
    """The Markdown table of study ``name`` (or how to make it), then one line with its seeds, commit and file."""
    if name not in AB_STUDIES:
        raise ValueError(f"<!-- ab:{name} --> names no study; expected one of {list(AB_STUDIES)}")
    file, command, (first, second), figures = AB_STUDIES[name]
    if file not in files:
        return [f"Not run yet: `{command}` writes docs/results/{file}."]
    record = files[file]
    lines = [
        f"| series | model | figure | {first} | {second} | {first} minus {second}, per seed | {first} better on |",
        "|---|---|---|---|---|---|---|",
    ]
    for series, entry in record["series"].items():
        for model, by_figure in entry["models"].items():
            for figure, (label, higher) in figures.items():
                cell = by_figure[figure]
                differences = cell["difference"]["values"]
                better = sum((d > 0) if higher else (d < 0) for d in differences)
                lines.append(
                    f"| {series} | {model} | {label} | {_mean_sd(cell[first]['values'])} | "
                    f"{_mean_sd(cell[second]['values'])} | {', '.join(f'{d:+.3g}' for d in differences)} | "
                    f"{better} of {len(differences)} seeds |"
                )
    seeds = ", ".join(str(seed) for seed in record["seeds"])
    lines.append("")
    lines.append(f"Seeds {seeds} (mean ± sd over seeds); commit {record['commit']}; file: [{file}](results/{file}).")
    return lines

"""The leaderboard on real public series that install with statsmodels (no download): the collection's models
against the classical rows, over seeds, written to a results file that ``docs/own_data.md`` renders.

Series (:data:`SERIES`):

* ``co2``: weekly atmospheric CO2 at Mauna Loa, 1958-2001 (``statsmodels.datasets.co2``, 2,284 weeks, trend and
  a yearly season; its 59 missing weeks filled by linear interpolation), one series split by time 70/15/15,
  training windows of 104 weeks;
* ``macro-growth``: quarterly growth rates (log differences, in %) of five US aggregates, 1959-2009
  (``statsmodels.datasets.macrodata``: real GDP, consumption, investment, government spending, disposable income),
  a panel of five series of 202 quarters split by time 70/15/15.

``python -m ppl_models.experiments.studies.real_series NAME --seeds 3 --out runs/real-NAME`` runs one board per
seed (``OUT/seed-N``; a rerun keeps finished runs) and writes ``docs/results/board_NAME_cpu.json``: per seed, every
row of the board; per model, the mean and sample sd over seeds of the held-out nats per step, one-step MSE, CRPS and
80 % coverage (the classical rows are deterministic: one value).
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ppl_models.inference.atomic_files import write_json

from ..board_flags import flag_kind
from ..claims.provenance import commit_label, script_provenance
from ..claims.reproductions import project_root
from ..leaderboard import run_leaderboard

__all__ = ["SERIES", "series_csv", "run_boards", "summary"]

#: name -> (the CSV writer, the board's ``--set`` items)
SERIES = {
    "co2": ("_co2", ['data.time="week"', 'data.split_by="time"', "data.window=104"]),
    "macro-growth": ("_macro_growth", ['data.series="series"', 'data.time="quarter"', 'data.split_by="time"']),
}
#: the figures summarised per model over seeds
FIGURES = ("nats_per_step", "mse", "crps", "coverage_0.8")


def series_csv(name: str, path: str | Path) -> Path:
    """Write series ``name`` of :data:`SERIES` as a long-format CSV at ``path``; returns the path."""
    if name not in SERIES:
        raise ValueError(f"name: expected one of {list(SERIES)}, got {name!r}")
    frame = globals()[SERIES[name][0]]()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def _co2():
    import statsmodels.api as sm

    data = sm.datasets.co2.load_pandas().data["co2"].interpolate()
    return data.rename_axis("week").reset_index().assign(week=lambda f: f["week"].dt.strftime("%Y-%m-%d"))


def _macro_growth():
    import pandas as pd
    import statsmodels.api as sm

    data = sm.datasets.macrodata.load_pandas().data
    quarter = [f"{int(y)}-{3 * int(q) - 2:02d}-01" for y, q in zip(data["year"], data["quarter"])]
    frames = []
    for column in ("realgdp", "realcons", "realinv", "realgovt", "realdpi"):
        growth = 100 * np.diff(np.log(data[column].to_numpy()))
        frames.append(pd.DataFrame({"series": column, "quarter": quarter[1:], "growth": growth}))
    return pd.concat(frames, ignore_index=True)


def run_boards(name: str, seeds: int, out: str | Path, *, budget: int = 1, jobs: int = 1) -> list[dict]:
    """One board per seed ``0 .. seeds - 1`` on series ``name`` into ``out/seed-N``; ``[{seed, rows, ...}]``."""
    out = Path(out)
    path = series_csv(name, out / f"{name}.csv")
    boards = []
    for seed in range(seeds):
        started = time.perf_counter()
        overrides = [*SERIES[name][1], f"seed={seed}", f"train.seed={seed}"]
        rows = run_leaderboard(path, out / f"seed-{seed}", overrides=overrides, budget=budget, jobs=jobs)
        boards.append({"seed": seed, "rows": rows, "seconds": time.perf_counter() - started})
    return boards


def summary(boards: list[dict]) -> dict[str, dict]:
    """``{model: {figure: {"mean", "sd", "n"}, "kind", "flags"}}`` over the boards' seeds (sd ``None`` for one
    value); ``flags``: each kind of flag (:func:`~ppl_models.experiments.board_flags.flag_kind`) with the number of
    seeds that raised it."""
    models = {}
    for board in boards:
        for row in board["rows"]:
            entry = models.setdefault(
                row["model"], {"kind": row["kind"], "flags": Counter(), **{f: [] for f in FIGURES}}
            )
            entry["flags"].update({flag_kind(flag) for flag in row.get("flags", [])})
            for figure in FIGURES:
                if row.get(figure) is not None and math.isfinite(row[figure]):
                    entry[figure].append(row[figure])
    result = {}
    for model, entry in models.items():
        flags = {kind: entry["flags"][kind] for kind in sorted(entry["flags"])}
        result[model] = {"kind": entry["kind"], "flags": flags}
        for figure in FIGURES:
            values = entry[figure]
            result[model][figure] = {
                "mean": float(np.mean(values)) if values else None,
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
                "n": len(values),
            }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=list(SERIES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    boards = run_boards(args.name, args.seeds, args.out, budget=args.budget, jobs=args.jobs)
    results = {
        "series": args.name,
        "what": __doc__.split("\n\n")[1].strip(),
        "boards": boards,
        "summary": summary(boards),
        "commit": commit_label(),
        "machine": platform.platform(),
        "cores": __import__("os").cpu_count(),
        "budget": args.budget,
        **script_provenance("ppl_models.experiments.studies.real_series", argv, tuple(range(args.seeds))),
    }
    target = project_root() / "docs" / "results" / f"board_{args.name.replace('-', '_')}_cpu.json"
    write_json(target, results)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

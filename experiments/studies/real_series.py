"""The leaderboard on real public series that install with the project or sit in the shared data folder (no
download): the collection's models against the classical rows, over seeds, one step and several steps ahead, written to
a results file that ``docs/own_data.md`` renders.

Series (:data:`SERIES`):

* ``co2``: weekly atmospheric CO2 at Mauna Loa, 1958-2001 (``statsmodels.datasets.co2``, 2,284 weeks, trend and
  a yearly season; its 59 missing weeks filled by linear interpolation), one series split by time 70/15/15,
  training windows of 104 weeks;
* ``macro-growth``: quarterly growth rates (log differences, in %) of five US aggregates, 1959-2009
  (``statsmodels.datasets.macrodata``: real GDP, consumption, investment, government spending, disposable income),
  a panel of five series of 202 quarters split by time 70/15/15; 4 steps ahead;
* ``elnino``: monthly sea surface temperature of the El Nino region, 1950-2010 (``statsmodels.datasets.elnino``,
  732 months, a yearly season), one series split by time 70/15/15, training windows of 120 months; 12 steps ahead;
* ``air-passengers``: monthly international airline passengers, 1949-1960 (the Box-Jenkins airline series, as
  ``statsforecast.utils.AirPassengersDF`` ships it; 144 months): a trend and a season that grows with it, one series
  split by time 70/15/15; 12 steps ahead;
* ``nile``: yearly flow of the Nile at Aswan, 1871-1970 (``statsmodels.datasets.nile``, 100 years, in 10^8 m^3; a
  drop in level about 1898), one series split by time 70/15/15; 4 steps ahead;
* ``covid-deaths``: daily COVID-19 deaths in the 26 US states and territories with 50 to 600 deaths by 2020-05-22,
  from 2020-03-15 (the differences of JHU CSSE's cumulative counts in the shared data's ``covid`` folder; the 14
  negative days, 0.8 %, of corrected counts set to 0): small counts, 32 % zeros, a panel of 26 series of 69 days
  split by time 70/15/15; 5 steps ahead;
* ``pm25-daily``: daily mean PM2.5 in Beijing, 2010-2014 (the shared data's ``pm25`` folder: the hourly UCI file,
  each day's mean of the hours read; the 37 days, 2 %, without a reading interpolated), with the day's mean dew point,
  temperature, pressure and cumulated wind speed as known covariates (read as inputs, as a weather forecast would
  give them), one series of 1,826 days split by time 70/15/15, training windows of 120 days; 7 steps ahead.

``python -m ppl_models.experiments.studies.real_series NAME --seeds 3 --out runs/real-NAME`` runs one board per
seed (``OUT/seed-N``; a rerun keeps finished runs) and writes ``docs/results/board_NAME_cpu.json``: per seed, every
row of the board; per model, the mean and sample sd over seeds of the held-out nats per step, one-step MSE, CRPS and
80 % coverage (the classical rows are deterministic: one value). Series with a horizon are judged several steps
ahead too (``leaderboard --horizon H --origins N``): per model, the mean CRPS over horizons and the 80 % coverage over
seeds, and how many seeds' paired intervals put it ahead of, level with or behind the best classical row.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..board_flags import flag_kind
from ..claims.provenance import commit_label, script_provenance
from ..claims.reproductions import project_root
from ..claims.results_files import write_results
from ..leaderboard import run_leaderboard

__all__ = ["SERIES", "series_csv", "run_boards", "summary"]


@dataclass(frozen=True)
class Series:
    """A real series of the study: the function writing its frame, the board's ``--set`` items and its multi-step
    judgement (``horizon`` steps from up to ``origins`` origins per test series; None: one step only)."""

    writer: str
    sets: tuple[str, ...]
    horizon: int | None = None
    origins: int | None = None


SERIES = {
    "co2": Series("_co2", ('data.time="week"', 'data.split_by="time"', "data.window=104")),
    "macro-growth": Series(
        "_macro_growth", ('data.series="series"', 'data.time="quarter"', 'data.split_by="time"'), 4, 10
    ),
    "elnino": Series("_elnino", ('data.time="month"', 'data.split_by="time"', "data.window=120"), 12, 20),
    "air-passengers": Series("_air_passengers", ('data.time="month"', 'data.split_by="time"'), 12, 10),
    "nile": Series("_nile", ('data.time="year"', 'data.split_by="time"'), 4, 12),
    "covid-deaths": Series("_covid_deaths", ('data.series="state"', 'data.time="day"', 'data.split_by="time"'), 5, 6),
    "pm25-daily": Series(
        "_pm25_daily",
        (
            'data.time="day"',
            'data.split_by="time"',
            "data.window=120",
            'data.covariates=["dewpoint", "temperature", "pressure", "wind"]',
        ),
        7,
        10,
    ),
}
#: the figures summarised per model over seeds
FIGURES = ("nats_per_step", "mse", "crps", "coverage_0.8")
#: the multi-step figures summarised per model over seeds
MULTISTEP_FIGURES = ("crps_mean", "coverage_80_mean")
#: the states of ``covid-deaths``: total deaths by the file's last day within these bounds
COVID_TOTALS = (50, 600)
#: the first day of ``covid-deaths`` (before it most of these states had no death)
COVID_START = "2020-03-15"


def series_csv(name: str, path: str | Path) -> Path:
    """Write series ``name`` of :data:`SERIES` as a long-format CSV at ``path``; returns the path."""
    if name not in SERIES:
        raise ValueError(f"name: expected one of {list(SERIES)}, got {name!r}")
    frame = globals()[SERIES[name].writer]()
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


def _elnino():
    import pandas as pd
    import statsmodels.api as sm

    data = sm.datasets.elnino.load_pandas().data
    months = data.columns[1:]
    rows = [
        {"month": f"{int(year)}-{m:02d}-01", "temperature": float(value)}
        for year, values in zip(data["YEAR"], data[months].to_numpy())
        for m, value in enumerate(values, start=1)
    ]
    return pd.DataFrame(rows)


def _air_passengers():
    from statsforecast.utils import AirPassengersDF

    months = AirPassengersDF["ds"].dt.strftime("%Y-%m-01")
    return AirPassengersDF.assign(month=months, passengers=AirPassengersDF["y"])[["month", "passengers"]]


def _nile():
    import statsmodels.api as sm

    data = sm.datasets.nile.load_pandas().data
    return data.assign(year=data["year"].astype(int))[["year", "volume"]]


def _covid_deaths():
    import pandas as pd

    from ..data import resolve_data_dir

    table = pd.read_csv(resolve_data_dir() / "covid" / "time_series_covid19_deaths_US.csv")
    dates = [c for c in table.columns if c.count("/") == 2]
    cumulative = table.groupby("Province_State")[dates].sum()
    total = cumulative[dates[-1]]
    chosen = cumulative[(total >= COVID_TOTALS[0]) & (total <= COVID_TOTALS[1])]
    daily = chosen.diff(axis=1).iloc[:, 1:].clip(lower=0).astype(int)
    daily.columns = pd.to_datetime(daily.columns, format="%m/%d/%y").strftime("%Y-%m-%d")
    daily = daily.loc[:, daily.columns >= COVID_START]
    frame = daily.rename_axis("state").reset_index().melt(id_vars="state", var_name="day", value_name="deaths")
    return frame.sort_values(["state", "day"], ignore_index=True)


def _pm25_daily():
    import pandas as pd

    from ..data import resolve_data_dir

    hourly = pd.read_csv(resolve_data_dir() / "pm25" / "PRSA_data_2010.1.1-2014.12.31.csv")
    hourly["day"] = pd.to_datetime(hourly[["year", "month", "day"]]).dt.strftime("%Y-%m-%d")
    columns = {"pm2.5": "pm25", "DEWP": "dewpoint", "TEMP": "temperature", "PRES": "pressure", "Iws": "wind"}
    daily = hourly.groupby("day")[list(columns)].mean().rename(columns=columns)  # a day's mean of its hours read
    daily["pm25"] = daily["pm25"].interpolate(limit_direction="both")  # the days without a reading
    return daily.reset_index()


def run_boards(
    name: str,
    seeds: int,
    out: str | Path,
    *,
    budget: int = 1,
    jobs: int = 1,
    horizon: int | None = None,
    origins: int | None = None,
    models: list[str] | None = None,
    overrides: tuple[str, ...] = (),
    classical: list[str] | None = None,
) -> list[dict]:
    """One board per seed ``0 .. seeds - 1`` on series ``name`` into ``out/seed-N``; ``[{seed, rows, seconds,
    multistep?}]`` (``multistep``: the board's multi-step section, with ``horizon`` and ``origins``). ``models``,
    ``classical`` (default: the board's) and ``overrides`` (after the series' own) go to every board."""
    out = Path(out)
    path = series_csv(name, out / f"{name}.csv")
    boards = []
    for seed in range(seeds):
        started = time.perf_counter()
        sets = [*SERIES[name].sets, *overrides, f"seed={seed}", f"train.seed={seed}"]
        folder = out / f"seed-{seed}"
        rows = run_leaderboard(
            path,
            folder,
            models,
            overrides=sets,
            budget=budget,
            jobs=jobs,
            horizon=horizon,
            origins=origins,
            classical=classical,
        )
        board = {"seed": seed, "rows": rows, "seconds": time.perf_counter() - started}
        if horizon is not None:
            board["multistep"] = json.loads((folder / "leaderboard.json").read_text())["multistep"]
        boards.append(board)
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
            result[model][figure] = _spread(entry[figure])
    return result


def multistep_summary(boards: list[dict]) -> dict | None:
    """``{horizon, origins, forecasts, references, models: {model: {figure: {"mean", "sd", "n"}, "kind", "verdicts",
    "flags"}}}`` of the boards' multi-step sections over seeds (None when no board has one): the figures of
    :data:`MULTISTEP_FIGURES`, and per model how many seeds gave each verdict against that seed's best classical row
    and raised each kind of flag."""
    sections = [board["multistep"] for board in boards if board.get("multistep")]
    if not sections:
        return None
    models: dict[str, dict] = {}
    for section in sections:
        for row in section["rows"]:
            entry = models.setdefault(
                row["model"],
                {"kind": row["kind"], "verdicts": Counter(), "flags": Counter(), **{f: [] for f in MULTISTEP_FIGURES}},
            )
            if row.get("versus"):
                entry["verdicts"][row["versus"]["verdict"]] += 1
            entry["flags"].update({flag_kind(flag) for flag in row.get("flags", [])})
            for figure in MULTISTEP_FIGURES:
                if row.get(figure) is not None and math.isfinite(row[figure]):
                    entry[figure].append(row[figure])
    return {
        "horizon": sections[0]["horizon"],
        "origins": sections[0]["origins"],
        "forecasts": sections[0]["forecasts"],
        "references": sorted({s["reference"] for s in sections if s["reference"]}),
        "models": {
            model: {
                "kind": entry["kind"],
                "verdicts": dict(sorted(entry["verdicts"].items())),
                "flags": dict(sorted(entry["flags"].items())),
                **{figure: _spread(entry[figure]) for figure in MULTISTEP_FIGURES},
            }
            for model, entry in models.items()
        },
    }


def _spread(values: list[float]) -> dict:
    """``{"mean", "sd", "n"}`` of values over seeds (sd None for fewer than two, mean None for none)."""
    return {
        "mean": float(np.mean(values)) if values else None,
        "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
        "n": len(values),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=list(SERIES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--horizon", type=int, help="steps ahead of the multi-step board (default: the series')")
    parser.add_argument("--origins", type=int, help="origins per test series (default: the series')")
    args = parser.parse_args(argv)
    series = SERIES[args.name]
    horizon = args.horizon if args.horizon is not None else series.horizon
    origins = args.origins if args.origins is not None else series.origins
    if (horizon is None) != (origins is None):
        parser.exit(2, "--horizon and --origins: give both or neither (the series has no default)\n")
    boards = run_boards(
        args.name, args.seeds, args.out, budget=args.budget, jobs=args.jobs, horizon=horizon, origins=origins
    )
    results = {
        "series": args.name,
        "what": __doc__.split("\n\n")[1].strip(),
        "boards": boards,
        "summary": summary(boards),
        "multistep": multistep_summary(boards),
        "commit": commit_label(),
        "machine": platform.platform(),
        "cores": __import__("os").cpu_count(),
        "budget": args.budget,
        **script_provenance("ppl_models.experiments.studies.real_series", argv, tuple(range(args.seeds))),
    }
    target = write_results(
        project_root() / "docs" / "results" / f"board_{args.name.replace('-', '_')}_cpu.json", results
    )
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

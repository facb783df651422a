"""The count emissions' input scale against none, paired on real count series: one change, the same seeds.

``python -m ppl_models.experiments.studies.count_scale --seeds 3 --out runs/count-scale``

Arms (:data:`ARMS`): ``scaled``, the own-data default (the nets read the counts over one plus their training mean,
and the rates are multiplied by it: :class:`~ppl_models.nets.CountScale`), and ``unscaled``
(``model.count_scale=[1.0]``: the nets read the integers and their output alone is the log-rate, bit for bit the
models before the scale). Series (:data:`SERIES`, boards of :mod:`~ppl_models.experiments.studies.real_series`):
``covid-deaths`` (small counts, a negative binomial by default) and ``air-passengers`` read as counts
(``--likelihood negbin``; by default its large counts are real values). Models: the three with a count emission
(GRU, VRNN, SRNN); no classical row (the series' own boards have them). Each (series, arm, seed) board is kept in
``OUT/<series>/<arm>/seed-N`` (a rerun keeps finished runs). The results file, ``docs/results/count_scale_cpu.json``,
gives per series, model and arm the held-out nats per step and one-step CRPS, and the mean CRPS over the series'
horizons, each as mean and sd over seeds, with the paired differences (scaled minus unscaled) per seed.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from ..claims.provenance import commit_label, script_provenance
from ..claims.reproductions import project_root
from ..claims.results_files import write_results
from . import real_series

__all__ = ["ARMS", "SERIES", "MODELS", "main"]

#: arm -> the settings it adds to every board (the scaled arm is the default)
ARMS = {"scaled": (), "unscaled": ("model.count_scale=[1.0]",)}
#: series -> the settings that read it as counts
SERIES = {"covid-deaths": (), "air-passengers": ('data.likelihood="negbin"',)}
#: the models with a count emission
MODELS = ["gru", "vrnn", "srnn"]
#: figure -> where a board keeps it: (section, key)
FIGURES = {
    "nats_per_step": ("rows", "nats_per_step"),
    "crps": ("rows", "crps"),
    "crps_mean": ("multistep", "crps_mean"),
}


def _figures(board: dict) -> dict[str, dict[str, float]]:
    """``{model: {figure: value}}`` of one board (:data:`FIGURES`)."""
    out: dict[str, dict[str, float]] = {}
    for figure, (section, key) in FIGURES.items():
        rows = board["rows"] if section == "rows" else board.get("multistep", {}).get("rows", [])
        for row in rows:
            if row.get(key) is not None:
                out.setdefault(row["model"], {})[figure] = float(row[key])
    return out


def compare_arms(boards: dict[str, list[dict]]) -> dict:
    """``{model: {figure: {arm: {mean, sd, values}, "difference": {mean, sd, values}}}}`` over seeds, from each
    arm's boards (one per seed, the same seeds in each arm); ``difference`` is scaled minus unscaled, seed by seed."""
    per_arm = {arm: [_figures(board) for board in arm_boards] for arm, arm_boards in boards.items()}
    result: dict = {}
    for model in MODELS:
        for figure in FIGURES:
            values = {
                arm: [seed.get(model, {}).get(figure, np.nan) for seed in seeds] for arm, seeds in per_arm.items()
            }
            entry = {arm: _spread(v) for arm, v in values.items()}
            entry["difference"] = _spread(list(np.subtract(values["scaled"], values["unscaled"])))
            result.setdefault(model, {})[figure] = entry
    return result


def _spread(values: list[float]) -> dict:
    array = np.asarray(values, dtype=float)
    return {
        "mean": float(np.mean(array)),
        "sd": float(np.std(array, ddof=1)) if len(array) > 1 else None,
        "values": [float(v) for v in array],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--series", nargs="+", choices=list(SERIES), default=list(SERIES))
    args = parser.parse_args(argv)
    results: dict = {}
    for name in args.series:
        spec = real_series.SERIES[name]
        boards = {
            arm: real_series.run_boards(
                name,
                args.seeds,
                f"{args.out}/{name}/{arm}",
                horizon=spec.horizon,
                origins=spec.origins,
                models=MODELS,
                overrides=(*SERIES[name], *sets),
                classical=[],
            )
            for arm, sets in ARMS.items()
        }
        results[name] = {
            "horizon": spec.horizon,
            "origins": spec.origins,
            "settings": list(SERIES[name]),
            "models": compare_arms(boards),
            "seconds": {arm: [board["seconds"] for board in arm_boards] for arm, arm_boards in boards.items()},
        }
    record = {
        "what": __doc__.split("\n\n")[0].strip(),
        "arms": {arm: list(sets) for arm, sets in ARMS.items()},
        "series": results,
        "commit": commit_label(),
        "machine": platform.platform(),
        **script_provenance("ppl_models.experiments.studies.count_scale", argv, tuple(range(args.seeds))),
    }
    target = write_results(project_root() / "docs" / "results" / "count_scale_cpu.json", record)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

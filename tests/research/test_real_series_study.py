"""The real-series study's frames and its summaries over seeds (no board is trained here)."""

import pandas as pd
import pytest

from ppl_models.experiments.data import resolve_data_dir
from ppl_models.experiments.studies import real_series


def _row(model, kind, crps, coverage, verdict, flags=()):
    versus = None if verdict is None else {"verdict": verdict}
    return {
        "model": model,
        "kind": kind,
        "crps_mean": crps,
        "coverage_80_mean": coverage,
        "versus": versus,
        "flags": list(flags),
    }


def test_multistep_summary_over_seeds_counts_verdicts_and_flags():
    sections = [
        {
            "horizon": 5,
            "origins": 6,
            "forecasts": 12,
            "reference": "ets",
            "rows": [_row("gru", "collection", 1.0, 0.8, "tie"), _row("ets", "classical", 1.2, 0.7, "reference")],
        },
        {
            "horizon": 5,
            "origins": 6,
            "forecasts": 12,
            "reference": "arima",
            "rows": [
                _row("gru", "collection", 2.0, 0.6, "beats", ["multi-step coverage at 80 % is 0.30"]),
                _row("ets", "classical", 1.2, 0.7, "behind"),
            ],
        },
    ]
    summary = real_series.multistep_summary([{"multistep": s} for s in sections] + [{"rows": []}])
    assert summary["references"] == ["arima", "ets"] and summary["horizon"] == 5
    gru = summary["models"]["gru"]
    assert gru["crps_mean"] == {"mean": 1.5, "sd": pytest.approx(0.5**0.5), "n": 2}
    assert gru["verdicts"] == {"beats": 1, "tie": 1}
    assert gru["flags"] == {"multi-step coverage off": 1}
    assert summary["models"]["ets"]["crps_mean"]["sd"] == 0.0
    assert real_series.multistep_summary([{"rows": []}]) is None


def test_series_frames_are_long_tables_with_the_documented_shape(tmp_path):
    elnino = pd.read_csv(real_series.series_csv("elnino", tmp_path / "e.csv"))
    assert list(elnino.columns) == ["month", "temperature"] and len(elnino) == 61 * 12
    assert elnino["month"].iloc[13] == "1951-02-01"
    air = pd.read_csv(real_series.series_csv("air-passengers", tmp_path / "a.csv"))
    assert list(air.columns) == ["month", "passengers"] and len(air) == 144
    assert (air["month"].iloc[0], air["passengers"].iloc[0], air["passengers"].iloc[-1]) == ("1949-01-01", 112, 432)
    nile = pd.read_csv(real_series.series_csv("nile", tmp_path / "n.csv"))
    assert list(nile.columns) == ["year", "volume"] and len(nile) == 100 and nile["year"].iloc[0] == 1871
    covid = pd.read_csv(real_series.series_csv("covid-deaths", tmp_path / "c.csv"))
    assert covid["state"].nunique() == 26 and len(covid) == 26 * 69
    assert (covid["deaths"] >= 0).all() and covid["deaths"].dtype.kind == "i"
    assert covid["day"].min() == real_series.COVID_START
    pm25 = pd.read_csv(real_series.series_csv("pm25-daily", tmp_path / "p.csv"))
    assert list(pm25.columns) == ["day", "pm25", "dewpoint", "temperature", "pressure", "wind"] and len(pm25) == 1826
    hourly = pd.read_csv(resolve_data_dir() / "pm25" / "PRSA_data_2010.1.1-2014.12.31.csv")
    first_read = hourly[(hourly.month == 1) & (hourly.day == 2) & (hourly.year == 2010)]["pm2.5"].mean()
    assert not pm25.isna().any().any() and pm25["pm25"].iloc[1] == pytest.approx(first_read)
    with pytest.raises(ValueError, match="name: expected one of"):
        real_series.series_csv("nope", tmp_path / "n.csv")


def test_every_multistep_flag_has_a_kind():
    from ppl_models.experiments.board_flags import flag_kind
    from ppl_models.experiments.multistep_board import _flags

    flags = _flags({"coverage_80_mean": 0.3}, ["validation coverage at 80 % is 0.20", "still improving (best 3 of 3)"])
    assert [flag_kind(f) for f in flags] == ["validation coverage off", "multi-step coverage off"]


def _rendered(rows: list[dict], section: dict) -> tuple[list[str], int]:
    """The board table of one seed's ``rows`` and multi-step ``section``, and the line where its multi-step table
    starts."""
    from ppl_models.experiments.claims.reproductions import board_table

    boards = [{"seed": 0, "rows": rows, "seconds": 60.0, "multistep": section}]
    record = {
        "summary": real_series.summary(boards),
        "multistep": real_series.multistep_summary(boards),
        "seeds": [0],
        "boards": boards,
        "cores": 2,
        "commit": "abc",
    }
    lines = board_table("x", {"board_x_cpu.json": record})
    return lines, next(i for i, line in enumerate(lines) if line.startswith("| model | kind | mean CRPS"))


def test_board_table_renders_the_multistep_summary_ranked_by_mean_crps():
    one_step = {"nats_per_step": -1.0, "mse": 1.0, "crps": 0.5, "coverage_0.8": 0.8}
    rows = [
        {"model": m, "kind": k, **one_step, "flags": [], "train_seconds": seconds}
        for m, k, seconds in (("gru", "collection", 150.0), ("ets", "classical", 30.0))
    ]
    sections = [
        {
            "horizon": 5,
            "origins": 6,
            "forecasts": 12,
            "reference": "ets",
            "rows": [_row("gru", "collection", 1.4, 0.8, "behind"), _row("ets", "classical", 1.2, 0.7, "reference")],
        },
    ]
    lines, start = _rendered(rows, sections[0])
    assert lines[start + 2].startswith("| ets | classical | 1.2 | 0.7 | reference (1 of 1) |")
    assert lines[start + 3] == "| gru | collection | 1.4 | 0.8 | behind (1 of 1) | - |"
    assert "5 steps ahead, 12 forecasts per row and seed" in lines[start - 2]
    # the cost: the rows' own timings (150 + 30 s), then the wall time of the call that wrote the file
    assert "; 3 min of training and fitting in the rows (their own timings), 1 min of wall time" in lines[-1]


def test_a_row_flagged_in_a_seed_is_not_listed_first_and_the_table_says_why():
    one_step = {"nats_per_step": -1.0, "mse": 1.0, "crps": 0.5, "coverage_0.8": 0.8}
    rows = [{"model": "gru", "kind": "collection", **one_step, "flags": [], "train_seconds": 1.0}]
    flagged = _row("ets", "classical", 1.2, 0.98, "reference", ["multi-step coverage at 80 % is 0.98"])
    section = {"horizon": 5, "origins": 6, "forecasts": 12, "reference": "ets"}
    section["rows"] = [
        _row("gru", "collection", 1.3, 0.8, "tie"),
        _row("srnn", "collection", 1.25, 0.99, "tie", ["multi-step coverage at 80 % is 0.99"]),
        flagged,
    ]
    lines, start = _rendered(rows, section)
    # by mean CRPS ets (1.2), srnn (1.25), gru (1.3); ets and srnn are flagged, so gru is listed first
    assert [line.split(" | ")[0] for line in lines[start + 2 : start + 5]] == ["| gru", "| ets", "| srnn"]
    note = lines[start + 6]
    assert note.startswith("gru is listed first as the best row flagged in no seed; those above it are flagged (ets:")
    assert "srnn: multi-step coverage off (1 of 1)" in note

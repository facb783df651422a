"""Odd files on the own-data surfaces: features that decide a score by themselves (constant, static per series,
collinear), flags that would be ignored, paths spelled two ways, gaps in time, tiny scales, empty columns."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from ppl_models.experiments import leaderboard
from ppl_models.experiments.cli import main
from ppl_models.experiments.tables import figure, format_table
from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference.data import DataWarning, SequenceDataset
from ppl_models.inference.data.degenerate import degenerate_features
from ppl_models.inference.data.transforms import SeriesTransform

TINY = [
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
    "evaluate.batch_size=8",
]


def walks(path, *, series=8, steps=30, seed=0, **extra):
    """Long format ``site``, ``t``, ``temp`` (a random walk per site) and ``extra`` columns, each a function of the
    frame."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "site": np.repeat([f"s{i}" for i in range(series)], steps),
            "t": np.tile(np.arange(steps), series),
            "temp": rng.normal(size=series * steps).cumsum(),
        }
    )
    for name, make in extra.items():
        frame[name] = make(frame)
    frame.to_csv(path, index=False)
    return path


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, DataWarning)]


# --- features that decide a score by themselves --------------------------------------------------
def test_constant_static_and_collinear_features_are_found_with_their_relation():
    rng = np.random.default_rng(0)
    sequences = []
    for i in range(4):
        a, c = rng.normal(size=25).cumsum(), rng.normal(size=25)
        sequences.append(np.c_[a, np.full(25, 3.0), 2 * a + 1, np.full(25, float(i)), c, a - 0.5 * c])
    found = degenerate_features(sequences, ["a", "k", "b", "attr", "c", "d"])
    assert list(found) == ["k", "b", "attr", "d"]
    assert found["k"] == "constant (every value 3)"
    assert "b = 2 a + 1" in found["b"]
    assert "series attribute" in found["attr"]
    assert "d = 1 a - 0.5 c" in found["d"]
    assert degenerate_features([s[:, [0, 4]] for s in sequences], ["a", "c"]) == {}


def test_a_file_reads_without_its_degenerate_features_and_says_so(tmp_path):
    path = walks(tmp_path / "d.csv", const=lambda f: 5.0, double=lambda f: 2 * f["temp"] + 1)
    dataset, messages = _warnings_of(lambda: SequenceDataset.from_file(path, series="site", time="t"))
    assert dataset.features == ["temp"] and dataset.obs_dim == 1
    assert set(dataset.left_out) == {"const", "double"}
    assert len(messages) == 1 and "'const'" in messages[0] and "double = 2 temp + 1" in messages[0]
    kept = SequenceDataset.from_file(path, series="site", time="t", degenerate="keep")
    assert kept.features == ["temp", "const", "double"]
    with pytest.raises(ValueError, match="no feature moves on its own"):
        SequenceDataset.from_file(path, series="site", time="t", features=["const"])


def test_a_trained_models_features_are_kept_when_it_reads_a_new_file(tmp_path):
    path = walks(tmp_path / "d.csv", wind=lambda f: np.random.default_rng(1).gamma(2.0, size=len(f)))
    trained = file_data(str(path), series="site", time="t", split_by="time")
    recorded = trained.split_record["standardizer"]
    flat = walks(tmp_path / "flat.csv", wind=lambda f: 2.0)  # constant in the new file only
    data = file_data(str(flat), series="site", time="t", split_by="time", standardizer=recorded)
    assert data.split_record["standardizer"]["features"] == ["temp", "wind"]


def test_a_constant_column_no_longer_decides_the_board(tmp_path):
    path = walks(tmp_path / "c.csv", const=lambda f: 3.0)
    out = tmp_path / "board"
    rows = leaderboard.run_leaderboard(
        path, out, ["lgssm"], ['data.series="site"', 'data.time="t"', *TINY], classical=["last-value"]
    )
    nats = {row["model"]: row["nats_per_step"] for row in rows}
    # one standard-normal-ish random walk: a step's density is a few nats below 0 for every row, not +11
    assert all(-5 < value < 1 for value in nats.values())
    board = json.loads((out / "leaderboard.json").read_text())
    assert any(w.startswith("const: left out of every row") for w in board["warnings"])
    assert "const: left out of every row" in (out / "leaderboard.md").read_text()


# --- flags that would be ignored -------------------------------------------------------------------
def test_targets_given_to_a_density_model_are_refused(tmp_path, capsys):
    path = walks(tmp_path / "w.csv", wind=lambda f: 1.0 + f["t"] % 3)
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(path),
                "--series",
                "site",
                "--targets",
                "wind",
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--targets" in error[0] and "--features" in error[0]
    assert not (tmp_path / "run").exists()


def test_a_split_column_and_a_split_by_time_are_not_both_taken(tmp_path, capsys):
    path = walks(
        tmp_path / "p.csv", part=lambda f: np.where(f["t"] < 20, "train", np.where(f["t"] < 25, "valid", "test"))
    )
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(path),
                "--series",
                "site",
                "--split-column",
                "part",
                "--split",
                "time",
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--split time" in error[0] and "--split-column part" in error[0]
    with pytest.raises(ValueError, match="so split_by would not be used"):
        file_data(str(path), series="site", time="t", split="part", split_by="time")
    with pytest.raises(ValueError, match="so fractions would not be used"):
        file_data(str(path), series="site", time="t", split="part", fractions=[0.5, 0.25, 0.25])


def test_a_numeric_split_column_is_named_by_its_value(tmp_path):
    path = walks(tmp_path / "n.csv", part=lambda f: (f["t"] >= 20).astype(int))
    with pytest.raises(ValueError, match=r"row 2: 0 is not a split name") as error:
        SequenceDataset.from_file(path, series="site", time="t", split="part")
    assert "np." not in str(error.value)


def test_a_seasonal_difference_names_a_whole_lag():
    assert SeriesTransform.parse("seasonal-difference-12").lag == 12
    assert SeriesTransform.parse("seasonal-difference", season=4).lag == 4
    for spec in ("seasonal-difference--3", "seasonal-difference3", "seasonal-difference-1", "seasonal-difference-x"):
        with pytest.raises(ValueError, match="seasonal-difference-<m>"):
            SeriesTransform.parse(spec, season=4)


# --- runs matched by content -------------------------------------------------------------------------
def test_a_board_rerun_matches_the_file_by_content_not_by_its_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    walks(tmp_path / "w.csv")
    flags = [
        "--series",
        "site",
        "--time",
        "t",
        "--models",
        "lgssm",
        "--classical",
        "none",
        "--out",
        "board",
        *[a for item in TINY for a in ("--set", item)],
    ]
    assert main(["leaderboard", "--data", "w.csv", *flags]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--data", str(tmp_path / "w.csv"), *flags]) == 0
    assert "lgssm: finished earlier, kept" in capsys.readouterr().out
    (tmp_path / "copy.csv").write_bytes((tmp_path / "w.csv").read_bytes())
    assert main(["leaderboard", "--data", "copy.csv", *flags]) == 0
    assert "kept" in capsys.readouterr().out
    walks(tmp_path / "copy.csv", seed=1)  # other content under the same name
    assert main(["leaderboard", "--data", "copy.csv", *flags]) == 2
    assert "not the data the run was trained on" in capsys.readouterr().err


# --- gaps, scales, empty columns ---------------------------------------------------------------------
def test_missing_steps_in_time_are_named_and_a_calendar_that_skips_often_is_not(tmp_path):
    frame = pd.read_csv(walks(tmp_path / "g.csv"))
    frame[(frame.t < 10) | (frame.t >= 20)].to_csv(tmp_path / "gaps.csv", index=False)
    _, messages = _warnings_of(lambda: SequenceDataset.from_file(tmp_path / "gaps.csv", series="site", time="t"))
    assert len(messages) == 1 and "skips steps in 8 place(s)" in messages[0] and "series s0: 9 then 20" in messages[0]
    trading = frame[frame.t % 7 < 5]  # weekends skipped every week: the data's own calendar
    trading.to_csv(tmp_path / "days.csv", index=False)
    _, messages = _warnings_of(lambda: SequenceDataset.from_file(tmp_path / "days.csv", series="site", time="t"))
    assert not any("skips steps" in m for m in messages)


def test_figures_on_a_tiny_scale_keep_their_digits():
    assert figure(1.2345e-13) == "1.234e-13" or figure(1.2345e-13) == "1.235e-13"
    assert figure(0.1234) == "0.1234" and figure(0.0) == "0.0000" and figure(-2.5) == "-2.5000"
    assert figure(0.0042, 5) == "0.00420" and figure(0.00042, 5) == "4.2000e-04"
    table = format_table(
        {
            "data": "d",
            "test_sequences": 1,
            "test_steps": 5,
            "mse": 3e-25,
            "loglik": {"exact": {"per_step": 27.1, "per_sequence": 135.5}},
            "calibration": {"crps": 4e-13, "coverage_0.8": 0.8},
        }
    )
    assert "3.0000e-25" in table and "4.000e-13" in table and "0.8000" in table


def test_an_empty_column_is_left_out_by_default_and_named_when_chosen(tmp_path, capsys):
    path = walks(tmp_path / "e.csv", blank=lambda f: np.nan)
    dataset, messages = _warnings_of(lambda: SequenceDataset.from_file(path, series="site", time="t"))
    assert dataset.features == ["temp"] and any("no value in any row" in m and "'blank'" in m for m in messages)
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(path),
                "--series",
                "site",
                "--time",
                "t",
                "--features",
                "temp,blank",
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "'blank' has no value in any row" in error[0] and "--features" in error[0]


def test_a_column_named_twice_or_in_two_roles_is_refused(tmp_path):
    path = walks(tmp_path / "w.csv", wind=lambda f: np.random.default_rng(2).gamma(2.0, size=len(f)))
    with pytest.raises(ValueError, match="column 'temp' is named twice in features"):
        SequenceDataset.from_file(path, series="site", time="t", features=["temp", "temp"])
    with pytest.raises(ValueError, match="column 'site' is given both as series and as time"):
        SequenceDataset.from_file(path, series="site", time="site")
    with pytest.raises(ValueError, match=r"column 'site', row 2: 's0' is not a number"):
        SequenceDataset.from_file(path, series="site", time="t", features=["site"])


def test_series_ids_that_look_like_numbers_stay_as_written(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(
        "id,t,v\n"
        + "".join(f"{i},{t},{(t * t + k) % 7}\n" for k, i in enumerate(["007", "7", "7.0"]) for t in range(4))
    )
    dataset = SequenceDataset.from_file(path, series="id", time="t")
    assert dataset.ids == ["007", "7", "7.0"] and dataset.lengths == [4, 4, 4]


@pytest.mark.parametrize(
    "flag",
    [
        ["--horizon", "3"],
        ["--observed", "5"],
        ["--em-iterations", "2"],
        ["--recalibrate", "scale"],
        ["--recalibrate-per-step"],
    ],
)
def test_forecast_flags_of_the_test_split_are_refused_with_beyond(tmp_path, capsys, flag):
    assert main(["forecast", f"a={tmp_path / 'run'}", "--beyond", "4", "--out", str(tmp_path / "f"), *flag]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and flag[0] in error[0] and "--beyond" in error[0]

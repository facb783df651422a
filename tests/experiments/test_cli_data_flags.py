"""The data flags of train / leaderboard / suite (--series, --time, ... as --set data.KEY=VALUE), the data messages
in the flags' words, and flags that would be ignored refused."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import site_walks

from ppl_models.experiments import cli, cli_messages, data_flags, leaderboard, processes
from ppl_models.experiments import config as config_module
from ppl_models.experiments.cli import main
from ppl_models.experiments.config import apply_overrides
from ppl_models.experiments.own_data import load_experiment, model_config
from ppl_models.experiments.run_folder import run_differences
from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference.data import FileSpec, SequenceDataset, resolve_transform
from ppl_models.inference.training import load_checkpoint
from ppl_models.inference.validation import SettingError

TINY = [
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=4",
    "evaluate.batch_size=8",
]


def stations(path: Path, *, series=6, steps=24) -> Path:
    """Long format: ``site``, ``when``, ``temp``, ``wind``, ``load`` and a ``part`` column of split labels."""
    rng = np.random.default_rng(0)
    rows = [
        {
            "site": f"s{s}",
            "when": t,
            "temp": rng.normal(),
            "wind": rng.gamma(2.0),
            "load": rng.normal(),
            "part": "train" if t < 16 else "valid" if t < 20 else "test",
        }
        for s in range(series)
        for t in range(steps)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def sets(items):
    return [a for item in items for a in ("--set", item)]


#: each flag, its value, and the --set that means the same
SPELLINGS = [
    (["--series", "site"], 'data.series="site"'),
    (["--time", "when"], 'data.time="when"'),
    (["--features", "temp,wind"], 'data.features=["temp", "wind"]'),
    (["--features", "temp"], 'data.features=["temp"]'),
    (["--targets", "load"], 'data.targets=["load"]'),
    (["--targets", "load, wind"], 'data.targets=["load", "wind"]'),
    (["--split", "time"], 'data.split_by="time"'),
    (["--split-column", "part"], 'data.split="part"'),
    (["--window", "12"], "data.window=12"),
    (["--missing", "drop-series"], 'data.missing="drop-series"'),
    (["--time-order", "file"], 'data.time_order="file"'),
    (["--series", 'Zürich "A"'], 'data.series="Zürich \\"A\\""'),
]


@pytest.mark.parametrize("command", ["train gru", "leaderboard --out board", "suite psrnn-swimmer"])
@pytest.mark.parametrize("flag, setting", SPELLINGS, ids=[" ".join(flag) for flag, _ in SPELLINGS])
def test_each_flag_is_the_set_of_its_key(command, flag, setting):
    args = cli.build_parser().parse_args([*command.split(), "--data", "x.csv", *flag])
    keys = data_flags.data_keys(args)
    assert keys == apply_overrides({}, [setting])["data"]
    assert apply_overrides({}, data_flags.as_set_items(keys)) == apply_overrides({}, [setting])


def test_the_flags_reach_the_data_table_as_values_without_toml(tmp_path, monkeypatch):
    def no_toml(text):
        raise AssertionError(f"TOML parsed: {text}")

    monkeypatch.setattr(config_module.tomllib, "loads", no_toml)
    args = cli.build_parser().parse_args(["train", "gru", "--data", "x.csv", "--features", "a,b", "--window", "5"])
    keys = data_flags.data_keys(args)
    assert keys == {"features": ["a", "b"], "window": 5}
    table = load_experiment("lgssm-demo", data="x.csv", data_keys=keys)["data"]
    assert table == {"name": "file", "path": "x.csv", "features": ["a", "b"], "window": 5}


def test_a_run_trained_with_the_flags_has_the_config_of_the_set_spelling(tmp_path, capsys):
    data = stations(tmp_path / "stations.csv")
    flags = [
        "--series",
        "site",
        "--time",
        "when",
        "--features",
        "temp,wind",
        "--split",
        "time",
        "--window",
        "8",
        "--missing",
        "drop-series",
        "--time-order",
        "values",
    ]
    spelled = [
        'data.series="site"',
        'data.time="when"',
        'data.features=["temp", "wind"]',
        'data.split_by="time"',
        "data.window=8",
        'data.missing="drop-series"',
        'data.time_order="values"',
    ]
    for run, extra in (("flags", flags), ("set", sets(spelled))):
        assert main(["train", "gru", "--data", str(data), "--run-dir", str(tmp_path / run), *extra, *sets(TINY)]) == 0
    assert (tmp_path / "flags" / "config.json").read_bytes() == (tmp_path / "set" / "config.json").read_bytes()
    config = json.loads((tmp_path / "flags" / "config.json").read_text())
    assert config["data"] == {
        "name": "file",
        "path": str(data),
        "series": "site",
        "time": "when",
        "features": ["temp", "wind"],
        "split_by": "time",
        "window": 8,
        "missing": "drop-series",
        "time_order": "values",
    }
    experiment = load_checkpoint(tmp_path / "flags" / "checkpoints" / "last.pt").get("experiment")
    assert run_differences(tmp_path / "flags", model_config("gru", data, [*spelled, *TINY]), experiment) == []
    # a run made before a training setting existed ran at its default: no change; another value is one
    older = {**config, "train": {k: v for k, v in config["train"].items() if k != "min_delta"}}
    (tmp_path / "flags" / "config.json").write_text(json.dumps(older))
    assert run_differences(tmp_path / "flags", model_config("gru", data, [*spelled, *TINY]), experiment) == []
    changed = model_config("gru", data, [*spelled, *TINY, "train.min_delta=0.5"])
    assert run_differences(tmp_path / "flags", changed, experiment) == ["train.min_delta: 0.0 -> 0.5"]


def test_the_board_gets_the_flags_as_overrides_and_its_jobs(tmp_path, monkeypatch, capsys):
    calls = []

    def board(path, out, models, overrides, device, **options):
        calls.append((list(overrides), options["jobs"]))
        Path(out).mkdir()
        (Path(out) / "leaderboard.md").write_text("board")

    monkeypatch.setattr(leaderboard, "run_leaderboard", board)
    assert (
        main(
            [
                "leaderboard",
                "--data",
                "x.csv",
                "--out",
                str(tmp_path / "b"),
                "--series",
                "site",
                "--features",
                "temp,wind",
                "--set",
                "train.epochs=1",
                "--jobs",
                "3",
            ]
        )
        == 0
    )
    assert calls == [(['data.series="site"', 'data.features=["temp", "wind"]', "train.epochs=1"], 3)]
    assert main(["leaderboard", "--data", "x.csv", "--out", str(tmp_path / "c")]) == 0
    assert calls[1] == ([], processes.default_jobs())


@pytest.mark.slow
def test_a_board_made_with_the_flags_is_kept_by_its_rerun_with_the_set_spelling(tmp_path, capsys):
    data, out = stations(tmp_path / "stations.csv"), tmp_path / "board"
    common = [
        "leaderboard",
        "--data",
        str(data),
        "--models",
        "gru",
        "--out",
        str(out),
        "--jobs",
        "1",
        "--classical",
        "none",
        *sets(TINY),
    ]
    assert main([*common, "--series", "site", "--time", "when", "--split-column", "part"]) == 0
    finished = (out / "runs" / "gru" / "metrics.json").stat().st_mtime_ns
    assert main([*common, *sets(['data.series="site"', 'data.time="when"', 'data.split="part"'])]) == 0  # kept
    assert (out / "runs" / "gru" / "metrics.json").stat().st_mtime_ns == finished
    assert json.loads((out / "runs" / "gru" / "config.json").read_text())["data"]["split"] == "part"


CONFLICTS = [
    (["train", "gru"], ["--series", "site"], "data.series=site"),
    (["train", "gru"], ["--split", "time"], 'data.split_by="time"'),
    (["train", "gru"], ["--split-column", "part"], ' data.split = "part"'),
    (["suite", "psrnn-swimmer"], ["--window", "4"], "data.window=4"),
    (["leaderboard", "--out", "board"], ["--time-order", "file"], 'data.time_order="file"'),
    (["leaderboard", "--out", "board"], ["--missing", "error"], 'gru:data.missing="error"'),
]


@pytest.mark.parametrize("command, flag, setting", CONFLICTS)
def test_a_flag_and_a_set_of_its_key_are_refused_naming_both(tmp_path, capsys, command, flag, setting):
    data = stations(tmp_path / "stations.csv")
    assert main([*command, "--data", str(data), *flag, "--set", setting]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and flag[0] in error and setting in error, error
    assert not (tmp_path / "board").exists()


@pytest.mark.parametrize("command", [["train", "gru"], ["train", "lgssm-demo"], ["suite", "psrnn-swimmer"]])
def test_a_flag_without_data_is_refused_naming_it(tmp_path, capsys, command):
    assert main([*command, "--time-order", "file", "--run-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--time-order" in error and "--data" in error, error
    assert not (tmp_path / "run").exists()


def test_a_bad_flag_value_is_a_usage_error_naming_the_flag(capsys):
    for flag, value in (("--window", "1"), ("--missing", "drop"), ("--features", "a,,b"), ("--split", "random")):
        with pytest.raises(SystemExit) as raised:
            main(["train", "gru", "--data", "x.csv", flag, value])
        assert raised.value.code == 2 and f"argument {flag}" in capsys.readouterr().err


ROWS = "site,when,temp\n" + "".join(f"{s},{t},{t % 3}\n" for s in "abcdef" for t in range(5))
#: (file text, flags and settings, what the one line must say, what it must no longer say)
MESSAGES = [
    ("site,when,temp\na,0,1\na,1,\na,2,2\n", [], "pass --missing drop-series", "missing="),
    ("site,when,temp\na,0,1\na,x,2\na,2,2\n", [], "pass --time-order file", "time_order="),
    ("site,when,temp\na,0,x\na,1,y\n", [], "name them with --features A,B", "features="),
    (ROWS, ["--window", "8"], "--window 8 is longer than series", "choose window"),
    (ROWS, ["--split-column", "part"], "column 'part' (given as --split-column) not found", "given as split)"),
    (ROWS, ["--set", "data.window=1"], "--window must be >= 2, got 1", None),
    (ROWS, ["--set", "data.window=3", "--set", "data.stride=0"], "data.stride must be >= 1, got 0", None),
    (ROWS, ["--set", 'data.missing="skip"'], "--missing: expected one of", None),
    (ROWS, ["--set", 'data.time_order="sorted"'], "--time-order: expected one of", None),
    (ROWS, ["--set", 'data.split_by="random"'], "--split: expected 'series' or 'time'", None),
    (ROWS, ["--set", "data.fractions=[0.5, 0.5]"], "data.fractions: expected three", None),
    (ROWS, ["--set", "data.split_seed=-1"], "data.split_seed must be >= 0, got -1", None),
    (
        "site,when,temp\n" + "".join(f"{s},{t},{t % 3}\n" for s in "ab" for t in range(5)),
        [],
        "other data.fractions, or --split time",
        "split by time",
    ),
]


@pytest.mark.parametrize("text, extra, says, not_said", MESSAGES, ids=[m[2][:30] for m in MESSAGES])
def test_a_data_message_names_the_command_line_option(tmp_path, capsys, text, extra, says, not_said):
    path = tmp_path / "data.csv"
    path.write_text(text)
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
                "when",
                *extra,
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith("ppl-models: error:") and says in error, error
    assert not_said is None or not_said not in error, error


@pytest.mark.parametrize("text, extra, says, not_said", MESSAGES, ids=[m[2][:30] for m in MESSAGES])
def test_each_data_error_reaching_the_command_line_is_a_setting_error_with_a_flag_or_data_key(
    tmp_path, text, extra, says, not_said
):
    path = tmp_path / "data.csv"
    path.write_text(text)
    command = ["train", "gru", "--data", str(path), "--series", "site", "--time", "when", *extra]
    with pytest.raises(SettingError) as raised:
        main([*command, "--run-dir", str(tmp_path / "run"), "--debug"])
    flags = {flag for flag, _, _ in data_flags.DATA_FLAGS}
    spelled = cli_messages.spell_flag(raised.value.key, None)
    assert spelled in flags or spelled == f"data.{raised.value.key}", raised.value.key


def test_the_pf_rnn_without_targets_is_told_the_targets_flag(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text(ROWS)
    assert main(["train", "pf-gru", "--data", str(path), "--series", "site", "--time", "when"]) == 2
    error = capsys.readouterr().err
    assert "give --targets (e.g. --targets y)" in error and "--set 'data.targets" not in error, error


def test_a_data_warning_names_the_features_flag(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text("site,when,temp,weight\n" + "".join(f"{s},{t},{t * t},{t}kg\n" for s in "ab" for t in range(3)))
    main(["train", "gru", "--data", str(path), "--series", "site", "--window", "9"])  # fails after the warning
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ppl-models: warning:")]
    assert len(warning) == 1 and "name the value columns with --features A,B to read them" in warning[0], warning


#: (a data error the command line seldom meets, its line with the data flags)
SELDOM = [
    (lambda: SequenceDataset.from_sequences([np.ones((3, 1))], source="f.csv").padded_targets(), "--targets C[,D]"),
    (lambda: SequenceDataset.from_sequences([np.ones((3, 1))], source="f.csv").split(column=True), "(--split-column"),
    (
        lambda: SequenceDataset.from_sequences([np.ones((3, 1))], source="f.csv").windows(9),
        "--window 9 is longer than series '0' (3 steps); choose --window <= 3",
    ),
    (
        lambda: resolve_transform("seasonal-difference", _series(30).split(by="time"), prefix="data."),
        "none was given (data.season)",
    ),
    (
        lambda: resolve_transform("difference", _series(12).split(by="time"), window=9, prefix="data."),
        "fewer than --window 9",
    ),
    (lambda: FileSpec.of(stride=2), "data.stride: needs --window"),
]


def _series(steps):
    """Two random walks of ``steps`` steps: no season."""
    return SequenceDataset.from_sequences(list(np.random.default_rng(0).normal(size=(2, steps)).cumsum(1)))


@pytest.mark.parametrize("make, says", SELDOM, ids=[says for _, says in SELDOM])
def test_a_setting_error_the_command_line_seldom_meets_is_spelled_by_its_flags(make, says):
    with pytest.raises(SettingError) as raised:
        make()
    assert says in cli_messages.user_message(raised.value, flags=True), raised.value
    assert cli_messages.user_message(raised.value, flags=False) == str(raised.value)


def test_each_flag_spells_its_key_and_a_key_without_one_is_data_key():
    for flag, key, options in data_flags.DATA_FLAGS:
        assert cli_messages.spell_flag(key, None) == flag
        assert cli_messages.spell_flag(key, "") == f"{flag} {options.get('metavar', 'VALUE')}"
    assert cli_messages.spell_flag("missing", "'drop-series'") == "--missing drop-series"
    assert cli_messages.spell_flag("features", "['a', 'b']") == "--features a,b"
    assert cli_messages.spell_flag("stride", None) == "data.stride"
    assert cli_messages.spell_flag("season", "12") == "--set data.season=12"
    assert cli_messages.spell_flag("by", "'time'") == "--split time"  # SequenceDataset.split's own name


def test_a_model_message_keeps_its_words(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text(ROWS)
    assert (
        main(
            [
                "train",
                "smc-transformer",
                "--data",
                str(path),
                "--series",
                "site",
                "--time",
                "when",
                "--set",
                "model.window=0",
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "window" in error and "--window" not in error, error


def test_the_leaderboard_takes_jobs(capsys):
    assert cli.build_parser().parse_args(["leaderboard", "--data", "x.csv", "--out", "b", "--jobs", "3"]).jobs == 3
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["leaderboard", "--data", "x.csv", "--out", "b", "--jobs", "0"])


def test_targets_given_to_a_density_model_are_refused(tmp_path, capsys):
    path = site_walks(tmp_path / "w.csv", wind=lambda f: 1.0 + f["t"] % 3)
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
    path = site_walks(
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

"""Bad input on the command line, tried as a new user would: every case one line on stderr, exit status 2, run
folders and data untouched; an interrupt one line with status 130, a bug (or ``--debug``) its traceback.

The CLI is driven in-process (``ppl_models.experiments.cli.main``) on one small finished run; malformed data
files are tiny synthetic copies in a data folder of the test's own (``PPL_MODELS_DATA``); a value that is only
extreme trains, with one warning line.
"""

import errno
import hashlib
import io
import json
import os
import shutil

import numpy as np
import pytest
import scipy.io
import torch

import ppl_models.inference.atomic_files
from ppl_models.experiments import cli, registry, run_folder, runner
from ppl_models.experiments.config import load_config

SMALL = """
name = "tiny"
seed = 0
device = "cpu"
[data]
name = "lgssm-synthetic"
num_train = 8
num_valid = 4
num_test = 4
num_steps = 8
[model]
name = "lgssm"
[objective]
name = "smc"
num_particles = 4
[train]
epochs = 1
batch_size = 8
progress = false
[evaluate]
estimators = ["exact", "smc"]
num_particles = 16
predictive_samples = 8
"""


#: the same data, another model: its config.json and best.pt belong to another run
OTHER_MODEL = SMALL.replace(
    '[model]\nname = "lgssm"\n', '[model]\nname = "recurrent"\ncell = "gru"\nstate_dim = 2\nencoder_dim = 2\n'
).replace('name = "smc"\nnum_particles = 4\n', 'name = "exact"\n')


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``(config file, finished run folder)`` of a one-epoch LGSSM run; beside it, ``other``: a GRU run."""
    root = tmp_path_factory.mktemp("bad-inputs")
    path = root / "tiny.toml"
    path.write_text(SMALL)
    run = root / "run"
    runner.train(load_config(path), run)
    (root / "other.toml").write_text(OTHER_MODEL)
    runner.train(load_config(root / "other.toml"), root / "other")
    return path, run


def _snapshot(folder):
    return (
        {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}
        if folder.exists()
        else None
    )


def _cli(argv, capsys):
    """``(exit status, stderr)`` of ``ppl-models argv`` run in-process."""
    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code
    return status, capsys.readouterr().err


def _copy(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _from_other_run(name):
    """A copy of the run whose file ``name`` is the GRU run's (copied from another model's run)."""

    def apply(run, tmp_path):
        copy = _copy(run, tmp_path)
        shutil.copyfile(run.parent / "other" / name, copy / name)
        return copy

    return apply


def _corrupt(name, content):
    def apply(run, tmp_path):
        run = _copy(run, tmp_path)
        target = run / name
        if content == "truncated":
            target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
        elif content is None:
            target.unlink()
        else:
            target.write_bytes(content)
        return run

    return apply


# (id, argv with {config} / {run} / {tmp}, what the one line must say); {run} may be prepared by a function
TRAIN_CASES = [
    (
        "float-for-int",
        ["train", "{config}", "--set", "objective.num_particles=1.5"],
        "objective.num_particles must be int",
    ),
    ("text-for-int", ["train", "{config}", "--set", "model.latent_dim=abc"], "model.latent_dim must be int"),
    ("section-as-value", ["train", "{config}", "--set", "train=5"], "[train] must be a table"),
    ("lr-inf", ["train", "{config}", "--set", "train.lr=inf"], "TrainConfig.lr must be a finite number"),
    ("clip-nan", ["train", "{config}", "--set", "train.clip_norm=nan"], "TrainConfig.clip_norm must be a finite"),
    ("epochs-float", ["train", "{config}", "--set", "train.epochs=2.5"], "TrainConfig.epochs must be an integer"),
    ("negative-seed", ["train", "{config}", "--set", "seed=-1"], "seed must be an int in [0, 2**32)"),
    ("huge-seed", ["train", "{config}", "--set", "seed=99999999999999999999"], "seed must be an int in [0, 2**32)"),
    ("out-of-memory", ["train", "{config}", "--set", "data.obs_dim=100000000"], "out of memory"),
    ("bool-for-float", ["train", "{config}", "--set", "data.obs_dim=true"], "data.obs_dim must be int"),
    ("no-such-file", ["train", "{tmp}/missing.toml"], "experiment file {tmp}/missing.toml is not a file"),
    ("not-a-toml-file", ["train", "{tmp}/afile"], "afile is not a .toml file"),
    ("malformed-toml", ["train", "{tmp}/bad.toml"], "bad.toml is not valid TOML"),
    ("binary-toml", ["train", "{tmp}/binary.toml"], "binary.toml is not valid TOML"),
    ("no-model-section", ["train", "{tmp}/nomodel.toml"], "needs a [model] section"),
    ("run-dir-is-a-file", ["train", "{config}", "--run-dir", "{tmp}/afile"], "afile is a file, not a folder"),
    ("device-in-set", ["train", "{config}", "--set", "device='tpu'"], "device must be"),
    ("supervised-section-as-value", ["train", "pfrnn-demo", "--set", "loss=3"], "[loss] must be a table"),
    ("supervised-device-in-set", ["train", "pfrnn-demo", "--set", "device='tpu'"], "device must be"),
    ("supervised-lr-inf", ["train", "pfrnn-demo", "--set", "train.lr=inf"], "TrainConfig.lr must be a finite"),
    ("supervised-bad-model-value", ["train", "pfrnn-demo", "--set", "model.num_particles=0"], "num_particles"),
    ("supervised-bad-data-value", ["train", "pfrnn-demo", "--set", "data.maze_size=11"], "maze_size"),
    ("epochs-without-resume", ["train", "{config}", "--epochs", "3"], "--epochs changes a resumed run's length"),
    (
        "posterior-draws-beyond-memory",
        ["train", "{config}", "--set", "evaluate.posterior_draws=1000000000000"],
        "evaluate.posterior_draws=1000000000000 needs at least",
    ),
]


def _write_inputs(tmp_path):
    (tmp_path / "bad.toml").write_text("name = \n[data\n")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "nomodel.toml").write_text(SMALL.replace('[model]\nname = "lgssm"\n', ""))
    (tmp_path / "afile").write_text("")


def _format(argv, config, run, tmp_path):
    return [a.format(config=config, run=run, tmp=tmp_path) for a in argv]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in TRAIN_CASES], ids=[c[0] for c in TRAIN_CASES])
def test_train_user_errors_are_one_line_with_exit_status_2(finished, tmp_path, capsys, argv, expected):
    config, run = finished
    _write_inputs(tmp_path)
    before = _snapshot(tmp_path)
    status, err = _cli(
        _format(argv, config, run, tmp_path) + ["--run-dir", tmp_path / "new"]
        if "--run-dir" not in argv
        else _format(argv, config, run, tmp_path),
        capsys,
    )
    assert status == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert expected.format(tmp=tmp_path) in err, err
    assert _snapshot(tmp_path) == before  # nothing written, not even a run folder


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user whom permissions stop")
def test_unwritable_run_dir_is_one_line(finished, tmp_path, capsys):
    config, _ = finished
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        status, err = _cli(["train", config, "--run-dir", locked / "run"], capsys)
    finally:
        locked.chmod(0o755)
    assert status == 2 and err.count("\n") == 1 and "cannot be written" in err, err


def test_unwritable_run_dir_is_one_line_for_any_user(finished, tmp_path, capsys, monkeypatch):
    config, _ = finished

    def refuse(path, text):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(run_folder, "write_text", refuse)
    status, err = _cli(["train", config, "--run-dir", tmp_path / "run"], capsys)
    assert status == 2 and err.count("\n") == 1 and "run" in err and "cannot be written to (Permission denied)" in err


@pytest.mark.parametrize(
    "content",
    [None, b"", b"\x00garbage with its own checksum" * 20],
    ids=["missing", "empty", "garbage-matching-checksum"],
)
def test_missing_or_empty_data_file_is_one_line_naming_it(finished, tmp_path, capsys, monkeypatch, content):
    digest = hashlib.sha256(content).hexdigest() if content else "0" * 64
    (tmp_path / "SHA256SUMS").write_text(digest + "  polyphonic/JSB_Chorales.mat\n")
    if content is not None:
        (tmp_path / "polyphonic").mkdir()
        (tmp_path / "polyphonic" / "JSB_Chorales.mat").write_bytes(content)
    monkeypatch.setenv("PPL_MODELS_DATA", str(tmp_path))
    status, err = _cli(["train", "srnn-jsb", "--run-dir", tmp_path / "run"], capsys)
    assert status == 2 and err.count("\n") == 1 and "JSB_Chorales.mat" in err, err
    assert not (tmp_path / "run").exists()


EVALUATE_CASES = [
    ("float-particles", None, ["--set", "num_particles=1.5"], "evaluate.num_particles must be an int >= 1"),
    ("estimators-not-list", None, ["--set", "estimators=smc"], "evaluate.estimators must be a non-empty list"),
    (
        "out-of-memory",
        None,
        ["--set", "num_particles=10000000000000"],
        "evaluate.num_particles=10000000000000 needs at least",
    ),
    ("out-is-a-file", None, ["--out", "{tmp}/afile"], "afile is a file, not a folder"),
    ("empty-best", _corrupt("checkpoints/best.pt", b""), [], "best.pt is not a readable checkpoint"),
    ("garbage-best", _corrupt("checkpoints/best.pt", b"\x80\x02garbage" * 10), [], "best.pt is not a readable"),
    ("truncated-best", _corrupt("checkpoints/best.pt", "truncated"), [], "best.pt is not a readable checkpoint"),
    ("missing-best", _corrupt("checkpoints/best.pt", None), [], "best.pt"),
    ("corrupt-config-json", _corrupt("config.json", b"{not json"), [], "config.json is not a readable run config"),
    ("config-json-list", _corrupt("config.json", b"[1, 2]"), [], "config.json is not a run configuration"),
    ("no-config-json", _corrupt("config.json", None), [], "has no config.json"),
    ("supervised-run", _corrupt("config.json", b'{"kind": "supervised"}'), [], "is a supervised run"),
    (
        "config-json-of-another-model",
        _from_other_run("config.json"),
        [],
        "best.pt is for model 'lgssm' but {run}/config.json expects model 'recurrent' (cell='gru'",
    ),
    (
        "best-pt-of-another-model",
        _from_other_run("checkpoints/best.pt"),
        [],
        "best.pt is for model 'recurrent' (cell='gru', state_dim=2, encoder_dim=2) but {run}/config.json expects "
        "model 'lgssm'",
    ),
    (
        "posterior-draws-beyond-memory",
        None,
        ["--set", "posterior_draws=1000000000000"],
        "evaluate.posterior_draws=1000000000000 needs at least",
    ),
    (
        "predictive-samples-beyond-memory",
        None,
        ["--set", "predictive_samples=1000000000000"],
        "evaluate.predictive_samples=1000000000000 needs at least",
    ),
    ("out-is-the-run", None, ["--out", "{run}", "--force"], "is (or holds) a run folder"),
    ("out-holds-the-run", None, ["--out", "{run}/..", "--force"], "is (or holds) a run folder"),
    ("out-holds-other-files", None, ["--out", "{tmp}"], "holds other files, not an evaluation"),
]


@pytest.mark.parametrize(
    ("prepare", "extra", "expected"), [c[1:] for c in EVALUATE_CASES], ids=[c[0] for c in EVALUATE_CASES]
)
def test_evaluate_user_errors_are_one_line_and_leave_the_run_untouched(
    finished, tmp_path, capsys, prepare, extra, expected
):
    _, run = finished
    _write_inputs(tmp_path)
    run = prepare(run, tmp_path) if prepare else run
    before = _snapshot(run)
    status, err = _cli(["evaluate", run, *_format(extra, "", run, tmp_path)], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected.format(run=run) in err, err
    assert _snapshot(run) == before


def test_evaluate_writes_its_own_folder_and_refuses_to_overwrite_without_force(finished, tmp_path, capsys):
    _, run = finished
    run = _copy(run, tmp_path)
    own = {name: (run / name).read_bytes() for name in ("metrics.json", "config.json", "predictive.nc")}
    out = tmp_path / "eval"
    assert _cli(["evaluate", run, "--set", "num_particles=8", "--out", out], capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["evaluate"]["num_particles"] == 8
    assert "smc-8" in json.loads((out / "metrics.json").read_text())["loglik"]
    assert {name: (run / name).read_bytes() for name in own} == own  # the run's own outputs are untouched
    before = _snapshot(out)
    status, err = _cli(["evaluate", run, "--out", out], capsys)
    assert status == 2 and "already holds an evaluation" in err and "--force" in err, err
    assert _snapshot(out) == before
    assert _cli(["evaluate", run, "--out", out, "--force"], capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["evaluate"]["num_particles"] == 16


def test_evaluate_fills_a_missing_evaluate_section(finished, tmp_path, capsys):
    _, run = finished
    run = _copy(run, tmp_path)
    config = json.loads((run / "config.json").read_text())
    del config["evaluate"]
    (run / "config.json").write_text(json.dumps(config))
    status, err = _cli(
        ["evaluate", run, "--set", "estimators=['exact']", "--set", "predictive_samples=0", "--out", tmp_path / "eval"],
        capsys,
    )
    assert status == 0, err


def test_resume_without_config_json_refuses_other_data(finished, tmp_path, capsys):
    config, run = finished
    run = _copy(run, tmp_path)
    (run / "config.json").unlink()
    before = _snapshot(run)
    status, err = _cli(["train", config, "--run-dir", run, "--resume", "--set", "data.seed=5"], capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert "experiment differs from the one saved in" in err and "last.pt (in ['data'])" in err, err
    assert _snapshot(run) == before


# (id, how the run's copy is prepared, arguments after ``train {config} --run-dir {copy} --resume``, the one line)
RESUME_CASES = [
    ("set-epochs", _copy, ["--set", "train.epochs=10"], "train.epochs=10 differs from the run's 1"),
    (
        "set-evaluate",
        _copy,
        ["--set", "evaluate.num_particles=5"],
        "(in ['evaluate']): evaluate.num_particles: 16 -> 5",
    ),
    ("set-data", _copy, ["--set", "data.num_train=9"], "(in ['data']): data.num_train: 8 -> 9"),
    (
        "epochs-twice",
        _copy,
        ["--epochs", "3", "--set", "train.epochs=3"],
        "give the number of epochs of a resumed run once",
    ),
    ("epochs-zero", _copy, ["--epochs", "0"], "argument --epochs: must be an integer >= 1"),
    ("another-models-experiment", _copy, ["--set", 'model={name="recurrent", cell="gru"}'], "(in ['model'])"),
    ("config-json-of-another-model", _from_other_run("config.json"), [], "(in ['model', 'objective'])"),
    (
        "best-pt-of-another-model",
        _from_other_run("checkpoints/best.pt"),
        [],
        "experiment differs from the one saved in {run}/checkpoints/best.pt (in ['model', 'objective'])",
    ),
]


@pytest.mark.parametrize(
    ("prepare", "extra", "expected"), [c[1:] for c in RESUME_CASES], ids=[c[0] for c in RESUME_CASES]
)
def test_resume_refuses_any_change_of_the_saved_configuration(finished, tmp_path, capsys, prepare, extra, expected):
    config, run = finished
    run = prepare(run, tmp_path)
    before = _snapshot(run)
    status, err = _cli(["train", config, "--run-dir", run, "--resume", *extra], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected.format(run=run) in err, err
    assert _snapshot(run) == before  # config.json untouched, no resume.jsonl


def _mat(**arrays) -> bytes:
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, arrays)
    return buffer.getvalue()


def _trajs(n=4, steps=10, columns=11, seed=0):
    return np.random.default_rng(seed).normal(size=(n, steps, columns))


def _swimmer(trajs=None, **arrays) -> dict:
    """The three Swimmer files a default run reads, the training one (mix 1.0) holding ``arrays``."""
    files = {f"swimmer/swimmers_trajs_{mix}.mat": _mat(trajs=_trajs(seed=i)) for i, mix in enumerate(("0.5", "0.8"))}
    files["swimmer/swimmers_trajs_1.0.mat"] = _mat(**({"trajs": trajs} if trajs is not None else arrays))
    return files


def _nan_at(array, index):
    array = array.copy()
    array[index] = np.nan
    return array


def _rolls(*shapes):
    cells = np.empty((1, len(shapes)), dtype=object)
    for i, shape in enumerate(shapes):
        cells[0, i] = (np.random.default_rng(i).random(shape) < 0.1).astype(np.uint8)
    return cells


COVID_HEADER = (
    "UID,iso2,iso3,code3,FIPS,Admin2,Province_State,Country_Region,Lat,Long_,Combined_Key,Population,"
    + ",".join(
        f"{m}/{d}/20"
        for m, days in ((1, range(22, 32)), (2, range(1, 30)), (3, range(1, 32)), (4, range(1, 31)), (5, range(1, 23)))
        for d in days
    )
)
COVID_ROW = '1,US,USA,840,1001,Autauga,Alabama,US,32.5,-86.6,"Autauga, Alabama, US",55869,' + ",".join(["0"] * 122)
AIR_HEADER = (
    "Date;Time;CO(GT);PT08.S1(CO);NMHC(GT);C6H6(GT);PT08.S2(NMHC);NOx(GT);PT08.S3(NOx);NO2(GT);"
    "PT08.S4(NO2);PT08.S5(O3);T;RH;AH;;"
)
AIR_ROW = "10/03/2004;18.00.00;2,6;1360;150;11,9;1046;166;1056;113;1692;1268;13,6;48,9;0,7578;;"


def _air(*rows) -> dict:
    return {"air_quality/AirQualityUCI.csv": "\r\n".join((AIR_HEADER, *rows)).encode() + b"\r\n"}


def _covid(text: str) -> dict:
    return {"covid/time_series_covid19_deaths_US.csv": text.encode()}


# (id, experiment and overrides, the data folder's files, what the one line must say)
DATA_CASES = [
    (
        "mat-without-its-array",
        ["recurrent-swimmer"],
        _swimmer(positions=_trajs()),
        "swimmers_trajs_1.0.mat has no array 'trajs' (it holds ['positions'])",
    ),
    (
        "mat-of-the-wrong-shape",
        ["recurrent-swimmer"],
        _swimmer(_trajs()[0]),
        "swimmer/swimmers_trajs_1.0.mat: array 'trajs' must have 3 dimensions of sizes [>= 1, >= 2, >= 11], got shape "
        "[10, 11]",
    ),
    (
        "mat-too-few-columns",
        ["recurrent-swimmer"],
        _swimmer(_trajs(columns=5)),
        "array 'trajs' must have 3 dimensions of sizes [>= 1, >= 2, >= 11], got shape [4, 10, 5]",
    ),
    (
        "mat-paper-split-too-short",
        ["recurrent-swimmer", "--set", "data.paper_split=true"],
        _swimmer(_trajs()),
        "got shape [4, 10, 11]",
    ),
    (
        "mat-with-nan",
        ["recurrent-swimmer"],
        _swimmer(_nan_at(_trajs(), (2, 3, 8))),
        "swimmer/swimmers_trajs_1.0.mat: array 'trajs', column 'trajs[..., 8]', index (2, 3): nan is not a finite "
        "float32 number",
    ),
    (
        "mat-beyond-float32",
        ["recurrent-swimmer"],
        _swimmer(np.where(np.arange(11) == 0, 1e39, _trajs())),
        "1e+39 is not a finite float32 number",
    ),
    (
        "rolls-without-test-split",
        ["gru-jsb"],
        {"polyphonic/JSB_Chorales.mat": _mat(traindata=_rolls((5, 88)), validdata=_rolls((5, 88)))},
        "JSB_Chorales.mat has no array 'testdata'",
    ),
    (
        "rolls-of-87-keys",
        ["gru-jsb"],
        {
            "polyphonic/JSB_Chorales.mat": _mat(
                traindata=_rolls((5, 88), (4, 87)), validdata=_rolls((5, 88)), testdata=_rolls((5, 88))
            )
        },
        "polyphonic/JSB_Chorales.mat: array 'traindata', sequence 1 must be a [T, 88] piano roll of 0s and 1s, got "
        "shape [4, 87]",
    ),
    ("csv-empty", ["mcdropout-covid"], _covid(""), "covid/time_series_covid19_deaths_US.csv is empty"),
    (
        "csv-header-only",
        ["mcdropout-covid"],
        _covid(COVID_HEADER + "\n"),
        "covid/time_series_covid19_deaths_US.csv holds a header but no data rows",
    ),
    (
        "csv-truncated",
        ["mcdropout-covid"],
        _covid("\n".join((COVID_HEADER, COVID_ROW, COVID_ROW[:60]))),
        "covid/time_series_covid19_deaths_US.csv line 3: 11 cells where the header has 134 (a truncated",
    ),
    (
        "csv-not-a-number",
        ["mcdropout-covid"],
        _covid("\n".join((COVID_HEADER, COVID_ROW.replace(",0,0", ",0,x", 1)))),
        "covid/time_series_covid19_deaths_US.csv line 2, column '1/23/20': 'x' is not a number",
    ),
    (
        "csv-no-such-column",
        ["mcdropout-covid"],
        _covid("\n".join((COVID_HEADER.replace("Population", "Pop"), COVID_ROW))),
        "covid/time_series_covid19_deaths_US.csv has no column 'Population'",
    ),
    (
        "air-truncated",
        ["recurrent-swimmer", "--set", 'data.name="air-quality"'],
        _air(AIR_ROW, AIR_ROW, AIR_ROW[:30]),
        "air_quality/AirQualityUCI.csv line 4: 5 cells where the header has 17",
    ),
    (
        "air-empty-cell",
        ["recurrent-swimmer", "--set", 'data.name="air-quality"'],
        _air(AIR_ROW, AIR_ROW.replace(";1360;", ";;")),
        "air_quality/AirQualityUCI.csv line 3, column 'PT08.S1(CO)': '' is not a number",
    ),
    (
        "air-only-empty-rows",
        ["recurrent-swimmer", "--set", 'data.name="air-quality"'],
        _air(";" * 16),
        "air_quality/AirQualityUCI.csv has no data rows",
    ),
    (
        "air-regression-truncated",
        ["pfrnn-air"],
        _air(AIR_ROW, AIR_ROW[:30]),
        "air_quality/AirQualityUCI.csv line 3: 5 cells where the header has 17",
    ),
    (
        "sha256sums-bad-line",
        ["recurrent-swimmer"],
        {**_swimmer(_trajs()), "SHA256SUMS": b"not a checksum line\n"},
        "SHA256SUMS line 1: expected a SHA-256 digest (64 hex digits), spaces and a file name",
    ),
]


def _data_folder(root, files: dict) -> None:
    """Write ``files`` (relative name: bytes) and their ``SHA256SUMS`` (unless ``files`` gives one ahead of it)."""
    data = {name: content for name, content in files.items() if name != "SHA256SUMS"}
    lines = [f"{hashlib.sha256(content).hexdigest()}  ./{name}\n" for name, content in data.items()]
    (root / "SHA256SUMS").write_bytes(files.get("SHA256SUMS", b"") + "".join(lines).encode())
    for name, content in data.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


@pytest.mark.parametrize(("argv", "files", "expected"), [c[1:] for c in DATA_CASES], ids=[c[0] for c in DATA_CASES])
def test_malformed_data_files_are_one_line_naming_file_and_place(tmp_path, capsys, monkeypatch, argv, files, expected):
    _data_folder(tmp_path, files)
    monkeypatch.setenv("PPL_MODELS_DATA", str(tmp_path))
    before = _snapshot(tmp_path)
    status, err = _cli(["train", *argv, "--run-dir", tmp_path / "run"], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err, err
    assert _snapshot(tmp_path) == before  # no run folder, the data untouched


def test_an_extreme_value_in_a_data_file_trains_with_one_warning_naming_file_and_column(tmp_path, capsys, monkeypatch):
    trajs = _trajs()
    trajs[1, 3, 8] = 1e30
    _data_folder(tmp_path, _swimmer(trajs))
    monkeypatch.setenv("PPL_MODELS_DATA", str(tmp_path))
    tiny = [
        "model.state_dim=2",
        "model.encoder_dim=2",
        "train.epochs=1",
        "evaluate.predictive_samples=4",
        'evaluate.noise_refit="none"',
        "device='cpu'",
    ]
    status, err = _cli(
        [
            "train",
            "recurrent-swimmer",
            "--run-dir",
            tmp_path / "run",
            *[arg for item in tiny for arg in ("--set", item)],
        ],
        capsys,
    )
    assert status == 0, err
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("ppl-models: warning: swimmer/swimmers_trajs_1.0.mat: array 'trajs': extreme values")
    assert "column 'trajs[..., 8]' (1, first 1e+30 at index (1, 3))" in warning


def test_a_full_disk_is_one_line_naming_the_file(finished, tmp_path, capsys, monkeypatch):
    _, run = finished

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ppl_models.inference.atomic_files.os, "fsync", full)
    status, err = _cli(["evaluate", run, "--out", tmp_path / "eval"], capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert err.endswith("metrics.json: No space left on device (errno 28)\n"), err
    assert list(tmp_path.iterdir()) == []  # neither the evaluation nor its hidden staging folder


@pytest.fixture(scope="module")
def smct_run(tmp_path_factory):
    """A one-epoch SMC Transformer run: a model with per-sequence EM."""
    config = load_config(
        registry.experiment_config("smct-demo"),
        [
            "data.num_samples=10",
            "train.epochs=1",
            "model.d_model=4",
            "model.window=4",
            "objective.num_particles=2",
            "evaluate.predictive_samples=2",
            "evaluate.num_particles=2",
            "device='cpu'",
        ],
    )
    run = tmp_path_factory.mktemp("smct") / "run"
    runner.train(config, run)
    return run


@pytest.mark.parametrize(
    ("sites", "expected"),
    [
        (
            "q,bogus",
            "run 'A' (model 'smc-transformer') has no covariances ['bogus']; its valid sites are q, k, v, z, x, "
            "x_first",
        ),
        ("q,,k", "has no covariances ['']"),
    ],
)
def test_unknown_em_sites_are_refused_naming_the_valid_ones(smct_run, tmp_path, capsys, sites, expected):
    status, err = _cli(
        [
            "forecast",
            f"A={smct_run}",
            "--out",
            tmp_path / "f",
            "--observed",
            "5",
            "--samples",
            "2",
            "--em-iterations",
            "1",
            "--em-sites",
            sites,
        ],
        capsys,
    )
    assert status == 2 and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "f").exists()


OTHER_CASES = [
    (
        "compare-feature-99",
        ["compare", "A={run}", "--out", "{tmp}/cmp", "--feature", "99"],
        "--feature must be in [0, ",
    ),
    ("compare-feature-negative", ["compare", "A={run}", "--out", "{tmp}/cmp", "--feature", "-1"], "--feature"),
    ("compare-unfinished", ["compare", "A={tmp}", "--out", "{tmp}/cmp"], "not finished run folders"),
    ("compare-no-label", ["compare", "{run}", "--out", "{tmp}/cmp"], "LABEL=RUN_FOLDER"),
    ("demo-device-tpu", ["demo", "--device", "tpu"], "argument --device: must be auto, cpu, cuda or cuda:N"),
    ("forecast-device-tpu", ["forecast", "A={run}", "--out", "{tmp}/f", "--device", "tpu"], "--device"),
    ("train-device-tpu", ["train", "{config}", "--device", "tpu"], "--device"),
    ("evaluate-device-tpu", ["evaluate", "{run}", "--device", "tpu"], "--device"),
    ("forecast-samples-0", ["forecast", "A={run}", "--out", "{tmp}/f", "--samples", "0"], "--samples"),
    (
        "forecast-samples-1",
        ["forecast", "A={run}", "--out", "{tmp}/f", "--samples", "1"],
        "argument --samples: must be an integer >= 2, got 1",
    ),
    (
        "forecast-samples-beyond-memory",
        ["forecast", "A={run}", "--out", "{tmp}/f", "--observed", "4", "--samples", "1000000000000"],
        "num_samples=1000000000000 needs at least",
    ),
    (
        "forecast-em-sites-without-em",
        ["forecast", "A={run}", "--out", "{tmp}/f", "--observed", "4", "--em-sites", "bogus"],
        "em_sites needs em_iterations > 0",
    ),
    (
        "forecast-em-on-a-model-without-em",
        ["forecast", "A={run}", "--out", "{tmp}/f", "--observed", "4", "--em-iterations", "2", "--em-sites", "bogus"],
        "no run has per-sequence EM (models ['lgssm']",
    ),
    (
        "compare-label-twice",
        ["compare", "A={run}", "A={tmp}", "--out", "{tmp}/cmp"],
        "label 'A' is given twice ({run} and {tmp})",
    ),
    ("forecast-label-twice", ["forecast", "A={run}", "A={run}", "--out", "{tmp}/f"], "label 'A' is given twice"),
    ("unknown-command", ["fly"], "invalid choice"),
    ("unknown-suite", ["suite", "nope"], "suite must be one of"),
    ("unknown-experiment", ["train", "no-such-experiment"], "no-such-experiment"),
    ("evaluate-missing-run", ["evaluate", "{tmp}/gone"], "run_dir {tmp}/gone does not exist"),
    ("forecast-missing-run", ["forecast", "A={tmp}/gone", "--out", "{tmp}/f"], "run 'A': {tmp}/gone does not exist"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in OTHER_CASES], ids=[c[0] for c in OTHER_CASES])
def test_other_commands_user_errors_are_one_line(finished, tmp_path, capsys, argv, expected):
    config, run = finished
    before = _snapshot(run)
    status, err = _cli(_format(argv, config, run, tmp_path), capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected.format(tmp=tmp_path, run=run) in err, err
    assert _snapshot(run) == before
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "f").exists()


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_demo_refuses_an_unavailable_device_before_it_starts(tmp_path, capsys, monkeypatch, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    status = cli.main(["demo", "--device", device, "--run-dir", str(tmp_path / "demo")])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert "CUDA is not available" in err and not (tmp_path / "demo").exists()


def test_debug_shows_the_traceback(tmp_path):
    (tmp_path / "bad.toml").write_text("name = \n")
    with pytest.raises(ValueError, match="bad.toml is not valid TOML"):
        cli.main(["--debug", "train", str(tmp_path / "bad.toml")])
    with pytest.raises(ValueError, match="bad.toml is not valid TOML"):
        cli.main(["train", str(tmp_path / "bad.toml"), "--debug"])


def test_ctrl_c_is_one_line_with_exit_status_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "experiment_config", interrupted)
    status, err = _cli(["train", "lgssm-demo"], capsys)
    assert status == 130 and err == "ppl-models: interrupted (a training run continues with --resume)\n"


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(registry, "experiment_config", broken)
    with pytest.raises(KeyError):
        cli.main(["train", "lgssm-demo"])

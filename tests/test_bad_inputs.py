"""Bad input, tried as a new user would: every case one line on stderr, exit status 2, run folders untouched.

The CLI is driven in-process (``experiments.cli.main``) on one small finished run; the public API
through a table of calls that must raise a named ``ValueError``/``TypeError``, and NaN in the
padding must give the same numbers as zeros there.
"""

import hashlib
import json
import os
import shutil

import pytest
import torch

from experiments import cli, registry, runner
from experiments.config import load_config
from inference import ParticleFilter
from inference.objectives import ELBO, IWAE, ExactLikelihood
from inference.training import Trainer
from inference.validation import InputTypeError
from ppl_models import SRNN, VRNN, GRUBaseline, LinearGaussianSSM
from ppl_models.psrnn import PSRNN

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


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``(config file, finished run folder)`` of a one-epoch LGSSM run."""
    root = tmp_path_factory.mktemp("bad-inputs")
    path = root / "tiny.toml"
    path.write_text(SMALL)
    run = root / "run"
    runner.train(load_config(path), run)
    return path, run


def _snapshot(folder):
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))} if folder.exists() else None


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
    ("float-for-int", ["train", "{config}", "--set", "objective.num_particles=1.5"],
     "objective.num_particles must be int"),
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
    status, err = _cli(_format(argv, config, run, tmp_path) + ["--run-dir", tmp_path / "new"]
                       if "--run-dir" not in argv else _format(argv, config, run, tmp_path), capsys)
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
    monkeypatch.setattr(runner, "write_text", refuse)
    status, err = _cli(["train", config, "--run-dir", tmp_path / "run"], capsys)
    assert status == 2 and err.count("\n") == 1 and "run" in err and "cannot be written to (Permission denied)" in err


@pytest.mark.parametrize("content", [None, b"", b"\x00garbage with its own checksum" * 20],
                         ids=["missing", "empty", "garbage-matching-checksum"])
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
    ("out-of-memory", None, ["--set", "num_particles=10000000000000"],
     "evaluate.num_particles=10000000000000 needs at least"),
    ("out-is-a-file", None, ["--out", "{tmp}/afile"], "afile is a file, not a folder"),
    ("empty-best", _corrupt("checkpoints/best.pt", b""), [], "best.pt is not a readable checkpoint"),
    ("garbage-best", _corrupt("checkpoints/best.pt", b"\x80\x02garbage" * 10), [], "best.pt is not a readable"),
    ("truncated-best", _corrupt("checkpoints/best.pt", "truncated"), [], "best.pt is not a readable checkpoint"),
    ("missing-best", _corrupt("checkpoints/best.pt", None), [], "best.pt"),
    ("corrupt-config-json", _corrupt("config.json", b"{not json"), [], "config.json is not a readable run config"),
    ("config-json-list", _corrupt("config.json", b"[1, 2]"), [], "config.json is not a run configuration"),
    ("no-config-json", _corrupt("config.json", None), [], "has no config.json"),
    ("supervised-run", _corrupt("config.json", b'{"kind": "supervised"}'), [], "is a supervised run"),
]


@pytest.mark.parametrize(("prepare", "extra", "expected"), [c[1:] for c in EVALUATE_CASES],
                         ids=[c[0] for c in EVALUATE_CASES])
def test_evaluate_user_errors_are_one_line_and_leave_the_run_untouched(finished, tmp_path, capsys, prepare, extra,
                                                                       expected):
    _, run = finished
    _write_inputs(tmp_path)
    run = prepare(run, tmp_path) if prepare else run
    before = _snapshot(run)
    status, err = _cli(["evaluate", run, *_format(extra, "", run, tmp_path)], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err, err
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
    status, err = _cli(["evaluate", run, "--set", "estimators=['exact']", "--set", "predictive_samples=0",
                        "--out", tmp_path / "eval"], capsys)
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


OTHER_CASES = [
    ("compare-feature-99", ["compare", "A={run}", "--out", "{tmp}/cmp", "--feature", "99"],
     "--feature must be in [0, "),
    ("compare-feature-negative", ["compare", "A={run}", "--out", "{tmp}/cmp", "--feature", "-1"], "--feature"),
    ("compare-unfinished", ["compare", "A={tmp}", "--out", "{tmp}/cmp"], "not finished run folders"),
    ("compare-no-label", ["compare", "{run}", "--out", "{tmp}/cmp"], "LABEL=RUN_FOLDER"),
    ("demo-device-tpu", ["demo", "--device", "tpu"], "argument --device: must be auto, cpu, cuda or cuda:N"),
    ("forecast-device-tpu", ["forecast", "A={run}", "--out", "{tmp}/f", "--device", "tpu"], "--device"),
    ("train-device-tpu", ["train", "{config}", "--device", "tpu"], "--device"),
    ("evaluate-device-tpu", ["evaluate", "{run}", "--device", "tpu"], "--device"),
    ("forecast-samples-0", ["forecast", "A={run}", "--out", "{tmp}/f", "--samples", "0"], "--samples"),
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
    assert expected.format(tmp=tmp_path) in err, err
    assert _snapshot(run) == before
    assert not (tmp_path / "cmp").exists()


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


# --- the public API ----------------------------------------------------------------------------------------
def _lgssm():
    return LinearGaussianSSM.random(2, 1, generator=torch.Generator().manual_seed(0), proposal="bootstrap")


def _x(dtype=torch.float32, features=1):
    return torch.randn(3, 6, features, generator=torch.Generator().manual_seed(1)).to(dtype)


API_CASES = [
    ("filter-float64", lambda: ParticleFilter(8).run(_lgssm(), _x(torch.float64)), TypeError,
     r"x has dtype torch.float64 but the model's parameters are torch.float32"),
    ("filter-float16", lambda: ParticleFilter(8).run(_lgssm(), _x(torch.float16)), TypeError,
     r"x has dtype torch.float16 but the model's parameters are torch.float32"),
    ("filter-features", lambda: ParticleFilter(8).run(_lgssm(), _x(features=3)), ValueError,
     r"x must have 1 features \(last dim\), got 3"),
    ("iwae-float64", lambda: IWAE(_lgssm(), 4)(_x(torch.float64)), TypeError, "x has dtype torch.float64"),
    ("elbo-features", lambda: ELBO(_lgssm())(_x(features=2)), ValueError, "x must have 1 features"),
    ("filter-nan-valid", lambda: ParticleFilter(8).run(_lgssm(), _x().index_fill(1, torch.tensor([2]), float("nan"))),
     ValueError, "NaN or inf at valid"),
    ("kalman-float64", lambda: _lgssm().log_likelihood(_x(torch.float64)), TypeError,
     "x has dtype torch.float64 but the model's parameters are torch.float32"),
    ("lgssm-predictive-features", lambda: _lgssm().predictive(_x(features=2)), ValueError, "x must have 1 features"),
    ("psrnn-float16", lambda: _psrnn().log_likelihood(_x(torch.float16)), TypeError, "x has dtype torch.float16"),
    ("filter-bad-particles", lambda: ParticleFilter(1.5), InputTypeError, "num_particles must be an int >= 1"),
    ("filter-int-x", lambda: ParticleFilter(8).run(_lgssm(), torch.ones(2, 3, 1, dtype=torch.long)), TypeError,
     "floating-point"),
    ("trainer-valid-features", lambda: Trainer(ExactLikelihood(_lgssm()), (_x(), None), (_x(features=2), None)),
     ValueError, r"valid_data\[0\] must have 1 features"),
    ("trainer-train-float64", lambda: Trainer(ExactLikelihood(_lgssm()), (_x(torch.float64), None)), TypeError,
     r"train_data\[0\] has dtype torch.float64"),
    ("filter-generator", lambda: ParticleFilter(8, generator=3), InputTypeError, "generator must be a torch.Generator"),
    ("objective-not-a-module", lambda: ELBO("srnn"), InputTypeError, "model must be an nn.Module"),
    ("lgssm-nan-parameter", lambda: LinearGaussianSSM(torch.full((1, 1), float("nan")), *[torch.eye(1)] * 4),
     ValueError, "A must hold finite floating-point numbers"),
    # a Bernoulli emission's data are refused before any Pyro program runs (whose errors carry trace shapes)
    ("srnn-elbo-not-binary", lambda: ELBO(SRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4))(_x()), ValueError,
     "x must be binary"),
    ("vrnn-iwae-not-binary", lambda: IWAE(VRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4), 2)(_x()), ValueError,
     "x must be binary"),
    ("srnn-filter-not-binary", lambda: ParticleFilter(4).run(SRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4), _x()),
     ValueError, "x must be binary"),
    ("gru-score-not-binary", lambda: GRUBaseline(1, rnn_dim=3, hidden_dim=4).score(_x()), ValueError,
     "x must be binary"),
]


@pytest.mark.parametrize(("call", "error", "message"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_bad_inputs_raise_one_named_error(call, error, message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


def _padded_with(value):
    x = _x()
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[0, 4:] = False
    mask[2, 2:] = False
    return x.masked_fill(~mask.unsqueeze(-1), value), mask


def _psrnn():
    model = PSRNN(1, state_dim=3, obs_features=3, num_features=20, init="random")
    model.initialize(*_padded_with(0.0), generator=torch.Generator().manual_seed(0))
    return model


NAN_PADDING = [
    ("kalman", lambda x, m: _lgssm().log_likelihood(x, m)),
    ("filter", lambda x, m: (torch.manual_seed(0), ParticleFilter(8, generator=torch.Generator().manual_seed(0))
                              .run(_lgssm(), x, m).log_evidence)[1]),
    ("iwae", lambda x, m: (torch.manual_seed(0), IWAE(_lgssm(), 4)(x, m).bound)[1]),
    ("elbo", lambda x, m: (torch.manual_seed(0), ELBO(_lgssm())(x, m).bound)[1]),
    ("psrnn", lambda x, m: _psrnn().log_likelihood(x, m)),
]


@pytest.mark.parametrize("compute", [c[1] for c in NAN_PADDING], ids=[c[0] for c in NAN_PADDING])
def test_nan_in_the_padding_is_accepted_and_changes_nothing(compute):
    with torch.no_grad():
        with_nan, zeros = compute(*_padded_with(float("nan"))), compute(*_padded_with(0.0))
    assert torch.isfinite(with_nan).all()
    assert torch.equal(with_nan, zeros)

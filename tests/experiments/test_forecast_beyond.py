"""Forecasts past the end of the data (``ppl-models forecast RUN --beyond H``): every step carries the model's state
forward (the draws of rerunning each path, at a cost linear in H), each series keeps its own id, a new file is read
whole as the series' history, 0/1 data gives the probability of a 1, a horizon that cannot fit is refused first, and
so are the flags of a forecast of the test split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyro.distributions as dist
import pytest
import torch
from factories import FACTORIES, VARIANTS
from scipy.stats import ks_2samp

from ppl_models import PSRNN, GRUBaseline, MCDropoutLSTM, RecurrentPredictor, TransformerForecaster
from ppl_models.experiments import beyond_forecasts, forecasting
from ppl_models.experiments.cli import main

D = 2
IDS = ["a:1", "x[2]", "s 1", "007", "ünï"]
TRAIN = [
    "--series",
    "station",
    "--time",
    "hour",
    "--split",
    "time",
    "--set",
    "train.epochs=1",
    "--set",
    "model.rnn_dim=4",
    "--set",
    "model.hidden_dim=4",
    "--set",
    "evaluate.predictive_samples=10",
]


# --- the models: each step carries the state forward -------------------------------------------------------------
def _positions_read(model, run) -> int:
    """How many positions (rows of their inputs' last dimension) the model's leaf modules read while ``run()`` runs,
    and how many steps its ``simulate`` (a particle model's step, which may use no module: the LGSSM's) takes."""
    count = 0

    def read(module, inputs):
        nonlocal count
        count += sum(t.numel() // t.shape[-1] for t in inputs if isinstance(t, torch.Tensor) and t.dim())

    def counted(simulate):
        def step(*args):
            nonlocal count
            count += 1
            return simulate(*args)

        return step

    hooks = [m.register_forward_pre_hook(read) for m in model.modules() if not list(m.children())]
    if hasattr(model, "simulate"):
        model.simulate = counted(model.simulate)
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
        vars(model).pop("simulate", None)
    return count


FORECASTERS = {
    name: build
    for name, build in {**{c.__name__: f for c, f in FACTORIES.items()}, **VARIANTS}.items()
    if build()[0].supports("forecast")
}


@pytest.mark.parametrize("name", sorted(FORECASTERS))
def test_each_step_ahead_costs_the_same_for_every_model_that_forecasts(name):
    model, x = FORECASTERS[name]()
    model.eval()

    def work(horizon):
        return _positions_read(model, lambda: model.forecast(x, None, horizon, 3, num_particles=4))

    four, eight, twelve = work(4), work(8), work(12)
    assert twelve - eight == eight - four  # linear in the horizon: no step reruns the steps before it


def _rerun(model, x, horizon, num_samples):
    """Paths ``[S, B, H, D]`` drawn the way a path is rerun: at each step the model's exact predictive over the whole
    path and a placeholder, its last step drawn (a Normal, a Bernoulli, or its mean where ``model`` draws no noise)."""
    paths = x.repeat(num_samples, 1, 1)  # path s of sequence b is row s * B + b
    for _ in range(horizon):
        exact = model.predictive_distribution(torch.cat([paths, paths.new_zeros(len(paths), 1, D)], 1))
        mean = exact.mean[:, -1]
        if isinstance(model, MCDropoutLSTM):
            draw = mean
        elif isinstance(exact.base_dist, dist.Bernoulli):
            draw = dist.Bernoulli(probs=mean).sample()
        else:
            draw = dist.Normal(mean, exact.stddev[:, -1]).sample()
        paths = torch.cat([paths, draw.unsqueeze(1)], 1)
    return paths[:, x.shape[1] :].reshape(num_samples, *x.shape[:1], horizon, D)


def _real(seed=0):
    return torch.randn(3, 5, D, generator=torch.Generator().manual_seed(seed))


CARRIERS = {
    "gru gaussian": lambda: (GRUBaseline(D, emission="gaussian", rnn_dim=4, hidden_dim=4), _real()),
    "gru bernoulli": lambda: (GRUBaseline(D, rnn_dim=4, hidden_dim=4), (_real() > 0.3).float()),
    **{
        f"recurrent {cell}": (lambda cell=cell: (RecurrentPredictor(D, cell=cell, state_dim=3, encoder_dim=3), _real()))
        for cell in ("rnn", "gru", "lstm")
    },
    "psrnn factorized, 2 layers": lambda: (
        PSRNN(D, state_dim=3, obs_features=3, num_features=20, horizon=2, rank=2, num_layers=2).initialize(_real(1)),
        _real(),
    ),
    "transformer learned": lambda: (TransformerForecaster(D, d_model=4, feedforward_dim=8), _real()),
    # 5 steps of history and 6 ahead through a context of 4: every step drawn restarts the window
    "transformer learned, context 4": lambda: (
        TransformerForecaster(D, d_model=4, feedforward_dim=8, max_len=4),
        _real(),
    ),
    "transformer sinusoidal, 2 heads, 2 layers": lambda: (
        TransformerForecaster(D, d_model=4, num_heads=2, num_layers=2, feedforward_dim=8, positions="sinusoidal"),
        _real(),
    ),
    **{
        f"mc dropout {where}, no dropout": (
            lambda where=where: (MCDropoutLSTM(D, 4, dropout=0.0, where=where), _real())
        )
        for where in ("output", "full")
    },
}


@pytest.mark.parametrize("name", sorted(CARRIERS))
def test_carried_forecasts_draw_what_rerunning_each_path_draws(name):
    model, x = CARRIERS[name]()
    model.eval()
    torch.manual_seed(1)
    carried = model.forecast(x, None, 6, 4)
    torch.manual_seed(1)
    torch.testing.assert_close(carried, _rerun(model, x, 6, 4), atol=1e-5, rtol=0)


@pytest.mark.parametrize("where", ["output", "full"])
def test_rows_of_different_lengths_carry_on_from_their_own_last_step(where):
    model, x = MCDropoutLSTM(D, 4, dropout=0.0, where=where).eval(), _real()  # draws its means: no randomness
    lengths = torch.tensor([5, 2, 4])
    paths = model.forecast(x, torch.arange(5) < lengths.unsqueeze(1), 3, 2)
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(paths[:, row], model.forecast(x[row : row + 1, :length], None, 3, 2)[:, 0])


@pytest.mark.parametrize(("where", "steps"), [("output", (0, 3)), ("full", (0,))])
def test_mc_dropout_paths_are_distributed_as_dropout_passes_over_each_path(where, steps):
    """Output dropout: every step a fresh pass's output, as when the path is rerun; with dropout inside the LSTM too,
    each path is one pass, which agrees with a rerun for the first step ahead (later steps keep the path's mask)."""
    model, x = MCDropoutLSTM(D, 4, dropout=0.5, where=where).eval(), _real()[:1]
    carried = model.forecast(x, None, max(steps) + 1, 3000)
    paths = x.repeat(3000, 1, 1)
    for _ in range(max(steps) + 1):
        draw = model.mc_samples(torch.cat([paths, paths.new_zeros(3000, 1, D)], 1), num_samples=1)[0, :, -1]
        paths = torch.cat([paths, draw.unsqueeze(1)], 1)
    for step in steps:
        assert ks_2samp(carried[:, 0, step, 0], paths[:, x.shape[1] + step, 0]).pvalue > 1e-3


# --- the command: ids, a new file's history, 0/1 data, long horizons ---------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A folder with ``real.csv`` (random walks, two features) and ``binary.csv`` (0/1 keys) of 5 series of 30 steps
    with awkward ids, and a 1-epoch GRU run on each (``real``: differenced, ``binary``: Bernoulli)."""
    folder = tmp_path_factory.mktemp("beyond")
    rng = np.random.default_rng(0)
    walks = [
        {"station": s, "hour": t, "temp": 10 + a, "wind": b}
        for s in IDS
        for t, (a, b) in enumerate(np.cumsum(rng.normal(size=(30, 2)), 0))
    ]
    pd.DataFrame(walks).to_csv(folder / "real.csv", index=False)
    keys = [
        {"station": s, "hour": t, "k1": int(rng.random() < 0.8), "k2": int(rng.random() < 0.2)}
        for s in IDS
        for t in range(30)
    ]
    pd.DataFrame(keys).to_csv(folder / "binary.csv", index=False)
    for name, extra in (("real", ["--set", 'data.transform="difference"']), ("binary", [])):
        assert (
            main(
                ["train", "gru", "--data", str(folder / f"{name}.csv"), *TRAIN, *extra, "--run-dir", str(folder / name)]
            )
            == 0
        )
    return folder


def _beyond(runs, run, out, horizon=3, num_samples=200, **options) -> pd.DataFrame:
    path = beyond_forecasts.forecast_beyond(runs / run, runs / out, horizon=horizon, num_samples=num_samples, **options)
    return pd.read_csv(path, dtype={"series": str}, keep_default_na=False)


def test_each_series_keeps_its_own_id(runs):
    table = _beyond(runs, "real", "ids")
    assert list(dict.fromkeys(table["series"])) == IDS
    assert (table.groupby("series").size() == 3 * 2).all()  # steps ahead x features


def test_a_new_file_is_read_whole_as_each_series_history(runs):
    # the run's own file read whole gives the forecast of the run's test split (each series' whole history)
    again = _beyond(runs, "real", "again", data_path=runs / "real.csv")
    pd.testing.assert_frame_equal(_beyond(runs, "real", "own"), again)
    # a file of each series' last 11 steps: its last levels carry the forecast, in the data's units (the run models
    # differences, so a history shifted by 50 gives every figure shifted by 50)
    frame = pd.read_csv(runs / "real.csv", dtype={"station": str}, keep_default_na=False).groupby("station").tail(11)
    frame.to_csv(runs / "last.csv", index=False)
    frame.assign(temp=frame["temp"] + 50).to_csv(runs / "shifted.csv", index=False)
    last, shifted = (_beyond(runs, "real", name, data_path=runs / f"{name}.csv") for name in ("last", "shifted"))
    assert list(dict.fromkeys(last["series"])) == IDS
    figures = ["mean", "q05", "q25", "q50", "q75", "q95"]
    temp = last["feature"] == "temp"
    np.testing.assert_allclose(shifted.loc[temp, figures], last.loc[temp, figures] + 50, atol=1e-4)
    np.testing.assert_allclose(shifted.loc[~temp, figures], last.loc[~temp, figures], atol=1e-4)
    assert (
        main(
            [
                "forecast",
                f"x={runs / 'real'}",
                "--beyond",
                "2",
                "--samples",
                "20",
                "--data",
                str(runs / "last.csv"),
                "--out",
                str(runs / "cli"),
            ]
        )
        == 0
    )


def test_binary_runs_give_the_probability_of_a_one_per_step(runs):
    table = _beyond(runs, "binary", "binary", horizon=2, num_samples=2000)
    assert list(table.columns) == ["series", "step_ahead", "feature", "probability_of_1"]
    _, data, model = forecasting.load_run("run", runs / "binary", "cpu")
    x, _ = data.test
    with torch.no_grad():  # the exact probability of a 1 at the first step ahead
        exact = model.predictive_distribution(torch.cat([x, x.new_zeros(len(x), 1, 2)], 1)).mean[:, -1]
    first = table[table["step_ahead"] == 1]
    np.testing.assert_allclose(first["probability_of_1"], exact.flatten().double(), atol=0.05)  # 2000 draws
    assert table["probability_of_1"].between(0, 1).all()


def test_a_horizon_beyond_memory_is_refused_before_any_draw(runs, monkeypatch, capsys):
    monkeypatch.setattr(beyond_forecasts, "available_memory", lambda: 20 * 2**20)
    with pytest.raises(
        ValueError,
        match=r"^horizon=100000 needs at least .* GiB of memory .* but 0.0195 GiB are "
        r"available: at most \d+ steps ahead fit$",
    ) as refused:
        _beyond(runs, "real", "long", horizon=100_000)
    limit = refused.value.limit
    assert 0 < limit < 100_000 and f"at most {limit} steps" in str(refused.value)
    with pytest.raises(beyond_forecasts.HorizonTooLong):
        _beyond(runs, "real", "long", horizon=limit + 1)
    assert len(_beyond(runs, "real", "long", horizon=limit)) == 5 * limit * 2  # the limit itself fits
    monkeypatch.setattr(GRUBaseline, "forecast", lambda *args, **kwargs: pytest.fail("forecast started"))
    assert main(["forecast", f"x={runs / 'real'}", "--beyond", "10000000000", "--out", str(runs / "huge")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppl-models: error: --beyond=10000000000 needs at least") and err.count("\n") == 1, err
    assert "at most" in err and not (runs / "huge").exists()


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

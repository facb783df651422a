"""What the tests build: a tiny instance of every model class with data it models, random linear-Gaussian SSMs and
their sequences, padded sequences, long-format tables of several series, and the warnings a call gives."""

import math
import warnings

import numpy as np
import pandas as pd
import torch

from ppl_models import (
    PFGRU,
    PFLSTM,
    PSRNN,
    SRNN,
    VRNN,
    GRUBaseline,
    LinearGaussianSSM,
    MCDropoutLSTM,
    PFRNNPredictor,
    PFRNNProgram,
    RecurrentPredictor,
    SMCTransformer,
    TransformerForecaster,
    TwoStageKalmanFilter,
)
from ppl_models.inference.data import DataWarning

B, T, D = 3, 6, 2


def _real(seed=0):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed))


def _binary(seed=0):
    return (torch.rand(B, T, D, generator=torch.Generator().manual_seed(seed)) < 0.3).float()


def _predictor():
    return PFRNNPredictor(D, 1, hidden_size=4, encoder_size=4, num_particles=3)


#: class -> (tiny instance, data it models)
FACTORIES = {
    SRNN: lambda: (SRNN(D, latent_dim=2, rnn_dim=4, hidden_dim=4), _binary()),
    VRNN: lambda: (VRNN(D, emission="gaussian", latent_dim=2, rnn_dim=4, hidden_dim=4), _real()),
    GRUBaseline: lambda: (GRUBaseline(D, rnn_dim=4, hidden_dim=4), _binary()),
    SMCTransformer: lambda: (SMCTransformer(D, d_model=4, window=3), _real()),
    MCDropoutLSTM: lambda: (MCDropoutLSTM(D, hidden_size=4), _real()),
    TransformerForecaster: lambda: (TransformerForecaster(D, d_model=4, feedforward_dim=8), _real()),
    PFLSTM: lambda: (PFLSTM(D, 4, num_particles=3), _real()),
    PFGRU: lambda: (PFGRU(D, 4, num_particles=3), _real()),
    PFRNNPredictor: lambda: (_predictor(), _real()),
    PFRNNProgram: lambda: (PFRNNProgram(_predictor()), _real()),
    PSRNN: lambda: (PSRNN(D, state_dim=3, obs_features=3, num_features=20, horizon=2).initialize(_real(1)), _real()),
    RecurrentPredictor: lambda: (RecurrentPredictor(D, state_dim=3, encoder_dim=3), _real()),
    LinearGaussianSSM: lambda: (LinearGaussianSSM.random(2, D, generator=torch.Generator().manual_seed(0)), _real()),
    TwoStageKalmanFilter: lambda: (TwoStageKalmanFilter(D, state_dim=2, horizon=2).initialize(_real(1)), _real()),
}
MASK = torch.arange(T).expand(B, T) < torch.tensor([[T], [T - 2], [1]])
#: other settings of the same classes: emissions, guides, cells, covariances, proposals
VARIANTS = {
    "SRNN gaussian filter guide without Res_q, dropout": lambda: (
        SRNN(
            D,
            emission="gaussian",
            inference="filter",
            residual=False,
            latent_dim=2,
            rnn_dim=4,
            hidden_dim=4,
            dropout=0.2,
        ),
        _real(),
    ),
    "VRNN bernoulli": lambda: (VRNN(D, latent_dim=2, rnn_dim=4, hidden_dim=4), _binary()),
    "SMCTransformer categorical": lambda: (
        SMCTransformer(1, d_model=4, window=3, emission="categorical", num_classes=4),
        torch.randint(0, 4, (B, T, 1), generator=torch.Generator().manual_seed(0)).float(),
    ),
    "SMCTransformer diagonal, 2 heads": lambda: (
        SMCTransformer(D, d_model=4, num_heads=2, window=2, covariance="diagonal"),
        _real(),
    ),
    "PSRNN factorized, 2 layers": lambda: (
        PSRNN(D, state_dim=3, obs_features=3, num_features=20, horizon=2, rank=2, num_layers=2).initialize(_real(1)),
        _real(),
    ),
    "TransformerForecaster sinusoidal": lambda: (
        TransformerForecaster(D, d_model=4, feedforward_dim=8, positions="sinusoidal", dropout=0.1),
        _real(),
    ),
    "MCDropoutLSTM full": lambda: (MCDropoutLSTM(D, hidden_size=4, where="full"), _real()),
    "RecurrentPredictor rnn": lambda: (RecurrentPredictor(D, cell="rnn", state_dim=3, encoder_dim=3), _real()),
    "GRUBaseline gaussian": lambda: (GRUBaseline(D, emission="gaussian", rnn_dim=4, hidden_dim=4), _real()),
    "LinearGaussianSSM bootstrap": lambda: (
        LinearGaussianSSM.random(3, D, proposal="bootstrap", generator=torch.Generator().manual_seed(0)),
        _real(),
    ),
}


def random_lgssm(latent=1, obs=1, seed=0, proposal="bootstrap") -> LinearGaussianSSM:
    """``LinearGaussianSSM.random`` with ``latent`` and ``obs`` dimensions, drawn from ``seed``."""
    return LinearGaussianSSM.random(latent, obs, generator=torch.Generator().manual_seed(seed), proposal=proposal)


def lgssm_sequences(model, batch, steps, seed=1) -> torch.Tensor:
    """``x [batch, steps, obs]`` sampled from ``model`` with ``seed``."""
    return model.sample(batch, steps, generator=torch.Generator().manual_seed(seed))[0]


def padded_sequences(fill=0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x [3, 6, 1], mask [3, 6])``: normal draws at the valid steps (lengths 4, 6, 2), ``fill`` in the padding."""
    x = torch.randn(3, 6, 1, generator=torch.Generator().manual_seed(1))
    mask = torch.arange(6).expand(3, 6) < torch.tensor([[4], [6], [2]])
    return x.masked_fill(~mask.unsqueeze(-1), fill), mask


#: fills of the padding that must change no result (0 is the reference)
PADDING_FILLS = (1e30, -1e30, math.nan, math.inf, -math.inf)


def warned(compute, category=DataWarning):
    """``(compute(), [the messages of the warnings of category it gave])``, every warning recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compute()
    return result, [str(w.message) for w in caught if issubclass(w.category, category)]


def long_frame(lengths=(7, 5, 9, 6), features=2, seed=0) -> pd.DataFrame:
    """Long format, rows shuffled: series ``s0..``, integer time, ``f0..`` real values and a ``label`` text column."""
    rng = np.random.default_rng(seed)
    rows = [
        {"id": f"s{i}", "step": t, **{f"f{d}": rng.normal(3.0 * d, 1 + d) for d in range(features)}, "label": "x"}
        for i, n in enumerate(lengths)
        for t in range(n)
    ]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)


def write_file(folder, name, text):
    """``folder / name`` holding ``text``."""
    path = folder / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- files for the command line


def write_series(path, lengths, labels=None, seed=0):
    """A long-format CSV of random walks of ``lengths`` steps (``series``, ``t``, ``value``, and ``part`` where
    ``labels`` gives each series' split)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "series": np.repeat([f"s{i}" for i in range(len(lengths))], lengths),
            "t": np.concatenate([np.arange(n) for n in lengths]),
            "value": np.concatenate([50 + rng.normal(size=n).cumsum() for n in lengths]),
        }
    )
    if labels is not None:
        frame["part"] = np.repeat(labels, lengths)
    frame.to_csv(path, index=False)
    return path


def site_walks(path, *, series=8, steps=30, seed=0, **extra):
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


def stations(path, *, seed=0, series=10, steps=20):
    """A long-format CSV: ``series`` sites of ``steps`` hours, two real-valued features."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(series):
        level = rng.normal()
        for t in range(steps):
            level = 0.8 * level + 0.3 * rng.normal()
            rows.append({"site": f"s{s}", "when": t, "temp": 15 + 4 * level, "load": 100 + 20 * level + rng.normal()})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def sites_file(path, *, shift=0.0, series=10, steps=12, seed=0):
    """Long format: ``series`` sites of ``steps`` steps, features ``a`` and ``b`` and a target ``y``, rows shuffled."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "site": f"s{s}",
            "step": t,
            "a": shift + s + 0.3 * t + rng.normal(),
            "b": shift - 2.0 * s + t,
            "y": 10.0 + s + rng.normal(),
        }
        for s in range(series)
        for t in range(steps)
    ]
    pd.DataFrame(rows).sample(frac=1.0, random_state=seed).to_csv(path, index=False)
    return path


def set_args(items):
    """``["--set", item, ...]`` for each of ``items``."""
    return [word for item in items for word in ("--set", item)]


#: the columns of a :func:`sites_file`, as command-line settings
SITE_COLUMNS = set_args(['data.series="site"', 'data.time="step"'])


def drawn_figures(monkeypatch) -> dict:
    """Leave the board's figures out (they cost seconds), recording them: ``{figure: [the models it was drawn
    with]}``."""
    from ppl_models.experiments import board_plots

    figures = {}
    monkeypatch.setattr(
        board_plots, "calibration_figure", lambda folders, path: figures.update(calibration=list(folders))
    )
    monkeypatch.setattr(board_plots, "fan_chart", lambda folders, path, device: figures.update(fan=list(folders)))
    return figures


#: the settings of a tiny board on the :func:`stations` file
TINY = [
    'data.series="site"',
    'data.time="when"',
    "train.epochs=1",
    "train.batch_size=8",
    "evaluate.predictive_samples=10",
    "evaluate.batch_size=8",
]


def board_args(*extra, data="a.csv", models="lgssm", out="out"):
    """The arguments of a tiny ``ppl-models leaderboard`` on ``data`` (no classical rows)."""
    return [
        "leaderboard",
        "--data",
        data,
        *(["--models", models] if models is not None else []),
        "--out",
        out,
        *set_args(TINY),
        "--classical",
        "none",
        *extra,
    ]  # the classical rows are test_board_classical.py's

"""Bad input to the public API (the filter, the bounds, the models, the trainer, the data checks): one named
``ValueError`` / ``TypeError`` on one line, raised before any work; a Bernoulli emission's data refused before any
Pyro program runs (whose errors carry trace shapes)."""

import math

import pytest
import torch
from factories import FACTORIES, D, padded_sequences, random_lgssm

from ppl_models import PSRNN, SRNN, VRNN, GRUBaseline, LinearGaussianSSM
from ppl_models.experiments import build
from ppl_models.experiments.data import ExperimentData
from ppl_models.inference import ParticleFilter
from ppl_models.inference.objectives import ELBO, IWAE, ExactLikelihood
from ppl_models.inference.training import Trainer
from ppl_models.inference.validation import InputTypeError


def _x(dtype=torch.float32, features=1):
    """``x [3, 6, features]`` of normal draws, in ``dtype``."""
    return torch.randn(3, 6, features, generator=torch.Generator().manual_seed(1)).to(dtype)


API_CASES = [
    (
        "filter-float64",
        lambda: ParticleFilter(8).run(random_lgssm(2, 1), _x(torch.float64)),
        TypeError,
        r"x has dtype torch.float64 but the model's parameters are torch.float32",
    ),
    (
        "filter-float16",
        lambda: ParticleFilter(8).run(random_lgssm(2, 1), _x(torch.float16)),
        TypeError,
        r"x has dtype torch.float16 but the model's parameters are torch.float32",
    ),
    (
        "filter-features",
        lambda: ParticleFilter(8).run(random_lgssm(2, 1), _x(features=3)),
        ValueError,
        r"x must have 1 features \(last dim\), got 3",
    ),
    ("iwae-float64", lambda: IWAE(random_lgssm(2, 1), 4)(_x(torch.float64)), TypeError, "x has dtype torch.float64"),
    ("elbo-features", lambda: ELBO(random_lgssm(2, 1))(_x(features=2)), ValueError, "x must have 1 features"),
    (
        "filter-nan-valid",
        lambda: ParticleFilter(8).run(random_lgssm(2, 1), _x().index_fill(1, torch.tensor([2]), float("nan"))),
        ValueError,
        "NaN or inf at valid",
    ),
    (
        "kalman-float64",
        lambda: random_lgssm(2, 1).log_likelihood(_x(torch.float64)),
        TypeError,
        "x has dtype torch.float64 but the model's parameters are torch.float32",
    ),
    (
        "lgssm-predictive-features",
        lambda: random_lgssm(2, 1).predictive(_x(features=2)),
        ValueError,
        "x must have 1 features",
    ),
    (
        "psrnn-float16",
        lambda: FACTORIES[PSRNN]()[0].log_likelihood(_x(torch.float16, features=D)),
        TypeError,
        "x has dtype torch.float16",
    ),
    ("filter-bad-particles", lambda: ParticleFilter(1.5), InputTypeError, "num_particles must be an int >= 1"),
    (
        "filter-int-x",
        lambda: ParticleFilter(8).run(random_lgssm(2, 1), torch.ones(2, 3, 1, dtype=torch.long)),
        TypeError,
        "floating-point",
    ),
    (
        "trainer-valid-features",
        lambda: Trainer(ExactLikelihood(random_lgssm(2, 1)), (_x(), None), (_x(features=2), None)),
        ValueError,
        r"valid_data\[0\] must have 1 features",
    ),
    (
        "trainer-train-float64",
        lambda: Trainer(ExactLikelihood(random_lgssm(2, 1)), (_x(torch.float64), None)),
        TypeError,
        r"train_data\[0\] has dtype torch.float64",
    ),
    ("filter-generator", lambda: ParticleFilter(8, generator=3), InputTypeError, "generator must be a torch.Generator"),
    ("objective-not-a-module", lambda: ELBO("srnn"), InputTypeError, "model must be an nn.Module"),
    (
        "lgssm-nan-parameter",
        lambda: LinearGaussianSSM(torch.full((1, 1), float("nan")), *[torch.eye(1)] * 4),
        ValueError,
        "A must hold finite floating-point numbers",
    ),
    # a Bernoulli emission's data are refused before any Pyro program runs (whose errors carry trace shapes)
    (
        "srnn-elbo-not-binary",
        lambda: ELBO(SRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4))(_x()),
        ValueError,
        "x must be binary",
    ),
    (
        "vrnn-iwae-not-binary",
        lambda: IWAE(VRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4), 2)(_x()),
        ValueError,
        "x must be binary",
    ),
    (
        "srnn-filter-not-binary",
        lambda: ParticleFilter(4).run(SRNN(1, latent_dim=2, rnn_dim=3, hidden_dim=4), _x()),
        ValueError,
        "x must be binary",
    ),
    (
        "gru-score-not-binary",
        lambda: GRUBaseline(1, rnn_dim=3, hidden_dim=4).score(_x()),
        ValueError,
        "x must be binary",
    ),
    (
        "runner-nan-data",
        lambda: build.check_finite(_data_with_nan()),
        ValueError,
        r"data 'nan': the valid split holds 1 NaN or inf values at valid steps, the first at sequence 2, step 1, "
        "feature 0",
    ),
]


def _data_with_nan():
    x, mask = padded_sequences(math.nan)  # NaN in the padding only: accepted
    valid = x.clone()
    valid[2, 1, 0] = float("nan")
    return ExperimentData((x, mask), (valid, mask), (x, mask), description="nan")


@pytest.mark.parametrize(("call", "error", "message"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_bad_inputs_raise_one_named_error(call, error, message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)

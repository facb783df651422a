"""Binary data that is not 88 keys wide: pictures follow the data's width, MIDI is skipped with a note."""

import numpy as np
import torch

from ppl_models import SRNN
from ppl_models.experiments.config import evaluation_options
from ppl_models.experiments.data import ExperimentData
from ppl_models.experiments.runner import evaluate_model
from ppl_models.experiments.tasks.music import plot_piano_roll

KEYS = 12


def _binary_split(count, steps, seed):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(count, steps, KEYS, generator=generator) < 0.3).float()
    mask = torch.arange(steps) < torch.randint(steps // 2, steps + 1, (count, 1), generator=generator)
    return x * mask.unsqueeze(-1), mask


def test_plot_of_a_12_key_roll_shows_its_columns():
    roll = (np.random.default_rng(0).random((20, KEYS)) < 0.3).astype(np.uint8)
    figure = plot_piano_roll(roll, probabilities=np.full(roll.shape, 0.25))
    roll_axes, probability_axes, _ = figure.axes
    np.testing.assert_array_equal(roll_axes.images[0].get_array(), roll.T)
    assert probability_axes.images[0].get_array().shape == (KEYS, 20)
    assert roll_axes.get_ylabel() == "key (column)"  # no note names: the pitches of 12 columns are unknown


def test_runner_evaluates_and_draws_a_12_key_binary_set(tmp_path):
    data = ExperimentData(
        _binary_split(6, 10, 0),
        _binary_split(3, 10, 1),
        _binary_split(3, 10, 2),
        description="12-key binary rolls",
        binary=True,
    )
    torch.manual_seed(0)
    model = SRNN(KEYS, latent_dim=2, rnn_dim=4, hidden_dim=8)
    config = evaluation_options({"estimators": ["elbo", "smc"], "num_particles": 8, "batch_size": 4})
    metrics = evaluate_model(model, data, config, tmp_path, seed=0)
    assert np.isfinite(metrics["loglik"]["elbo"]["per_step"])
    for picture in ("plots/test_piano_roll.png", "generated/continuation.png", "generated/sample.png"):
        assert (tmp_path / picture).is_file(), picture
    assert not list(tmp_path.rglob("*.mid"))
    (note,) = (tmp_path / "generated" / "no_midi.txt").read_text().splitlines()
    assert "12 keys" in note and "88" in note

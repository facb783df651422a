"""The music protocol check: split facts by hand, and the two per-step normalisations."""

import pyro
import torch

from ppl_models import SRNN
from ppl_models.experiments.studies.music_protocol import normalisations, split_summary


def test_split_summary_counts_steps_lengths_and_sounding_midi_keys():
    x = torch.zeros(2, 5, 88)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    x[0, 1, 60 - 21] = x[1, 0, 72 - 21] = x[0, 4, 40 - 21] = 1
    x[1, 3, 100 - 21] = 1  # padding: not counted
    assert split_summary(x, mask) == {
        "sequences": 2,
        "steps": 7,
        "length_min": 2,
        "length_max": 5,
        "midi_key_low": 40,
        "midi_key_high": 72,
        "keys_sounding": 3,
    }


def test_normalisations_agree_on_equal_lengths_and_silent_keys_cost_nothing_when_none_are_silent():
    torch.manual_seed(0)
    model = SRNN(88, latent_dim=2, rnn_dim=4, hidden_dim=8)
    x = (torch.rand(3, 6, 88, generator=torch.Generator().manual_seed(0)) < 0.05).float()
    mask = torch.ones(3, 6, dtype=torch.bool)
    pyro.set_rng_seed(0)
    result = normalisations(model, x, mask, torch.zeros(88, dtype=torch.bool))
    assert abs(result["elbo_total_over_steps"] - result["elbo_mean_of_per_piece"]) < 1e-5  # float32 sums
    assert result["silent_keys_nats_per_step"] == 0.0
    silent = torch.zeros(88, dtype=torch.bool)
    silent[:10] = True
    assert normalisations(model, x, mask, silent)["silent_keys_nats_per_step"] < 0

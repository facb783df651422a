"""An SRNN carrying its state from chunk to chunk (truncated BPTT over continuous streams): two chunks of a sequence,
the second started from the state the first handed on, are the whole sequence (the same ``d_t``; with the filtering
guide and the same draws, the same ELBO), whether the first step is an input or not."""

import pytest
import torch

from ppl_models import SRNN
from ppl_models.inference.objectives import ELBO, IWAE
from ppl_models.inference.training import TrainConfig, Trainer

SIZES = dict(latent_dim=3, rnn_dim=5, hidden_dim=7, feature_dim=4)
KEYS, STEPS, CUT = 6, 8, 4


def _rolls(batch=3, steps=STEPS + 1, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, steps, KEYS, generator=generator) < 0.4).float()


def _chunks(rows, input_steps):
    """The whole sequence and its two chunks. With a first input row, the second chunk's first (input) row is the first
    chunk's last row, as in the SRNN authors' files; otherwise the chunks split the rows."""
    if input_steps:
        return rows, rows[:, : CUT + 1], rows[:, CUT:]
    rows = rows[:, 1:]
    return rows, rows[:, :CUT], rows[:, CUT:]


def _model(inference, input_steps):
    torch.manual_seed(0)
    return SRNN(KEYS, **SIZES, inference=inference, first_step_is_input=bool(input_steps))


def _ones(x):
    return torch.ones(x.shape[:2], dtype=torch.bool)


@pytest.mark.parametrize("input_steps", [0, 1])
def test_two_carried_chunks_give_the_whole_sequences_elbo_with_the_filtering_guide(input_steps):
    model = _model("filter", input_steps)
    whole, first, second = _chunks(_rolls(), input_steps)
    torch.manual_seed(7)
    expected = ELBO(model)(whole, _ones(whole)).bound
    torch.manual_seed(7)  # the same draws, in the same order: z_1 .. z_CUT, then the rest
    with model.carrying() as box:
        bound_first = ELBO(model)(first, _ones(first)).bound
    handed = box.final
    assert [tuple(part.shape) for part in handed] == [(3, 5), (3, 3), (3, KEYS)]
    assert torch.equal(handed[2], first[:, -1])
    with model.carrying(handed) as box:
        bound_second = ELBO(model)(second, _ones(second)).bound
    torch.testing.assert_close(bound_first + bound_second, expected)
    assert box.final is not None and torch.equal(box.final[2], whole[:, -1])


@pytest.mark.parametrize("input_steps", [0, 1])
def test_the_carried_gru_state_continues_the_whole_sequences_d(input_steps):
    model = _model("smooth", input_steps).eval()
    whole, first, second = _chunks(_rolls(), input_steps)
    d_whole = model.context(whole, _ones(whole)).d
    with model.carrying() as box:
        ELBO(model)(first, _ones(first))
    with model.carrying(box.final):
        d_second = model.context(second, _ones(second)).d
    torch.testing.assert_close(d_second[input_steps:], d_whole[CUT + input_steps :])
    assert not torch.allclose(model.context(second, _ones(second)).d[input_steps:], d_second[input_steps:])


def test_without_carrying_a_pass_starts_from_zero_and_hands_on_nothing():
    model = _model("filter", 0)
    x = _rolls()[:, 1:]
    torch.manual_seed(3)
    alone = ELBO(model)(x, _ones(x)).bound
    torch.manual_seed(3)
    with model.carrying(None) as box:  # no start: the model's own first state
        carried = ELBO(model)(x, _ones(x)).bound
    torch.testing.assert_close(carried, alone)
    assert model.carried is None and box.final is not None


def test_streams_under_an_objective_that_hands_on_no_state_are_refused_in_one_line():
    model = _model("filter", 0)
    x = _rolls(batch=4, steps=5)
    config = TrainConfig(epochs=1, streams=2, progress=False)
    with pytest.raises(ValueError, match="TrainConfig.streams: SRNN handed on no state under the IWAE objective"):
        Trainer(IWAE(model, 2), (x, None), config=config).fit()
    history = Trainer(ELBO(model), (x, None), config=config).fit()
    assert len(history) == 1

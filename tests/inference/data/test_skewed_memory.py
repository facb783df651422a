"""Skewed lengths (one long series beside many short ones): the splits hold about as many elements as the data has
steps, training batches are padded to their own longest piece, and regular files give the tensors and transform
figures of a padded computation."""

import math
import warnings

import pandas as pd
import pytest
import torch
from factories import write_series

from ppl_models.experiments.tasks.own_file import file_data
from ppl_models.inference.data import DataWarning
from ppl_models.inference.data.datasets import PADDING_LIMIT, chunk_length
from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer, length_batches
from ppl_models.rnn_baseline import GRUBaseline

LONG, SHORT, SHORT_STEPS = 3000, 150, 10
#: the short series' split labels: 3 in 5 train, then one valid and one test
LABELS = ("train", "train", "train", "valid", "test")


def skewed(tmp_path, long_part="train", **options):
    """``file_data`` of a file with one series of :data:`LONG` steps (in split ``long_part``) and :data:`SHORT`
    series of :data:`SHORT_STEPS`, split by a column; and the steps of its training split."""
    labels = [long_part] + [LABELS[i % len(LABELS)] for i in range(SHORT)]
    path = write_series(tmp_path / "skewed.csv", [LONG] + [SHORT_STEPS] * SHORT, labels)
    steps = sum(n for n, part in zip([LONG] + [SHORT_STEPS] * SHORT, labels) if part == "train")
    return file_data(str(path), series="series", time="t", split="part", **options), steps


def test_skewed_training_split_holds_about_its_steps_not_series_times_the_longest(tmp_path):
    with pytest.warns(
        DataWarning,
        match=r"skewed\.csv: series lengths are very skewed: the training split's 91 "
        r"series have 9 to 2999 steps.*cut into pieces of \d+ steps",
    ):  # differenced
        data, steps = skewed(tmp_path, transform="difference")
    kept = {"train": steps - 91, "levels": steps}  # differencing drops each series' first step
    for name, (x, mask) in (("train", data.train), ("levels", data.levels.train)):
        assert x.numel() <= PADDING_LIMIT * steps  # padded whole: 91 x 3000 elements, 70 times the steps
        assert int(mask.sum()) >= kept[name] - 1  # every step, bar a last piece of one step
    assert data.split_record["how"]["chunk"] == data.train[0].shape[1] < LONG
    assert data.valid[0].shape[1] == data.test[0].shape[1] == SHORT_STEPS - 1  # held out whole (differenced)


def test_training_batches_are_padded_to_their_own_longest_piece(tmp_path):
    with pytest.warns(DataWarning, match="very skewed"):
        data, _ = skewed(tmp_path, transform="none")
    shapes = []

    class Recording(ExactLikelihood):
        def forward(self, x, mask):
            shapes.append((x.shape[1], int(mask.sum(1).max())))
            return super().forward(x, mask)

    model = GRUBaseline(1, emission="gaussian", rnn_dim=4, hidden_dim=4)
    Trainer(Recording(model), data.train, config=TrainConfig(epochs=1, batch_size=16, progress=False)).fit()
    assert all(steps == longest for steps, longest in shapes)
    assert max(steps for steps, _ in shapes) == data.split_record["how"]["chunk"] < LONG


def test_a_skewed_held_out_split_is_scored_whole_and_named(tmp_path):
    with pytest.warns(
        DataWarning, match="the test split's 31 series have 10 to 3000 steps.*held-out series are scored whole"
    ):
        data, _ = skewed(tmp_path, long_part="test", transform="none")
    assert "chunk" not in data.split_record["how"]
    assert data.test[0].shape[1] == LONG and int(data.test[1].sum()) == LONG + 30 * SHORT_STEPS


def test_evaluation_batches_take_a_far_longer_sequence_alone_and_cut_regular_lengths_as_before():
    lengths = torch.tensor([SHORT_STEPS] * 60 + [LONG] + [SHORT_STEPS] * 40)
    batches = length_batches(torch.arange(LONG) < lengths.unsqueeze(1), 16)
    assert batches[0].tolist() == [60]  # 16 rows would pad 16 x 3000 steps; the others are under a tenth of it
    budget = 16 * PADDING_LIMIT * int(lengths.sum()) / len(lengths)
    assert all(len(b) * int(lengths[b].max()) <= min(budget, PADDING_LIMIT * int(lengths[b].sum())) for b in batches)
    assert len(batches[-1]) <= 16
    assert sorted(torch.cat(batches).tolist()) == list(range(len(lengths)))
    regular = torch.arange(40) < torch.randint(5, 41, (100, 1), generator=torch.Generator().manual_seed(0))
    expected = regular.sum(1).argsort(descending=True, stable=True).split(16)
    assert all(torch.equal(a, b) for a, b in zip(length_batches(regular, 16), expected, strict=True))


@pytest.mark.parametrize("lengths", [[10] * 50, [5, 50, 500], [2] * 1000 + [10**6], [10] * 700 + [100_000]])
def test_chunk_length_keeps_the_padding_within_the_limit(lengths):
    length = chunk_length(lengths)
    if length is None:
        assert len(lengths) * max(lengths) <= PADDING_LIMIT * sum(lengths)
    else:
        assert 2 <= length < max(lengths)
        assert sum(math.ceil(n / length) for n in lengths) * length <= PADDING_LIMIT * sum(lengths)


def test_chunk_length_refuses_a_limit_that_no_piece_can_keep():
    with pytest.raises(ValueError, match=r"^limit: expected a number >= 1\.5 .* got 1$"):
        chunk_length([2, 30], 1)


def padded_ar_figure(train, valid, mean, scale, order):
    """The transform figure of ``none`` computed on padded tensors: a pooled Gaussian AR(``order``) per feature fit
    by least squares on the standardised training rows, its mean log density per validation step in the data's
    units."""

    def pad(rows):
        x = torch.zeros(len(rows), max(map(len, rows)), rows[0].shape[1], dtype=torch.float64)
        for i, row in enumerate(rows):
            x[i, : len(row)] = (torch.tensor(row) - mean) / scale
        return x, torch.arange(x.shape[1]) < torch.tensor([len(r) for r in rows]).unsqueeze(1)

    def lags(x):
        return torch.stack([torch.nn.functional.pad(x, (0, 0, k, 0))[:, : x.shape[1]] for k in range(1, order + 1)], -1)

    x, mask = pad(train)
    design, target = lags(x)[:, order:][mask[:, order:]], x[:, order:][mask[:, order:]]
    weights = torch.linalg.lstsq(design.transpose(0, 1), target.T.unsqueeze(-1)).solution.squeeze(-1)
    variance = (target - torch.einsum("ndk,dk->nd", design, weights)).pow(2).mean(0)
    v, v_mask = pad(valid)
    log_density = (
        torch.distributions.Normal(torch.einsum("ntdk,dk->ntd", lags(v), weights), variance.sqrt()).log_prob(v).sum(-1)
        - scale.log().sum()
    )
    return float(log_density[v_mask].sum()) / int(v_mask.sum())


@pytest.mark.parametrize("lengths", [[40] * 30, list(range(20, 110, 3))], ids=["even", "varied"])
def test_regular_file_gives_the_tensors_and_transform_figures_of_a_padded_computation(tmp_path, lengths):
    path = write_series(tmp_path / "regular.csv", lengths, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # not skewed: no warning
        data, chosen = (file_data(str(path), series="series", time="t", transform=t) for t in ("none", "auto"))
    record = data.split_record
    assert "chunk" not in record["how"] and "chunk" not in chosen.split_record["how"]
    table = pd.read_csv(path)
    rows = {
        name: [table[table["series"] == i].sort_values("t")[["value"]].to_numpy() for i in record[name]["ids"]]
        for name in ("train", "valid", "test")
    }
    mean, scale = (torch.tensor(record["standardizer"][k], dtype=torch.float64) for k in ("mean", "scale"))
    for name in ("train", "valid", "test"):
        x, mask = getattr(data, name)
        expected = torch.zeros(x.shape, dtype=torch.float64)
        for i, row in enumerate(rows[name]):
            expected[i, : len(row)] = (torch.tensor(row) - mean) / scale
        assert torch.equal(x, expected.float())
        assert mask.sum(1).tolist() == [len(row) for row in rows[name]]
    figure = padded_ar_figure(rows["train"], rows["valid"], mean, scale, min(4, min(lengths) - 1))
    assert chosen.split_record["transform"]["candidates"]["none"] == pytest.approx(figure, rel=1e-12)

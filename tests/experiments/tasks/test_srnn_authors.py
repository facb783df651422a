"""The SRNN authors' music files (their splits, first inputs and checks), their per-sequence test figure, the
delayed lr decay."""

import hashlib
import math

import numpy as np
import pytest
import torch

from ppl_models import LinearGaussianSSM
from ppl_models.experiments.claims.table import CLAIMS
from ppl_models.experiments.tasks.srnn_authors import authors_splits, by_stream, read_arrays, srnn_authors
from ppl_models.inference import evaluate
from ppl_models.inference.training.settings import TrainConfig, make_scheduler

KEYS = 5


def authors_arrays(seed=0, lengths=(7, 4, 2)):
    """Arrays shaped as the authors' files: 6 training / 2 validation chunks of 5 steps, test pieces of ``lengths``."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", 6), ("valid", 2)):
        rolls = (rng.random((n, 6, KEYS)) < 0.3).astype(np.float32)  # u is x one step late: x = rolls[1:]
        arrays[f"x_{split}"], arrays[f"u_{split}"] = rolls[:, 1:].copy(), rolls[:, :-1].copy()
    t_max = max(lengths)
    mask = (np.arange(t_max) < np.array(lengths)[:, None]).astype(np.float32)
    x = (rng.random((len(lengths), t_max, KEYS)) < 0.3).astype(np.float32) * mask[..., None]
    before = (rng.random((len(lengths), 1, KEYS)) < 0.3).astype(np.float32)  # the roll before each piece
    u = np.concatenate([before, x[:, :-1]], axis=1)
    u[mask == 0] = np.nan
    arrays.update(x_test=x, u_test=u, mask_test=mask)
    return arrays


def write_npz(folder, arrays, name="jsb"):
    """The arrays as ``srnn_authors/<name>_raw_batchsize16_seqlen100.npz`` under ``folder``, with its SHA256SUMS."""
    relative = f"srnn_authors/{name}_raw_batchsize16_seqlen100.npz"
    (folder / "srnn_authors").mkdir(exist_ok=True)
    np.savez(folder / relative, **arrays)
    digest = hashlib.sha256((folder / relative).read_bytes()).hexdigest()
    (folder / "SHA256SUMS").write_text(f"{digest}  ./{relative}\n")
    return folder / relative


def test_loader_gives_each_chunk_and_piece_after_its_first_input(tmp_path):
    arrays = authors_arrays()
    write_npz(tmp_path, arrays)
    data = srnn_authors("jsb", tmp_path)
    (xt, mt), (xv, mv), (xs, ms) = data.train, data.valid, data.test
    assert xt.shape == (6, 6, KEYS) and xv.shape == (2, 6, KEYS) and xs.shape == (3, 8, KEYS)
    assert mt.all() and mv.all() and mt.dtype == torch.bool
    assert ms.sum(1).tolist() == [8, 5, 3] and ms.dtype == torch.bool
    for split, x in (("train", xt), ("valid", xv), ("test", xs)):
        assert np.array_equal(x[:, 0].numpy(), arrays[f"u_{split}"][:, 0])
        assert np.array_equal(x[:, 1:].numpy(), np.nan_to_num(arrays[f"x_{split}"]))
    assert data.input_steps == 1 and data.scored_mask("test")[:, 0].sum() == 0
    assert torch.equal(data.scored_mask("test")[:, 1:], ms[:, 1:]) and data.scored_mask("valid")[:, 1:].all()
    assert data.binary and "3 whole test pieces (13 steps), each after its given first input" in data.description
    assert srnn_authors("jsb", tmp_path, max_sequences=2).test[0].shape[0] == 2


def test_with_a_silent_first_input_the_sequences_are_the_files_x(tmp_path):
    arrays = authors_arrays()
    write_npz(tmp_path, arrays)
    data = srnn_authors("jsb", tmp_path, first_input="silence")
    (xt, _), (xs, ms) = data.train, data.test
    assert np.array_equal(xt.numpy(), arrays["x_train"]) and np.array_equal(xs.numpy(), arrays["x_test"])
    assert ms.sum(1).tolist() == [7, 4, 2] and data.input_steps == 0 and data.scored is None
    with pytest.raises(ValueError, match=r"^first_input must be one of \['given', 'silence'\], got 'noise'$"):
        srnn_authors("jsb", tmp_path, first_input="noise")


@pytest.mark.parametrize("name", ["jsb", "nottingham"])
def test_the_real_files_first_inputs_are_the_rolls_before_each_sequence(name):
    """In the real files the training chunks are 16 streams (chunk i + 16 continues chunk i), so a chunk's first
    input is the last roll of the chunk before it in its stream; each JSB test piece's first input is its first
    chord (JSB is at twice the time resolution); no first input is silence in the test files."""
    data = srnn_authors(name)
    x, _ = data.train
    assert torch.equal(x[16:, 0], x[:-16, -1])
    xs, ms = data.test
    assert (xs[:, 0].sum(-1) > 0).all() and data.input_steps == 1
    if name == "jsb":
        assert torch.equal(xs[:, 0], xs[:, 1])
    else:  # the roll before the piece, not its first step, in most pieces
        assert (xs[:, 0] != xs[:, 1]).any(-1).float().mean() > 0.5


def test_u_is_x_one_step_late_in_the_files_and_a_broken_shift_is_one_line():
    arrays = authors_arrays()
    assert np.array_equal(arrays["u_train"][:, 1:], arrays["x_train"][:, :-1])
    arrays["u_valid"][1, 3] = 1 - arrays["x_valid"][1, 2]
    with pytest.raises(
        ValueError,
        match=r"^f\.npz: u_valid must be x_valid one step late .* sequence 1 differs at "
        r"step 3$",
    ):
        authors_splits(arrays, "f.npz")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.pop("mask_test"), r"has no array 'mask_test'"),
        (lambda a: a.update(x_valid=a["x_valid"][0]), r"array 'x_valid' must be a numeric \[N, T, K\] array"),
        (lambda a: a.update(mask_test=a["mask_test"][:, :3]), r"mask_test must be \[N, T_max\] = \[3, 7\]"),
        (lambda a: a["mask_test"].__setitem__((2, 5), 1.0), r"mask_test must mark a non-empty prefix"),
        (lambda a: a["x_train"].__setitem__((0, 0, 0), 0.5), r"array 'x_train' must hold only 0 and 1"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, change, message):
    arrays = authors_arrays()
    change(arrays)
    path = write_npz(tmp_path, arrays)
    with pytest.raises(ValueError, match=message) as error:
        authors_splits(read_arrays(path, "srnn_authors/jsb.npz"), "srnn_authors/jsb.npz")
    assert "\n" not in str(error.value) and "srnn_authors/jsb.npz" in str(error.value)


def test_a_missing_file_or_set_is_one_line(tmp_path):
    write_npz(tmp_path, authors_arrays())
    with pytest.raises(ValueError, match=r"^name must be one of \['jsb', 'muse', 'nottingham', 'piano'\]"):
        srnn_authors("bach", tmp_path)
    with pytest.raises(ValueError, match=r"'srnn_authors/piano_raw_batchsize16_seqlen100.npz' is not listed"):
        srnn_authors("piano", tmp_path)
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"^broken.npz is not a readable .npz file of arrays"):
        read_arrays(tmp_path / "broken.npz", "broken.npz")


def test_per_sequence_step_is_each_sequences_mean_averaged_over_sequences():
    """With A = 0 and init_cov = Q, the steps of a 1-D LGSSM are independent N(0, C^2 Q + R): hand log-densities."""
    c, q, r = 1.5, 0.4, 0.3
    model = LinearGaussianSSM(
        torch.zeros(1, 1), torch.tensor([[c]]), torch.tensor([[q]]), torch.tensor([[r]]), torch.tensor([[q]])
    )
    x = torch.tensor([[0.5, -1.0, 2.0, 0.1, 0.7], [1.2, 0.3, 0.0, 0.0, 0.0], [-0.4, 0.0, 0.0, 0.0, 0.0]])[..., None]
    lengths = [5, 2, 1]
    mask = torch.arange(5) < torch.tensor(lengths)[:, None]
    var = c * c * q + r

    def log_density(value):
        return -0.5 * math.log(2 * math.pi * var) - value * value / (2 * var)

    sums = [sum(log_density(float(v)) for v in x[i, : lengths[i], 0]) for i in range(3)]
    figures = evaluate(model, x, mask, estimators=["exact"], predictive_samples=2, seed=0)["loglik"]["exact"]
    assert figures["per_sequence_step"] == pytest.approx((sums[0] / 5 + sums[1] / 2 + sums[2] / 1) / 3, rel=1e-6)
    assert figures["per_step"] == pytest.approx(sum(sums) / 8, rel=1e-6)
    assert figures["per_sequence_step"] != pytest.approx(figures["per_step"], rel=1e-3)


def test_lr_held_for_the_delay_then_decayed_each_epoch_as_the_authors_code():
    """Their ExponentialDecaySchedule(1.2, no_decay_epochs=20), set after each epoch: epochs 0..20 at lr, epoch
    21 at lr / 1.2, epoch e > 20 at lr / 1.2^(e - 20)."""
    config = TrainConfig(lr=1e-3, lr_schedule="exponential", lr_gamma=1 / 1.2, lr_delay_epochs=20, epochs=50)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=config.lr)
    scheduler, rates = make_scheduler(optimizer, config), []
    for _ in range(50):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[:21] == [1e-3] * 21
    assert rates[21] == pytest.approx(1e-3 / 1.2) and rates[49] == pytest.approx(1e-3 / 1.2**29)
    with pytest.raises(ValueError, match=r"lr_delay_epochs needs lr_schedule 'exponential' or 'step', got 'constant'"):
        TrainConfig(lr_delay_epochs=3)


def test_claims_read_the_per_sequence_figure_of_the_authors_experiments():
    for key, figure in (("jsb", -4.74), ("nottingham", -2.94), ("muse", -6.28), ("piano", -8.20)):
        claim = CLAIMS[f"srnn-authors-{key}"]
        assert claim.metric_key == "elbo_per_sequence_step" and claim.rule.paper == figure
        assert claim.members == (("SRNN", f"srnn-authors-{key}", ()),) and claim.seeds == (0, 1, 2)


def test_stream_order_lays_out_the_files_chunks_stream_by_stream():
    chunks = np.arange(48).reshape(48, 1, 1)  # 16 streams of 3 chunks: the file's chunk i + 16 continues chunk i
    ordered = by_stream(chunks, "f.npz")[:, 0, 0]
    assert ordered[:3].tolist() == [0, 16, 32] and ordered[3:6].tolist() == [1, 17, 33]
    assert sorted(ordered.tolist()) == list(range(48))
    with pytest.raises(ValueError, match=r"^f.npz: order='streams' needs .* multiple of 16 streams, got 20 chunks$"):
        by_stream(np.zeros((20, 2, 1)), "f.npz")


@pytest.mark.parametrize("name", ["jsb", "nottingham"])
def test_in_stream_order_each_real_training_chunk_continues_the_one_before_it(name):
    """Laid out for ``TrainConfig.streams = 16`` (stream s: rows s C .. s C + C - 1), every chunk but a stream's first
    starts from the last roll of the chunk before it: the state a chunk hands on is the one its successor needs."""
    x, _ = srnn_authors(name, order="streams").train
    per_stream = len(x) // 16
    starts = torch.arange(16) * per_stream
    following = (starts[:, None] + torch.arange(1, per_stream)).flatten()
    assert torch.equal(x[following, 0], x[following - 1, -1])
    with pytest.raises(ValueError, match=r"^order must be one of \['file', 'streams'\], got 'shuffled'$"):
        srnn_authors(name, order="shuffled")

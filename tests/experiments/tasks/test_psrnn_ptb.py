"""The ptb-chars task on tiny texts: symbol mapping, unseen characters, chunks and scored held-out rows."""

from __future__ import annotations

import hashlib

import pytest
import torch

from ppl_models.experiments.tasks.ptb_chars import ptb_chars

TEXTS = {"train": "abcab ca", "valid": "cab", "test": "ab#c"}


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "ptb_chars"
    folder.mkdir()
    lines = []
    for split, text in TEXTS.items():
        path = folder / f"ptb.{split}.txt"
        path.write_text(text)
        lines.append(f"{hashlib.sha256(text.encode()).hexdigest()}  ./ptb_chars/ptb.{split}.txt")
    (tmp_path / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return tmp_path


def _ids(x, mask):
    return [row[m].argmax(-1).tolist() for row, m in zip(x, mask)]


def test_symbols_are_the_sorted_training_characters_and_unseen_ones_are_dropped(data_dir):
    data = ptb_chars(data_dir, train_chunk=3, eval_chunk=2, context=1)
    # alphabet " abc": ' ' 0, 'a' 1, 'b' 2, 'c' 3
    assert data.obs_dim == 4
    assert _ids(*data.train) == [[1, 2, 3], [1, 2, 0], [3, 1]]
    assert _ids(*data.test) == [[1, 2], [2, 3]]  # "abc" ('#' dropped): rows "ab", then "b" as context + "c"
    assert data.scored_mask("test").tolist() == [[True, True], [False, True]]
    assert _ids(*data.valid) == [[3, 1], [1, 2]]
    assert data.scored_mask("valid").tolist() == [[True, True], [False, True]]
    assert data.binary


def test_unk_symbol_and_error(data_dir):
    data = ptb_chars(data_dir, train_chunk=3, eval_chunk=4, context=0, unseen="unk")
    assert data.obs_dim == 5
    assert _ids(*data.test) == [[1, 2, 4, 3]]
    with pytest.raises(ValueError, match="'#' at position 2"):
        ptb_chars(data_dir, unseen="error")


def test_held_out_rows_score_every_character_once(data_dir):
    data = ptb_chars(data_dir, eval_chunk=1, context=5)
    scored = data.scored_mask("test")
    assert int(scored.sum()) == 3
    x, mask = data.test
    assert torch.equal(x[scored].argmax(-1), torch.tensor([1, 2, 3]))


def test_figure_3_claims_name_loadable_experiments_with_the_bpc_key():
    from ppl_models.experiments.claims.psrnn_ptb import PSRNN_PTB_CLAIMS
    from ppl_models.experiments.config import load_config
    from ppl_models.experiments.registry import experiment_config

    for name, claim in PSRNN_PTB_CLAIMS.items():
        assert claim.metric_key in ("test_bpc", "test_accuracy"), name
        for _, experiment, overrides in claim.members:
            config = load_config(experiment_config(experiment), list(overrides))
            assert config["data"]["name"] == "ptb-chars"
            assert config["model"]["emission"] == "categorical"


def test_eval_chunk_zero_scores_each_held_out_text_as_one_row(data_dir):
    data = ptb_chars(data_dir, train_chunk=3, eval_chunk=0, context=0)
    assert _ids(*data.test) == [[1, 2, 3]]  # "ab#c", '#' dropped
    assert data.scored_mask("test").tolist() == [[True, True, True]]
    assert _ids(*data.valid) == [[3, 1, 2]]
    with pytest.raises(ValueError, match="context must be 0 when eval_chunk is 0"):
        ptb_chars(data_dir, eval_chunk=0, context=5)
    with pytest.raises(ValueError, match="eval_chunk must be an int >= 0"):
        ptb_chars(data_dir, eval_chunk=-1)


def test_training_chunks_in_text_order_cut_into_contiguous_streams(data_dir):
    from ppl_models.inference.training import stream_batches

    x, mask = ptb_chars(data_dir, train_chunk=2).train  # "abcab ca": "ab", "ca", "b ", "ca"
    assert _ids(x, mask) == [[1, 2], [3, 1], [2, 0], [3, 1]]
    # 2 streams: "abca" and "b ca"; batch c holds chunk c of each
    assert [b.tolist() for b in stream_batches(len(x), 2)] == [[0, 2], [1, 3]]

"""The one-factor study's table (``<!-- factors:NAME -->`` blocks): figures over seeds, differences from ``ours``
and from ``all``, the authors' code beside them (at the study's budget, then converged), read from the results
files."""

import pytest

from ppl_models.experiments.claims.factor_table import factor_table


def _runs(values, first=3.0):
    return [
        {
            "test_bpc": v,
            "test_accuracy": 0.4,
            "best_epoch": 9,
            "epochs": 10,
            "updates": 1730,
            "valid_bpc_curve": [first],
        }
        for v in values
    ]


FILES = {
    "psrnn_protocol_factors.json": {
        "seeds": [0, 1],
        "commit": "abc",
        "wall_seconds": 600.0,
        "results": {
            "all": {"experiment": "psrnn-ptb-authors", "overrides": [], "runs": _runs([2.6, 2.7])},
            "ours": {"experiment": "psrnn-ptb", "overrides": ["train.epochs=10"], "runs": _runs([2.9, 3.0], 3.5)},
        },
    },
    "psrnn_official_10_epochs.json": {
        "budget": {"epochs": 10},
        "runs": {
            "official": [
                {
                    "test_final": {"test_bpc": 2.5, "test_accuracy": 0.5},
                    "best_epoch": 10,
                    "curve": [{"valid_bpc": 2.9}] + [{"valid_bpc": 2.6}] * 9,
                }
            ]
        },
    },
}


def _converged(ours, theirs):
    def run(bpc, best, epochs):
        curve = [{"valid_bpc": 3.0}] * epochs
        return {"test_final": {"test_bpc": bpc, "test_accuracy": 0.5}, "best_epoch": best, "curve": curve}

    return {
        "budget": {"epochs": 60, "patience": 3, "lr_gamma": 0.8, "lr_delay": 10},
        "commands": {
            "ours_train_seed0": ["ppl-models", "train", "psrnn-ptb-authors", "--set", "train.epochs=60"]
            + ["--set", "model.encoder_bias=true"]
        },
        "runs": {"ours": [run(b, 22, 25) for b in ours], "official": [run(b, 23, 26) for b in theirs]},
    }


def test_a_converged_side_by_side_gives_both_sides_with_their_budget():
    files = {**FILES, "psrnn_official.json": _converged([2.56, 2.58], [2.5])}
    lines = factor_table("psrnn-protocol", files)
    assert lines[5].startswith(
        "| ours, converged | psrnn-ptb-authors `model.encoder_bias=true`, to convergence (patience 3, within 60 "
        "epochs, learning rate x0.8 per epoch after 10)"
    )
    assert (
        "| 2.570 ± 0.014 (n=2) | -0.380 | -0.080 | 0.500 ± 0.000 (n=2) | 3.000 ± 0.000 (n=2) | 22/25, 22/25 | - |"
        in (lines[5])
    )
    assert lines[6].startswith("| the authors' code | their TF1 code, to convergence") and "| 23/26 |" in lines[6]


def test_rows_start_with_ours_and_give_each_difference_from_it():
    lines = factor_table("psrnn-protocol", FILES)
    assert lines[2].startswith(  # sd of 2.9, 3.0 by hand
        "| ours | psrnn-ptb | 2.950 ± 0.071 (n=2) | +0.000 | +0.300 | 0.400 ± 0.000 (n=2) | 3.500 ± 0.000 (n=2) |"
    )
    assert lines[3].startswith("| all | psrnn-ptb-authors | 2.650 ± 0.071 (n=2) | -0.300 | +0.000 |")
    assert (
        lines[4].startswith("| the authors' code | their TF1 code, 10 epochs")
        and "| 2.500 (n=1) | -0.450 | -0.150 | 0.500 (n=1) | 2.900 (n=1) | 10/10 | - |" in lines[4]
    )
    assert lines[-1].startswith("Seeds 0, 1; commit abc (of the call that wrote the file: finished runs are kept); ")
    assert "; 0 min of training in the study's runs" in lines[-1]  # _runs carry no seconds


def test_runs_of_their_code_reused_by_a_later_file_are_shown_once():
    converged = _converged([2.56, 2.58], [2.5])
    extras = {**converged, "runs": {**converged["runs"], "ours": converged["runs"]["ours"][:1]}}
    files = {**FILES, "psrnn_official.json": converged, "psrnn_official_their_model.json": extras}
    labels = [line.split(" | ")[0] for line in factor_table("psrnn-protocol", files) if line.startswith("| ")]
    assert labels[-4:] == ["| the authors' code", "| ours, converged", "| the authors' code", "| ours, converged"]


def test_rows_follow_the_studys_order_of_factors():
    files = {"psrnn_protocol_factors.json": {**FILES["psrnn_protocol_factors.json"], "factors": ["all", "ours"]}}
    lines = factor_table("psrnn-protocol", files)
    assert lines[2].startswith("| all |") and lines[3].startswith("| ours |")


def test_without_the_row_all_its_column_is_a_dash():
    files = {"psrnn_protocol_factors.json": {**FILES["psrnn_protocol_factors.json"]}}
    files["psrnn_protocol_factors.json"]["results"] = {"ours": FILES["psrnn_protocol_factors.json"]["results"]["ours"]}
    assert factor_table("psrnn-protocol", files)[2].startswith(
        "| ours | psrnn-ptb | 2.950 ± 0.071 (n=2) | +0.000 | - |"
    )


def test_a_missing_file_says_how_to_make_it_and_an_unknown_study_is_refused():
    assert factor_table("psrnn-protocol", {})[0].startswith("Not run yet")
    with pytest.raises(ValueError, match=r"<!-- factors:nope --> names no study"):
        factor_table("nope", FILES)

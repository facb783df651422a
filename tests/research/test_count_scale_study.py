"""The count-scale study's paired comparison, on boards made by hand."""

import pytest

from ppl_models.experiments.studies.count_scale import compare_arms


def _board(gru_nats, gru_crps_mean):
    return {
        "rows": [{"model": "gru", "nats_per_step": gru_nats, "crps": 1.0}],
        "multistep": {"rows": [{"model": "gru", "crps_mean": gru_crps_mean}]},
    }


def test_the_arms_are_compared_seed_by_seed():
    boards = {
        "scaled": [_board(-2.0, 3.0), _board(-2.2, 3.5), _board(-2.1, 2.5)],
        "unscaled": [_board(-2.5, 4.0), _board(-2.4, 4.5), _board(-2.6, 4.5)],
    }
    nats = compare_arms(boards)["gru"]["nats_per_step"]
    assert nats["scaled"]["values"] == [-2.0, -2.2, -2.1] and nats["scaled"]["mean"] == pytest.approx(-2.1)
    assert nats["difference"]["values"] == pytest.approx([0.5, 0.2, 0.5])
    assert nats["difference"]["sd"] == pytest.approx(0.17320508)  # sd of 0.5, 0.2, 0.5 (n - 1)
    assert compare_arms(boards)["gru"]["crps_mean"]["difference"]["mean"] == pytest.approx(-4.0 / 3)


def test_the_ab_table_renders_each_arm_and_the_seeds_on_which_the_first_wins():
    from ppl_models.experiments.claims.ab_table import ab_table

    cell = {
        "scaled": {"values": [-2.0, -2.2]},
        "unscaled": {"values": [-2.5, -2.1]},
        "difference": {"values": [0.5, -0.1]},
    }
    record = {
        "series": {"covid-deaths": {"models": {"gru": {"nats_per_step": cell, "crps": cell, "crps_mean": cell}}}},
        "seeds": [0, 1],
        "commit": "abc",
    }
    lines = ab_table("count-scale", {"count_scale_cpu.json": record})
    nats, crps = lines[2], lines[3]
    assert nats.startswith("| covid-deaths | gru | held-out nats / step | -2.1 ± 0.14 | -2.3 ± 0.28 | +0.5, -0.1 |")
    assert nats.endswith("| 1 of 2 seeds |")  # higher nats: better where the difference is positive
    assert crps.endswith("| 1 of 2 seeds |") and "one-step CRPS" in crps  # lower CRPS: better where negative
    assert "commit abc" in lines[-1]
    assert ab_table("count-scale", {})[0].startswith("Not run yet")

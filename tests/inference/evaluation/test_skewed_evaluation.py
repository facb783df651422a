"""Held-out data of skewed lengths (one long row beside many short ones): the evaluation keeps its one-step draws at
the scored steps only, with the figures, files and memory check of the padded draws; regular data keeps the padded
layout."""

import json
import math

import numpy as np
import pytest
import torch

from ppl_models import GRUBaseline, LinearGaussianSSM
from ppl_models.experiments import runner
from ppl_models.experiments.own_data import model_config
from ppl_models.inference import calibration, evaluate, validation
from ppl_models.inference.arviz_compat import az
from ppl_models.inference.data import DataWarning
from ppl_models.inference.evaluation import EvaluationOptions, batch_estimates, evaluation_memory, memory
from ppl_models.inference.evaluation.data_layout import packed_layout

#: the draws per step, the long row's steps and context, and the short rows' count, steps and context
S, LONG, LONG_CONTEXT, SHORT, SHORT_STEPS, SHORT_CONTEXT = 30, 400, 300, 40, 6, 3


def skewed_data(features=2, seed=1):
    """An LGSSM and its draws ``x [41, 400, D]``: one row of :data:`LONG` steps and :data:`SHORT` rows of
    :data:`SHORT_STEPS`, each scored after its context (``mask``, ``scored`` ``[41, 400]``)."""
    model = LinearGaussianSSM.random(2, features, generator=torch.Generator().manual_seed(0))
    x, _ = model.sample(num_sequences=SHORT + 1, num_steps=LONG, generator=torch.Generator().manual_seed(seed))
    lengths = torch.tensor([LONG] + [SHORT_STEPS] * SHORT)
    context = torch.tensor([LONG_CONTEXT] + [SHORT_CONTEXT] * SHORT)
    steps = torch.arange(LONG)
    mask = steps < lengths.unsqueeze(1)
    return model, x * mask.unsqueeze(-1), mask, mask & (steps >= context.unsqueeze(1))


def both_layouts(monkeypatch, model, x, mask, scored, **settings):
    """``(packed, padded)``: the evaluation of skewed data as it is, and again with the padded layout forced (the
    same seed, so the same draws)."""
    packed = evaluate(model, x, mask, scored=scored, seed=0, **settings)
    monkeypatch.setattr(batch_estimates, "packed_layout", lambda mask: False)
    padded = evaluate(model, x, mask, scored=scored, seed=0, **settings)
    monkeypatch.undo()
    return packed, padded


def held_elements(result) -> int:
    """The elements of every tensor an :class:`Evaluation` holds."""
    tensors = (
        result.x,
        result.mask,
        result.scored,
        result.predictive,
        result.log_density,
        result.probabilities,
        result.positions,
    )
    return sum(t.numel() for t in tensors if t is not None)


def test_a_skewed_evaluation_holds_its_scored_steps_only():
    model, x, mask, scored = skewed_data()
    assert packed_layout(mask)  # padded to the longest, the rows would hold 26 times their steps
    result = evaluate(model, x, mask, scored=scored, estimators=["exact"], predictive_samples=S, seed=0)
    n, features = int(scored.sum()), x.shape[-1]
    assert result.predictive.shape == (S, 1, n, features) and result.log_density.shape == (1, n)
    assert held_elements(result) <= (S + 6) * n * features  # padded: S x 41 x 400 x D draws alone
    assert result.mask.all() and result.scored.all() and result.mask.shape == (1, n)
    rows, times = scored.nonzero(as_tuple=True)  # by row, then time step
    assert torch.equal(result.positions, torch.stack([rows, times]))
    assert torch.equal(result.x[0], x[scored])
    row, steps = result.steps_of(0)
    assert row == 0 and int(steps.sum()) == LONG - LONG_CONTEXT


@pytest.mark.parametrize("context", [True, False], ids=["scored-after-context", "every-step"])
def test_the_packed_figures_are_those_of_the_padded_draws(monkeypatch, context):
    model, x, mask, scored = skewed_data()
    scored = scored if context else None
    packed, padded = both_layouts(monkeypatch, model, x, mask, scored, estimators=["exact"], predictive_samples=S)
    judged = mask if scored is None else scored
    assert padded.positions is None and padded.predictive.shape == (S, *x.shape)
    assert torch.equal(packed.predictive[:, 0], padded.predictive[:, judged])  # the same draws, at the scored steps
    assert torch.equal(packed.log_density[0], padded.log_density[judged])
    assert packed["loglik"] == padded["loglik"] and packed["mse"] == padded["mse"]
    expected = calibration.calibration_summary(padded.predictive, padded.x, judged, padded.log_density)
    assert set(packed["calibration"]) == set(expected)
    for name, value in expected.items():
        if name != "pit_ks":  # per-step figures pooled over the same steps
            assert packed["calibration"][name] == pytest.approx(value, rel=1e-12, abs=1e-12), name
    # the PIT: the same rank of each value among its draws, its randomisation within its 1 / (S + 1) slot drawn anew
    assert abs(packed["calibration"]["pit_ks"] - expected["pit_ks"]) <= 1 / (S + 1)
    ranks = [
        (calibration.pit(r.predictive, r.x, s)[s] * (S + 1)).floor()
        for r, s in ((packed, packed.mask), (padded, judged))
    ]
    assert torch.equal(*ranks)


def test_the_packed_draws_are_stored_as_the_padded_ones():
    model, x, mask, scored = skewed_data()
    result = evaluate(model, x, mask, scored=scored, estimators=["exact"], predictive_samples=S, seed=0)
    padded_draws = torch.zeros(S, *x.shape, dtype=result.predictive.dtype)
    padded_draws[:, scored] = result.predictive[:, 0]
    expected = calibration.to_inference_data(padded_draws, x.to(result.x.dtype), mask=scored)
    stored = result.to_inference_data()
    for group in ("posterior_predictive", "observed_data"):
        got, want = getattr(stored, group), getattr(expected, group)
        assert got.equals(want) and all(got[c].equals(want[c]) for c in ("sequence", "time")), group


def test_packed_draws_need_positions_that_fit_them():
    draws, observed = torch.zeros(4, 1, 5, 2), torch.zeros(1, 5, 2)
    with pytest.raises(
        ValueError,
        match=r"^positions \[2, n\] go with draws packed to n steps .* got positions "
        r"\[2, 4\], observed \[1, 5, 2\]$",
    ):
        calibration.to_inference_data(draws, observed, positions=torch.zeros(2, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="^positions must be an int64 torch.Tensor"):
        calibration.to_inference_data(draws, observed, positions=np.zeros((2, 5)))


def test_binary_probabilities_are_packed_with_the_padded_figures(monkeypatch):
    _, x, mask, scored = skewed_data(features=3)
    notes = (x > 0).float() * mask.unsqueeze(-1)
    model = GRUBaseline(3, emission="bernoulli", rnn_dim=4, hidden_dim=4)
    packed, padded = both_layouts(monkeypatch, model, notes, mask, scored, estimators=["exact"])
    assert packed.probabilities.shape == (1, int(scored.sum()), 3)
    assert torch.equal(packed.probabilities[0], padded.probabilities[scored])
    assert packed["calibration"] == pytest.approx(padded["calibration"], rel=1e-12)


def test_a_regular_evaluation_keeps_the_padded_layout():
    model, x, _, _ = skewed_data()
    mask = torch.arange(40) < torch.arange(20, 40).unsqueeze(1)  # 20 rows of 20 to 39 steps
    x = x[:20, :40] * mask.unsqueeze(-1)
    assert not packed_layout(mask)
    result = evaluate(model, x, mask, estimators=["exact"], predictive_samples=S, seed=0)
    assert result.positions is None and result.predictive.shape == (S, 20, 40, 2) and result.x.shape == x.shape
    row, steps = result.steps_of(3)
    assert row == 3 and torch.equal(steps, mask[3])
    needs = evaluation_memory(model, x, EvaluationOptions(predictive_samples=S), binary=False, mask=mask)
    assert needs["predictive_samples"][1] == 2 * S * x.numel() * x.element_size()  # as without the mask


def test_the_memory_check_counts_the_draws_the_layout_keeps(monkeypatch):
    model, x, mask, scored = skewed_data()
    options = EvaluationOptions(estimators=("exact",), predictive_samples=S, seed=0)
    packed_bytes = evaluation_memory(model, x, options, binary=False, mask=mask, scored=scored)["predictive_samples"][1]
    padded_bytes = 2 * S * x.numel() * x.element_size()
    result = evaluate(model, x, mask, options, scored=scored)
    assert 2 * result.predictive.numel() * x.element_size() <= packed_bytes < padded_bytes / 10
    monkeypatch.setattr(validation, "available_memory", lambda: 2 * packed_bytes)  # room for the packed draws only
    assert evaluate(model, x, mask, options, scored=scored)["calibration"] == result["calibration"]
    for module in (batch_estimates, memory):
        monkeypatch.setattr(module, "packed_layout", lambda mask: False)
    with pytest.raises(ValueError, match=r"^predictive_samples=30 needs at least .* lower predictive_samples$"):
        evaluate(model, x, mask, options, scored=scored)


def test_a_run_on_a_file_whose_long_series_is_in_the_test_split_writes_its_files(tmp_path):
    from factories import write_series

    lengths, labels = [3000] + [10] * 80, ["test"] + ["train", "train", "valid", "test"] * 20
    path = write_series(tmp_path / "skewed.csv", lengths, labels)
    settings = [
        'data.series="series"',
        'data.time="t"',
        'data.split="part"',
        'data.transform="none"',
        "train.epochs=1",
        "evaluate.predictive_samples=20",
    ]
    with pytest.warns(DataWarning, match="the test split's 21 series have 10 to 3000 steps"):
        metrics = runner.train(model_config("lgssm", path, settings), tmp_path / "run")
    run = tmp_path / "run"
    assert metrics["test_steps"] == 3000 + 20 * 10 and "crps" in metrics["calibration"]
    stored = az.from_netcdf(run / "predictive.nc").posterior_predictive
    assert stored.sizes["step"] == 3200 and int(stored["sequence"].max()) == 20
    assert torch.load(run / "pit.pt").shape == (3200, 1)
    assert all((run / "plots" / f"{name}.png").is_file() for name in ("pit_ecdf", "coverage", "predictive_bands"))
    observed = json.loads((run / "predictions.json").read_text())["observed"]
    assert len(observed) == 3000 and math.isfinite(observed[-1][0])  # the first test series, as read

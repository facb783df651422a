"""The known-truth HMM-rolls source: its forward algorithm against brute-force enumeration of state paths."""

import itertools
import math

import pytest
import torch

from ppl_models.experiments.tasks.hmm_rolls import RollHMM, hmm_rolls
from ppl_models.inference.evaluation import gap_to_truth


def _enumerated_log_likelihood(source: RollHMM, x: list[list[float]]) -> float:
    """``log sum_paths p(path) p(x | path)`` over all N^T state paths of one roll ``x [T][D]``, in plain Python."""
    n, persistence = source.num_states, source.persistence
    on = 1 / (1 + math.exp(-source.sharpness))  # sigmoid(sharpness): a chord key sounds
    chord = (source.key_probs > 0.5).tolist()
    total = 0.0
    for path in itertools.product(range(n), repeat=len(x)):
        p = 1 / n
        for t, s in enumerate(path):
            if t:
                p *= persistence if s == path[t - 1] else (1 - persistence) / (n - 1)
            for k, value in enumerate(x[t]):
                q = on if chord[s][k] else 1 - on
                p *= q if value == 1 else 1 - q
        total += p
    return math.log(total)


def test_forward_algorithm_equals_enumeration_and_ignores_padding():
    source = RollHMM(num_states=3, num_keys=5, persistence=0.7, sharpness=1.5, source_seed=2)
    x = source.sample(2, 5, torch.Generator().manual_seed(0)).double()
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    got = source.log_likelihood(x, mask)
    assert float(got[0]) == pytest.approx(_enumerated_log_likelihood(source, x[0].tolist()), rel=1e-10)
    assert float(got[1]) == pytest.approx(_enumerated_log_likelihood(source, x[1, :3].tolist()), rel=1e-10)


def test_one_state_source_is_independent_bernoullis():
    source = RollHMM(num_states=1, num_keys=4, sharpness=1.0, source_seed=3)
    x = source.sample(3, 6, torch.Generator().manual_seed(1)).double()
    probs = source.key_probs[0]
    expected = (x * probs.log() + (1 - x) * (1 - probs).log()).sum((1, 2))
    torch.testing.assert_close(source.log_likelihood(x), expected)


def test_sampled_state_persistence_shows_in_the_data():
    # sharp emissions: each step reveals its state, so the share of repeated steps is the persistence
    source = RollHMM(num_states=2, num_keys=12, persistence=0.8, sharpness=8.0, source_seed=0)
    assert not torch.equal(source.key_probs[0] > 0.5, source.key_probs[1] > 0.5)
    x = source.sample(200, 40, torch.Generator().manual_seed(2))
    same = (x[:, 1:] == x[:, :-1]).all(-1).double().mean()
    assert float(same) == pytest.approx(0.8, abs=0.03)


def test_loader_splits_truth_and_bad_settings():
    data = hmm_rolls(num_train=5, num_valid=2, num_test=3, num_steps=7, num_keys=6)
    assert [s[0].shape for s in (data.train, data.valid, data.test)] == [(5, 7, 6), (2, 7, 6), (3, 7, 6)]
    assert data.binary and set(data.train[0].unique().tolist()) <= {0.0, 1.0}
    bigger = hmm_rolls(num_train=9, num_valid=2, num_test=3, num_steps=7, num_keys=6)
    assert torch.equal(bigger.test[0], data.test[0])
    with pytest.raises(ValueError, match="persistence"):
        RollHMM(persistence=1.5)
    with pytest.raises(ValueError, match="sharpness"):
        RollHMM(sharpness=0)
    with pytest.raises(ValueError, match="num_keys"):
        RollHMM(num_keys=0)
    with pytest.raises(ValueError, match="6 keys"):
        data.truth.log_likelihood(torch.zeros(1, 3, 5))


def test_gap_to_truth_by_hand():
    truth = torch.tensor([-10.0, -12.0, -11.0])
    estimates = {"a": torch.tensor([-11.0, -12.5, -11.5]), "b": torch.tensor([-9.0, -11.0, -10.0])}
    gaps = gap_to_truth(estimates, truth, num_steps=6)
    # a: differences -1, -0.5, -0.5: sum -2 over 6 steps; sd 0.2887, times sqrt(3) / 6
    assert gaps["a"]["gap_per_step"] == pytest.approx(-2 / 6)
    assert gaps["a"]["standard_error_per_step"] == pytest.approx(math.sqrt(1 / 12) * math.sqrt(3) / 6)
    assert not gaps["a"]["above_truth"]
    # b: every difference +1, no spread: above the truth beyond any error
    assert gaps["b"]["gap_per_step"] == pytest.approx(0.5) and gaps["b"]["above_truth"]
    with pytest.raises(ValueError, match="shape"):
        gap_to_truth({"c": torch.zeros(2)}, truth, 6)


def test_quick_benchmark_a_trained_srnn_approaches_a_tiny_hmm_without_passing_it():
    """The benchmark in small: SRNN trained by SMC-4 on a 2-state HMM, every estimate held to the forward algorithm."""
    from ppl_models import SRNN
    from ppl_models.experiments.config import evaluation_options
    from ppl_models.experiments.runner import evaluate_model
    from ppl_models.inference import ParticleFilter
    from ppl_models.inference.objectives import SMCBound

    torch.manual_seed(0)
    data = hmm_rolls(
        num_states=2, num_keys=4, persistence=0.9, sharpness=3.0, num_train=40, num_valid=5, num_test=40, num_steps=10
    )
    model = SRNN(4, latent_dim=2, rnn_dim=8, hidden_dim=8)
    config = evaluation_options({"estimators": ["elbo", "iwae", "smc"], "num_particles": 50, "iwae_particles": 20})
    before = evaluate_model(model, data, config)["gap_to_truth"]["smc-50"]["gap_per_step"]
    objective = SMCBound(model, ParticleFilter(4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    x, mask = data.train
    for _ in range(60):
        optimizer.zero_grad()
        objective(x, mask).loss.backward()
        optimizer.step()
    gaps = evaluate_model(model, data, config)["gap_to_truth"]
    assert set(gaps) == {"elbo", "iwae-20", "smc-50"}
    assert not any(gap["above_truth"] for gap in gaps.values())
    # loose: an untrained model is several nats per step short; a short training closes most of it
    assert gaps["smc-50"]["gap_per_step"] > max(-0.6, before + 1.0)


def test_truth_fit_scores_the_training_split_against_the_forward_algorithm(tmp_path):
    """ppl_models.experiments.studies.truth_fit on a GRU checkpoint: each split's gap equals the gap computed here by
    hand."""
    from ppl_models.experiments.build import build_experiment
    from ppl_models.experiments.claims.truth_gaps import split_gaps
    from ppl_models.experiments.config import load_config
    from ppl_models.experiments.registry import EXPERIMENTS
    from ppl_models.experiments.studies.truth_fit import main
    from ppl_models.inference.atomic_files import write_json

    config = load_config(
        EXPERIMENTS["srnn-hmm"].build,
        [
            'data={name="hmm-rolls", num_states=2, num_keys=4, num_train=12, num_valid=4, num_test=6, num_steps=5}',
            'model={name="gru", rnn_dim=4, hidden_dim=4}',
            'objective={name="exact"}',
            'evaluate.estimators=["exact"]',
        ],
    )
    torch.manual_seed(0)
    data, model, objective = build_experiment(config)
    run = tmp_path / "gru"
    write_json(run / "config.json", config)
    (run / "checkpoints").mkdir()
    torch.save({"objective": objective.state_dict()}, run / "checkpoints" / "best.pt")
    gaps = split_gaps(run, sequences=5)
    assert gaps["sequences"] == {"train": 5, "test": 5}
    for split in ("train", "test"):
        x, mask = getattr(data, split)
        with torch.no_grad():
            difference = model.log_likelihood(x[:5], mask[:5]) - RollHMM(2, 4).log_likelihood(x[:5], mask[:5])
        assert gaps[split]["exact"]["gap_per_step"] == pytest.approx(float(difference.sum()) / 25, rel=1e-5)
        assert gaps["truth_per_step"][split] == pytest.approx(float(RollHMM(2, 4).log_likelihood(x[:5]).sum()) / 25)
    assert split_gaps(run, sequences=100)["sequences"]["test"] == 6  # the whole split when it is shorter
    with pytest.raises(ValueError, match="sequences"):
        split_gaps(run, sequences=0)
    with pytest.raises(ValueError, match="splits must name some of train, valid, test"):
        split_gaps(run, splits=("training",))
    assert set(split_gaps(run, sequences=5, splits=("valid",))["sequences"]) == {"valid"}
    assert main([str(tmp_path / "missing")]) == 2


def test_metrics_table_shows_each_gap_to_the_truth():
    from ppl_models.experiments.tables import format_table

    metrics = {
        "data": "HMM rolls",
        "test_sequences": 2,
        "test_steps": 10,
        "loglik": {
            "smc-100": {"per_step": -3.5, "per_sequence": -17.5},
            "exact (true parameters)": {"per_step": -3.4, "per_sequence": -17.0},
        },
        "gap_to_truth": {
            "smc-100": {"gap_per_step": -0.1, "standard_error_per_step": 0.02, "above_truth": False},
            "iwae-5": {"gap_per_step": 0.3, "standard_error_per_step": 0.1, "above_truth": True},
        },
    }
    text, markdown = format_table(metrics), format_table(metrics, markdown=True)
    assert "smc-100" in text and "-0.1000" in text and "± 0.0200" in text and "± 0.1000 above" in text
    assert "| smc-100 | -0.1000 | 0.0200 |" in markdown and "| iwae-5 | +0.3000 | 0.1000 above |" in markdown


def test_srnn_hmm_trains_with_the_recipe_and_the_hmm_suites_keep_the_earlier_training():
    """srnn-hmm: weight decay 1e-3, 60 epochs, no early stopping; the suites reproduce docs/known_truth.md's tables."""
    from ppl_models.experiments.config import load_config
    from ppl_models.experiments.registry import EXPERIMENTS
    from ppl_models.experiments.suites import SUITES

    path = EXPERIMENTS["srnn-hmm"].build
    train = load_config(path)["train"]
    assert (train["weight_decay"], train["epochs"], train.get("patience")) == (1e-3, 60, None)
    for suite in ("hmm-gap", "hmm-recipe", "hmm-sources"):
        for label, _, overrides in SUITES[suite].members:
            member = load_config(path, list(overrides))["train"]
            assert (member["weight_decay"] > 0) == ("weight decay" in label), label
            epochs = 60 if "60 epochs" in label else 30 if "30 epochs" in label else 15
            assert member["epochs"] == epochs and member.get("patience") == (10 if "patience" in label else None), label
    recipe = SUITES["hmm-recipe"].members[0]
    assert recipe[0] == "SRNN smooth + Res_q / weight decay 1e-3, 60 epochs / seed 0"
    assert load_config(path, list(recipe[2]))["train"] == train

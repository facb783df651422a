"""CUDA-graph wrappers (ppl_models.inference.training.cuda_graphs): the CPU fallback and the rules a recorded call
keeps.

The graphs themselves need a GPU (the CI has none): their figures, and a log-evidence check
against the Kalman value, are in docs/benchmarks.md (experiments/benchmarks/cuda_graph_speed.py).
Here: the wrapper runs the function itself off CUDA, checks its inputs, and the switch that
turns value checks off inside a capture.
"""

import pytest
import torch

from ppl_models import LinearGaussianSSM
from ppl_models.inference import ParticleFilter
from ppl_models.inference.discriminative import DiscriminativeLoss
from ppl_models.inference.training import GraphedCall
from ppl_models.inference.validation import check_sequences, value_checks, value_checks_enabled
from ppl_models.pf_rnn import PFRNNPredictor


def test_cpu_fallback_calls_the_function_and_checks_input_shapes():
    calls = []

    def double(a, b):
        calls.append(1)
        return 2 * a + b

    a, b = torch.ones(3), torch.zeros(3)
    call = GraphedCall(double, (a, b))
    assert not call.enabled and calls == []  # no warm-up off CUDA
    assert torch.equal(call(a, b), 2 * a + b)
    with pytest.raises(ValueError, match="recorded"):
        call(torch.ones(4), b)
    with pytest.raises(ValueError, match="recorded"):
        call(a.double(), b)
    with pytest.raises(ValueError, match="CUDA"):
        GraphedCall(double, (a, b), enabled=True)
    with pytest.raises(TypeError, match="example_inputs"):
        GraphedCall(double, ())


def test_filter_wrapper_gives_the_filter_result_of_a_direct_run():
    model = LinearGaussianSSM.random(1, 1, generator=torch.Generator().manual_seed(0), proposal="bootstrap")
    x, _ = model.sample(4, 20, generator=torch.Generator().manual_seed(1))
    direct = ParticleFilter(64, generator=torch.Generator().manual_seed(3))
    torch.manual_seed(4)  # the propagation's draws
    with torch.no_grad():
        expected = direct.run(model, x).log_evidence
    call = GraphedCall.filter(ParticleFilter(64, generator=torch.Generator().manual_seed(3)), model, x)
    torch.manual_seed(4)
    assert torch.equal(call(x).log_evidence, expected)
    with pytest.raises(ValueError, match="NaN"):
        call(torch.full_like(x, float("nan")))


def test_training_step_wrapper_trains_a_pf_rnn():
    torch.manual_seed(0)
    model = PFRNNPredictor(3, 2, hidden_size=8, encoder_size=8, num_particles=4)
    objective = DiscriminativeLoss(model)
    optimizer = torch.optim.RMSprop(objective.parameters(), lr=1e-2)
    x, y = torch.randn(6, 5, 3), torch.randn(6, 5, 2)
    before = [p.detach().clone() for p in objective.parameters()]
    step = GraphedCall.training_step(lambda x, y: objective(x, None, y).loss, optimizer, (x, y), clip_norm=3.0)
    losses = [float(step(x, y)) for _ in range(30)]
    assert sum(losses[-5:]) < sum(losses[:5])
    assert all(not torch.equal(a, p) for a, p in zip(before, objective.parameters()) if p.requires_grad)


def test_value_checks_switch_skips_only_checks_that_read_values():
    x = torch.full((2, 3, 1), float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        check_sequences(x)
    with value_checks(False):
        assert not value_checks_enabled()
        check_sequences(x)  # a NaN is a value: not read inside a capture
        with pytest.raises(ValueError, match="3 dims"):
            check_sequences(x[0])  # shapes are always checked
    assert value_checks_enabled()

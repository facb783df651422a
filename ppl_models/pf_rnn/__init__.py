"""PF-RNNs (Ma et al. 2020): PF-LSTM and PF-GRU, recurrent layers whose state is a weighted particle set.

Each particle ``h^i`` is updated by the gated cell with a *stochastic memory update*: the
cell candidate gets Gaussian noise whose scale is a learned function of ``[h_{t-1}^i, x_t]``
(eqs. 9-11, and the appendix for the GRU), reparameterized. The weights are updated by the
learned discriminative observation function ``log f_obs(x_t, h_t^i)``, a one-hidden-layer
net over ``[h_t^i, x_t]`` (eq. 2), and the set is soft-resampled (eq. 3) before the next step. The layer's output at
each step is the weighted mean particle ``sum_i w_t^i h_t^i``.

The filtering itself is the shared :class:`~ppl_models.inference.particle_filter.ParticleFilter`
(gradient mode ``soft``, resampling at every step), with the cell as its particle model;
the module adds no loop of its own. :class:`PFLSTM` and :class:`PFGRU` are drop-in for
``nn.LSTM`` / ``nn.GRU``: the same positional arguments and defaults (``batch_first=False``),
stacked layers, dropout between them, packed and unbatched input, and
``output, (h_n, c_n) = rnn(x)`` with each layer's weighted mean particle as ``h_n``; the
particle options (``num_particles`` ...) are keyword-only. The full :class:`ParticleState`
(particles and log-weights of every layer) is kept in ``last_particle_state`` and can be
passed back as ``hx`` to continue the filters (truncated BPTT). :meth:`filter` returns the
whole :class:`ParticleBelief` that the PF-RNN losses (:mod:`ppl_models.inference.discriminative`) need.
``eval()`` fixes the random draws (or turns them off: ``eval_randomness``).
:class:`PFRNNPredictor` stacks the paper's input layers, a recurrent layer and an output
head, and :class:`PFRNNProgram` writes the same filter as a Pyro program.

Modules: :mod:`.cells` (the particle cells, :class:`StepBatchNorm`, one layer's filtering
call), :mod:`.layers` (:class:`PFLSTM`, :class:`PFGRU`; their :class:`ParticleState` is in :mod:`.layer_io`,
:class:`ParticleBelief`), :mod:`.predictor` (:class:`PFRNNPredictor`) and :mod:`.program`
(:class:`PFRNNProgram`); every public name is importable from ``ppl_models.pf_rnn``.

Activation (``"relu_bn"``, the paper's default, or ``"tanh"``, the plain cell's): the cell
candidate goes through ReLU after batch normalisation over all particles of the batch, or
through tanh. The normalisation (:class:`StepBatchNorm`) keeps running statistics per time
step, as recurrent batch normalisation does (Cooijmans et al. 2017): the candidate's
distribution changes with ``t`` (all particles start equal), and one set of statistics
averaged over the steps made evaluation-mode losses a third higher than training-mode ones
on the localization task. With ``K = 1``, no noise, no resampling and tanh, :class:`PFLSTM` is exactly
``nn.LSTMCell``; :class:`PFGRU` is then the GRU of the paper's appendix (reset gate applied
before the recurrent product, Cho et al. 2014), which differs from ``nn.GRU``.
"""

from .cells import ACTIVATIONS, StepBatchNorm
from .layers import EVAL_RANDOMNESS, PF_CELLS, PFGRU, PFLSTM, ParticleBelief, ParticleState
from .predictor import TASKS, PFRNNPredictor
from .program import PFRNNProgram

__all__ = [
    "ACTIVATIONS",
    "EVAL_RANDOMNESS",
    "TASKS",
    "ParticleState",
    "ParticleBelief",
    "StepBatchNorm",
    "PFLSTM",
    "PFGRU",
    "PF_CELLS",
    "PFRNNPredictor",
    "PFRNNProgram",
]

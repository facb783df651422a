"""PFRNNProgram: the PF-RNN filter of a :class:`~ppl_models.pf_rnn.PFRNNPredictor` as Pyro model and guide."""

from __future__ import annotations

import math

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.poutine.runtime import get_plates

from ppl_models.inference.protocol import SequenceModel
from ppl_models.inference.resampling import gather_particles, resample
from ppl_models.inference.state_space import SEQUENCE_PLATE
from ppl_models.inference.traces import PARTICLE_PLATE
from ppl_models.inference.validation import check_sequences

from .cells import _ParticleRun
from .layers import _PFRNNBase
from .predictor import PFRNNPredictor

__all__ = ["PFRNNProgram"]


class PFRNNProgram(SequenceModel):
    """The PF-RNN filter of a :class:`PFRNNPredictor` as a Pyro program (``SMCFilter``-style plates).

    ``model(x, y, mask)`` runs the filter step by step inside ``pyro.plate("particles", K,
    dim=-2)`` and ``pyro.plate("sequences", B, dim=-1)``: at each step the standard normal
    draws of the stochastic memory update are a sample site ``noise_t`` (batch ``[K, B]``,
    event ``[H]``), the weights come from ``f_obs``, and the target is an observed site
    ``y_t`` under the weighted particle mixture ``sum_i w_t^i p(y_t | h_t^i)`` (batch
    ``[B]``). Soft resampling runs between steps, outside the trace, as in ``SMCFilter``.
    ``guide`` draws the same noise from its prior. With it, ``Trace_ELBO``'s loss is
    ``-sum_t log sum_i w_t^i p(y_t | h_t^i)``, the PF-RNN ELBO loss of
    :func:`ppl_models.inference.discriminative.particle_elbo_loss`, and its gradient is the paper's
    (reparameterized noise; resampling indices constant).

    Args:
        predictor: a :class:`PFRNNPredictor` with one ``pf-lstm`` or ``pf-gru`` layer (``num_layers=1``).
        generator: source of the resampling draws.
    """

    conditional = True
    uncondition = "free"
    pyro_prefix = "pf_rnn"
    capabilities = frozenset({"programs"})
    limitations = {
        "exact": "the stochastic memory updates make log p(y | x) intractable: Trace_ELBO of these programs, or "
        "the PF-RNN losses of ppl_models.inference.discriminative, score it",
        "latent": "a conditional model of targets given inputs: score(x) and the shared ELBO / IWAE bound log p(x) "
        "with model(x, mask), while its programs are model(x, y, mask) and bound log p(y | x); use "
        "Trace_ELBO of these programs (the PF-RNN ELBO loss) or ppl_models.inference.discriminative",
        "particles": "the filter runs inside the programs (soft resampling between steps), not as a model of x",
        "predictive": "its predictor gives it: PFRNNProgram.predictor.predictive(x, mask, num_samples)",
        "generate": "a conditional model of targets given inputs: it cannot simulate inputs",
        "forecast": "a conditional model: forecasting targets needs the future inputs",
    }
    description = "the PF-RNN filter of a PFRNNPredictor as Pyro model(x, y, mask) / guide programs for SVI"

    def __init__(self, predictor: PFRNNPredictor, generator: torch.Generator | None = None):
        if not isinstance(predictor, PFRNNPredictor) or not isinstance(predictor.rnn, _PFRNNBase):
            raise TypeError("predictor must be a PFRNNPredictor with a pf-lstm or pf-gru layer")
        if predictor.rnn.num_layers != 1:
            raise ValueError(
                f"PFRNNProgram writes one PF layer as a program; the predictor's has "
                f"num_layers={predictor.rnn.num_layers}"
            )
        super().__init__()
        self.predictor, self.generator = predictor, generator

    def _noise_sites(self, sequences, steps, like):
        cell = self.predictor.rnn
        prior = dist.Normal(like.new_zeros(()), like.new_ones(())).expand([cell.hidden_size]).to_event(1)
        with pyro.plate(PARTICLE_PLATE, cell.num_particles, dim=-2), sequences:
            return [pyro.sample(f"noise_{t}", prior) if cell.stochastic else None for t in pyro.markov(range(steps))]

    def model(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """Pyro model over inputs ``x [B, T, D]``, targets ``y [B, T, O]`` (or class indices ``[B, T]``).

        Under vectorised plates outside its own (``Predictive(parallel=True)``'s, at dims -3,
        -4, ...), each of their ``N`` draws runs its own filter: they are folded into the batch.
        """
        predictor, cell = self.predictor, self.predictor.rnn
        step_cell = cell.layers[0]
        pyro.module(self.pyro_name, predictor)
        batch, steps, _ = x.shape
        x, mask = check_sequences(x, mask)  # the padding of x, and of y below, set to 0: it changes nothing
        y = torch.where(mask.reshape(mask.shape + (1,) * (y.dim() - 2)), y, torch.zeros_like(y))
        sequences = pyro.plate(SEQUENCE_PLATE, batch, dim=-1)
        noises = self._noise_sites(sequences, steps, x)
        outer = _outer_plate_sizes()
        draws = math.prod(outer)  # the outer draws, folded into the batch: [N * B]
        folded_x = x.expand(draws, *x.shape).reshape(draws * batch, steps, -1)
        folded_mask = mask.expand(draws, *mask.shape).reshape(draws * batch, steps)
        noises = [None if noise is None else _fold_outer(noise, draws) for noise in noises]
        zeros = x.new_zeros(cell.num_particles, draws * batch, cell.hidden_size)
        run = _ParticleRun(step_cell, dict.fromkeys(step_cell.state_keys, zeros), None, None)
        state, context = run.start(predictor.encoder(folded_x), folded_mask, cell.num_particles)
        log_w = x.new_full((cell.num_particles, draws * batch), -math.log(cell.num_particles))
        for t in range(steps):
            valid = folded_mask[:, t]
            if t > 0 and cell.resampling == "soft":
                ancestors, new_log_w = resample(log_w, "soft", alpha=cell.alpha, generator=self.generator)
                identity = torch.arange(cell.num_particles, device=x.device).unsqueeze(-1)
                ancestors = torch.where(valid, ancestors, identity)
                log_w = torch.where(valid, new_log_w, log_w)
                state = {k: gather_particles(v, ancestors) for k, v in state.items()}
            new = step_cell.propagate(state, context["gates"][t], noises[t], t)
            state = {k: torch.where(valid.unsqueeze(-1), v, state[k]) for k, v in new.items()}
            log_w = torch.where(
                valid, torch.log_softmax(log_w + step_cell.log_obs(state["h"], context["obs"][t]), 0), log_w
            )
            shape = (*outer, 1, batch) if outer else (batch,)  # the outer plates at dims -3, -4, ...
            mixture = dist.MixtureSameFamily(
                dist.Categorical(logits=log_w.T.reshape(*shape, -1)),
                _batch_last(predictor.particle_distribution(state["h"]), shape),
            )
            with sequences, poutine.mask(mask=mask[:, t]):
                pyro.sample(f"y_{t}", mixture, obs=y[:, t])

    def guide(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
        """The prior of the noise sites (a bootstrap proposal: the ELBO is the filter's likelihood term)."""
        self._noise_sites(pyro.plate(SEQUENCE_PLATE, x.shape[0], dim=-1), x.shape[1], x)


def _batch_last(component, shape):
    """A per-particle distribution with batch ``[K, N * B]`` as batch ``shape`` (``[..., B]``) with ``K`` last."""
    if isinstance(component, dist.Categorical):
        return dist.Categorical(logits=component.logits.transpose(0, 1).reshape(*shape, *component.logits.shape[::2]))
    base = component.base_dist
    loc, scale = base.loc, base.scale.expand_as(base.loc)
    return dist.Normal(
        loc.transpose(0, 1).reshape(*shape, *loc.shape[::2]), scale.transpose(0, 1).reshape(*shape, *loc.shape[::2])
    ).to_event(1)


def _outer_plate_sizes() -> tuple[int, ...]:
    """Sizes of the vectorised plates outside the program's two (dims -3, -4, ...), outermost first; ``()`` if none."""
    sizes = {frame.dim: frame.size for frame in get_plates() if frame.dim is not None and frame.dim < -2}
    return tuple(sizes.get(dim, 1) for dim in range(min(sizes), -2)) if sizes else ()


def _fold_outer(noise: torch.Tensor, draws: int) -> torch.Tensor:
    """Noise ``[..., K, B, H]`` of ``draws`` outer draws as ``[K, draws * B, H]`` (draw-major, as the batch)."""
    particles, batch, hidden = noise.shape[-3:]
    noise = noise.expand(*noise.shape[:-3], particles, batch, hidden).reshape(-1, particles, batch, hidden)
    return noise.expand(draws, -1, -1, -1).transpose(0, 1).reshape(particles, draws * batch, hidden)

"""Posterior draws and pointwise log-likelihoods of any model with Pyro programs, for LOO and WAIC.

ArviZ's ``loo``, ``waic`` and ``loo_pit`` need, for each draw ``s`` of the unknowns and each
observed entry ``i``, the log-likelihood ``log p(y_i | draw s)`` and a replicate of ``y_i``
drawn given draw ``s``. Here the unknowns are a model's latent sites, drawn from its guide
(the posterior approximation it was trained with), optionally importance-resampled towards
the posterior by the weights ``p(x, z) / q(z | x)`` of each sequence.

The pointwise unit is one entry ``x_{b,t,d}`` (step ``t``, feature ``d``), so the
log-likelihood has the shape of the data and ``az.plot_loo_pit`` can compare it with the
observations. A step's log-density is split into the chain-rule factors
``log p(x_{t,d} | x_{t,<d}, draw)``, which sum to it exactly: independent features give their
own log-densities, a multivariate normal its Cholesky factors, a mixture (the PF-RNN belief)
its component-weighted conditionals.

A model without latent sites (an exact predictor) has nothing to draw: its draws all agree, so
``az.loo`` returns the exact one-step log predictive density and ArviZ reports a Pareto ``k``
of ``inf`` (constant importance ratios have no tail to fit).

The reading of a trace's sites as per-step draws, :func:`entry_log_prob` included, is in
:mod:`ppl_models.inference.site_steps`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyro
import torch
from pyro import poutine

from .site_steps import entry_log_prob, latent_steps, observed_steps, stack_steps
from .traces import latent_sites, sample_sites, trace_log_prob
from .validation import check_flag, check_memory, check_positive_int, check_sequences

__all__ = [
    "DRAWS_PLATE",
    "PosteriorDraws",
    "posterior_draws",
    "PosteriorPredictive",
    "posterior_predictive",
    "entry_log_prob",
]

#: name of the vectorised plate of draws (outside the programs' own plates)
DRAWS_PLATE = "draws"


@dataclass
class PosteriorDraws:
    """``S`` draws of a model's unknowns given a batch of ``B`` sequences of ``T`` steps.

    Attributes:
        log_likelihood: ``[S, B, T, D]`` per-entry ``log p(x_{t,d} | x_{t,<d}, draw)``; their
            sum over ``d`` is the step's log-likelihood given the draw; 0 at padded steps.
        replicates: ``[S, B, T, D]`` a draw of each observed step given the draw.
        latents: ``{site name: [S, B, T, ...]}`` the per-step latent sites, stacked in time.
        log_weights: ``[S, B]`` importance log-weights ``log p(x, z_s) - log q(z_s | x)`` of the
            guide's draws (before any resampling).
        source: where the draws come from, in words.
    """

    log_likelihood: torch.Tensor
    replicates: torch.Tensor
    latents: dict[str, torch.Tensor]
    log_weights: torch.Tensor
    source: str


@torch.no_grad()
def posterior_draws(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    num_draws: int = 100,
    *,
    targets: torch.Tensor | None = None,
    resample: bool = False,
    parallel: bool = True,
    max_plate_nesting: int = 2,
    generator: torch.Generator | None = None,
) -> PosteriorDraws:
    """Draws of ``model``'s latent sites from its guide, with pointwise log-likelihoods and replicates.

    Args:
        model: a :class:`~ppl_models.inference.protocol.SequenceModel` declaring ``programs``.
        x: ``[B, T, D]`` data (the inputs of a conditional model).
        mask: optional bool ``[B, T]``.
        num_draws: ``S``.
        targets: ``y [B, T, O]`` (or class indices ``[B, T]``) of a conditional model, whose
            programs are ``model(x, y, mask)``; ``None`` for a density of ``x``.
        resample: importance-resample the ``S`` guide draws of each sequence by their weights
            (sampling-importance-resampling), for guides far from the posterior (a bootstrap
            guide draws from the prior); the result then holds repeated draws.
        parallel: draw all ``S`` in one vectorised pass (a plate named ``draws``); ``False``
            traces the programs ``S`` times, for programs that cannot take an outer plate.
        max_plate_nesting: plates inside the programs; the draws plate sits outside them.
        generator: source of the resampling indices.

    A ``num_draws`` whose log-likelihoods and replicates cannot fit in the memory available is
    refused by name before anything is drawn.
    """
    num_draws = _check_draws("num_draws", num_draws, resample, parallel)
    x, mask, args = _program_args(model, x, mask, targets, max_plate_nesting)
    _check_draw_memory("num_draws", num_draws, x, targets, "log-likelihoods, replicates")
    shape = (x.shape[0], x.shape[1])
    if parallel:
        draws = [_trace_draws(model, args, shape, num_draws, -(max_plate_nesting + 1))]
    else:
        draws = [_trace_draws(model, args, shape, None, None) for _ in range(num_draws)]
    log_lik, replicates, latents, log_w = (_cat([d[i] for d in draws]) for i in range(4))
    log_lik = log_lik * mask[..., None]
    source = f"{num_draws} draws of the guide"
    if resample:
        index = torch.multinomial(torch.softmax(log_w.T, -1), num_draws, replacement=True, generator=generator).T
        pick = _per_sequence_picker(index)
        log_lik, replicates = pick(log_lik), pick(replicates)
        latents = {name: pick(value) for name, value in latents.items()}
        source += ", importance-resampled by p(x, z) / q(z | x)"
    return PosteriorDraws(log_lik, replicates, latents, log_w, source)


@dataclass
class PosteriorPredictive:
    """Replicates of a batch of ``B`` sequences of ``T`` steps, each drawn given one posterior draw.

    Attributes:
        samples: ``[S, B, T, D]`` replicates of the modelled variable (``x``, or the targets ``y``
            of a conditional model; class indices as ``D = 1``); NaN at padded steps.
        latents: ``{site name: [S, B, T, ...]}`` the per-step latent sites each replicate was drawn given.
        uncondition: what a replicate is, the model's :attr:`~ppl_models.inference.protocol.SequenceModel.uncondition`:
            ``"teacher-forced"`` (each step drawn given the observed past and the draw) or ``"free"``
            (the whole sequence simulated given the draw, each drawn step read by the next).
        source: where the draws come from, in words.
    """

    samples: torch.Tensor
    latents: dict[str, torch.Tensor]
    uncondition: str
    source: str


@torch.no_grad()
def posterior_predictive(
    model,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    num_samples: int = 100,
    *,
    targets: torch.Tensor | None = None,
    resample: bool = False,
    parallel: bool = True,
    max_plate_nesting: int = 2,
    generator: torch.Generator | None = None,
) -> PosteriorPredictive:
    """The posterior predictive of ``model`` on ``x``: replicates of the data given posterior draws.

    Each draw runs the guide, then the model with the guide's latent values replayed and its
    observed sites unconditioned (``poutine.uncondition``), so they are drawn, not given back.
    (``pyro.infer.Predictive(model.model, guide=model.guide)(x)`` returns ``x`` itself at the
    observed sites: the programs are called with the data, which conditions them.)

    What a replicate is depends on the model's declared ``uncondition``: a ``"teacher-forced"``
    model (SRNN, the exact predictors) computes its deterministic state from the observed
    sequence, so step ``t`` is drawn from ``p(x_t | x_{<t}, z_t)`` with the observed past; a
    ``"free"`` model (VRNN, the LGSSM, the SMC Transformer, the PF-RNN program) simulates the
    whole sequence given the draw, each drawn ``x_t`` feeding its state.

    Args:
        model: a :class:`~ppl_models.inference.protocol.SequenceModel` declaring ``programs``.
        x: ``[B, T, D]`` data (the inputs of a conditional model); mask: optional bool ``[B, T]``.
        num_samples: ``S``.
        targets: ``y [B, T, O]`` (or class indices ``[B, T]``) of a conditional model, whose
            replicates are then drawn; ``None`` for a density of ``x``.
        resample: importance-resample each sequence's guide draws by ``p(x, z) / q(z | x)``
            first (for a guide far from the posterior, such as a bootstrap guide).
        parallel: all ``S`` draws in one vectorised pass (``False``: ``S`` passes).
        max_plate_nesting: plates inside the programs; the draws plate sits outside them.
        generator: source of the resampling indices.

    A ``num_samples`` whose replicates cannot fit in the memory available is refused by name
    before anything is drawn.
    """
    num_samples = _check_draws("num_samples", num_samples, resample, parallel)
    x, mask, args = _program_args(model, x, mask, targets, max_plate_nesting)
    _check_draw_memory("num_samples", num_samples, x, targets, "replicates drawn, then stacked in time")
    shape = (x.shape[0], x.shape[1])
    if parallel:
        passes = [_replicate_pass(model, args, shape, num_samples, -(max_plate_nesting + 1), resample)]
    else:
        passes = [_replicate_pass(model, args, shape, None, None, resample) for _ in range(num_samples)]
    replicates, latents, log_w = (_cat([part[i] for part in passes]) for i in range(3))
    source = f"{num_samples} draws of the guide, the observed sites drawn ({model.uncondition})"
    if resample:
        index = torch.multinomial(torch.softmax(log_w.T, -1), num_samples, replacement=True, generator=generator).T
        pick = _per_sequence_picker(index)
        replicates, latents = pick(replicates), {name: pick(value) for name, value in latents.items()}
        source += ", importance-resampled by p(x, z) / q(z | x)"
    replicates = replicates.masked_fill(~mask[..., None], float("nan"))
    return PosteriorPredictive(replicates, latents, model.uncondition, source)


# --------------------------------------------------------------------------- helpers


def _trace_draws(model, args, shape, size, dim):
    """One pass: ``(log_lik, replicates, latents, log_w)``, each with a leading draws dim."""
    programs = (model.model, model.guide)
    if size is not None:
        plate = pyro.plate(DRAWS_PLATE, size, dim=dim)
        programs = tuple(plate(program) for program in programs)
    guide_trace = poutine.trace(programs[1]).get_trace(*args)
    model_trace = poutine.trace(poutine.replay(programs[0], trace=guide_trace)).get_trace(*args)
    count = 1 if size is None else size
    log_w = _log_weights(model_trace, guide_trace, (count,) + shape[:1], size is not None)
    log_lik, replicates = observed_steps(model_trace, count, shape)
    latents = latent_steps(guide_trace, count, shape)
    return log_lik, replicates, latents, log_w


def _check_draws(name: str, count, resample, parallel) -> int:
    """The checked number of draws ``count`` (named ``name``), with the flags ``resample`` and ``parallel``."""
    check_flag(resample, name="resample")
    check_flag(parallel, name="parallel")
    return check_positive_int(count, name=name)


def _check_draw_memory(name: str, count: int, x: torch.Tensor, targets, what: str) -> None:
    """Refuse by ``name`` ``count`` draws whose two ``[S, B, T, D]`` tensors (``what``) cannot fit in memory.

    ``D`` is that of the modelled variable: ``x [B, T, D]``, or the targets ``[B, T, O]`` (class indices: 1).
    """
    batch, steps, features = x.shape
    if isinstance(targets, torch.Tensor):
        features = targets.shape[-1] if targets.dim() == 3 else 1
    size = x.element_size()
    check_memory(
        {
            name: (
                count,
                2 * count * batch * steps * features * size,
                f"{count} draws x 2 ({what}) x {batch} sequences x {steps} steps x {features} features x {size} bytes",
            )
        }
    )


def _program_args(model, x, mask, targets, max_plate_nesting):
    """Checked ``(x, mask, args)``: the arguments of the programs, ``(x, mask)`` or ``(x, targets, mask)``."""
    model.require("programs")
    check_positive_int(max_plate_nesting, name="max_plate_nesting")
    if model.conditional and targets is None:
        raise ValueError(f"targets must be given for the conditional model {type(model).__name__}, got None")
    if not model.conditional and targets is not None:
        raise ValueError(f"targets must be None for {type(model).__name__}, which is a density of x")
    x, mask = check_sequences(x, mask, model=model)  # dtype and feature size checked against the model
    return x, mask, ((x, mask) if targets is None else (x, targets, mask))


def _replicate_pass(model, args, shape, size, dim, weigh):
    """One pass: ``(replicates [S, B, T, D], latents, log_w [S, B] or None)`` from the unconditioned, replayed model."""
    programs = (model.model, model.guide)
    if size is not None:
        plate = pyro.plate(DRAWS_PLATE, size, dim=dim)
        programs = tuple(plate(program) for program in programs)
    guide_trace = poutine.trace(programs[1]).get_trace(*args)
    replayed = poutine.replay(programs[0], trace=guide_trace)
    trace = poutine.trace(poutine.uncondition(replayed)).get_trace(*args)
    count = 1 if size is None else size
    log_w = None
    if weigh:
        model_trace = poutine.trace(replayed).get_trace(*args)
        log_w = _log_weights(model_trace, guide_trace, (count,) + shape[:1], size is not None)
    names = [
        name for name, site in trace.nodes.items() if site["type"] == "sample" and site["infer"].get("was_observed")
    ]
    values = {name: trace.nodes[name]["value"] for name in names}
    return stack_steps(values, count, shape), latent_steps(guide_trace, count, shape), log_w


def _log_weights(model_trace, guide_trace, shape, vectorised):
    plate = DRAWS_PLATE if vectorised else None
    target = shape if vectorised else shape[1:]
    log_p = trace_log_prob(model_trace, sample_sites(model_trace), target, plate)
    log_q = trace_log_prob(guide_trace, latent_sites(guide_trace), target, plate)
    return torch.as_tensor(log_p - log_q).expand(target).reshape(shape)


def _cat(parts):
    first = parts[0]
    if first is None:
        return None
    if isinstance(first, dict):
        return {key: torch.cat([part[key] for part in parts]) for key in first if all(key in p for p in parts)}
    return torch.cat(parts)


def _per_sequence_picker(index):
    """Gather draws ``index [S, B]`` per sequence from tensors ``[S, B, ...]``."""

    def pick(values):
        expanded = index.reshape(index.shape + (1,) * (values.dim() - 2)).expand(index.shape + values.shape[2:])
        return values.gather(0, expanded)

    return pick

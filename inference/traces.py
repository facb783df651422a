"""Per-sequence log-densities from Pyro traces, and KL annealing of latent sites.

Pyro's ELBOs return one number for a whole batch. The objectives here report one
number per sequence, so they reduce each site's ``log_prob`` (which already holds
its ``poutine.scale`` and ``poutine.mask``) to ``[B]``, or ``[K, B]`` under a
vectorised particle plate, by summing every other plate dimension. Every sample
site must therefore sit inside the plate named :data:`SEQUENCE_PLATE`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from pyro.distributions.util import scale_and_mask
from pyro.poutine.messenger import Messenger
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import site_is_subsample

__all__ = [
    "SEQUENCE_PLATE",
    "PARTICLE_PLATE",
    "site_per_sequence",
    "trace_log_prob",
    "latent_sites",
    "observed_sites",
    "sample_sites",
    "check_reparameterized",
    "annealed",
    "DetachLatents",
]

#: the plate over the sequences of a batch (``dim=-1`` in :class:`~ppl_models.inference.state_space.MarkovStateSpace`)
SEQUENCE_PLATE = "sequences"
#: the vectorised plate over particles (IWAE's importance samples, the PF-RNN program's particles)
PARTICLE_PLATE = "particles"


def site_per_sequence(value: torch.Tensor, site: dict, shape: tuple[int, ...], particle_plate: str | None = None):
    """Reduce a per-site tensor (``log_prob``, a KL, ...) to ``shape`` = ``(B,)`` or ``(K, B)``.

    Dimensions of other plates are summed; the sequence (and particle) plate dims kept.
    """
    frames = {f.name: f.dim for f in site["cond_indep_stack"] if f.vectorized}
    if SEQUENCE_PLATE not in frames:
        raise ValueError(
            f"sample site {site['name']!r} is outside the plate {SEQUENCE_PLATE!r}: per-sequence objectives "
            f"need every site inside pyro.plate({SEQUENCE_PLATE!r}, B)"
        )
    keep = {frames[SEQUENCE_PLATE]}
    if particle_plate is not None and particle_plate in frames:
        keep.add(frames[particle_plate])
    depth = max(-min(frames.values()), value.dim())
    value = value.reshape((1,) * (depth - value.dim()) + value.shape)
    other = [d for d in range(-depth, 0) if d not in keep]
    if other:
        value = value.sum(other)
    if value.dim() < len(shape):
        value = value.reshape((1,) * (len(shape) - value.dim()) + value.shape)
    return value.expand(shape)


def _sample_sites(trace: Trace):
    return [(n, s) for n, s in trace.nodes.items() if s["type"] == "sample" and not site_is_subsample(s)]


def latent_sites(trace: Trace) -> list[str]:
    """Names of the sampled (not observed) sites of ``trace`` (plates' subsample sites excluded)."""
    return [n for n, s in _sample_sites(trace) if not s["is_observed"]]


def observed_sites(trace: Trace) -> list[str]:
    """Names of the observed sites of ``trace``."""
    return [n for n, s in _sample_sites(trace) if s["is_observed"]]


def check_reparameterized(trace: Trace) -> None:
    """Raise ``ValueError`` if a latent site of a guide trace cannot be reparameterised.

    The per-sequence ELBO and IWAE differentiate through the guide's samples; a
    discrete or otherwise non-reparameterisable site would need score-function terms.
    """
    for name in latent_sites(trace):
        if not trace.nodes[name]["fn"].has_rsample:
            raise ValueError(
                f"guide site {name!r} ({type(trace.nodes[name]['fn']).__name__}) has no rsample: the ELBO and IWAE "
                "objectives need reparameterisable guides (use Pyro's own ELBOs with SVI for discrete latents)"
            )


def sample_sites(trace: Trace) -> list[str]:
    """Names of all latent and observed sample sites of ``trace``."""
    return [n for n, _ in _sample_sites(trace)]


def trace_log_prob(
    trace: Trace, names: Iterable[str], shape: tuple[int, ...], particle_plate: str | None = None
) -> torch.Tensor | float:
    """Sum of the named sites' scaled, masked ``log_prob``, per sequence: ``shape`` ``(B,)`` or ``(K, B)``.

    Returns the float ``0.0`` when ``names`` is empty.
    """
    total = 0.0
    for name in names:
        site = trace.nodes[name]
        log_p = scale_and_mask(site["fn"].log_prob(site["value"]), site["scale"], site["mask"])
        total = total + site_per_sequence(log_p, site, shape, particle_plate)
    return total


class DetachLatents(Messenger):
    """Within this context, latent sample sites return (and record) detached values.

    Used for Fisher's identity: every use of a sampled latent downstream in the same
    program (a mean computed from it, a later site's distribution) sees a constant, so
    ``∇ log p(z, x)`` is taken at fixed ``z``. Enter it outside ``poutine.trace`` so the
    trace records the detached values too.
    """

    def _postprocess_message(self, msg):
        if msg["type"] == "sample" and not msg["is_observed"]:
            msg["value"] = msg["value"].detach()


class _AnnealLatents(Messenger):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def _process_message(self, msg):
        if msg["type"] == "sample" and not msg["is_observed"]:
            msg["scale"] = msg["scale"] * self.factor


def annealed(fn: Callable, factor: float) -> Callable:
    """Wrap a Pyro program so every latent sample site's log-density is scaled by ``factor``.

    Applied to both model and guide, any Pyro ELBO becomes
    ``E_q[log p(x | z)] - factor * KL(q(z) || p(z))``: the KL annealing of SRNN,
    with ``factor`` rising from e.g. 0.2 to 1 during training.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 0:
        raise ValueError(f"factor must be a number >= 0, got {factor!r}")
    return _AnnealLatents(factor)(fn)

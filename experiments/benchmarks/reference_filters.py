"""The reference filters the bootstrap-filter benchmark times ours against, on the same 1-d LGSSM and data
(:mod:`~ppl_models.experiments.benchmarks.lgssm_problem`): the ``particles`` library of N. Chopin and Pyro's
``pyro.infer.SMCFilter``, each one sequence at a time in float64 on the CPU, and the same filter written plainly in
torch for all sequences at once (float32, :func:`prepare_torch`): the eager-torch floor a general engine is held to.

Each ``prepare_*`` warms up and returns ``(run, finish)``: ``run()`` is one timed call over all sequences and
``finish(times, last_output)`` turns the timings into a row
(:func:`ppl_models.experiments.benchmarks.bootstrap_filter.compare`).
"""

from __future__ import annotations

import math

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SMCFilter

from ppl_models.experiments.benchmarks.lgssm_problem import (
    ESS_THRESHOLD,
    RHO,
    SIGMA_0,
    SIGMA_X,
    SIGMA_Y,
    evidence_errors,
)
from ppl_models.experiments.benchmarks.timing import package_version, stats

__all__ = ["prepare_particles", "prepare_pyro", "prepare_torch"]


def _float64_cpu_row(times: list[float], num_particles: int, x64: torch.Tensor, **extra) -> dict:
    """Timing statistics and the configuration of a float64 run on the CPU (the reference libraries)."""
    return {
        **stats(times),
        "num_particles": num_particles,
        "num_steps": int(x64.shape[1]),
        "num_sequences": int(x64.shape[0]),
        "device": "cpu",
        "dtype": "float64",
        **extra,
    }


def _particles_modules():
    try:
        import particles
        from particles import kalman
        from particles import state_space_models as ssm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(
            f"the 'particles' library is not installed ({exc}); install it "
            "(pip install 'ppl-models[benchmark]') or pass --skip-particles"
        ) from exc
    return particles, kalman, ssm


def prepare_particles(num_particles, data, *, seed=0):
    """``particles.SMC`` on a ``Bootstrap`` Feynman-Kac model, one sequence at a time (numpy, float64)."""
    particles, kalman, ssm = _particles_modules()
    _, x64, exact = data
    series = [x64[b, :, 0].numpy().copy() for b in range(x64.shape[0])]
    lg = kalman.LinearGauss(rho=RHO, sigmaX=SIGMA_X, sigmaY=SIGMA_Y, sigma0=SIGMA_0)

    # the same model? particles' own Kalman filter against ours
    kf = kalman.Kalman(ssm=lg, data=series[0])
    kf.filter()
    kalman_gap = abs(float(np.sum(kf.logpyt)) - float(exact[0]))

    def run_one(y):
        alg = particles.SMC(
            fk=ssm.Bootstrap(ssm=lg, data=y), N=num_particles, resampling="systematic", ESSrmin=ESS_THRESHOLD
        )
        alg.run()
        return alg.logLt

    def run():
        return np.array([run_one(y) for y in series])

    np.random.seed(seed)
    run_one(series[0][:20])  # warm-up (numba compiles its resampling kernels on first call)

    def finish(times, log_evidence):
        out = _float64_cpu_row(times, num_particles, x64, version=package_version("particles"))
        out.update(evidence_errors(log_evidence, exact.numpy()), kalman_vs_ours_abs_diff=kalman_gap)
        return out

    return run, finish


class _PyroModel:
    """``init``/``step`` program of the LGSSM for ``pyro.infer.SMCFilter`` (the model writes the state)."""

    def __init__(self, rho, sigma_x, sigma_y, sigma_0):
        self.rho, self.sigma_x, self.sigma_y, self.sigma_0 = rho, sigma_x, sigma_y, sigma_0

    def init(self, state, x0):
        state["z"] = pyro.sample("z", dist.Normal(0.0, self.sigma_0))
        pyro.sample("x", dist.Normal(state["z"], self.sigma_y), obs=x0)

    def step(self, state, x_t):
        state["z"] = pyro.sample("z", dist.Normal(self.rho * state["z"], self.sigma_x))
        pyro.sample("x", dist.Normal(state["z"], self.sigma_y), obs=x_t)


class _PyroBootstrapGuide(_PyroModel):
    """The bootstrap proposal: the transition itself (reads the state, never writes it)."""

    def init(self, state, x0):
        pyro.sample("z", dist.Normal(0.0, self.sigma_0))

    def step(self, state, x_t):
        pyro.sample("z", dist.Normal(self.rho * state["z"], self.sigma_x))


def prepare_pyro(num_particles, data, *, seed=0):
    """``pyro.infer.SMCFilter``, one sequence at a time on CPU, validation off (it keeps no log-evidence).

    It runs in float64: in float32, round-off in the last cumulative weight lets Pyro 1.9's
    ``_systematic_sample`` return the index ``K`` (about once in 2e4 resamplings here), and the
    run dies with ``IndexError: index 1000 is out of bounds for dimension 0 with size 1000``.
    """
    _, x64, _ = data
    series = [x64[b, :, 0].clone() for b in range(x64.shape[0])]
    model = _PyroModel(RHO, SIGMA_X, SIGMA_Y, SIGMA_0)
    guide = _PyroBootstrapGuide(RHO, SIGMA_X, SIGMA_Y, SIGMA_0)

    def run_one(y):
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # SMCFilter's weights and uniforms follow the default dtype
        try:
            smc = SMCFilter(model, guide, num_particles=num_particles, max_plate_nesting=0, ess_threshold=ESS_THRESHOLD)
            with torch.no_grad(), pyro.validation_enabled(False):
                smc.init(y[0])
                for t in range(1, y.shape[0]):
                    smc.step(y[t])
        finally:
            torch.set_default_dtype(default)
        return smc

    def run():
        for y in series:
            run_one(y)

    pyro.set_rng_seed(seed)
    run_one(series[0][:20])

    def finish(times, _):
        return _float64_cpu_row(times, num_particles, x64, version=package_version("pyro-ppl"), validation=False)

    return run, finish


def prepare_torch(num_particles, data, *, seed=0):
    """The bootstrap filter of the 1-d LGSSM written by hand in torch for all ``B`` sequences at once (float32, one
    process, no gradients): the same algorithm (systematic resampling of the sequences whose ESS fell below
    ``ESS_THRESHOLD K``, before each propagation) without a general engine's model protocol, masks or records."""
    x32, _, exact = data
    observations = x32[:, :, 0].T.contiguous()  # [T, B]
    batch, k = observations.shape[1], num_particles
    log_norm = -0.5 * math.log(2 * math.pi) - math.log(SIGMA_Y)
    generator = torch.Generator().manual_seed(seed + 1)
    offsets = torch.arange(k, dtype=torch.float32)

    def run(steps=observations):
        z = SIGMA_0 * torch.randn(k, batch, generator=generator)
        log_w = torch.full((k, batch), -math.log(k))
        log_evidence = torch.zeros(batch)
        for t in range(steps.shape[0]):
            if t > 0:
                weights = log_w.exp()
                low = 1.0 / weights.square().sum(0) < ESS_THRESHOLD * k
                if bool(low.any()):
                    cdf = weights.T.cumsum(1)
                    positions = (offsets + torch.rand(batch, 1, generator=generator)) / k
                    ancestors = torch.searchsorted(cdf, positions).clamp_(max=k - 1).T
                    z = torch.where(low, z.gather(0, ancestors), z)
                    log_w = torch.where(low, -math.log(k), log_w)
                z = RHO * z + SIGMA_X * torch.randn(k, batch, generator=generator)
            residual = (steps[t] - z) / SIGMA_Y
            log_w = log_w + (log_norm - 0.5 * residual.square())
            top = log_w.amax(0)
            step_evidence = top + (log_w - top).exp().sum(0).log()
            log_evidence += step_evidence
            log_w = log_w - step_evidence
        return log_evidence

    with torch.no_grad():
        run(observations[:20])

    def timed():
        with torch.no_grad():
            return run()

    def finish(times, log_evidence):
        out = {**stats(times), "num_particles": k, "num_steps": int(observations.shape[0]), "num_sequences": batch}
        out.update(evidence_errors(log_evidence.double().numpy(), exact.numpy()), device="cpu", dtype="float32")
        return out

    return timed, finish

"""The defaults that several modules share, one named constant per meaning: change a default here and every place
that uses it follows.

Particle counts ``K`` differ by purpose, so each purpose has its own constant; where two entry points take a
different ``K`` for the same estimate (a model's own ``score`` and the evaluation's SMC estimate), both are named
here and each comment says which path reads it. The command line's help and ``docs/cli.md`` name these values.
"""

from __future__ import annotations

__all__ = [
    "METHOD_PARTICLES",
    "EVALUATION_PARTICLES",
    "EVALUATION_IWAE_PARTICLES",
    "SMC_OBJECTIVE_PARTICLES",
    "IWAE_OBJECTIVE_PARTICLES",
    "FORECAST_PARTICLES",
    "FORECAST_SAMPLES",
    "BACKTEST_SAMPLES",
    "PARTICLE_CLOUD_PARTICLES",
    "EM_PARTICLES",
    "PF_RNN_PARTICLES",
    "SPLIT_FRACTIONS",
    "WINDOW_SHARES",
]

#: K of a model's own particle methods when the caller gives none (SequenceModel.score smc/iwae, predictive, forecast)
METHOD_PARTICLES = 100
#: K of the evaluation's SMC estimate (EvaluationOptions.num_particles: evaluate(), [evaluate], ppl-models evaluate)
EVALUATION_PARTICLES = 1000
#: K of the evaluation's IWAE bound (EvaluationOptions.iwae_particles, evaluate.iwae_particles)
EVALUATION_IWAE_PARTICLES = 100
#: K of the smc training objective where [objective] gives no num_particles (the experiments' registry)
SMC_OBJECTIVE_PARTICLES = 64
#: K of the IWAE training objective where none is given (inference.objectives.IWAE, [objective] name = "iwae")
IWAE_OBJECTIVE_PARTICLES = 10
#: a particle model's filter size in forecasts (ppl-models forecast / backtest --particles, forecast_beyond)
FORECAST_PARTICLES = 30
#: paths per sequence of a forecast (ppl-models forecast --samples, compare_forecasts, forecast_beyond)
FORECAST_SAMPLES = 1000
#: draws per forecast of a backtest (ppl-models backtest --samples, backtest_run)
BACKTEST_SAMPLES = 200
#: the most particles that draw a run folder's particle-cloud figure (experiments.outputs)
PARTICLE_CLOUD_PARTICLES = 500
#: K of the filter before each EM step of SMCTransformer.fine_tuned (ppl-models forecast --em-iterations)
EM_PARTICLES = 10
#: K of a PF-RNN layer (PFLSTM, PFGRU) where none is given
PF_RNN_PARTICLES = 20
#: (train, valid, test) shares of a split by series or by time (DataSet.split; a user's file: data.fractions)
SPLIT_FRACTIONS = (0.7, 0.15, 0.15)
#: (train, valid) shares of the chronological window data sets (air quality, UCI regression); the rest is test
WINDOW_SHARES = (0.7, 0.1)

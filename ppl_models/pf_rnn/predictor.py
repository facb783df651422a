"""PFRNNPredictor: the PF-RNN paper's network, input layers, a PF-LSTM / PF-GRU (or LSTM / GRU) layer and a head."""

from __future__ import annotations

import pyro.distributions as dist
import torch
from torch import nn

from ppl_models.inference.protocol import OneStepPredictive, SequenceModel, check_num_samples
from ppl_models.inference.validation import InputTypeError, check_choice, check_positive_int

from .layers import PF_CELLS, ParticleBelief, _PFRNNBase

__all__ = ["TASKS", "PFRNNPredictor"]

TASKS = ("regression", "classification")


class PFRNNPredictor(SequenceModel):
    """The paper's network around a recurrent layer: two input layers, the layer, an output head.

    ``x [B, T, D] -> ReLU(Linear) -> ReLU(Linear) -> recurrent layer -> Linear -> y [B, T, O]``.
    The recurrent layer is ``"pf-lstm"``, ``"pf-gru"`` (particle beliefs) or ``"lstm"``,
    ``"gru"`` (``nn.LSTM`` / ``nn.GRU``, the baselines; one "particle"). The head ``f_out`` is
    applied to the mean particle for the prediction and to every particle for the PF-RNN losses.

    Args:
        input_size: ``D``; output_size: ``O`` (classes for classification).
        cell: one of ``pf-lstm, pf-gru, lstm, gru``.
        hidden_size: ``H``; encoder_size: width of the two input layers.
        task: ``"regression"`` (Gaussian with learned or unit scale) or ``"classification"``.
        learn_scale: regression only: learn the Gaussian's per-output scale (default) or keep
            it at 1 (the paper's unit-variance ELBO).
        activation: of the PF cell candidate. The ``"lstm"``/``"gru"`` baselines are the torch
            layers; the ablation's LSTM-BNReLU is ``cell="pf-lstm"`` with one deterministic
            particle (``num_particles=1, stochastic=False, resampling="none"``).
        **pf_options: keyword options of :class:`PFLSTM`: ``num_particles``, ``resampling``, ``alpha``,
            ``stochastic``, ``activation``, ``norm_steps``, ``num_layers``, ``dropout``, ``compiled``,
            ``eval_randomness`` (default here ``"sampled"``: evaluation draws afresh, as the paper's and our recorded
            runs did).

    A conditional model: its :meth:`predictive` draws targets ``y_t`` from the particle mixture
    ``sum_i w_t^i p(y_t | h_t^i)`` given the inputs ``x_{<=t}``.
    """

    conditional = True
    capabilities = frozenset({"predictive"})
    limitations = {
        "programs": "its Pyro programs take targets as well as inputs: PFRNNProgram(predictor).model(x, y, mask)",
        "exact": "a conditional model of targets given inputs; the PF-RNN losses score it "
        "(ppl_models.inference.discriminative.DiscriminativeLoss)",
        "latent": "a conditional model of targets given inputs: no density of x to bound",
        "particles": "its particle filter runs inside the layer (PFLSTM.filter), over encoded inputs, not as a "
        "model of x for ParticleFilter",
        "generate": "a conditional model of targets given inputs: it cannot simulate inputs",
        "forecast": "a conditional model: forecasting targets needs the future inputs",
    }
    description = (
        "PF-RNN network (Ma et al. 2020): input layers, a PF-LSTM / PF-GRU (or LSTM / GRU) layer and "
        "an output head; regression or classification of targets from inputs"
    )

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        cell: str = "pf-lstm",
        hidden_size: int = 64,
        encoder_size: int = 64,
        task: str = "regression",
        learn_scale: bool = True,
        **pf_options,
    ):
        super().__init__()
        self.cell_name = check_choice(cell, (*PF_CELLS, "lstm", "gru"), name="cell")
        self.task = check_choice(task, TASKS, name="task")
        self.input_size = check_positive_int(input_size, name="input_size")
        self.output_size = check_positive_int(output_size, name="output_size")
        check_positive_int(encoder_size, name="encoder_size")
        self.encoder = nn.Sequential(
            nn.Linear(input_size, encoder_size), nn.ReLU(), nn.Linear(encoder_size, encoder_size), nn.ReLU()
        )
        if cell in PF_CELLS:
            self.rnn = PF_CELLS[cell](
                encoder_size, hidden_size, batch_first=True, **{"eval_randomness": "sampled", **pf_options}
            )
        else:
            if pf_options:
                raise ValueError(f"options {sorted(pf_options)} apply to PF cells only, not cell={cell!r}")
            self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(encoder_size, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, output_size)
        if learn_scale and task == "regression":
            self.log_scale = nn.Parameter(torch.zeros(output_size))
        else:  # a fixed unit scale (or none, for classes): a buffer, so Pyro's parameter store has nothing to skip
            self.register_buffer("log_scale", torch.zeros(output_size))

    @property
    def num_particles(self) -> int:
        return getattr(self.rnn, "num_particles", 1)

    def belief(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
        outputs: bool = False,
    ) -> ParticleBelief:
        """The recurrent layer's belief over the encoded inputs (for baselines: one particle of weight 1).

        ``outputs=True``: the belief holds the head's value of each particle, ``f_out(h_t^i) [T, K, B, O]``, computed
        step by step inside the filter, instead of the particles ``[T, K, B, H]`` (what the PF-RNN losses read:
        ``O / H`` of the memory, and no ``[T, K, B, H]`` tensor or gradient is formed).
        """
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.input_size:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape [B, T, D] with D = {self.input_size}, got {got}")
        if x.dtype != self.head.weight.dtype:
            raise InputTypeError(
                f"x must have the dtype of the predictor's parameters, {self.head.weight.dtype}, "
                f"got {x.dtype}: convert one of them"
            )
        features = self.encoder(x)
        if isinstance(self.rnn, _PFRNNBase):
            return self.rnn.filter(features, mask=mask, generator=generator, readout=self.head if outputs else None)
        output, _ = self.rnn(features)
        particles = output.transpose(0, 1).unsqueeze(1)
        log_w = particles.new_zeros(particles.shape[:3])
        if outputs:
            return ParticleBelief(
                mean=output, particles=None, log_weights=log_w, state=None, outputs=self.head(particles)
            )
        return ParticleBelief(mean=output, particles=particles, log_weights=log_w, state=None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Point prediction ``f_out(mean particle)``: ``[B, T, O]`` (class logits for classification)."""
        return self.head(self.belief(x, mask).mean)

    @torch.no_grad()
    def predictive(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        num_samples: int = 100,
        *,
        num_particles: int | None = None,
        generator: torch.Generator | None = None,
    ) -> OneStepPredictive:
        """Draws ``[S, B, T, O]`` of the targets (class indices ``[S, B, T, 1]``) given the inputs ``x [B, T, D]``.

        ``mean``: the mixture's mean (regression) or class probabilities (classification),
        ``[B, T, O]``; ``log_density`` is ``None`` (it needs the targets). ``num_particles`` is
        the layer's own ``K``.
        """
        return self.belief_predictive(self.belief(x, mask, generator=generator), num_samples, generator)

    def belief_predictive(
        self, belief: ParticleBelief, num_samples: int, generator: torch.Generator | None = None
    ) -> OneStepPredictive:
        """:meth:`predictive` of an already computed :meth:`belief` (``particles [T, K, B, H]``)."""
        num_samples = check_num_samples(num_samples)
        out = self.head(belief.particles)  # [T, K, B, O]
        weights = belief.log_weights.exp()  # [T, K, B]
        if self.task == "classification":
            probs = (weights.unsqueeze(-1) * torch.softmax(out, -1)).sum(1).transpose(0, 1)  # [B, T, O]
            samples = None
            if num_samples:
                flat = torch.multinomial(
                    probs.reshape(-1, probs.shape[-1]), num_samples, replacement=True, generator=generator
                )
                samples = flat.T.reshape(num_samples, *probs.shape[:2], 1).to(probs.dtype)
            return OneStepPredictive(samples, probs, None, f"the {self.num_particles}-particle belief")
        mean = (weights.unsqueeze(-1) * out).sum(1).transpose(0, 1)  # [B, T, O]
        samples = None
        if num_samples:
            steps, particles, batch, outputs = out.shape
            flat_weights = weights.permute(0, 2, 1).reshape(-1, particles)  # [T B, K]
            chosen = torch.multinomial(flat_weights, num_samples, replacement=True, generator=generator)  # [T B, S]
            centres = out.permute(0, 2, 1, 3).reshape(-1, particles, outputs)  # [T B, K, O]
            centres = centres.gather(1, chosen.unsqueeze(-1).expand(-1, -1, outputs))  # [T B, S, O]
            noise = torch.randn(centres.shape, generator=generator, device=centres.device, dtype=centres.dtype)
            draws = centres + self.log_scale.exp() * noise
            samples = draws.reshape(steps, batch, num_samples, outputs).permute(2, 1, 0, 3)
        return OneStepPredictive(samples, mean, None, f"the {self.num_particles}-particle belief")

    def particle_distribution(self, particles: torch.Tensor):
        """``p(y | h^i)`` per particle: Normal (event ``[O]``) or Categorical over ``O`` classes."""
        return self.output_distribution(self.head(particles))

    def output_distribution(self, out: torch.Tensor):
        """:meth:`particle_distribution` from the head's values ``out = f_out(h^i) [..., O]``."""
        if self.task == "classification":
            return dist.Categorical(logits=out)
        return dist.Normal(out, self.log_scale.exp()).to_event(1)

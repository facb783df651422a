"""PFLSTM and PFGRU: drop-in ``nn.LSTM`` / ``nn.GRU`` layers whose state is a weighted particle set per layer.

Their state and belief, and the checks of their inputs, are in :mod:`ppl_models.pf_rnn.layer_io`."""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

from ppl_models.inference.defaults import PF_RNN_PARTICLES
from ppl_models.inference.filter_result import weighted_sum
from ppl_models.inference.particle_filter import ParticleFilter
from ppl_models.inference.protocol import CAPABILITIES, SequenceModel
from ppl_models.inference.validation import (
    check_choice,
    check_dropout,
    check_positive_int,
    check_probability,
)

from .cells import ACTIVATIONS, _GRUParticleCell, _LSTMParticleCell, _ParticleCell, _ParticleRun
from .layer_io import LayerInputs, ParticleBelief, ParticleState, apply_to_final, packed_like

__all__ = ["EVAL_RANDOMNESS", "ParticleState", "ParticleBelief", "PFLSTM", "PFGRU", "PF_CELLS"]

EVAL_RANDOMNESS = ("fixed", "off", "sampled")


class _PFRNNBase(LayerInputs, SequenceModel):
    """Shared by :class:`PFLSTM` and :class:`PFGRU`: options, input conversions, the filters of the layers.

    A subclass sets ``_cell`` (its :class:`_ParticleCell`) and ``_state_name`` (``hx``'s form in errors).
    """

    capabilities = frozenset()
    limitations = dict.fromkeys(
        CAPABILITIES,
        "a recurrent layer (drop-in for nn.LSTM / nn.GRU) maps inputs to features and models no distribution; "
        "PFRNNPredictor puts a predictive head on it and PFRNNProgram its Pyro programs",
    )

    _cell: type[_ParticleCell]
    _state_name: str

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        *,
        num_particles: int = PF_RNN_PARTICLES,
        resampling: str = "soft",
        alpha: float = 0.5,
        stochastic: bool = True,
        activation: str = "relu_bn",
        norm_steps: int = 100,
        eval_randomness: str = "fixed",
        eval_seed: int = 0,
        compiled: bool = False,
    ):
        super().__init__()
        name = type(self).__name__
        for flag, value in (
            ("bias", bias),
            ("batch_first", batch_first),
            ("bidirectional", bidirectional),
            ("stochastic", stochastic),
            ("compiled", compiled),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {type(value).__name__} {value!r}")
        if bidirectional:
            raise ValueError(
                f"{name} filters forward in time: bidirectional=True has no particle-filter meaning "
                "(run a second layer on the time-reversed input instead)"
            )
        self.input_size = check_positive_int(input_size, name="input_size")
        self.hidden_size = check_positive_int(hidden_size, name="hidden_size")
        self.num_layers = check_positive_int(num_layers, name="num_layers")
        self.dropout = check_dropout(dropout)
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout={dropout} acts between layers, and num_layers=1 has none (as in nn.LSTM)", stacklevel=3
            )
        self.num_particles = check_positive_int(num_particles, name="num_particles")
        self.resampling = check_choice(resampling, ("soft", "none"), name="resampling")
        self.alpha = check_probability(alpha, name="alpha", open_left=True)
        self.activation = check_choice(activation, ACTIVATIONS, name="activation")
        self.eval_randomness = check_choice(eval_randomness, EVAL_RANDOMNESS, name="eval_randomness")
        if isinstance(eval_seed, bool) or not isinstance(eval_seed, int) or eval_seed < 0:
            raise ValueError(f"eval_seed must be an int >= 0, got {eval_seed!r}")
        self.bias, self.batch_first, self.stochastic, self.eval_seed = bias, batch_first, stochastic, eval_seed
        self.bidirectional, self.proj_size = False, 0  # read by code written for nn.LSTM (num_directions)
        self.layers = nn.ModuleList(
            self._cell(
                input_size if index == 0 else hidden_size,
                hidden_size,
                bias=bias,
                stochastic=stochastic,
                activation=activation,
                norm_steps=norm_steps,
                compiled=compiled,
            )
            for index in range(num_layers)
        )
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)
        self.last_particle_state: ParticleState | None = None
        self.register_load_state_dict_pre_hook(_single_layer_checkpoint)

    # --- drop-in API ----------------------------------------------------------------------
    def forward(self, input, hx=None):
        """``nn.LSTM``'s call: ``(output, (h_n, c_n))`` for :class:`PFLSTM`, ``(output, h_n)`` for :class:`PFGRU`.

        Args:
            input: ``[T, B, D]`` (``[B, T, D]`` if ``batch_first``), unbatched ``[T, D]``, or a
                ``PackedSequence``.
            hx: ``None`` (zero particles, uniform weights); ``nn.LSTM``'s ``(h_0, c_0)`` /
                ``nn.GRU``'s ``h_0``, each ``[num_layers, B, H]`` (``[num_layers, H]`` unbatched),
                copied to all ``K`` particles of each layer with uniform weights; or a
                :class:`ParticleState` (such as :attr:`last_particle_state`) to continue the filters.

        Returns:
            ``output``: the top layer's weighted mean particle at each step, shaped as ``input``
            with ``H`` features (a ``PackedSequence`` for packed input); ``h_n`` (and ``c_n``)
            ``[num_layers, B, H]`` (``[num_layers, H]`` unbatched): each layer's weighted mean
            final particle, taken at each sequence's last valid step. The full particle state is
            left, detached, in :attr:`last_particle_state` (:meth:`filter` returns it with its
            gradient path).
        """
        x, mask, unbatched = self._batch_first_input(input)
        initial = self._initial_state(hx, x, unbatched)
        mean, state, _ = self._filter_layers(x, initial, mask, None, None, keep=None)
        self.last_particle_state = ParticleState(*(v.detach() if isinstance(v, torch.Tensor) else v for v in state))
        h_n = weighted_sum(state.h, state.log_weights.exp())  # [L, B, H]
        final = h_n if state.c is None else (h_n, weighted_sum(state.c, state.log_weights.exp()))
        if isinstance(input, PackedSequence):
            return packed_like(input, mean, mask), final
        if unbatched:
            return mean.squeeze(0), apply_to_final(final, lambda v: v.squeeze(1))
        return (mean if self.batch_first else mean.transpose(0, 1)), final

    def flatten_parameters(self) -> None:
        """``nn.LSTM``'s cuDNN call, for code that makes it: the particle layers have nothing to flatten."""

    def filter(
        self,
        input: torch.Tensor,
        hx=None,
        *,
        mask: torch.Tensor | None = None,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        readout=None,
    ) -> ParticleBelief:
        """Run the layers' particle filters over ``input`` (``[B, T, D]`` if batch_first, else ``[T, B, D]``).

        Args:
            hx: state to continue from, as :meth:`forward` takes it (default: zero particles, uniform weights).
            mask: ``[B, T]`` bool, valid steps first; the state is carried over padding.
            noise: ``[num_layers, T, K, B, H]`` (``[T, K, B, H]`` for one layer) standard normal
                draws of the stochastic updates (default: fresh, or none in evaluation with
                ``eval_randomness="off"``).
            generator: source of the noise and resampling draws (in evaluation with
                ``eval_randomness="fixed"``, default: one seeded with ``eval_seed``).
            readout: a map of the top layer's particles ``[K, B, H] -> [K, B, O]`` (a predictor's head), applied
                at every step: the belief then keeps its values (``outputs``) instead of the particles, ``O / H``
                of the memory, and their gradients flow step by step.

        Returns:
            the top layer's :class:`ParticleBelief`, with the final :class:`ParticleState` of all layers.
        """
        x = self._check_tensor_input(input)
        initial, noise = self._initial_state(hx, x, False), self._check_noise(noise, x)
        key = "h" if readout is None else "out"
        mean, state, result = self._filter_layers(x, initial, mask, noise, generator, keep=key, readout=readout)
        kept = result.history[key]
        return ParticleBelief(
            mean=mean,
            particles=kept if readout is None else None,
            log_weights=result.history_log_weights,
            state=state,
            outputs=None if readout is None else kept,
        )

    def _filter_layers(self, x, initial: ParticleState, mask, noise, generator, *, keep: str | None, readout=None):
        """The layers' filters over ``x [B, T, D]``: top mean ``[B, T, H]``, final state, top :class:`FilterResult`
        (recording the top layer's state ``keep`` at every step, unless ``None``; ``readout``: the top layer's)."""
        generator, draws = self._evaluation_draws(generator, x)
        layer_input, results = x, []
        for index, cell in enumerate(self.layers):
            if index > 0:  # nn.LSTM's dropout: on each layer's output but the last, in training only
                layer_input = F.dropout(layer_input, self.dropout, self.training)
            start = {key: getattr(initial, key)[index] for key in cell.state_keys}
            last = index == self.num_layers - 1
            run = _ParticleRun(
                cell,
                start,
                None if noise is None else noise[index],
                generator,
                initial.steps,
                draw_noise=draws,
                readout=readout if last else None,
            )
            resampling = self.resampling if draws else "none"
            pf = ParticleFilter(
                self.num_particles,
                resampling=resampling,
                ess_threshold=1.0,
                gradient="soft" if resampling == "soft" else "reparam",
                soft_alpha=self.alpha,
                generator=generator,
            )
            result = pf.run(
                run,
                layer_input,
                mask,
                keep_ancestry=(keep,) if keep and last else False,
                keep_means=("h",),
                initial_log_weights=initial.log_weights[index],
            )
            layer_input = result.means["h"]
            results.append(result)
        stacked = {key: torch.stack([r.state[key] for r in results]) for key in self.layers[0].state_keys}
        state = ParticleState(
            stacked["h"], stacked.get("c"), torch.stack([r.log_weights for r in results]), initial.steps + x.shape[1]
        )
        return layer_input, state, results[-1]

    def _evaluation_draws(self, generator, like):
        """``(generator, draws)`` for a call: in ``eval()``, ``eval_randomness`` fixes or turns off the draws."""
        if self.training or self.eval_randomness == "sampled":
            return generator, True
        if self.eval_randomness == "off":
            return generator, False
        if generator is None:
            generator = torch.Generator(device=like.device).manual_seed(self.eval_seed)
        return generator, True

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
            f"batch_first={self.batch_first}, dropout={self.dropout}, num_particles={self.num_particles}, "
            f"resampling={self.resampling!r}, alpha={self.alpha}, stochastic={self.stochastic}, "
            f"activation={self.activation!r}, eval_randomness={self.eval_randomness!r}"
        )


def _single_layer_checkpoint(module, state_dict, prefix, *args) -> None:
    """Load checkpoints written before the layers were stacked: ``{prefix}input_projection...`` -> ``layers.0``."""
    for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + "layers.")]:
        state_dict[f"{prefix}layers.0.{key[len(prefix) :]}"] = state_dict.pop(key)


class PFLSTM(_PFRNNBase):
    """PF-LSTM: ``K`` LSTM particles per layer, stochastic cell updates, learned weights, soft resampling.

    A drop-in for ``nn.LSTM``: its positional arguments and defaults; the particle options are
    keyword-only. See :meth:`forward` for the call.

    Args:
        input_size: ``D``; hidden_size: ``H``.
        num_layers: stacked PF layers, each a particle filter of its own over the weighted mean
            output of the layer below.
        bias: biases in the gate and noise-scale projections.
        batch_first: inputs and outputs ``[B, T, .]`` instead of ``[T, B, .]`` (default ``False``,
            as ``nn.LSTM``).
        dropout: dropout on each layer's output but the last's, in training.
        bidirectional, proj_size: only the defaults (``False``, ``0``); others raise ``ValueError``.
        device, dtype: of the parameters.
        num_particles: ``K`` (keyword-only; each layer updates ``B K`` cells per step).
        resampling: ``"soft"`` (eq. 3, at every step) or ``"none"``.
        alpha: soft-resampling mixture weight (0.5 in the paper; 1 = plain multinomial).
        stochastic: add the learned Gaussian noise to the candidate (eqs. 9-11).
        activation: ``"relu_bn"`` (eq. 12, the paper's) or ``"tanh"`` (eq. 6, ``nn.LSTM``'s).
        norm_steps: time steps with batch-norm statistics of their own (:class:`StepBatchNorm`).
        eval_randomness: what ``eval()`` does with the noise and resampling draws: ``"fixed"``
            (default: drawn from a generator seeded with ``eval_seed`` at every call, so a batch
            always gives the same output), ``"off"`` (no noise, no resampling: the weights are
            carried by importance weighting alone) or ``"sampled"`` (fresh draws, as in training).
        eval_seed: the seed of ``"fixed"``.
        compiled: run each step's elementwise update (noise, gates, memory) as kernels fused by
            ``torch.compile``: the same equations, equal to about 1e-6; the first call compiles (tens of seconds;
            on the CPU it needs a C++ compiler), so it pays on long runs only.

    Attributes:
        layers: one particle cell per layer (``input_projection``, ``hidden_projection``,
            ``obs_net`` = ``f_obs``, ``norm``).
        last_particle_state: the :class:`ParticleState` the last :meth:`forward` ended in, detached.
    """

    description = "PF-LSTM layer (Ma et al. 2020): K LSTM particles, stochastic cell updates, soft resampling"
    _cell = _LSTMParticleCell
    _state_name = "(h_0, c_0)"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
        **particle_options,
    ):
        if proj_size != 0:
            raise ValueError(
                f"PFLSTM has no projections: proj_size must be 0, got {proj_size!r} (put a linear "
                "layer on its output instead)"
            )
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
            **particle_options,
        )


class PFGRU(_PFRNNBase):
    """PF-GRU (the paper's appendix): ``K`` GRU particles per layer, stochastic updates, soft resampling.

    ``n = W_n [r * h, x] + b_n + eps``, ``h' = (1 - z) * act(n) + z * h``; the noise scale
    reads ``[h_{t-1}, x_t]``. The reset gate acts before the recurrent product (Cho et al.
    2014), not after it as in ``nn.GRU``. A drop-in for ``nn.GRU``: arguments and attributes as
    :class:`PFLSTM` (without ``proj_size``); the call returns ``(output, h_n)``.
    """

    description = "PF-GRU layer (Ma et al. 2020): K GRU particles, stochastic updates, soft resampling"
    _cell = _GRUParticleCell
    _state_name = "h_0"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        **particle_options,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
            **particle_options,
        )


PF_CELLS = {"pf-lstm": PFLSTM, "pf-gru": PFGRU}

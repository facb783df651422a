"""CUDA graphs: record a computation over fixed-shape tensors once, replay it with one launch.

On a GPU one particle-filter step launches a few dozen small kernels. Up to ``K = 10^5``
particles each kernel is short, so an eager step costs its launches (about 0.6 ms on an H100)
whatever ``K``. Recorded as a CUDA graph, a whole filter run, or a whole training step
(forward, backward and optimizer update), replays its kernels without the host in the loop.

:class:`GraphedCall` wraps any ``fn(*tensors)``; :meth:`GraphedCall.filter` records a
:meth:`~ppl_models.inference.particle_filter.ParticleFilter.run` and :meth:`GraphedCall.training_step`
one optimisation step. On a CPU (or with ``enabled=False``) the wrapper calls ``fn``
directly: the same results, no graph. Rules of a recorded call:

* the inputs keep the example's shapes, dtypes and device; each call copies them into the
  recorded buffers;
* the outputs are the recorded buffers, overwritten by the next call (clone what you keep);
* random draws come from the default CUDA generator or from the ``generators`` registered at
  capture; each replay draws afresh;
* checks that read tensor values are off inside the capture
  (:func:`ppl_models.inference.validation.value_checks`, and Pyro's and torch's distribution checks);
  ``check`` runs on every call's inputs instead, outside the graph;
* the warm-up runs (``warmup``) execute ``fn`` for real: for a training step they are
  optimisation steps on the example batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pyro
import torch

from ..validation import check_positive_int, check_sequences, value_checks

__all__ = ["GraphedCall"]


class GraphedCall:
    """``fn(*inputs)`` recorded as a CUDA graph on the example inputs' device, or run eagerly off CUDA.

    Args:
        fn: a function of tensors returning a tensor or a (nested) tuple, list, dict or
            dataclass of tensors; it must not read tensor values on the host (no ``.item()``,
            no ``if tensor``) and must not change the shapes it allocates between calls.
        example_inputs: tensors of the shapes every call will use.
        warmup: eager runs on a side stream before the capture (CUDA only).
        generators: CUDA ``torch.Generator`` objects that ``fn`` draws from besides the default.
        check: called with each call's inputs before the replay (e.g. a NaN check).
        enabled: record a graph (default: when the inputs are on a CUDA device).
    """

    def __init__(
        self,
        fn: Callable,
        example_inputs: Sequence[torch.Tensor],
        *,
        warmup: int = 2,
        generators: Sequence[torch.Generator] = (),
        check: Callable | None = None,
        enabled: bool | None = None,
    ):
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        example_inputs = tuple(example_inputs)
        if not example_inputs or not all(isinstance(t, torch.Tensor) for t in example_inputs):
            raise TypeError("example_inputs must be a non-empty sequence of torch.Tensor")
        devices = {t.device for t in example_inputs}
        if len(devices) != 1:
            raise ValueError(f"example_inputs must share one device, got {sorted(map(str, devices))}")
        self.device = devices.pop()
        self.fn, self.check = fn, check
        self.signature = tuple((tuple(t.shape), t.dtype) for t in example_inputs)
        self.enabled = self.device.type == "cuda" if enabled is None else bool(enabled)
        if self.enabled and self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need CUDA inputs, got device {self.device}")
        self.graph = None
        if self.enabled:
            self._capture(example_inputs, check_positive_int(warmup, name="warmup"), tuple(generators))

    def _capture(self, example_inputs, warmup: int, generators) -> None:
        if self.check is not None:
            self.check(*example_inputs)
        self.static_inputs = tuple(t.detach().clone() for t in example_inputs)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up: lazy initialisation, allocator, autograd buffers
            for _ in range(warmup):
                self.fn(*self.static_inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        for generator in generators:
            self.graph.register_generator_state(generator)
        # no device reads inside: our value checks and Pyro's / torch's distribution checks are off
        with value_checks(False), pyro.validation_enabled(False), torch.cuda.graph(self.graph):
            self.static_outputs = self.fn(*self.static_inputs)

    def __call__(self, *inputs: torch.Tensor):
        """``fn(*inputs)``: the replayed graph's outputs (overwritten by the next call), or ``fn``'s."""
        signature = tuple((tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t) for t in inputs)
        if signature != self.signature:
            raise ValueError(f"inputs must match the recorded (shape, dtype) {self.signature}, got {signature}")
        if not self.enabled:
            return self.fn(*inputs)
        if self.check is not None:
            self.check(*inputs)
        for static, value in zip(self.static_inputs, inputs):
            static.copy_(value)
        self.graph.replay()
        return self.static_outputs

    @classmethod
    def filter(
        cls,
        particle_filter,
        model,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        enabled: bool | None = None,
        **run_options,
    ) -> GraphedCall:
        """A recorded ``particle_filter.run(model, x, mask, **run_options)`` under ``torch.no_grad``.

        Call the result with new ``x`` (and ``mask``, if one was given) of the same shapes; it
        returns a :class:`~ppl_models.inference.particle_filter.FilterResult`. The filter resamples
        every sequence whose ESS fell below the threshold, as the eager filter does on a GPU.
        """
        generators = [particle_filter.generator] if particle_filter.generator is not None else []

        def run(*inputs):
            with torch.no_grad():
                return particle_filter.run(model, inputs[0], inputs[1] if len(inputs) > 1 else None, **run_options)

        def check(*inputs):
            check_sequences(inputs[0], inputs[1] if len(inputs) > 1 else None)

        inputs = (x,) if mask is None else (x, mask)
        return cls(run, inputs, generators=generators, check=check, enabled=enabled)

    @classmethod
    def training_step(
        cls,
        loss_fn: Callable,
        optimizer: torch.optim.Optimizer,
        example_inputs,
        *,
        clip_norm: float | None = None,
        parameters=None,
        enabled: bool | None = None,
        generators: Sequence[torch.Generator] = (),
        check: Callable | None = None,
        warmup: int = 3,
    ) -> GraphedCall:
        """One recorded step ``zero_grad; loss_fn(*inputs).backward(); clip; optimizer.step()``.

        ``loss_fn`` returns a scalar loss tensor, or an object with a ``loss`` attribute (an
        :class:`~ppl_models.inference.objectives.ObjectiveOutput`); the call returns it detached. For a graph the
        optimizer must be built with ``capturable=True`` (Adam, AdamW, RMSprop, SGD...), and
        ``parameters`` (default: the optimizer's) are the ones ``clip_norm`` clips. The warm-up
        steps train on ``example_inputs``.
        """
        if parameters is None:
            parameters = [p for group in optimizer.param_groups for p in group["params"]]
        parameters = list(parameters)
        example_inputs = tuple(example_inputs)
        first = example_inputs[0] if example_inputs else None
        on_cuda = isinstance(first, torch.Tensor) and first.device.type == "cuda" if enabled is None else enabled
        if on_cuda:
            for group in optimizer.param_groups:
                if "capturable" in group and not group["capturable"]:
                    raise ValueError("a recorded training step needs an optimizer built with capturable=True")

        def step(*inputs):
            optimizer.zero_grad(set_to_none=False)  # the gradients keep their recorded buffers
            out = loss_fn(*inputs)
            loss = out if isinstance(out, torch.Tensor) else out.loss
            loss.backward()
            if clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(parameters, clip_norm, foreach=True)
            optimizer.step()
            if isinstance(out, torch.Tensor):
                return out.detach()
            return dataclasses.replace(out, **{f.name: getattr(out, f.name).detach() for f in dataclasses.fields(out)})

        return cls(step, example_inputs, warmup=warmup, generators=generators, check=check, enabled=enabled)

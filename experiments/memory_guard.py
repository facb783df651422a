"""Memory checks before large allocations: a setting that cannot fit is refused by name before it allocates.

On Linux an allocation larger than the free memory often succeeds (the kernel overcommits)
and the process is killed later, while the pages are filled, with no message. So the
evaluation settings whose tensors grow with a sample count are estimated first
(:func:`evaluation_memory`) and compared with :func:`available_memory`. The estimate and the
check are the engine's (:func:`ppl_models.inference.evaluation.evaluation_memory`,
:func:`ppl_models.inference.validation.check_memory`), which ``ppl_models.inference.evaluate`` runs as well.
"""

from __future__ import annotations

from ppl_models.inference.validation import available_memory, check_memory

__all__ = ["available_memory", "evaluation_memory", "check_memory"]

FLOAT32 = 4


def evaluation_memory(model, data, options) -> dict[str, tuple[int, int, str]]:
    """Lower bounds of the memory the sample counts of ``options`` (an
    :class:`~ppl_models.inference.evaluation.EvaluationOptions`) make an evaluation of ``model`` on ``data``'s test
    split hold: :func:`ppl_models.inference.evaluation.evaluation_memory`, each setting named
    ``evaluate.<setting>``."""
    from ppl_models.inference.evaluation import evaluation_memory as needs_of

    x, mask = data.test
    needs = needs_of(model, x, options, binary=data.binary, mask=mask, scored=data.scored_mask("test"))
    return {f"evaluate.{name}": need for name, need in needs.items()}

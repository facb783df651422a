"""What the shared objectives read of a model: :class:`DeclaredModel`, the base of every collection model.

:class:`~ppl_models.inference.protocol.SequenceModel` subclasses it. The objectives
(:mod:`ppl_models.inference.objectives`) recognise a collection model by this base rather than by the
protocol's class, so that the protocol, whose :meth:`~ppl_models.inference.protocol.SequenceModel.score`
runs the objectives, imports them and not the reverse.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ClassVar

from torch import nn

__all__ = ["DeclaredModel"]


class DeclaredModel(nn.Module):
    """A model that declares what it can do (:class:`~ppl_models.inference.protocol.SequenceModel` declares it in full).

    The objectives enter :meth:`sharing_context` around each evaluation, and the ELBO and IWAE
    ask a ``conditional`` model to :meth:`require` ``"latent"`` before they run ``model(x, mask)``.
    """

    #: inputs ``x`` predict targets ``y`` (``predictive`` draws targets), instead of a density of ``x``
    conditional: ClassVar[bool] = False

    def require(self, capability: str) -> None:
        """Raise :class:`~ppl_models.inference.protocol.Unsupported` with the model's reason unless it declares
        ``capability``."""
        raise NotImplementedError(f"{type(self).__name__} defines no require")

    def sharing_context(self):
        """Context entered by the shared objectives around one evaluation (see ``MarkovStateSpace``)."""
        return nullcontext(self)

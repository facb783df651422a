"""The claims of the PSRNN paper's Figure 3 on character-level Penn Treebank (:data:`PSRNN_PTB_CLAIMS`, spliced into
:data:`~ppl_models.experiments.claims.table.CLAIMS`)."""

from __future__ import annotations

from .claim import Claim

__all__ = ["PSRNN_PTB_CLAIMS"]

#: claim name -> claim, in the order of the rendered page
PSRNN_PTB_CLAIMS: dict[str, Claim] = {}

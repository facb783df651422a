"""The claims of the SRNN paper's Table 2 on the authors' own preprocessed music files
(:data:`SRNN_AUTHORS_CLAIMS`, spliced into :data:`~ppl_models.experiments.claims.table.CLAIMS`)."""

from __future__ import annotations

from .claim import Claim

__all__ = ["SRNN_AUTHORS_CLAIMS"]

#: claim name -> claim, in the order of the rendered page
SRNN_AUTHORS_CLAIMS: dict[str, Claim] = {}

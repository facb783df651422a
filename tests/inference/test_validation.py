"""The checks of the API's inputs (``ppl_models.inference.validation``): sequences are copied only where their padding
holds something, the caller's tensor left untouched."""

import math

import torch
from factories import PADDING_FILLS

from ppl_models.inference.validation import check_sequences


def test_check_sequences_copies_x_only_where_its_padding_holds_something():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    x = torch.ones(2, 3, 1).masked_fill(~mask.unsqueeze(-1), 0.0)
    assert check_sequences(x, mask)[0] is x  # programs given the returned tensor recognise it
    for fill in PADDING_FILLS:
        padded = x.masked_fill(~mask.unsqueeze(-1), fill)
        checked, _ = check_sequences(padded, mask)
        assert torch.equal(checked, x)
        untouched = padded[~mask].isnan() if math.isnan(fill) else padded[~mask] == fill
        assert untouched.all() and torch.equal(padded[mask], x[mask])  # the caller's tensor is untouched

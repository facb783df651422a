"""The PSRNN paper's data protocol options, against the raw files read independently."""

import numpy as np
import pytest
import scipy.io
import torch

from ppl_models.experiments.data import verified_path
from ppl_models.experiments.tasks.swimmer import swimmer


def test_swimmer_paper_split_is_20_5_of_one_file_standardised_by_the_20():
    raw = scipy.io.loadmat(verified_path("swimmer/swimmers_trajs_1.0.mat"))["trajs"][..., [0, 1, 8, 9, 10]]
    mean, std = raw[:20].mean((0, 1)), raw[:20].reshape(-1, 5).std(0, ddof=1)
    data = swimmer(paper_split=True)
    np.testing.assert_allclose(data.train[0].numpy(), (raw[:20] - mean) / std, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(data.test[0].numpy(), (raw[20:] - mean) / std, rtol=1e-4, atol=1e-4)
    assert data.valid[0].shape == (25, 100, 5) and data.test[1].all()
    with pytest.raises(TypeError, match="paper_split"):
        swimmer(paper_split="yes")
    assert torch.equal(swimmer().test[0], swimmer(paper_split=False).test[0])

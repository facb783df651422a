"""A user's file as an experiment's data (``ppl_models.experiments.tasks.own_file.file_data``): its settings passed
through to the reader, and a trained model's features kept when it reads a new file."""

import numpy as np
import pytest
import torch
from factories import site_walks, write_file

from ppl_models.experiments.tasks.own_file import file_data


def test_the_own_file_data_setting_passes_the_files_order_through(tmp_path):
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliett",
        "kilo",
        "lima",
    ]
    text = "t,v\n" + "".join(f"{word},{v}\n" for v, word in enumerate(words))
    path = write_file(tmp_path, "days.csv", text)
    with pytest.raises(ValueError, match="days.csv: column 't', row 2"):
        file_data(str(path), time="t", split_by="time", fractions=[0.5, 0.25, 0.25])
    data = file_data(str(path), time="t", split_by="time", fractions=[0.5, 0.25, 0.25], time_order="file")
    standardizer = data.standardizer
    train = standardizer.inverse(data.train[0], dtype=torch.float64)[0, :, 0]
    assert torch.allclose(train, torch.arange(6, dtype=torch.float64), atol=1e-5)


def test_a_trained_models_features_are_kept_when_it_reads_a_new_file(tmp_path):
    path = site_walks(tmp_path / "d.csv", wind=lambda f: np.random.default_rng(1).gamma(2.0, size=len(f)))
    trained = file_data(str(path), series="site", time="t", split_by="time")
    recorded = trained.split_record["standardizer"]
    flat = site_walks(tmp_path / "flat.csv", wind=lambda f: 2.0)  # constant in the new file only
    data = file_data(str(flat), series="site", time="t", split_by="time", standardizer=recorded)
    assert data.split_record["standardizer"]["features"] == ["temp", "wind"]

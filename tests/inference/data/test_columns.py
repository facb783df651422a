"""The columns of a user's table (``ppl_models.inference.data.columns``): quoted numbers with thousands separators
read as numbers, a text column with digits left out and named, a name given twice and an empty series id refused."""

import numpy as np
import pandas as pd
import pytest
from factories import site_walks, warned, write_file

from ppl_models.experiments.cli import main
from ppl_models.inference.data.datasets import SequenceDataset


def test_a_quoted_number_with_thousands_separators_is_read_as_a_number(tmp_path):
    text = "id,t,price,n\n" + "".join(f'a,{t},"1,23{t},567.5",{t * t}\n' for t in range(4))
    dataset = SequenceDataset.from_file(write_file(tmp_path, "prices.csv", text), series="id", time="t")
    assert dataset.features == ["price", "n"]
    assert dataset.sequences[0][:, 0].tolist() == [1230567.5, 1231567.5, 1232567.5, 1233567.5]
    bad = 'id,t,price\na,0,"1,234.5"\na,1,"1,2,3"\na,2,7\n'
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(write_file(tmp_path, "bad.csv", bad), series="id", time="t", features=["price"])
    assert all(word in str(error.value) for word in ("bad.csv", "'price'", "row 3", "'1,2,3'")), str(error.value)


def test_a_text_column_with_digits_left_out_of_the_features_is_named(tmp_path):
    text = "id,t,v,weight,colour\n" + "".join(f'a,{t},{t},"{t},5 kg",red\n' for t in range(4))
    dataset, messages = warned(
        lambda: SequenceDataset.from_file(write_file(tmp_path, "kg.csv", text), series="id", time="t")
    )
    assert dataset.features == ["v"]
    assert len(messages) == 1 and "kg.csv" in messages[0] and "'weight'" in messages[0]
    assert "'colour'" not in messages[0]  # words (labels, categories) are left out without a word


def test_a_column_name_given_twice_is_refused(tmp_path):
    path = write_file(tmp_path, "twice.csv", "id,t,v,w,v\na,0,1,2,3\na,1,4,5,6\n")
    with pytest.raises(ValueError, match=r"twice.csv: column name 'v' appears more than once"):
        SequenceDataset.from_file(path, series="id", time="t")
    frame = pd.DataFrame([[0, 1.0, 2.0], [1, 3.0, 4.0]], columns=["t", "v", "v"])
    with pytest.raises(ValueError, match=r"frame: column name 'v' appears more than once"):
        SequenceDataset.from_dataframe(frame, time="t", source="frame")
    renamed = write_file(tmp_path, "dotted.csv", "t,v,v.1\n0,1,2\n1,3,4\n2,4,9\n")  # a name that only looks renamed
    assert SequenceDataset.from_file(renamed, time="t").features == ["v", "v.1"]


def test_an_empty_series_id_is_refused_naming_the_row(tmp_path):
    path = write_file(tmp_path, "ids.csv", "id,t,v\na,0,1\na,1,2\n,2,3\nb,0,1\nb,1,2\n")
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(path, series="id", time="t")
    assert all(word in str(error.value) for word in ("ids.csv", "'id'", "row 4", "series")), str(error.value)


def test_an_empty_column_is_left_out_by_default_and_named_when_chosen(tmp_path, capsys):
    path = site_walks(tmp_path / "e.csv", blank=lambda f: np.nan)
    dataset, messages = warned(lambda: SequenceDataset.from_file(path, series="site", time="t"))
    assert dataset.features == ["temp"] and any("no value in any row" in m and "'blank'" in m for m in messages)
    assert (
        main(
            [
                "train",
                "gru",
                "--data",
                str(path),
                "--series",
                "site",
                "--time",
                "t",
                "--features",
                "temp,blank",
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "'blank' has no value in any row" in error[0] and "--features" in error[0]


def test_series_ids_that_look_like_numbers_stay_as_written(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(
        "id,t,v\n"
        + "".join(f"{i},{t},{(t * t + k) % 7}\n" for k, i in enumerate(["007", "7", "7.0"]) for t in range(4))
    )
    dataset = SequenceDataset.from_file(path, series="id", time="t")
    assert dataset.ids == ["007", "7", "7.0"] and dataset.lengths == [4, 4, 4]

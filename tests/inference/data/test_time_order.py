"""The time order of a table's rows (``ppl_models.inference.data.time_order``): numbered labels by their number, dates
in several forms as dates, a cell that does not read refused unless the file's order is asked for, and many series
grouped in order of first appearance."""

import numpy as np
import pandas as pd
import pytest
from factories import site_walks, warned, write_file

from ppl_models.inference.data.datasets import SequenceDataset


def test_numbered_labels_are_ordered_by_their_number(tmp_path):
    rows = [(f"t{t}", float(t)) for t in range(12)]
    shuffled = [rows[i] for i in np.random.default_rng(3).permutation(12)]
    path = write_file(tmp_path, "labels.csv", "id,t,v\n" + "".join(f"a,{t},{v}\n" for t, v in shuffled))
    dataset = SequenceDataset.from_file(path, series="id", time="t")
    assert dataset.sequences[0][:, 0].tolist() == list(range(12))


def test_dates_in_several_forms_are_ordered_as_dates(tmp_path):
    text = (
        "id,t,v\na,2024-01-02,3\nb,12/31/2023,1\na,12/31/2023 23:00,2\nb,2024-01-01,2\na,01/10/2024,4\nb,2023-12-30,0\n"
    )
    dataset = SequenceDataset.from_file(write_file(tmp_path, "dates.csv", text), series="id", time="t")
    assert dataset.ids == ["a", "b"]
    assert [s[:, 0].tolist() for s in dataset.sequences] == [[2.0, 3.0, 4.0], [0.0, 1.0, 2.0]]


TIMES = [  # the time cells of series a (3) and b (2), the cell refused and its line
    (["01/29/2024", "02/30/2024", "2024-03-01"], ["2024-01-01", "2024-01-02"], "'02/30/2024'", 3),
    (["morning", "noon", "evening"], ["night", "dawn"], "'morning'", 2),
    (["1", "2", "three"], ["5", "6"], "'three'", 4),
    (["t1", "t2", "t3"], ["t1", "u2"], "'u2'", 6),
]


@pytest.mark.parametrize(("cells", "others", "bad", "row"), TIMES, ids=["date", "words", "number", "label"])
def test_a_time_cell_that_does_not_read_is_refused_unless_the_files_order_is_asked_for(
    tmp_path, cells, others, bad, row
):
    text = "id,t,v\n" + "".join(f"a,{c},{i}\n" for i, c in enumerate(cells)) + f"b,{others[0]},7\nb,{others[1]},8\n"
    path = write_file(tmp_path, "times.csv", text)
    with pytest.raises(ValueError) as error:
        SequenceDataset.from_file(path, series="id", time="t")
    message = str(error.value)
    assert all(word in message for word in ("times.csv", "'t'", f"row {row}", bad, "time_order='file'")), message
    dataset = SequenceDataset.from_file(path, series="id", time="t", time_order="file")
    assert [s[:, 0].tolist() for s in dataset.sequences] == [[0.0, 1.0, 2.0], [7.0, 8.0]]
    with pytest.raises(ValueError, match="time_order: expected one of"):
        SequenceDataset.from_file(path, series="id", time="t", time_order="sorted")


def test_many_series_are_grouped_in_order_of_first_appearance_and_sorted_in_time():
    rng = np.random.default_rng(4)
    ids, steps = rng.permutation(np.repeat(np.arange(400), 7)), rng.permutation(2800)
    frame = pd.DataFrame({"id": [f"s{i}" for i in ids], "t": steps, "v": steps * 2.0})
    dataset = SequenceDataset.from_dataframe(frame, series="id", time="t")
    by_series = {}
    for i, t in zip(ids, steps):  # dicts keep the order of first appearance
        by_series.setdefault(f"s{i}", []).append(2.0 * t)
    assert dataset.ids == list(by_series)
    assert [s[:, 0].tolist() for s in dataset.sequences] == [sorted(v) for v in by_series.values()]


def test_missing_steps_in_time_are_named_and_a_calendar_that_skips_often_is_not(tmp_path):
    frame = pd.read_csv(site_walks(tmp_path / "g.csv"))
    frame[(frame.t < 10) | (frame.t >= 20)].to_csv(tmp_path / "gaps.csv", index=False)
    _, messages = warned(lambda: SequenceDataset.from_file(tmp_path / "gaps.csv", series="site", time="t"))
    assert len(messages) == 1 and "skips steps in 8 place(s)" in messages[0] and "series s0: 9 then 20" in messages[0]
    trading = frame[frame.t % 7 < 5]  # weekends skipped every week: the data's own calendar
    trading.to_csv(tmp_path / "days.csv", index=False)
    _, messages = warned(lambda: SequenceDataset.from_file(tmp_path / "days.csv", series="site", time="t"))
    assert not any("skips steps" in m for m in messages)

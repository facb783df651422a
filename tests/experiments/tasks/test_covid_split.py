"""The COVID-19 task's rows and splits (experiments/tasks/covid.py) on a tiny synthetic JHU-format file."""

import datetime
import hashlib

import pytest

from ppl_models.experiments.claims import CLAIMS
from ppl_models.experiments.tasks.covid import COVID_FILE, covid_deaths, split_sizes

#: last-day cumulative deaths of the synthetic rows: 11 have >= 100 (100 itself kept), 3 fewer (99 dropped)
TOTALS = [100, 99, 250, 0, 130, 400, 101, 5, 180, 220, 310, 150, 170, 120]


def _data_dir(tmp_path, totals=TOTALS):
    """A data folder holding a JHU-format deaths file from 2020-03-22 to 2020-05-22 and its SHA256SUMS."""
    days = [datetime.date(2020, 3, 22) + datetime.timedelta(days=i) for i in range(62)]
    header = ["UID", "Combined_Key", "Population"] + [f"{d.month}/{d.day}/{d.year % 100}" for d in days]
    lines = [",".join(header)]
    for row, total in enumerate(totals):
        cumulative = [total * i // (len(days) - 1) for i in range(len(days))]  # rises to `total` on the last day
        lines.append(",".join([str(row), f"County {row}", "1000"] + [str(c) for c in cumulative]))
    path = tmp_path / COVID_FILE
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  ./{COVID_FILE}\n")
    return tmp_path


@pytest.mark.parametrize("split, sizes", [("80/20", (8, 1, 2)), ("80/10/10", (9, 1, 1))])
def test_split_sizes_and_rows_kept_on_a_synthetic_file(tmp_path, split, sizes):
    data = covid_deaths(_data_dir(tmp_path), split=split)
    kept = {f"County {row}" for row, total in enumerate(TOTALS) if total >= 100}
    assert len(kept) == 11
    # by hand: 80/20 holds out round(0.2 * 11) = 2 for test, validates on round(0.1 * 9) = 1 of the other 9;
    # 80/10/10 cuts at round(8.8) = 9 and round(9.9) = 10
    assert tuple(len(data.names[s]) for s in ("train", "valid", "test")) == sizes
    assert (data.train[0].shape[0], data.valid[0].shape[0], data.test[0].shape[0]) == sizes
    names = [name for s in ("train", "valid", "test") for name in data.names[s]]
    assert sorted(names) == sorted(kept)  # disjoint splits that cover exactly the kept rows
    assert f"({split} split, seed 0)" in data.description


def test_the_earlier_split_is_the_80_20_splits_shuffle_cut_differently(tmp_path):
    folder = _data_dir(tmp_path)
    paper, earlier = covid_deaths(folder, split="80/20"), covid_deaths(folder, split="80/10/10")
    order = lambda d: d.names["train"] + d.names["valid"] + d.names["test"]  # noqa: E731
    assert order(paper) == order(earlier)


def test_split_sizes_of_the_snapshots_125_rows():
    # by hand: 25 = 20 % of 125 for test, 10 = 10 % of the other 100 for validation; 100 / 112 for 80/10/10
    assert split_sizes(125) == (90, 10, 25)
    assert split_sizes(125, "80/10/10") == (100, 12, 13)


def test_bad_split_and_too_few_rows_are_refused(tmp_path):
    folder = _data_dir(tmp_path)
    with pytest.raises(ValueError, match="split must be one of"):
        covid_deaths(folder, split="70/30")
    # before: 3 rows passed a check of "one per split" but 80/10/10 cut them 2 / 1 / 0, an empty test split
    with pytest.raises(ValueError, match="keeps 3 rows: too few for a row in each split of 80/10/10"):
        covid_deaths(folder, min_deaths=250, split="80/10/10")
    with pytest.raises(ValueError, match="keeps 2 rows: too few for a row in each split of 80/20"):
        covid_deaths(folder, min_deaths=310)


def test_the_claims_metric_names_the_test_cities_of_the_shared_data():
    try:
        data = covid_deaths()
    except ValueError as error:  # no shared data folder on this machine
        pytest.skip(str(error))
    assert f"the {len(data.names['test'])} test cities of the paper's 80/20 split" in CLAIMS["smct-covid"].metric
    assert f"of the {sum(len(n) for n in data.names.values())} counties" in CLAIMS["smct-covid"].metric

"""Daily COVID-19 deaths per US county: the forecasting task of the SMC Transformer paper (section 4.2).

Source: the JHU CSSE file ``covid/time_series_covid19_deaths_US.csv`` of the shared data
folder (cumulative deaths per row from 2020-01-22 to 2020-05-22), checked against
``SHA256SUMS``. The paper's "3261 US cities" are the file's 3261 rows (counties, plus a few
territories and "Unassigned" / "Out of" rows of each state). Preprocessing, as in the paper
where it says and documented here where it does not:

1. keep the rows with at least ``min_deaths`` (100) deaths in total, the total being the
   cumulative count on the file's last day (2020-05-22): 125 rows with this snapshot (the
   paper's 886 came from a later, longer one);
2. daily deaths are the day-to-day differences of the cumulative counts, negative
   differences (downward corrections) clipped to 0;
3. the window is the file's last 60 days, 2020-03-24 to 2020-05-22: 40 observed days
   (2020-03-24 to 2020-05-02) and 20 forecast days (2020-05-03 to 2020-05-22);
4. each series is divided by its largest daily count over the 40 observed days (at least
   1), so the observed part lies in ``[0, 1]``, counties of very different sizes share one
   scale, and nothing of the forecast days enters the scale; :meth:`CovidData.to_deaths`
   multiplies back;
5. the rows are shuffled by ``seed`` and split by ``split``: ``"80/20"`` (the default, the paper's protocol)
   holds out 20 % of the rows for test and carves the validation split out of the other 80 %, 10 % of them
   (the paper validates and tests on its 20 %: we keep the test counties out of model selection), so 72 / 8 /
   20 % train / validation / test: 90 / 10 / 25 rows with this snapshot; ``"80/10/10"`` (the earlier
   protocol, kept for the results files made with it) splits 80 / 10 / 10 (100 / 12 / 13 rows).

Not matched: the paper trains 50 epochs at batch 32 and does not say how it scales the series (step 4 is
ours); the ``smct-covid`` and ``mcdropout-covid`` configs keep their own epochs and batch sizes.

Option ``transform`` (not in the paper) gives the model a variance-stabilised series: with
``M`` the largest observed daily count (at least 1) and ``d`` the daily deaths,

* ``"none"``: ``x = d / M`` (the default, as above);
* ``"sqrt"``: ``x = sqrt(d / M)``, Poisson-like noise made about constant;
* ``"log1p"``: ``x = log1p(d) / log1p(M)``, multiplicative noise made about constant.

Each keeps the observed days in ``[0, 1]``. :meth:`CovidData.untransform` maps values of any
transform back to ``d / M`` (floored at 0 deaths), the units every forecast is scored in, so
runs with different transforms compare.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field

import numpy as np
import torch

from ppl_models.inference.validation import check_choice, check_positive_int

from ..data import ExperimentData, check_values, read_shared_csv

__all__ = [
    "CovidData",
    "covid_deaths",
    "split_sizes",
    "COVID_FILE",
    "WINDOW_START",
    "OBSERVED_DAYS",
    "FORECAST_DAYS",
    "TRANSFORMS",
    "SPLIT_PROTOCOLS",
]

COVID_FILE = "covid/time_series_covid19_deaths_US.csv"
WINDOW_START = datetime.date(2020, 3, 24)
OBSERVED_DAYS = 40
FORECAST_DAYS = 20
SPLITS = ("train", "valid", "test")
TRANSFORMS = ("none", "sqrt", "log1p")
#: the row splits of ``covid_deaths(split=...)``: the paper's 80 / 20 (validation 10 % of the 80 %) and 80 / 10 / 10
SPLIT_PROTOCOLS = ("80/20", "80/10/10")


@dataclass
class CovidData(ExperimentData):
    """:class:`~ppl_models.experiments.data.ExperimentData` of scaled daily deaths ``x [N, 60, 1]`` with what undoes
    the scaling.

    Attributes:
        names: per split, the rows' ``Combined_Key`` (e.g. ``"Fairfax, Virginia, US"``), in order.
        scales: per split, ``[N]``: ``M``, the largest observed daily count (deaths per unit of ``d / M``).
        dates: the 60 days of the window, ISO format.
        observed_days: days given to a forecaster before it forecasts the rest (40).
        transform: ``"none"``, ``"sqrt"`` or ``"log1p"`` (see the module docstring).
    """

    names: dict[str, list[str]] = field(default_factory=dict)
    scales: dict[str, torch.Tensor] = field(default_factory=dict)
    dates: tuple[str, ...] = ()
    observed_days: int = OBSERVED_DAYS
    transform: str = "none"

    def untransform(self, values: torch.Tensor, split: str = "test") -> torch.Tensor:
        """``d / M`` (floored at 0) from values ``[..., N, T, 1]`` of ``split`` in the data's transform."""
        scale = self._scale(values, split)
        values = values.clamp(min=0)
        if self.transform == "sqrt":
            return values**2
        if self.transform == "log1p":
            return torch.expm1(values * scale.log1p()) / scale
        return values

    def to_deaths(self, values: torch.Tensor, split: str = "test") -> torch.Tensor:
        """Daily deaths from values ``[..., N, T, 1]`` of ``split`` (samples may lead: ``[S, N, T, 1]``)."""
        return self.untransform(values, split) * self._scale(values, split)

    def _scale(self, values: torch.Tensor, split: str) -> torch.Tensor:
        """``M`` of ``split``'s sequences as ``[N, 1, 1]`` in ``values``' dtype, after checking ``values``' shape."""
        if split not in self.scales:
            raise ValueError(f"split must be one of {sorted(self.scales)}, got {split!r}")
        scale = self.scales[split]
        if values.dim() < 3 or values.shape[-3] != scale.shape[0]:
            raise ValueError(
                f"values must have shape [..., N, T, 1] with N = {scale.shape[0]} sequences of "
                f"{split!r}, got {tuple(values.shape)}"
            )
        return scale.to(values)[:, None, None]


def split_sizes(rows: int, split: str = "80/20") -> tuple[int, int, int]:
    """``(train, valid, test)`` row counts of ``rows`` rows under ``split`` (module docstring, step 5)."""
    check_choice(split, SPLIT_PROTOCOLS, name="split")
    if split == "80/10/10":
        train, valid = round(0.8 * rows), round(0.9 * rows) - round(0.8 * rows)
    else:
        test = round(0.2 * rows)
        valid = round(0.1 * (rows - test))
        train = rows - test - valid
    return train, valid, rows - train - valid


def covid_deaths(
    data_dir: str | os.PathLike | None = None,
    min_deaths: int = 100,
    seed: int = 0,
    transform: str = "none",
    split: str = "80/20",
) -> CovidData:
    """The section-4.2 data set: counties with ``>= min_deaths`` deaths, 60 days of scaled daily deaths.

    See the module docstring for every preprocessing step.

    Args:
        data_dir: the shared data folder (see :func:`~ppl_models.experiments.data.resolve_data_dir`).
        min_deaths: smallest cumulative death count on the last day for a row to be kept.
        seed: seed of the shuffle before the split.
        transform: ``"none"``, ``"sqrt"`` or ``"log1p"`` of the daily counts (module docstring).
        split: ``"80/20"`` (the paper's; validation 10 % of the training rows) or ``"80/10/10"``.

    Returns:
        A :class:`CovidData`: ``x [N, 60, 1]`` float32 per split (every step valid).
    """
    check_positive_int(min_deaths, name="min_deaths")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    check_choice(transform, TRANSFORMS, name="transform")
    check_choice(split, SPLIT_PROTOCOLS, name="split")
    table = read_shared_csv(COVID_FILE, data_dir)
    first = table.index("Population") + 1  # the dates follow the row's description
    dates = []
    for text in table.header[first:]:
        try:
            dates.append(datetime.datetime.strptime(text, "%m/%d/%y").date())
        except ValueError:
            raise ValueError(f"{COVID_FILE}: column {text!r} after 'Population' is not a date m/d/yy") from None
    days = OBSERVED_DAYS + FORECAST_DAYS
    start = dates.index(WINDOW_START) if WINDOW_START in dates else -1
    if start < 1 or start + days > len(dates):
        raise ValueError(f"{COVID_FILE} does not cover the day before {WINDOW_START} and {days} days from it")
    cumulative = table.numbers(table.header[first:])
    check_values(cumulative, COVID_FILE, table.header[first:], lines=table.lines)
    keep = cumulative[:, -1] >= min_deaths
    if min(split_sizes(int(keep.sum()), split)) < 1:
        raise ValueError(
            f"min_deaths={min_deaths} keeps {int(keep.sum())} rows: too few for a row in each split "
            f"of {split} (train, valid, test {split_sizes(int(keep.sum()), split)})"
        )
    key = table.index("Combined_Key")
    names = [row[key] for row, kept in zip(table.rows, keep) if kept]
    daily = np.clip(np.diff(cumulative[keep], axis=1), 0, None)[:, start - 1 : start - 1 + days]
    scale = np.maximum(daily[:, :OBSERVED_DAYS].max(1), 1.0)
    x = torch.as_tensor(_transformed(daily, scale, transform), dtype=torch.float32).unsqueeze(-1)
    order = torch.randperm(len(names), generator=torch.Generator().manual_seed(seed))
    n_train, n_valid, _ = split_sizes(len(names), split)
    cut_train, cut_valid = n_train, n_train + n_valid
    parts = dict(zip(SPLITS, (order[:cut_train], order[cut_train:cut_valid], order[cut_valid:])))
    window = [d.isoformat() for d in dates[start : start + days]]
    return CovidData(
        *((x[index], torch.ones(len(index), days, dtype=torch.bool)) for index in parts.values()),
        description=f"JHU COVID-19 daily deaths, {len(names)} US counties with >= {min_deaths} deaths by "
        f"{dates[-1]}, {window[0]}..{window[-1]} ({OBSERVED_DAYS} observed + {FORECAST_DAYS} forecast days), "
        f"scaled by each series' largest observed daily count{_DESCRIBED[transform]}; "
        f"{'/'.join(str(len(i)) for i in parts.values())} "
        f"train/valid/test ({split} split, seed {seed})",
        names={split: [names[i] for i in index] for split, index in parts.items()},
        scales={split: torch.as_tensor(scale[index.numpy()], dtype=torch.float32) for split, index in parts.items()},
        dates=tuple(window),
        observed_days=OBSERVED_DAYS,
        transform=transform,
    )


_DESCRIBED = {"none": "", "sqrt": ", square root (sqrt(d / M))", "log1p": ", log1p (log1p(d) / log1p(M))"}


def _transformed(daily: np.ndarray, scale: np.ndarray, transform: str) -> np.ndarray:
    """``[N, T]`` model-space values of daily deaths ``[N, T]`` with per-series ``M = scale [N]``."""
    if transform == "sqrt":
        return np.sqrt(daily / scale[:, None])
    if transform == "log1p":
        return np.log1p(daily) / np.log1p(scale)[:, None]
    return daily / scale[:, None]

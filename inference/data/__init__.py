"""A user's own sequences: the data type (:mod:`.datasets`), the file readers with their value checks
(:mod:`.readers`), the standardisation (:mod:`.standardize`) and the transforms that fit real series, chosen on
validation and undone for every figure (:mod:`.transforms`)."""

from .datasets import MISSING, DataSplits, SequenceDataset
from .readers import FILE_SUFFIXES, TIME_ORDERS, DataWarning, check_values
from .standardize import Standardizer
from .transforms import DataUnits, SeriesTransform, choose_transform, detect_season, resolve_transform

__all__ = [
    "SequenceDataset",
    "DataSplits",
    "Standardizer",
    "DataWarning",
    "check_values",
    "FILE_SUFFIXES",
    "TIME_ORDERS",
    "MISSING",
    "SeriesTransform",
    "DataUnits",
    "choose_transform",
    "resolve_transform",
    "detect_season",
]

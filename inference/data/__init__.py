"""A user's own sequences: the data type (:mod:`.datasets`), the file readers with their value checks
(:mod:`.readers`) and the standardisation (:mod:`.standardize`)."""

from .datasets import MISSING, DataSplits, SequenceDataset
from .readers import FILE_SUFFIXES, TIME_ORDERS, DataWarning, check_values
from .standardize import Standardizer

__all__ = ["SequenceDataset", "DataSplits", "Standardizer", "DataWarning", "check_values", "FILE_SUFFIXES",
           "TIME_ORDERS", "MISSING"]

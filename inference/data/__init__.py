"""A user's own sequences: the data type (:mod:`.datasets`) and the file readers with their value checks
(:mod:`.readers`)."""

from .datasets import MISSING, DataSplits, SequenceDataset, Standardizer
from .readers import FILE_SUFFIXES, TIME_ORDERS, DataWarning, check_values

__all__ = ["SequenceDataset", "DataSplits", "Standardizer", "DataWarning", "check_values", "FILE_SUFFIXES",
           "TIME_ORDERS", "MISSING"]

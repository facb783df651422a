"""A user's own sequences: the data type (:mod:`.datasets`), the settings that read and cut a file (:mod:`.spec`),
the file readers with their value checks (:mod:`.readers`), the standardisation (:mod:`.standardize`), the
transforms that fit real series (:mod:`.transforms`), chosen on validation (:mod:`.transform_choice`) and undone for
every figure (:mod:`.data_units`), and the likelihood that fits the values (:mod:`.likelihoods`: counts, positive
or real values)."""

from .data_units import DataUnits
from .data_warnings import DataWarning
from .datasets import MISSING, DataSplits, SequenceDataset
from .likelihoods import LIKELIHOODS, resolve_likelihood
from .readers import FILE_SUFFIXES, check_values
from .seasons import detect_season
from .spec import TIME_ORDERS, FileSpec, SettingTypeError
from .standardize import Standardizer
from .transform_choice import choose_transform, resolve_transform
from .transforms import SeriesTransform

__all__ = [
    "SequenceDataset",
    "DataSplits",
    "FileSpec",
    "SettingTypeError",
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
    "LIKELIHOODS",
    "resolve_likelihood",
]

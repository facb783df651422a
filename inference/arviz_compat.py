"""ArviZ for the whole project, on ArviZ 0.17-0.23 (``InferenceData``) and 1.x (``xarray.DataTree``).

The project touches ArviZ only through this module:

- ``az``, the ArviZ module, imported on its first use (a command that writes no ArviZ file never pays its
  seconds of import), without ArviZ 0.23's once-a-day ``FutureWarning`` banner about its coming refactor (that one
  message; every other warning still shows);
- :func:`dataset` and :func:`inference_data` build the groups and their container;
- :func:`loo_summary` and :func:`waic_summary` read PSIS-LOO and WAIC the same way on both.

ArviZ 1.x needs Python 3.12 or newer. The test suite runs on the ArviZ that installs with the
project's Python (0.23 on 3.11); ``tests/inference/test_arviz_compat.py`` runs this module alone, without
torch, so it can be run under ArviZ 1.x as well (see docs/calibration.md).
"""

import importlib.metadata
import importlib.util
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)


def _imported_on_first_use(name: str):
    """The module ``name``, executed when one of its attributes is first read (importlib's ``LazyLoader``); the
    module itself where it is imported already."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


az = _imported_on_first_use("arviz")

__all__ = [
    "az",
    "ARVIZ_1",
    "dataset",
    "inference_data",
    "is_inference_data",
    "group_names",
    "loo_summary",
    "waic_summary",
]

#: ArviZ 1.x (``xarray.DataTree`` containers, ``arviz_stats``), rather than 0.x (``InferenceData``)
ARVIZ_1 = int(importlib.metadata.version("arviz").split(".")[0]) >= 1


def dataset(values: dict, *, dims: dict, coords: dict | None = None, draws: bool = True):
    """An ``xarray.Dataset`` of numpy ``values``; with ``draws`` each array leads with (chain, draw)."""
    sample_dims = {} if draws else ({"sample_dims": []} if ARVIZ_1 else {"default_dims": []})
    return az.dict_to_dataset(values, coords=coords, dims=dims, **sample_dims)


def inference_data(groups: dict):
    """The container of the datasets ``groups`` (name -> dataset): ``InferenceData`` or ``DataTree``."""
    if ARVIZ_1:
        import xarray

        return xarray.DataTree.from_dict(dict(groups))
    return az.InferenceData(**groups)


def is_inference_data(value) -> bool:
    """Whether ``value`` is the installed ArviZ's container of groups."""
    if ARVIZ_1:
        import xarray

        return isinstance(value, xarray.DataTree)
    return isinstance(value, az.InferenceData)


def group_names(data) -> set[str]:
    """Names of the groups of an ``InferenceData`` or ``DataTree`` (``{"posterior", "observed_data", ...}``)."""
    if ARVIZ_1:
        return {name.strip("/") for name in data.groups if name.strip("/")}
    return set(data.groups())


def loo_summary(data) -> dict:
    """PSIS-LOO of ``data`` (groups ``posterior`` and ``log_likelihood``): elpd, its se, p_loo, largest k.

    When every draw gives the same log-likelihood (a model with nothing to draw), leaving an
    entry out changes nothing: the elpd is the log-likelihood itself, ``p`` is 0 and ``k`` is
    NaN (no tail to fit), on both ArviZ versions (ArviZ 1.x's ``loo`` raises there, 0.x reports
    ``k = inf``).
    """
    pointwise = np.concatenate(
        [
            values.values.reshape(values.shape[0] * values.shape[1], -1)
            for values in data["log_likelihood"].data_vars.values()
        ],
        axis=1,
    )
    if np.all(pointwise == pointwise[:1]):
        exact = pointwise[0]
        return {
            "elpd": float(exact.sum()),
            "se": float(np.sqrt(exact.size) * exact.std()),
            "p": 0.0,
            "max_pareto_k": float("nan"),
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's Pareto k warnings: the largest k is returned
        loo = az.loo(data, pointwise=True)
    if ARVIZ_1:
        elpd, se, p = loo.elpd, loo.se, loo.p
    else:
        elpd, se, p = loo.elpd_loo, loo.se, loo.p_loo
    return {"elpd": float(elpd), "se": float(se), "p": float(p), "max_pareto_k": float(np.max(loo.pareto_k))}


def waic_summary(data) -> dict | None:
    """WAIC of ``data``: elpd, its se, p_waic; ``None`` on ArviZ 1.x, which dropped WAIC for PSIS-LOO."""
    if ARVIZ_1:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        waic = az.waic(data)
    return {"elpd": float(waic.elpd_waic), "se": float(waic.se), "p": float(waic.p_waic)}

"""ArviZ, imported once for the whole project, without its once-a-day refactor banner.

ArviZ 0.23 prints a ``FutureWarning`` about its coming 1.0 refactor on the first import of
each day. The project imports ArviZ only through this module (``from inference.arviz_import
import az``), which silences that one message and nothing else: every other warning of
ArviZ, future ones included, still reaches the user.
"""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
    import arviz as az

__all__ = ["az"]

"""MkDocs hook: show the docstrings' Sphinx roles (``:class:`~a.B```) as plain code in the API pages.

The docstrings follow the Google style with Sphinx cross-reference roles, which mkdocstrings
renders as ``:class:<code>~a.B</code>``. This hook drops the role and, for ``~``, the module
path, as Sphinx would display them.
"""

import re

_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|obj):<code>(~?)([\w.]+)</code>")


def _display(match: re.Match) -> str:
    short, path = match.groups()
    return f"<code>{path.rsplit('.', 1)[-1] if short else path}</code>"


def on_post_page(output: str, page, config) -> str:
    return _ROLE.sub(_display, output)

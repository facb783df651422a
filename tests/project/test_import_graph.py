"""The package imports one way, read from every module's source with ``ast``.

The layers, lowest first: the engines (``ppl_models.inference``), the models (the rest of ``ppl_models`` outside
``inference`` and ``experiments``), the product (``ppl_models.experiments`` outside ``studies`` and ``benchmarks``),
then the research (studies, benchmarks and the paper claims, which the wheel does not ship). A module imports only from
its own layer and the layers below it, whether the import is absolute or relative, at module level or inside a
function, or by a string that names a module (``importlib.import_module("ppl_models....")``). No modules import one
another in a circle, at module level or through an import moved inside a function to dodge the circle (a package's
``__init__`` importing its own modules is an edge like any other, not a circle with them).
"""

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the package's folder (``ppl_models/inference`` and ``ppl_models/experiments`` link to the top-level folders)
PACKAGE = ROOT / "ppl_models"
#: each layer with the layers it may import from
ALLOWED = {
    "engines": {"engines"},
    "models": {"engines", "models"},
    "product": {"engines", "models", "product"},
    "research": {"engines", "models", "product", "research"},
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted module name: (file, whether it is a package's __init__)}`` of every module of the package."""
    modules = {}
    for folder, _, files in os.walk(PACKAGE, followlinks=True):
        for path in (Path(folder, f) for f in files if f.endswith(".py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            package = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if package else parts)] = (path, package)
    return modules


MODULES = _modules()


def imports(source: str, name: str, package: bool, known=MODULES) -> list[tuple[str, int, bool]]:
    """``[(imported module, line, at module level)]`` of the ``ppl_models`` imports in a module's ``source``.

    ``from a import b`` imports module ``a.b`` where that is a module of ``known``, else ``a``; a relative import is
    resolved from the module's own package (``name`` itself for a package's ``__init__``).
    """
    found = []

    def visit(node, module_level: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, module_level) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child, name, package)
                found.extend(
                    (f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base, child.lineno, module_level)
                    for alias in child.names
                )
            visit(child, module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source), True)
    return [(target, line, level) for target, line, level in found if target.split(".")[0] == "ppl_models"]


def named_modules(source: str, known=MODULES) -> list[tuple[str, int]]:
    """``[(module, line)]`` named by the strings of ``source`` that are not docstrings: a string (or an f-string's
    leading text) ``ppl_models.a.b...`` names the longest module of ``known`` it starts with."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = node.values[0].value
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        else:
            continue
        for match in re.finditer(r"\bppl_models(?:\.\w+)+", text):
            parts = match.group().split(".")
            names = [".".join(parts[:n]) for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in known]
            found += [(names[0], node.lineno)] if names else []
    return sorted(set(found))  # an f-string's leading text is also a constant of its own


def _absolute(node: ast.ImportFrom, name: str, package: bool) -> str:
    """The dotted module a ``from ... import`` reads from, relative levels resolved against module ``name``."""
    if not node.level:
        return node.module
    parts = name.split(".")[: None if package else -1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def layer(module: str) -> str:
    """``engines``, ``models``, ``product`` or ``research`` (studies, benchmarks, claims) of a dotted module name."""
    parts = module.split(".")
    if parts[1:2] == ["inference"]:
        return "engines"
    if parts[1:2] == ["experiments"]:
        return "research" if parts[2:3] in (["studies"], ["benchmarks"], ["claims"]) else "product"
    return "models"


def _edges() -> list[tuple[str, str, int, bool]]:
    """``[(module, imported module, line, at module level)]`` of the whole package."""
    return [
        (name, target, line, level)
        for name, (path, package) in sorted(MODULES.items())
        for target, line, level in imports(path.read_text(), name, package)
    ]


def _named() -> list[tuple[str, str, int]]:
    """``[(module, module named by one of its strings, line)]`` of the whole package."""
    return [
        (name, target, line)
        for name, (path, _) in sorted(MODULES.items())
        for target, line in named_modules(path.read_text())
    ]


def _upward(importer_layer: str) -> list[str]:
    edges = [(name, target, line) for name, target, line, _ in _edges()] + _named()
    return [
        f"{name}:{line} imports {target} ({layer(target)})"
        for name, target, line in edges
        if layer(name) == importer_layer and layer(target) not in ALLOWED[importer_layer]
    ]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Circles met by a depth-first search of ``{module: imported modules}``, each as modules with the first repeated
    at the end; empty only where the graph has no circle."""
    circles, seen, done = [], set(), set()

    def visit(node, path):
        if node in path:
            circle = path[path.index(node) :] + [node]
            if frozenset(circle) not in seen:
                seen.add(frozenset(circle))
                circles.append(circle)
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return circles


# --------------------------------------------------------------------------- the reader


def test_the_reader_resolves_absolute_relative_and_function_level_imports():
    known = {"ppl_models", "ppl_models.a", "ppl_models.a.b", "ppl_models.a.c", "ppl_models.d"}
    source = (
        "import os\nfrom ppl_models.a import b, name\nfrom . import c\nfrom .. import d\n"
        "def f():\n    from ..d import thing\n    import ppl_models.a.c\nclass K:\n    from .c import other\n"
    )
    assert imports(source, "ppl_models.a.b", False, known) == [
        ("ppl_models.a.b", 2, True),
        ("ppl_models.a", 2, True),
        ("ppl_models.a.c", 3, True),
        ("ppl_models.d", 4, True),
        ("ppl_models.d", 6, False),
        ("ppl_models.a.c", 7, False),
        ("ppl_models.a.c", 9, True),
    ]
    assert imports("from . import b\nfrom .c import x\n", "ppl_models.a", True, known) == [
        ("ppl_models.a.b", 1, True),
        ("ppl_models.a.c", 2, True),
    ]


def test_the_reader_finds_modules_named_by_strings_but_not_by_docstrings():
    known = {"ppl_models", "ppl_models.a", "ppl_models.a.b"}
    source = (
        '"""See ppl_models.a.b."""\nimport importlib\n'
        'def f(x):\n    """ppl_models.a"""\n    return importlib.import_module(f"ppl_models.a.b.{x}")\n'
        'NAMES = ("ppl_models.a", "nothing")\n'
    )
    assert sorted(named_modules(source, known)) == [("ppl_models.a", 6), ("ppl_models.a.b", 5)]


def test_the_layers_and_the_circle_finder_read_names_and_graphs_as_written():
    assert [
        layer(n)
        for n in (
            "ppl_models",
            "ppl_models.pf_rnn.cells",
            "ppl_models.inference.training.trainer",
            "ppl_models.experiments.tasks.music",
            "ppl_models.experiments.studies.truth_fit",
            "ppl_models.experiments.benchmarks",
            "ppl_models.experiments.claims.reproductions",
        )
    ] == ["models", "models", "engines", "product", "research", "research", "research"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_every_folder_of_the_package_is_read():
    assert {"ppl_models", "ppl_models.inference.protocol", "ppl_models.experiments.cli"} <= set(MODULES)
    assert ("ppl_models.inference.protocol", "ppl_models.inference.objectives") in {(a, b) for a, b, *_ in _edges()}


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("importer", ["engines", "models", "product"])
def test_no_layer_imports_a_layer_above_it(importer):
    violations = _upward(importer)
    assert violations == [], f"{importer} may import only {sorted(ALLOWED[importer])}:\n" + "\n".join(violations)


def test_no_modules_import_one_another_in_a_circle():
    graph = {}
    for name, target, _, _ in _edges():
        if target in MODULES and target != name:
            graph.setdefault(name, set()).add(target)
    circles = _circles(graph)
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(circle) for circle in circles)


def test_protocol_objectives_state_space_and_traces_import_nothing_inside_functions():
    for name in ("objectives", "protocol", "state_space", "traces"):
        module = f"ppl_models.inference.{name}"
        assert [line for importer, _, line, level in _edges() if importer == module and not level] == [], name

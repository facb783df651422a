"""The engines' modules import one another at module level without a circle (no import dodged inside a function)."""

import ast
from pathlib import Path

INFERENCE = Path(__file__).resolve().parents[1] / "inference"


def _module_level_imports() -> dict[str, set[str]]:
    """``{module: modules of inference it imports at module level}``; a subpackage counts as one module."""
    graph: dict[str, set[str]] = {}
    for path in INFERENCE.rglob("*.py"):
        parts = path.relative_to(INFERENCE).with_suffix("").parts
        node = parts[0]
        package = parts[:-1]  # the folder of the file, relative to inference
        for statement in ast.parse(path.read_text()).body:
            if isinstance(statement, ast.ImportFrom) and statement.level:
                base = package[: len(package) - (statement.level - 1)]
                target = (*base, *(statement.module.split(".") if statement.module else ()))
                if target and target[0] != node:
                    graph.setdefault(node, set()).add(target[0])
    return graph


def _function_level_relative_imports(name: str) -> list[int]:
    tree = ast.parse((INFERENCE / f"{name}.py").read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
            and node not in tree.body]  # fmt: skip


def test_the_engines_import_graph_has_no_circle():
    graph, done, path = _module_level_imports(), set(), []

    def visit(node):
        assert node not in path, f"import circle: {' -> '.join(path[path.index(node):] + [node])}"
        if node in done:
            return
        path.append(node)
        for target in sorted(graph.get(node, ())):
            visit(target)
        path.pop()
        done.add(node)

    for node in sorted(graph):
        visit(node)
    assert "objectives" in graph["protocol"] and "protocol" not in graph["objectives"]  # score runs the objectives


def test_protocol_objectives_state_space_and_traces_import_nothing_inside_functions():
    for name in ("objectives", "protocol", "state_space", "traces"):
        assert _function_level_relative_imports(name) == [], name

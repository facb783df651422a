"""The claims package (rules, readers, table), the provenance of results files and the product's layering."""

import ast
import hashlib
from pathlib import Path

import pytest

from ppl_models.experiments.claims import Budget, Claim, Reading, Stat, Within, provenance, seed_runs
from ppl_models.experiments.claims.evidence_readers import joined

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _claim(**fields):
    """A claim on two results files: X's test MSE in ``a.json``, Y's RMSE in ``b.json`` (7 epochs, not recorded)."""
    return Claim(
        paper="psrnn",
        claim="X is near 1",
        paper_figure="-",
        metric="MSE",
        tests=(),
        seeds=(0, 1),
        rule=Within("X", 1.0, 0.5, higher_is_better=False),
        results=("a.json", "b.json"),
        reader=joined(seed_runs("test_mse", {"x": "X"}), seed_runs("rmse", {"y": "Y"}, epochs=7)),
        **fields,
    )


A = {
    "results": {
        "x": {
            "runs": [
                {"test_mse": 1.0, "best_epoch": 3, "epochs": 5, "seconds": 10.0},
                {"test_mse": 2.0, "best_epoch": 5, "epochs": 5, "seconds": 20.0},
            ]
        }
    }
}
B = {"results": {"y": {"runs": [{"rmse": 4.0}, {"rmse": 6.0, "seconds": 1.0}]}}}


def test_a_claim_takes_keyword_arguments_only():
    with pytest.raises(TypeError):
        Claim("psrnn", "X is near 1", "-", "MSE", (), (0,), Within("X", 1.0, 0.5))
    assert _claim().metric_key == "test_mse" and _claim(metric_key="rmse").metric_key == "rmse"


def test_a_reader_takes_the_files_in_the_order_of_the_claims_results():
    """``a.json`` to the first reader, ``b.json`` to the second, whatever the order of the loaded files."""
    reading = _claim().read({"b.json": B, "a.json": A, "other.json": {"results": {}}})
    assert reading.figures == {"X": Stat((1.0, 2.0)), "Y": Stat((4.0, 6.0))}
    assert reading.figures["X"].mean == 1.5 and reading.figures["Y"].sd == pytest.approx(2**0.5)
    assert reading.budgets == (
        Budget("X", epochs=(5, 5), best_epochs=(3, 5), trials=1, wall_s=30.0),
        Budget("Y", epochs=(7, 7), trials=1, wall_s=None),
    )  # one run lacks its seconds
    assert reading.budgets[0].still_improving and not reading.budgets[1].still_improving
    assert _claim().rule.decide(reading) == "tie with the edge 1.5 (t-test p = 0.5)"  # on the edge 1 + 0.5


def test_a_claims_reproduction_is_its_evidence_once_it_exists():
    reproduction = {"format": "reproduce/1", "results": {"X": {"runs": [{"rmse": 3.0, "best_epoch": 1}]}}}
    reading = _claim(metric_key="rmse").read({"reproduce_c.json": reproduction, "a.json": A, "b.json": B})
    assert reading == Reading({"X": Stat((3.0,))}, (Budget("X", best_epochs=(1,), trials=1),))
    assert _claim().rule.decide(reading) == "missed by 1.5"  # 3.0 is 1.5 above the edge 1 + 0.5 (lower is better)


def test_a_joined_reader_refuses_a_wrong_number_of_files_in_one_line():
    with pytest.raises(ValueError, match="files must be 2 results files, one per reader, got 1"):
        joined(seed_runs("test_mse"), seed_runs("test_mse"))(A)


def _manifest(tmp_path, monkeypatch, engine_text: bytes) -> None:
    """A copied tree holding one engine file with ``engine_text``, its manifest taken where it held ``x = 1``."""
    (tmp_path / "inference").mkdir()
    (tmp_path / "ppl_models").mkdir()
    (tmp_path / "inference" / "a.py").write_bytes(engine_text)
    blob = hashlib.sha1(b"blob 6\0x = 1\n").hexdigest()  # git's blob hash of the 6 bytes "x = 1\n"
    (tmp_path / "manifest.txt").write_text(f"commit abc123\n100644 {blob} 0\tinference/a.py\n")
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("PPL_MODELS_MANIFEST", str(tmp_path / "manifest.txt"))


def test_commit_label_says_when_an_engine_file_differs_from_the_commit(tmp_path, monkeypatch):
    _manifest(tmp_path, monkeypatch, b"x = 1\n")
    assert provenance.commit_label() == "abc123"
    (tmp_path / "inference" / "a.py").write_bytes(b"x = 2\n")
    assert provenance.commit_label() == "abc123+changes"


def test_script_provenance_records_the_command_as_run_and_its_seeds():
    record = provenance.script_provenance("pkg.bench", ["--out", "a b.json"], (3,))
    assert record == {"commands": ["python -m pkg.bench --out 'a b.json'"], "seeds": [3]}
    assert provenance.provenance_problems("x.json", record) == []
    assert provenance.provenance_problems("x.json", {"seed": 0}) == [
        "docs/results/x.json: no 'commands' (or 'command') field"
    ]


def _imports(path: Path) -> set[str]:
    """The modules of ``ppl_models.experiments`` (dotted, from it) that the file at ``path`` imports anywhere, with
    each name a ``from`` import takes from them (it may be a module)."""
    package = path.relative_to(EXPERIMENTS).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                module = ".".join((*package[: len(package) - (node.level - 1)], *(node.module or "").split(".")))
            else:
                module = node.module.removeprefix("ppl_models.experiments") if node.module else ""
                if node.module == module:
                    continue  # outside ppl_models.experiments
            module = module.strip(".")
            found |= {module, *(f"{module}.{alias.name}".strip(".") for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {
                alias.name.removeprefix("ppl_models.experiments.")
                for alias in node.names
                if alias.name.startswith("ppl_models.experiments.")
            }
    return found


def test_the_benchmarks_import_one_another_without_a_circle():
    graph = {
        p.stem: {m.split(".")[1] for m in _imports(p) if m.startswith("benchmarks.")} - {p.stem}
        for p in (EXPERIMENTS / "benchmarks").glob("*.py")
    }
    assert "lgssm_problem" in graph["filter_memory"] and "lgssm_problem" in graph["bootstrap_filter"]
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import circle: {' -> '.join((*path[path.index(node) :], node))}"
        if node not in done:
            for target in sorted(graph.get(node, ())):
                visit(target, (*path, node))
            done.add(node)

    for node in sorted(graph):
        visit(node, ())

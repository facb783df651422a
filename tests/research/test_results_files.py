"""Where a reproduction writes its results (``ppl_models.experiments.claims.results_files``): a results file that
cannot be read, or holds more seeds, is kept by every path, and the rerun written elsewhere."""

import importlib
import json
from pathlib import Path
from types import SimpleNamespace

from ppl_models.experiments.claims import reproductions, results_files
from ppl_models.experiments.claims.table import CLAIMS


def test_an_unreadable_results_file_is_kept_by_a_rerun(tmp_path, capsys):
    committed = tmp_path / "results" / "reproduce_x.json"
    committed.parent.mkdir()
    committed.write_text('{"seeds": [0, 1')
    elsewhere = tmp_path / "runs" / "x.json"
    assert results_files.results_destination(committed, (0,), elsewhere) == elsewhere
    assert "no readable list of seeds" in capsys.readouterr().out
    assert results_files.results_destination(tmp_path / "new.json", (0,), elsewhere) == tmp_path / "new.json"


def _seeded(path, seeds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"seeds": seeds, "results": "three"}))


def test_a_rerun_on_fewer_seeds_never_replaces_the_file_by_any_path(tmp_path, capsys, monkeypatch):
    """reproduce's study path and a study run on its own both keep a 3-seed file and write a 1-seed rerun beside its
    runs; a rerun on the same or more seeds replaces it."""
    published = tmp_path / "results" / "study.json"
    _seeded(published, [0, 1, 2])
    written = results_files.write_results(published, {"seeds": [0], "results": "one"}, tmp_path / "runs" / "s.json")
    assert written == tmp_path / "runs" / "s.json" and json.loads(written.read_text())["results"] == "one"
    assert json.loads(published.read_text())["results"] == "three"
    assert "holds seeds [0, 1, 2]" in capsys.readouterr().out
    assert results_files.write_results(published, {"seeds": [2, 1, 0], "results": "again"}) == published
    assert json.loads(published.read_text())["results"] == "again"

    claim = next(c for c in CLAIMS.values() if c.study)
    calls = []

    def fake_main(argv):  # the study writes its --out through write_results, as every study does
        out = Path(argv[argv.index("--out") + 1])
        calls.append(out)
        results_files.write_results(out, {"seeds": list(range(int(argv[argv.index("--seeds") + 1]))), "results": 1})

    monkeypatch.setattr(importlib, "import_module", lambda name: SimpleNamespace(main=fake_main))
    _seeded(tmp_path / "results" / claim.results[0], [0, 1, 2])
    path = reproductions._run_study(claim, 1, tmp_path / "runs", tmp_path / "results")
    assert path == tmp_path / "runs" / claim.results[0] == calls[0]
    assert json.loads((tmp_path / "results" / claim.results[0]).read_text())["results"] == "three"


def test_a_file_without_seeds_is_replaced_only_by_a_record_without_seeds(tmp_path):
    published = tmp_path / "check.json"
    published.write_text(json.dumps({"results": "old"}))
    assert results_files.write_results(published, {"results": "new"}) == published
    elsewhere = tmp_path / "runs" / "check.json"
    assert results_files.write_results(published, {"seeds": [0], "results": "x"}, elsewhere) == elsewhere
    _seeded(published, [0, 1])
    assert results_files.write_results(published, {"results": "none"}, elsewhere) == elsewhere


def test_every_study_writes_its_results_file_through_the_guard():
    for path in sorted((Path(reproductions.__file__).parent.parent / "studies").glob("*.py")):
        text = path.read_text()
        assert "write_json(args.out" not in text.replace("\n", "").replace(" ", ""), path.name

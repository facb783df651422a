"""Where a reproduction writes its results (``ppl_models.experiments.claims.results_files``): a results file that
cannot be read is kept, and the rerun written elsewhere."""

from ppl_models.experiments.claims import results_files


def test_an_unreadable_results_file_is_kept_by_a_rerun(tmp_path, capsys):
    committed = tmp_path / "results" / "reproduce_x.json"
    committed.parent.mkdir()
    committed.write_text('{"seeds": [0, 1')
    elsewhere = tmp_path / "runs" / "x.json"
    assert results_files.results_destination(committed, (0,), elsewhere) == elsewhere
    assert "no readable list of seeds" in capsys.readouterr().out
    assert results_files.results_destination(tmp_path / "new.json", (0,), elsewhere) == tmp_path / "new.json"

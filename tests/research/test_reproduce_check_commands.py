"""``ppl-models reproduce --check`` parses every recorded command of the results files without running it."""

import json

from ppl_models.experiments.claims import reproductions
from ppl_models.experiments.claims.recorded_commands import command_problem, recorded_commands, stale_commands
from ppl_models.experiments.cli import build_parser
from ppl_models.experiments.config import apply_overrides
from ppl_models.experiments.own_data import load_experiment

MOVED = "python -m experiments.psrnn_seeds runs/psrnn6/ring --out docs/results/psrnn_ring_seeds.json"
PARSER = build_parser()
REFUSED_SET = "ppl-models train lgssm-demo --run-dir RUN --set train.no_such_setting=3"


def _write(folder, name, data):
    (folder / name).write_text(json.dumps(data))


def test_check_names_each_stale_command_and_its_file(tmp_path):
    _write(tmp_path, "moved.json", {"command": MOVED, "seeds": [0]})
    _write(tmp_path, "refused.json", {"commands": [REFUSED_SET], "seeds": [0]})
    _write(
        tmp_path,
        "fine.json",
        {
            "commands": [
                "OMP_NUM_THREADS=1 ppl-models train lgssm-demo --set train.epochs=2 --run-dir RUN (stopped by hand)"
            ],
            "seeds": [0],
        },
    )
    stale = stale_commands(tmp_path, PARSER)
    assert len(stale) == 2
    assert stale[0].startswith(f"docs/results/moved.json: stale command {MOVED!r}: no module experiments.psrnn_seeds")
    assert "ppl_models.experiments.studies.psrnn_seeds" in stale[0]  # where it lives now
    assert stale[1].startswith(f"docs/results/refused.json: stale command {REFUSED_SET!r}: ")
    assert "no_such_setting" in stale[1]


def test_commands_are_found_at_any_depth_and_as_argv_lists():
    data = {
        "commands": {"study": "ppl-models list", "official": ["python", "main.py", "--lr=0.1"]},
        "runs": {"a": {"fit_command": "python -m x", "note": "python -m not_a_command"}},
    }
    assert recorded_commands(data) == ["ppl-models list", "python main.py --lr=0.1", "python -m x"]


def test_module_arguments_are_parsed_by_the_modules_parser_without_running_it():
    # psrnn_calibration builds its parser inside main: --refit no longer takes a split name
    refused = command_problem(
        "python -m ppl_models.experiments.studies.psrnn_calibration A=no/such/run --refit train", PARSER
    )
    assert refused is not None and "invalid choice: 'train'" in refused
    assert (
        command_problem(
            "python -m ppl_models.experiments.studies.psrnn_calibration A=no/such/run --refit normal --split train",
            PARSER,
        )
        is None
    )  # parsed only: the missing run folder is never read
    assert "unrecognized arguments: --no-such-flag" in command_problem(  # a module with build_parser()
        "python -m experiments.benchmarks.bootstrap_filter --no-such-flag", PARSER
    )
    assert command_problem("cp -r a b; git archive x | tar -x", PARSER) is None  # other programs are not checked
    assert command_problem("ppl-models train lgssm-demo --set train.epochs=<epochs done> --resume", PARSER) is None


def test_an_unquoted_toml_list_from_the_shell_is_a_list_of_strings():
    # the shell passes evaluate.estimators=["elbo"] on as evaluate.estimators=[elbo]
    assert apply_overrides({}, ["evaluate.estimators=[elbo, iwae]"]) == {"evaluate": {"estimators": ["elbo", "iwae"]}}
    assert apply_overrides({}, ["a.b=[1, 2]", "a.c=word"]) == {"a": {"b": [1, 2], "c": "word"}}
    assert load_experiment("lgssm-demo", ["evaluate.estimators=[elbo]"])["evaluate"]["estimators"] == ["elbo"]
    assert command_problem('ppl-models train srnn-jsb --set evaluate.estimators=["elbo"] --set seed=2', PARSER) is None


def test_the_committed_results_files_record_no_stale_command():
    assert stale_commands(reproductions.project_root() / "docs" / "results", PARSER) == []

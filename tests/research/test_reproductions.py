"""The claims registry and ``ppl-models reproduce``: the page is current, every row traces to its file, a rerun on
fewer seeds never replaces a results file holding more, and a broken results file is named in one line."""

import json
import shutil
import statistics
from pathlib import Path

import pytest
from scipy import stats

from ppl_models.experiments import claims, compare
from ppl_models.experiments.claims import (
    CLAIMS,
    Beats,
    Budget,
    Claim,
    Matches,
    Reading,
    Stat,
    Within,
    reproductions,
    transfers,
)
from ppl_models.experiments.claims.transfers import TRANSFERS, Transfer
from ppl_models.experiments.cli import main
from ppl_models.experiments.registry import EXPERIMENTS
from ppl_models.experiments.suites import SUITES

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _json(name):
    return json.loads((RESULTS / name).read_text())


def test_committed_page_is_current_and_files_have_provenance(capsys):
    assert main(["reproduce", "--check"]) == 0, capsys.readouterr().out


def test_every_claim_names_its_evidence_or_why_not():
    for name, claim in CLAIMS.items():
        assert claim.paper in claims.PAPERS, name
        assert all(t in EXPERIMENTS or t in SUITES for t in claim.tests), (name, claim.tests)
        assert all(experiment in EXPERIMENTS for _, experiment, _ in claim.members), name
        if claim.not_run:
            continue
        if not claim.manual and not claim.study:  # reproduce trains its members; the rule reads their labels
            assert set(claim.rule.models) <= {label for label, _, _ in claim.members}, name
        if not claim.results:
            assert claim.incomplete, f"{name}: neither a results file nor a reason"
        for file in claim.results:
            assert (RESULTS / file).is_file(), f"{name}: docs/results/{file} does not exist"
    assert {claim.paper for claim in CLAIMS.values()} == set(claims.PAPERS)


def _psrnn(name, labels, key="test_mse"):
    data = _json(name)["results"]
    return {shown: [run[key] for run in data[label]["runs"]] for label, shown in labels.items()}


PSRNN = {"psrnn": "PSRNN", "rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}
LSTM_FULL = "input per step + recurrent per sequence + output (new 'full') | Model 1"
#: each claim's figures read straight from its JSON file, independently of the claim's reader
EXPECTED = {
    "srnn-jsb": lambda: {
        "SRNN": [_json("srnn_jsb_seeds.json")["runs"][f"base-s{s}"]["runner_test_per_step"]["elbo"] for s in range(3)]
    },
    "smct-coverage": lambda: {
        "SMC-T M=10": [_json("smct_synthetic_coverage.json")["results"]["Model I"]["share_in_true_80"]],
        "LSTM d=64 dropout 0.5": [
            f["share_in_80"] for f in _json("smct_mcdropout_full.json")["results"][LSTM_FULL]["per_fold"].values()
        ],
    },
    "smct-dropout-mse": lambda: {
        "LSTM d=64 dropout 0.5": [
            f["predictive_mse"] for f in _json("smct_mcdropout_full.json")["results"][LSTM_FULL]["per_fold"].values()
        ],
        "SMC-T M=10": [_json("smct_synthetic_coverage.json")["results"]["Model I"]["predictive_mse"]],
    },
    "smct-covid": lambda: {
        shown: [run[label]["coverage_0.8"] for run in _json("smct_covid_paper_split.json")["per_seed"].values()]
        for label, shown in (("SMC-T", "SMC-T M=10"), ("LSTM MC-dropout", "LSTM MC-dropout"))
    },
    "pfrnn-maze10": lambda: {
        name: [_json("pfrnn_paper_maze10_cpu.json")["runs"][name]["test_at_epoch_30"]["last_step_mse"]]
        for name in ("PF-LSTM-P30", "LSTM-80", "GRU-86")
    },
    "pfrnn-official": lambda: {
        shown: [
            run["test_best_valid"]["last_step_mse"]  # each side's best-validation model
            for run in _json("pfrnn_official_side_by_side.json")["runs"][code]
        ]
        for code, shown in (("ours", "ours"), ("official", "official code"))
    },
    "pflstm-multimodal": lambda: {
        shown: [_json("pfrnn_regimes.json")["runs"][f"{key}_s{s}"]["metrics"]["nlpd"] for s in range(3)]
        for key, shown in (("pflstm", "PF-LSTM"), ("lstm43", "LSTM-43"), ("gru46", "GRU-46"))
    },
    "psrnn-swimmer": lambda: _psrnn("psrnn_swimmer_300_epochs_seeds.json", PSRNN),
    "psrnn-swimmer-paper-protocol": lambda: _psrnn("psrnn_paper_protocol_seeds.json", PSRNN),
    "psrnn-layers": lambda: {
        **_psrnn("psrnn_layers_rank_seeds.json", {"layers2": "2 layers"}),
        **_psrnn("psrnn_ablation_swimmer.json", {"psrnn": "1 layer"}),
    },
    "psrnn-rank": lambda: {
        **_psrnn("psrnn_layers_rank_seeds.json", {f"rank{r}": f"rank {r}" for r in (5, 10, 20, 40)}),
        **_psrnn("psrnn_ablation_swimmer.json", {"psrnn": "PSRNN"}),
    },
    "psrnn-ring": lambda: _psrnn("psrnn_ring_seeds.json", {f"{m}-n20": shown for m, shown in PSRNN.items()}),
    "psrnn-official": lambda: {
        shown: [run["test_final"]["test_bpc"] for run in _json("psrnn_official_their_model.json")["runs"][code]]
        for code, shown in (("ours", "ours"), ("official", "official code"))
    },
    "smct-official": lambda: {
        "ours": [
            run["test"]["truth_metrics"]["predictive_mse"] for run in _json("smct_official_model1.json")["runs"]["ours"]
        ],
        "official code": [
            run["test"]["predictive_mse"] for run in _json("smct_official_model1.json")["runs"]["official"]
        ],
    },
    "psrnn-ptb-3a-accuracy": lambda: {
        label: [run["test_accuracy"] for run in result["runs"]]
        for label, result in _json("reproduce_psrnn_ptb_3a.json")["results"].items()
    },
}


def _reproduced(name):
    """A claim's figures read straight from its ``reproduce_*.json`` file: per label, its metric per seed."""
    data = _json(reproductions.reproduction_file(name))
    key = CLAIMS[name].metric_key
    return {label: [run[key] for run in result["runs"]] for label, result in data["results"].items()}


def test_rendered_rows_equal_the_files():
    reproduced = {name for name in CLAIMS if (RESULTS / reproductions.reproduction_file(name)).is_file()}
    claims_with_files = {name for name, claim in CLAIMS.items() if claim.results and not claim.not_run}
    assert claims_with_files == set(EXPECTED)
    page = (RESULTS.parent / "reproductions.md").read_text()
    rows = {line.split("**")[1]: line for line in page.splitlines() if line.startswith("| **")}
    assert set(rows) == set(CLAIMS)
    expected_rows = {**EXPECTED, **{name: (lambda name=name: _reproduced(name)) for name in reproduced}}
    for name, expected in expected_rows.items():
        for model, values in expected().items():
            mean = statistics.fmean(values)
            sd = f" ± {statistics.stdev(values):.2g}" if len(values) > 1 else ""
            assert f"{model}: {mean:.4g}{sd} (n={len(values)})" in rows[name], (name, model)
    for name, claim in CLAIMS.items():
        if claim.not_run:
            assert f"not run: {' '.join(claim.not_run.split())}" in rows[name]
        elif name not in expected_rows:
            assert "evidence incomplete" in rows[name], name


def test_beats_decides_by_welchs_t_test_over_seeds_and_the_budget():
    rule = Beats("A", ("B",))  # lower is better
    done = (Budget("A", (10,) * 3, (5,) * 3), Budget("B", (10,) * 3, (6,) * 3))
    a, far, near = (0.9, 1.0, 1.1), (1.4, 1.5, 1.6), (1.0, 1.1, 1.2)
    # scipy's Welch test: A below B at p = 0.0013 (far), p = 0.14 (near: a lead of one sd is not enough)
    assert stats.ttest_ind(a, far, equal_var=False, alternative="less").pvalue < 0.05
    assert stats.ttest_ind(a, near, equal_var=False, alternative="less").pvalue > 0.05
    assert rule.decide(Reading({"A": Stat(a), "B": Stat(far)}, done)) == "met"
    assert rule.decide(Reading({"A": Stat(a), "B": Stat(near)}, done)) == "tie with B"
    assert rule.decide(Reading({"A": Stat(far), "B": Stat(a)}, done)) == "not met: B better"
    assert "fewer than 3 seeds" in rule.decide(Reading({"A": Stat((1.0, 1.1)), "B": Stat((2.0, 2.1, 2.2))}, done))
    improving = (done[0], Budget("B", (10,) * 3, (6, 10, 7)))
    assert "B still improving" in rule.decide(Reading({"A": Stat(a), "B": Stat(far)}, improving))
    assert "Welch's t-test, one-sided p < 0.05" in rule.text
    assert Stat((0.9, 1.0, 1.1)).sd == pytest.approx(0.1)


def test_a_lead_of_a_fraction_of_the_spread_is_a_tie():
    """SMC-T against a Transformer on fold 0: 0.5498 ± 0.0012 against 0.5512 ± 0.00066 leads by more than the larger
    sd but not beyond the seeds' noise (Welch p = 0.086)."""
    smct, transformer = (0.5486, 0.5498, 0.5510), (0.55054, 0.5512, 0.55186)
    assert stats.ttest_ind(smct, transformer, equal_var=False, alternative="less").pvalue == pytest.approx(0.0858, 1e-2)
    done = (Budget("S", (9,) * 3, (5,) * 3), Budget("T", (9,) * 3, (5,) * 3))
    assert Beats("S", ("T",)).decide(Reading({"S": Stat(smct), "T": Stat(transformer)}, done)) == "tie with T"


def test_an_undecided_row_says_what_settling_it_costs():
    claim = Claim(
        paper="psrnn",
        claim="A beats B",
        paper_figure="-",
        metric="MSE",
        tests=(),
        seeds=(0, 1, 2),
        rule=Beats("A", ("B",)),
        results=("f.json",),
        reader=lambda data: Reading({"A": Stat((1.0,)), "B": Stat((2.0,))}),
        rerun_cost="3 seeds take 9 GPU hours",
    )
    files = {"f.json": {"commands": ["x"], "seeds": [0]}}
    assert reproductions.row("c", claim, files)[3] == (
        "undecided: A, B on fewer than 3 seeds (n=1) (3 seeds take 9 GPU hours)"
    )


def test_matches_asks_for_no_difference_beyond_the_seeds_noise_and_within_their_spread():
    rule = Matches("ours", "official")  # lower is better
    official = Stat((9.0, 9.3, 9.6))  # sd 0.3
    done = (Budget("ours", (8,) * 3, (6, 7, 5)), Budget("official", (8,) * 3, (7, 6, 6)))
    assert rule.decide(Reading({"ours": Stat((8.9, 9.1, 9.3)), "official": official}, done)) == "met"  # 0.2 apart
    better = stats.ttest_ind((8.4, 8.5, 8.6), official.values, equal_var=False).pvalue  # two-sided
    assert rule.decide(Reading({"ours": Stat((8.4, 8.5, 8.6)), "official": official}, done)) == (
        f"not met: ours better by 0.8 (p = {better:.2g})"
    )
    worse = rule.decide(Reading({"ours": Stat((10.1, 10.2, 10.3)), "official": official}, done))
    assert worse.startswith("not met: ours worse by 0.9")
    wide = Stat((8.0, 9.0, 10.6))  # 0.5 apart, beyond the larger sd (0.3) of a steady side, yet not significant
    assert (
        rule.decide(Reading({"ours": Stat((8.0, 9.0, 10.6)), "official": Stat((8.6, 8.7, 8.8))}, done)).startswith(
            "tie: ours worse by 0.5"
        )
        or wide.sd > 0.5
    )
    assert "fewer than 3 seeds" in rule.decide(Reading({"ours": Stat((9.0,)), "official": official}, done))


def test_matches_is_undecided_while_a_side_is_still_improving_or_its_best_epoch_unknown():
    rule, close = Matches("ours", "official"), {"ours": Stat((8.9, 9.1, 9.3)), "official": Stat((9.0, 9.3, 9.6))}
    ours = Budget("ours", (8, 8, 8), (6, 7, 5))
    last = Budget("official", (8, 8, 8), (7, 8, 6))  # seed 1's best epoch is its last (8 of 8)
    assert rule.decide(Reading(close, (ours, last))) == "undecided: official still improving at its last epoch"
    unknown = Budget("official", (8, 8, 8))  # no best epoch recorded
    assert rule.decide(Reading(close, (ours, unknown))) == "undecided: best epoch of official not recorded"
    assert rule.decide(Reading(close)) == "undecided: best epoch of ours, official not recorded"


def test_within_compares_with_the_papers_figure_by_its_allowance_and_a_t_test():
    rule = Within("A", -4.74)  # higher is better; 5 % of 4.74 is 0.237: the edge is -4.977
    assert rule.decide(Reading({"A": Stat((-4.9, -4.96))})) == "tie with the edge -4.977 (t-test p = 0.18)"
    assert stats.ttest_1samp((-4.9, -4.96), -4.977, alternative="greater").pvalue == pytest.approx(0.181, abs=0.002)
    assert rule.decide(Reading({"A": Stat((-4.90, -4.91, -4.92))})) == "met"  # above the edge beyond the noise
    assert rule.decide(Reading({"A": Stat((-5.0,))})) == "missed by 0.023"  # one seed: its distance to the edge
    assert rule.decide(Reading({"A": Stat((-5.2, -5.25, -5.3))})) == "missed by 0.273"
    assert rule.decide(Reading({"A": Stat((-3.0,))})) == "met"  # above the paper's figure
    assert "within 5 % (0.237) of -4.74 or above it" in rule.text
    mse = Within("A", 0.223, higher_is_better=False)  # 5 % of 0.223 is 0.01115: the edge 0.23415
    assert mse.decide(Reading({"A": Stat((0.334,))})) == "missed by 0.0999"
    assert mse.decide(Reading({"A": Stat((0.23,))})) == "met" and mse.decide(Reading({"A": Stat((0.1,))})) == "met"
    coverage = Within("A", 0.8, two_sided=True)  # 0.04 on either side: too wide is missed as much as too narrow
    assert coverage.decide(Reading({"A": Stat((0.80, 0.81, 0.82))})) == "met"
    assert coverage.decide(Reading({"A": Stat((0.93,))})) == "missed by 0.09 (above)"
    assert coverage.decide(Reading({"A": Stat((0.7,))})) == "missed by 0.06 (below)"
    reported = Within("A", -4.74, 0.1)  # the paper's own reported uncertainty, where it gives one
    assert reported.decide(Reading({"A": Stat((-4.9,))})) == "missed by 0.06"  # its distance from the edge -4.84


def test_within_takes_half_the_gap_to_the_papers_nearest_ranked_model_where_tighter():
    """Nottingham in the SRNN paper's Table 2: SRNN -2.94, STORN -2.85 (0.09 apart): an allowance of 0.045 against
    5 % (0.147); JSB: RNN-NADE -5.19 is 0.45 away, so 0.225 against 0.237."""
    nottingham = Within("SRNN", -2.94, neighbours=(-3.67, -2.72, -2.85, -2.31, -4.46))
    assert nottingham.margin == pytest.approx(0.045)
    assert "0.045 (half the gap to the nearest model the paper ranks, -2.85)" in nottingham.text
    assert nottingham.decide(Reading({"SRNN": Stat((-3.05,))})) == "missed by 0.065"
    assert Within("SRNN", -4.74, neighbours=(-7.48, -3.99, -6.91, -5.19, -8.71)).margin == pytest.approx(0.225)
    assert Within("A", 1.0, neighbours=(3.0,)).margin == pytest.approx(0.05)  # 5 % is tighter than half of 2


def test_a_verdict_on_fewer_than_3_seeds_says_the_smallest_n():
    def claim(rule, figures):
        return Claim(
            paper="psrnn",
            claim="-",
            paper_figure="-",
            metric="-",
            tests=(),
            seeds=(0,),
            rule=rule,
            results=("f.json",),
            reader=lambda data: Reading(figures),
        )

    files = {"f.json": {"commands": ["x"], "seeds": [0]}}
    one = claim(Within("A", 1.0), {"A": Stat((1.01,)), "B": Stat((5.0,))})  # B is shown, not compared
    assert reproductions.row("c", one, files)[3] == "met (n=1)"
    two = claim(Within("A", 1.0), {"A": Stat((1.0, 1.001))})
    assert reproductions.row("c", two, files)[3] == "met (n=2)"
    three = claim(Within("A", 1.0), {"A": Stat((1.0, 1.01, 1.02))})
    assert reproductions.row("c", three, files)[3] == "met"
    mixed = claim(Beats("A", ("B",)), {"A": Stat((1.0, 1.1, 1.2)), "B": Stat((2.0, 2.1))})
    assert reproductions.row("c", mixed, files)[3] == "undecided: B on fewer than 3 seeds (n=2)"


def test_check_reports_a_stale_page_and_missing_seeds(tmp_path):
    for name in reproductions.load_results():
        shutil.copy(RESULTS / name, tmp_path / name)
    page = tmp_path / "reproductions.md"
    reproductions.write_page(tmp_path, page)
    assert reproductions.check(tmp_path, page) == []
    data = json.loads((tmp_path / "srnn_jsb_seeds.json").read_text())  # srnn-jsb's evidence (no reproduction)
    del data["seeds"], data["seed"]
    (tmp_path / "srnn_jsb_seeds.json").write_text(json.dumps(data))
    problems = reproductions.check(tmp_path, page)
    assert problems == [
        "reproductions.md differs from a fresh render: run ppl-models reproduce --render",
        "docs/results/srnn_jsb_seeds.json: no 'seeds' (or 'seed') field",
    ]
    assert "evidence incomplete" in reproductions.render(tmp_path).split("**srnn-jsb**")[1].splitlines()[0]
    record = json.loads((tmp_path / "reproduce_psrnn_ring.json").read_text())  # a reproduction lacking its seeds
    del record["seeds"]
    (tmp_path / "reproduce_psrnn_ring.json").write_text(json.dumps(record))
    assert "docs/results/reproduce_psrnn_ring.json: no 'seeds' (or 'seed') field" in reproductions.check(tmp_path, page)
    (tmp_path / "a_benchmark.json").write_text(json.dumps({"seeds": [0]}))  # quoted by no claim: checked all the same
    assert "docs/results/a_benchmark.json: no 'commands' (or 'command') field" in reproductions.check(tmp_path, page)


def test_reproduce_runs_each_seed_resumably_and_records_provenance(tmp_path, monkeypatch):
    tiny = Claim(
        paper="psrnn",
        claim="a tiny LGSSM run",
        paper_figure="-",
        metric="test MSE",
        tests=("lgssm-demo",),
        seeds=(0, 1),
        rule=Within("LGSSM", 0.0, 1.0),
        members=(
            (
                "LGSSM",
                "lgssm-demo",
                (
                    "train.epochs=1",
                    "data.num_train=8",
                    "data.num_steps=10",
                    "evaluate.num_particles=10",
                    "evaluate.iwae_particles=5",
                    "evaluate.predictive_samples=10",
                ),
            ),
        ),
        incomplete="not run yet",
    )
    monkeypatch.setitem(CLAIMS, "tiny", tiny)
    runs, out = tmp_path / "runs", tmp_path / "results"
    reproductions.reproduce("tiny", 1, runs, results_dir=out)
    first = json.loads((runs / "seed-0" / "lgssm" / "metrics.json").read_text())
    path = reproductions.reproduce("tiny", 2, runs, results_dir=out)  # seed 0 is kept, seed 1 trained
    assert json.loads((runs / "seed-0" / "lgssm" / "metrics.json").read_text()) == first
    record = json.loads(path.read_text())
    assert record["seeds"] == [0, 1] and len(record["commands"]) == 2
    assert "--set 'seed=1' --set 'train.seed=1'" in record["commands"][1]
    assert set(record["machine"]) == {"platform", "cpu_count", "torch", "device"} and record["commit"]
    assert record["wall_seconds"] > 0
    runs_read = record["results"]["LGSSM"]["runs"]
    assert [r["seed"] for r in runs_read] == [0, 1] and runs_read[0]["test_mse"] == first["mse"]
    assert path.name == "reproduce_tiny.json"
    assert tiny.read({path.name: record}).figures["LGSSM"].values == (first["mse"], runs_read[1]["test_mse"])
    ours, _, _, verdict = reproductions.row("tiny", tiny, {path.name: record})
    assert "LGSSM: " in ours and "n=2" in ours and verdict == "met (n=2)"
    assert [r["epochs"] for r in runs_read] == [1, 1] and [r["best_epoch"] for r in runs_read] == [1, 1]


def test_reproduce_runs_a_claims_study_with_its_seeds_run_dir_and_results_file(tmp_path, monkeypatch):
    from ppl_models.experiments.studies import covid_forecasts

    calls = []

    def fake_main(argv):
        calls.append(argv)
        Path(argv[argv.index("--out") + 1]).write_text("{}")
        return 0

    monkeypatch.setattr(covid_forecasts, "main", fake_main)
    path = reproductions.reproduce("smct-covid", 2, tmp_path / "runs", results_dir=tmp_path)
    assert path == tmp_path / "smct_covid_paper_split.json" and path.is_file()
    assert calls == [["--seeds", "2", "--run-dir", str(tmp_path / "runs"), "--out", str(path)]]


def test_a_study_rerun_on_fewer_seeds_never_replaces_the_published_file(tmp_path, monkeypatch, capsys):
    from ppl_models.experiments.studies import covid_forecasts

    def fake_main(argv):
        out = Path(argv[argv.index("--out") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"seeds": list(range(int(argv[argv.index("--seeds") + 1])))}))
        return 0

    monkeypatch.setattr(covid_forecasts, "main", fake_main)
    published = tmp_path / "smct_covid_paper_split.json"
    published.write_text(json.dumps({"seeds": [0, 1, 2], "results": "three seeds"}))
    path = reproductions.reproduce("smct-covid", 1, tmp_path / "runs", results_dir=tmp_path)
    assert path == tmp_path / "runs" / "smct_covid_paper_split.json" and json.loads(path.read_text())["seeds"] == [0]
    assert json.loads(published.read_text()) == {"seeds": [0, 1, 2], "results": "three seeds"}
    assert "it is kept" in capsys.readouterr().out
    assert reproductions.reproduce("smct-covid", 3, tmp_path / "runs", results_dir=tmp_path) == published


def test_reproduce_refuses_bad_input_in_one_line(capsys):
    assert main(["reproduce", "srnn-speech"]) == 2
    assert main(["reproduce", "no-such-claim"]) == 2
    assert main(["reproduce", "--list", "--render"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "not run here" in err[0] and "claim must be one of" in err[1]


def test_claims_blocks_of_other_pages_are_rendered_and_checked(tmp_path):
    for name in reproductions.load_results():
        shutil.copy(RESULTS / name, tmp_path / name)
    page, model = tmp_path / "reproductions.md", tmp_path / "model.md"
    model.write_text("# A model\n\n<!-- claims:psrnn -->\nold rows\n<!-- /claims -->\n\nmore text\n")
    reproductions.write_page(tmp_path, page)
    text = model.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| **psrnn")]
    assert rows and all(line in page.read_text() for line in rows)  # the same rows as the reproductions page
    assert "old rows" not in text and text.endswith("<!-- /claims -->\n\nmore text\n")
    assert reproductions.check(tmp_path, page) == []
    model.write_text(text.replace(rows[0], "| **psrnn-typed**: a hand-copied row |"))
    assert reproductions.check(tmp_path, page) == [
        "model.md: its claims rows differ from a fresh render: run ppl-models reproduce --render"
    ]
    model.write_text("<!-- claims:nope -->\n<!-- /claims -->\n")
    with pytest.raises(ValueError, match="names no paper"):
        reproductions.write_page(tmp_path, page)


# --- a rerun never replaces more evidence; a broken results file is named in one line -----------------------------
def _fake_training(monkeypatch):
    """``reproduce`` and transfers without training: each member's record is ``{"fake": True}``."""
    monkeypatch.setattr(compare, "run_suite", lambda members, *args, **kwargs: {label: {} for label, _, _ in members})
    monkeypatch.setattr(reproductions, "_run_record", lambda folder, row: {"fake": True})
    monkeypatch.setattr(transfers, "_split", lambda folder, transfer: {"fake": True})


def _results_file(path, seeds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"format": "reproduce/1", "commands": ["ppl-models train x"] * len(seeds), "seeds": seeds, "results": {}}
        )
    )
    return path.read_bytes()


def test_a_rerun_on_fewer_seeds_keeps_the_results_file_with_more_and_writes_beside_its_runs(
    tmp_path, monkeypatch, capsys
):
    _fake_training(monkeypatch)
    tiny = Claim(
        paper="psrnn",
        claim="a tiny run",
        paper_figure="-",
        metric="test MSE",
        tests=("lgssm-demo",),
        seeds=(0, 1, 2),
        rule=Within("LGSSM", 0.0, 1.0),
        members=(("LGSSM", "lgssm-demo", ()),),
    )
    monkeypatch.setitem(CLAIMS, "tiny", tiny)
    results, runs = tmp_path / "results", tmp_path / "runs"
    committed = results / "reproduce_tiny.json"
    before = _results_file(committed, [0, 1, 2])
    path = reproductions.reproduce("tiny", 1, runs, results_dir=results)
    assert committed.read_bytes() == before
    assert path == runs / "reproduce_tiny.json" and json.loads(path.read_text())["seeds"] == [0]
    out = capsys.readouterr().out
    assert f"{committed} holds seeds [0, 1, 2]" in out and str(path) in out
    # a file holding no seed the rerun lacks is replaced
    _results_file(committed, [0])
    assert reproductions.reproduce("tiny", 2, runs, results_dir=results) == committed
    assert json.loads(committed.read_text())["seeds"] == [0, 1]


def test_a_transfer_rerun_on_fewer_seeds_keeps_the_results_file_with_more(tmp_path, monkeypatch, capsys):
    _fake_training(monkeypatch)
    monkeypatch.setitem(TRANSFERS, "tiny", Transfer("lgssm-demo", "-", (("source", ()),), estimator="exact"))
    results, runs = tmp_path / "results", tmp_path / "runs"
    committed = results / "transfer_tiny.json"
    before = _results_file(committed, [0, 1, 2])
    path = reproductions.reproduce("transfer-tiny", 2, runs, results_dir=results)
    assert committed.read_bytes() == before and path == runs / "transfer_tiny.json"
    assert json.loads(path.read_text())["seeds"] == [0, 1] and "holds seeds [0, 1, 2]" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["psrnn_ring_seeds.json", "a_benchmark.json"])  # read by a claim, and by none
def test_check_names_a_truncated_results_file_in_one_line(tmp_path, monkeypatch, capsys, name):
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    for kept in reproductions.load_results():
        shutil.copy(RESULTS / kept, results / kept)
    reproductions.write_page(results, tmp_path / "docs" / "reproductions.md")
    text = (RESULTS / "psrnn_ring_seeds.json").read_text()
    (results / name).write_text(text[: len(text) // 2])  # cut short
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{results / name}" in err[0] and "not valid JSON" in err[0]


def test_a_reproduction_file_made_with_another_recipe_is_flagged():
    from ppl_models.experiments.claims.reproductions import recipe_problems

    claim = claims.CLAIMS["psrnn-ptb-3b"]

    def commands(members, seeds):
        return [
            compare.member_command(
                experiment,
                (*overrides, f"seed={s}", f"train.seed={s}"),
                compare.member_folder(Path(f"r/seed-{s}"), label),
            )
            for s in seeds
            for label, experiment, overrides in members
        ]

    data = {"claim": "psrnn-ptb-3b", "seeds": [0, 1], "commands": commands(claim.members, [0, 1])}
    assert recipe_problems(data) == []
    other = [(label, "psrnn-ptb", overrides) for label, _, overrides in claim.members]
    (problem,) = recipe_problems({**data, "commands": commands(other, [0, 1])})
    assert "another recipe" in problem and "reproduce psrnn-ptb-3b" in problem
    assert recipe_problems({**data, "commands": commands(claim.members, [0])})  # a seed's runs missing
    assert recipe_problems({"seeds": [0], "commands": []}) == []  # not a claim's reproduction file


def test_the_smct_official_reader_takes_each_sides_predictive_mse_and_best_epochs():
    from ppl_models.experiments.claims.evidence_readers import smct_official_side_by_side

    def ours(seed, mse):
        bounds = [-1.0, -0.5, -0.6]
        records = [
            {"epoch": e + 1, "valid_bound_per_step": b, "best": b == max(bounds[: e + 1])} for e, b in enumerate(bounds)
        ]
        return {
            "seed": seed,
            "train_wall_seconds": 10.0,
            "curve": [{"record": r} for r in records],
            "test": {"mse": 9.0, "truth_metrics": {"predictive_mse": mse}},
        }

    official = [
        {
            "seed": s,
            "train_wall_seconds": 20.0,
            "curve": [{}, {}, {}, {}],
            "best_epoch": 3,
            "test": {"predictive_mse": 0.5 + s},
        }
        for s in (0, 1)
    ]
    reading = smct_official_side_by_side({"runs": {"ours": [ours(0, 0.6), ours(1, 0.7)], "official": official}})
    assert reading.figures["ours"].values == (0.6, 0.7) and reading.figures["official code"].values == (0.5, 1.5)
    ours_budget, official_budget = reading.budgets
    assert ours_budget.best_epochs == (2, 2) and ours_budget.epochs == (3, 3)
    assert official_budget.best_epochs == (3, 3) and official_budget.epochs == (4, 4) and official_budget.wall_s == 40

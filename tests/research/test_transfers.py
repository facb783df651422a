"""Recipes checked on unseen sources: the gap split, the results file's provenance and the rendered table."""

import json

import pytest
import torch

from ppl_models.experiments.claims import reproductions, transfers
from ppl_models.experiments.claims.transfers import TRANSFERS, Transfer, shares
from ppl_models.experiments.cli import main
from ppl_models.experiments.registry import EXPERIMENTS

TINY = (
    "train.epochs=2",
    "data.num_train=8",
    "data.num_valid=4",
    "data.num_test=6",
    "data.num_steps=10",
    "evaluate.num_particles=10",
    "evaluate.iwae_particles=5",
    "evaluate.predictive_samples=10",
)


def test_registered_transfers_name_sources_the_recipe_was_not_tuned_on():
    for name, transfer in TRANSFERS.items():
        assert transfer.recipe in EXPERIMENTS, name
        assert len(transfer.sources) >= 2 and len(transfer.seeds) >= 3, name
        labels = [label for label, _, _ in transfer.members()]
        assert len(labels) == len(set(labels)) == len(transfer.sources) * (1 + len(transfer.probes))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One LGSSM source (a known truth), the recipe and one probe, seed 0; the written record."""
    root = tmp_path_factory.mktemp("transfer")
    tiny = Transfer(
        "lgssm-demo",
        "the demo source",
        (("source 3", (*TINY, "data.seed=3")), ("source 4", (*TINY, "data.seed=4"))),
        estimator="smc-10",
        bound="elbo",
        more_particles=40,
        probes=(("3 epochs", ("train.epochs=3",)),),
        train_sequences=5,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(TRANSFERS, "tiny", tiny)
        path = reproductions.reproduce("transfer-tiny", 1, root / "runs", results_dir=root / "results")
        yield root, path, json.loads(path.read_text())


def test_transfer_records_provenance_and_every_member(tiny_run):
    root, path, record = tiny_run
    assert path.name == "transfer_tiny.json" and record["format"] == transfers.TRANSFER_FORMAT
    assert record["seeds"] == [0] and len(record["commands"]) == 4 and record["commit"] and record["machine"]
    assert all("--set 'seed=0' --set 'train.seed=0'" in command for command in record["commands"])
    assert set(record["results"]) == {
        "source 3 / recipe",
        "source 3 / 3 epochs",
        "source 4 / recipe",
        "source 4 / 3 epochs",
    }
    run = record["results"]["source 3 / 3 epochs"]["runs"][0]
    assert run["epochs"] == 3 and run["best_epoch"] <= 3
    metrics = json.loads((root / "runs" / "seed-0" / "source-3-3-epochs" / "metrics.json").read_text())
    assert run["test"]["smc-10"]["gap_per_step"] == metrics["gap_to_truth"]["smc-10"]["gap_per_step"]
    assert set(run["test_more_particles"]) >= {"smc-40"}


def test_training_gap_is_the_models_exact_likelihood_against_the_truth_on_training_sequences(tiny_run):
    """The fit share's exact gap equals log p_model(x) - log p_true(x) over the first 5 training sequences."""
    from ppl_models.experiments.build import build_experiment
    from ppl_models.experiments.config import check_config
    from ppl_models.experiments.run_folder import read_config_json
    from ppl_models.inference.training import load_best

    root, _, record = tiny_run
    folder = root / "runs" / "seed-0" / "source-4-recipe"
    data, model, objective = build_experiment(check_config(read_config_json(folder / "config.json")))
    load_best(folder, objective)
    x, mask = data.train[0][:5], data.train[1][:5]
    with torch.no_grad():
        expected = float((model.log_likelihood(x, mask) - data.truth.log_likelihood(x, mask)).sum()) / int(mask.sum())
    run = record["results"]["source 4 / recipe"]["runs"][0]
    assert run["train"]["exact"]["gap_per_step"] == pytest.approx(expected, rel=1e-5)
    assert run["train"]["exact"]["gap_per_step"] != pytest.approx(run["test"]["exact"]["gap_per_step"], rel=1e-3)


def test_shares_add_up_to_the_held_out_gap():
    run = {
        "test": {"smc-10": {"gap_per_step": -0.5}, "elbo": {"gap_per_step": -0.8}},
        "train": {"smc-10": {"gap_per_step": -0.3}},
        "test_more_particles": {"smc-100": {"gap_per_step": -0.45}, "elbo": {"gap_per_step": -0.8}},
    }
    split = shares(run, {"estimator": "smc-10", "bound": "elbo"})
    assert split == pytest.approx(
        {"total": -0.5, "fit": -0.3, "generalisation": -0.2, "evaluation": -0.05, "bound": -0.3}
    )


def test_table_and_page_render_each_member_with_where_the_nats_go(tiny_run, tmp_path):
    _, path, record = tiny_run
    lines = transfers.table(record)
    rows = [line for line in lines if line.startswith(("| source 3", "| source 4"))]
    assert [row.split(" | ")[0] for row in rows] == [
        "| source 3 / recipe",
        "| source 3 / 3 epochs",
        "| source 4 / recipe",
        "| source 4 / 3 epochs",
    ]
    gap = record["results"]["source 4 / recipe"]["runs"][0]["test"]["smc-10"]["gap_per_step"]
    assert rows[2].startswith(f"| source 4 / recipe | {gap:.3f} |")
    assert all(("fit" in row and "generalisation" in row) or "within 0.05" in row for row in rows)
    gaps = [record["results"][f"source {k} / recipe"]["runs"][0]["test"]["smc-10"]["gap_per_step"] for k in (3, 4)]
    assert lines[-1].startswith(f"Trained as recommended, the recipe ends {-max(gaps):.3f} to {-min(gaps):.3f} nats")
    page = tmp_path / "page.md"
    page.write_text("<!-- transfer:nope -->\n<!-- /transfer -->\n")
    with pytest.raises(ValueError, match="names no recipe"):
        reproductions.fill_blocks(page.read_text(), {}, "page.md")
    text = reproductions.fill_blocks("<!-- transfer:srnn-hmm -->\nold\n<!-- /transfer -->\n", {}, "page.md")
    assert "Not run yet: `ppl-models reproduce transfer-srnn-hmm`" in text and "old" not in text


def test_unknown_transfer_is_refused_in_one_line(capsys):
    assert main(["reproduce", "transfer-nope"]) == 2
    assert "claim must be one of" in capsys.readouterr().err


def test_recipe_overrides_set_the_own_data_recipe_exactly():
    """The ``--set`` tables of an own-data transfer give back the recipe's sections, parsed by the CLI's own rules."""
    from ppl_models.experiments.config import apply_overrides
    from ppl_models.experiments.recipes import recipe

    for model, binary in (("srnn", True), ("srnn", False), ("lgssm", False), ("smc-transformer", False)):
        overrides = list(transfers.recipe_overrides(model, binary=binary))
        config = apply_overrides({"data": {"name": "hmm-rolls"}}, overrides)
        expected = recipe(model, binary=binary)
        sections = ("model", "objective", "train", "evaluate")
        assert {k: config[k] for k in sections} == {k: expected[k] for k in sections}
        assert config["data"] == {"name": "hmm-rolls"}  # the source stays the experiment's

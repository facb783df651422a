"""``ppl-models reproduce``: run a claim of :data:`ppl_models.experiments.claims.CLAIMS` for its seeds, render
``docs/reproductions.md`` from the results files, and check the page and the files' provenance.

:func:`reproduce` trains the claim's members for each seed into ``<run_dir>/seed-<N>/<label>`` through
:func:`ppl_models.experiments.compare.run_suite` (finished runs are kept, interrupted ones resume) and writes
``docs/results/reproduce_<claim>.json`` (:func:`reproduction_file`) in the ``reproduce/1`` shape:
``commands``, ``seeds``, ``commit``, ``machine``, ``wall_seconds`` and, per label, one record per seed
(the run's test metrics, ``best_epoch``, ``epochs``, ``seconds``). Once it exists it is the claim's
evidence in place of the earlier studies' files, which other pages quote and which are never overwritten.
:func:`render` is the one renderer of the page; :func:`check` compares it with the committed page.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import re
import shlex
import time
from pathlib import Path

import torch

from ppl_models.inference.atomic_files import write_json, write_text

from .. import compare
from . import CLAIMS, PAPERS, REPRODUCE_FORMAT, Claim, Reading
from .ab_table import AB_STUDIES, ab_table
from .benchmark_table import benchmark_table
from .factor_table import STUDY_FILES, factor_table
from .provenance import REPO_ROOT, commit_label, provenance_problems
from .results_files import read_results_file, results_destination
from .rules import RELATIVE_TOLERANCE
from .transfers import TRANSFERS, run_transfer, table, transfer_file

__all__ = [
    "project_root",
    "reproduction_file",
    "reproduce",
    "load_results",
    "row",
    "render",
    "write_page",
    "check",
    "listing",
    "TRANSFER_PREFIX",
]

#: a name ``transfer-RECIPE`` given to ``reproduce`` runs :data:`ppl_models.experiments.claims.transfers.TRANSFERS`
# ``[RECIPE]``
TRANSFER_PREFIX = "transfer-"


def project_root() -> Path:
    """The project folder whose ``docs/results`` the claims read: the working directory where it holds one, else the
    checkout this module belongs to."""
    for candidate in (Path.cwd(), REPO_ROOT):
        if (candidate / "docs" / "results").is_dir():
            return candidate
    raise ValueError(f"no docs/results folder in {Path.cwd()}: run ppl-models reproduce from the project's root")


def _results(results_dir: str | Path | None) -> Path:
    return Path(results_dir) if results_dir is not None else project_root() / "docs" / "results"


def reproduction_file(name: str) -> str:
    """The file name under ``docs/results/`` of claim ``name``'s reproduction."""
    return f"reproduce_{name.replace('-', '_')}.json"


def _claim(name: str) -> Claim:
    if name not in CLAIMS:
        raise ValueError(
            f"claim must be one of {sorted(CLAIMS) + [TRANSFER_PREFIX + t for t in TRANSFERS]}, got {name!r}"
        )
    return CLAIMS[name]


def reproduce(
    name: str,
    seeds: int | None = None,
    run_dir: str | Path | None = None,
    results_dir: str | Path | None = None,
    device: str | None = None,
) -> Path:
    """Train claim ``name``'s members for its first ``seeds`` seeds (default all) and write its results file.

    ``transfer-RECIPE`` runs a recipe's check on unseen sources instead
    (:func:`ppl_models.experiments.claims.transfers.run_transfer`).
    """
    if name.startswith(TRANSFER_PREFIX) and name[len(TRANSFER_PREFIX) :] in TRANSFERS:
        recipe = name[len(TRANSFER_PREFIX) :]
        return run_transfer(
            recipe,
            seeds,
            run_dir or f"runs/reproduce-{name}",
            _results(results_dir),
            commit_label(),
            _machine(device),
            device,
        )
    claim = _claim(name)
    if claim.not_run:
        raise ValueError(f"claim {name!r} is not run here: {claim.not_run}")
    if claim.manual:
        raise ValueError(f"claim {name!r} is not rerun by reproduce: {claim.manual}")
    if claim.study:
        return _run_study(claim, seeds, run_dir or f"runs/reproduce-{name}", results_dir)
    members = claim.members
    chosen = tuple(range(seeds)) if seeds is not None else claim.seeds
    root = Path(run_dir or f"runs/reproduce-{name}")
    path = results_destination(_results(results_dir) / reproduction_file(name), chosen, root / reproduction_file(name))
    start = time.perf_counter()
    results: dict[str, dict] = {label: {"runs": []} for label, _, _ in members}
    commands = []
    for seed in chosen:
        seeded = tuple(
            (label, experiment, (*overrides, f"seed={seed}", f"train.seed={seed}"))
            for label, experiment, overrides in members
        )
        folder = root / f"seed-{seed}"
        commands += [
            compare.member_command(experiment, overrides, compare.member_folder(folder, label))
            for label, experiment, overrides in seeded
        ]
        summary = compare.run_suite(seeded, folder, device=device)
        for label, _, _ in members:
            results[label]["runs"].append(
                {"seed": seed, **_run_record(compare.member_folder(folder, label), summary[label])}
            )
    record = {
        "format": REPRODUCE_FORMAT,
        "claim": name,
        "commands": commands,
        "seeds": list(chosen),
        "commit": commit_label(),
        "machine": _machine(device),
        "wall_seconds": time.perf_counter() - start,
        "results": results,
    }
    write_json(path, record)
    return path


def _run_study(claim: Claim, seeds: int | None, run_dir: str | Path, results_dir: str | Path | None) -> Path:
    """Run the claim's study for its first ``seeds`` seeds; the results file it wrote (beside its runs where the
    published file holds seeds this rerun lacks: :func:`.results_files.results_destination`)."""
    count = seeds or len(claim.seeds)
    path = results_destination(_results(results_dir) / claim.results[0], range(count), Path(run_dir) / claim.results[0])
    study = importlib.import_module(f"ppl_models.experiments.studies.{claim.study}")
    study.main(["--seeds", str(count), "--run-dir", str(run_dir), "--out", str(path)])
    return path


def _run_record(folder: Path, row: dict) -> dict:
    """A finished run's test metrics (its comparison row and ``metrics.json``'s numbers) and its budget."""
    metrics = json.loads((folder / "metrics.json").read_text())
    record = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    record.update({k: v for k, v in row.items() if v is not None})
    return {**record, **compare.run_budget(folder)}


def _machine(device: str | None) -> dict:
    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "device": device or ("cuda" if torch.cuda.is_available() else "cpu"),
    }


def load_results(results_dir: str | Path | None = None) -> dict[str, dict]:
    """Every results file a claim names, every reproduction, every real-series board (``board_*_cpu.json``), every
    one-factor study (:data:`.factor_table.STUDY_FILES`), every A/B study (:data:`.ab_table.AB_STUDIES`) and every
    benchmark a docs page's ``<!-- speed:NAME -->`` block names that exists: ``{file name: data}``."""
    results_dir = _results(results_dir)
    names = (
        {name for claim in CLAIMS.values() for name in claim.results}
        | set(map(reproduction_file, CLAIMS))
        | set(map(transfer_file, TRANSFERS))
        | {path.name for path in results_dir.glob("board_*_cpu.json")}
        | set(STUDY_FILES)
        | {study[0] for study in AB_STUDIES.values()}
        | _speed_files(results_dir.parent)
    )
    return {name: read_results_file(results_dir / name) for name in sorted(names) if (results_dir / name).is_file()}


def _speed_files(pages: Path) -> set[str]:
    """The results files the ``<!-- speed:NAME -->`` blocks of the docs pages in ``pages`` name."""
    return {
        f"{match.group('key')}.json"
        for page in pages.glob("*.md")
        for match in CLAIMS_BLOCK.finditer(page.read_text())
        if match.group("kind") == "speed"
    }


def _stat(stat) -> str:
    sd = "" if stat.sd is None else f" ± {stat.sd:.2g}"
    return f"{stat.mean:.4g}{sd} (n={len(stat.values)})"


def _budget(budget) -> str:
    parts = []
    if budget.epochs:
        parts.append(f"epochs {_ints(budget.epochs)}")
    parts.append(f"best epoch {_ints(budget.best_epochs)}" if budget.best_epochs else "best epoch not recorded")
    parts.append(
        f"{budget.trials} tuning trial{'s' if budget.trials != 1 else ''}"
        if budget.trials is not None
        else "tuning trials not recorded"
    )
    if budget.wall_s is not None:
        parts.append(f"{budget.wall_s:,.0f} s of training in all")
    return f"{budget.model}: " + ", ".join(parts)


def _ints(values) -> str:
    return ", ".join(str(v) for v in values)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


#: the seeds a verdict needs to rest on; a verdict on fewer says the smallest n of its compared models ("met (n=1)")
MIN_SEEDS = 3


def row(name: str, claim: Claim, files: dict[str, dict]) -> tuple[str, str, str, str]:
    """The rendered ours, budgets, rule and verdict of one claim (``files``: loaded results files)."""
    if claim.not_run:
        return "not run", "-", claim.rule.text, f"not run: {claim.not_run}"
    used = _evidence(name, claim, files)
    missing = [f for f in used if f not in files]
    if not used or missing:
        why = claim.incomplete or f"no results file ({', '.join(missing)})"
        return "no file", "-", claim.rule.text, f"evidence incomplete: {why}"
    reading: Reading = claim.read({f: files[f] for f in used})
    ours = "<br>".join(f"{model}: {_stat(stat)}" for model, stat in reading.figures.items())
    budgets = "<br>".join(_budget(b) for b in reading.budgets) or "-"
    problems = [p for f in used for p in provenance_problems(f, files[f])]
    problems += [p for f in used for p in recipe_problems(files[f])]
    verdict = ("evidence incomplete: " + "; ".join(problems)) if problems else claim.rule.decide(reading)
    fewest = min(len(reading.figures[model].values) for model in claim.rule.models)
    if not problems and fewest < MIN_SEEDS:
        verdict += f" (n={fewest})"
    if verdict.startswith("undecided") and claim.rerun_cost:
        verdict += f" ({claim.rerun_cost})"
    return ours, budgets, claim.rule.text, verdict


def recipe_problems(data: dict) -> list[str]:
    """One line when the runs a claim's reproduction file records are not that claim's members today (another
    experiment or other settings, seeds aside): the file then measured another recipe, and ``reproduce`` must rerun
    it. Files of no claim with members give none."""
    name = data.get("claim")
    claim = CLAIMS.get(name) if isinstance(name, str) else None
    if claim is None or not claim.members:
        return []
    recorded = sorted(_recipe(command) for command in data.get("commands", []))
    expected = sorted(
        _recipe(compare.member_command(experiment, (*overrides, f"seed={seed}", f"train.seed={seed}"), Path(".")))
        for seed in data.get("seeds", [])
        for _, experiment, overrides in claim.members
    )
    if recorded == expected:
        return []
    return [f"its runs were made with another recipe than the claim's members today; ppl-models reproduce {name}"]


def _recipe(command: str) -> tuple[str, ...]:
    """A recorded ``ppl-models train`` command without its ``--run-dir`` (the recipe and seed it ran)."""
    words = shlex.split(command)
    if "--run-dir" in words:
        at = words.index("--run-dir")
        del words[at : at + 2]
    return tuple(words)


def _evidence(name: str, claim: Claim, files: dict) -> tuple[str, ...]:
    """The files a claim's row reads: its reproduction once there is one, else its earlier studies' files."""
    return (reproduction_file(name),) if reproduction_file(name) in files else claim.results


def render(results_dir: str | Path | None = None) -> str:
    """The text of ``docs/reproductions.md``: one table per paper, every figure read from its results file."""
    files = load_results(results_dir)
    lines = [
        "# Reproductions",
        "",
        "Each paper's headline claims, what tests them here, our figures read from their results files under "
        "`docs/results/` and the verdict of each claim's rule. This page is generated by "
        "`ppl-models reproduce --render` (never edited by hand); `ppl-models reproduce --check` fails when it "
        "is out of date. Rerun a claim with `ppl-models reproduce NAME [--seeds N] [--run-dir DIR]`; "
        "`ppl-models reproduce --list` lists them.",
        "",
        "Ours: mean ± sample sd over n seeds (over folds where the metric says so). A difference counts only "
        "where it holds across seeds: one model beats another when Welch's t-test gives a one-sided p below "
        "0.05 on at least 3 seeds each, with every compared model's best epoch before its last; an "
        "implementation matches its reference when no such test (two-sided) separates them and their means "
        "differ by no more than the larger sd; otherwise the verdict is a tie. A figure compared with the "
        "paper's has an allowance: the paper's reported uncertainty where it gives one, else the tighter of "
        f"{RELATIVE_TOLERANCE * 100:g} % of the figure's magnitude and half the gap to the nearest model the "
        "paper's table ranks in the same column (a figure within it would not change the paper's ranking). It "
        "is met when ours is within the allowance or better (within it on either side for a coverage) beyond "
        "the seeds' noise (one-sample t-test against the allowance's edge, one-sided p below 0.05), missed when "
        'beyond the edge so, otherwise a tie with the edge; "missed by" is always the distance from our mean '
        "to that edge. A "
        f"verdict resting on fewer than {MIN_SEEDS} seeds says "
        "the smallest n of its compared models, e.g. met (n=1).",
        "",
    ]
    for paper, title in PAPERS.items():
        lines += [f"## {title}", "", *_paper_table(paper, files), ""]
    lines += [
        "## Recommended recipes on sources they were not tuned on",
        "",
        "Each recipe trained unchanged on sources with a known exact log-likelihood that it was not tuned on; "
        "the held-out gap split into fit (the gap on the training sequences), generalisation (held-out minus "
        "training), evaluation (a cheaper estimate of the same model) and the training bound's own gap.",
        "",
    ]
    for recipe in TRANSFERS:
        lines += [f"### {recipe}", "", *_transfer_table(recipe, files), ""]
    return "\n".join(lines)


def _transfer_table(recipe: str, files: dict) -> list[str]:
    """The rendered table of one recipe's transfer file, or why there is none yet."""
    name = transfer_file(recipe)
    if name not in files:
        return [f"Not run yet: `ppl-models reproduce {TRANSFER_PREFIX}{recipe}` writes docs/results/{name}."]
    return [*table(files[name]), "", f"File: [{name}](results/{name})."]


def _paper_table(paper: str, files: dict) -> list[str]:
    """The Markdown table of one paper's claims (the rows of :func:`render`)."""
    lines = [
        "| claim | paper's figure | our metric | tested by | ours | budgets | rule | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, claim in CLAIMS.items():
        if claim.paper != paper:
            continue
        ours, budgets, rule, verdict = row(name, claim, files)
        files_text = ", ".join(f"[{f}](results/{f})" for f in _evidence(name, claim, files) if f in files)
        tested = ", ".join(f"`{t}`" for t in claim.tests) or "-"
        cells = [
            f"**{name}**: {claim.claim}",
            claim.paper_figure,
            claim.metric,
            tested + (f"; {files_text}" if files_text else ""),
            ours,
            budgets,
            rule,
            verdict,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


#: a block of a docs page that the renderer fills with one paper's rows (``<!-- claims:PAPER -->`` ...
#: ``<!-- /claims -->``), one recipe's transfer table (``<!-- transfer:RECIPE -->`` ... ``<!-- /transfer -->``) or
#: the boards of a real series over seeds (``<!-- board:NAME -->`` ... ``<!-- /board -->``, from
#: ``docs/results/board_NAME_cpu.json``), a one-factor-at-a-time study (``<!-- factors:NAME -->``,
#: :mod:`.factor_table`), a benchmark's timings (``<!-- speed:NAME -->``, :mod:`.benchmark_table`) or a paired A/B
#: study (``<!-- ab:NAME -->``, :mod:`.ab_table`)
CLAIMS_BLOCK = re.compile(
    r"(<!-- (?P<kind>claims|transfer|board|factors|speed|ab):(?P<key>[\w-]+) -->\n)(?P<body>.*?)"
    r"(<!-- /(?P=kind) -->)",
    re.S,
)


def fill_blocks(text: str, files: dict, where: str = "page") -> str:
    """``text`` with each :data:`CLAIMS_BLOCK` holding its paper's rendered rows (a model page shows the rows of
    ``docs/reproductions.md``, never hand-copied numbers)."""

    def fill(match: re.Match) -> str:
        kind, key = match.group("kind"), match.group("key")
        if kind == "board":
            return match.group(1) + "\n".join(board_table(key, files)) + "\n" + match.group(5)
        if kind == "factors":
            return match.group(1) + "\n".join(factor_table(key, files)) + "\n" + match.group(5)
        if kind == "speed":
            return match.group(1) + "\n".join(benchmark_table(key, files)) + "\n" + match.group(5)
        if kind == "ab":
            return match.group(1) + "\n".join(ab_table(key, files)) + "\n" + match.group(5)
        known = PAPERS if kind == "claims" else TRANSFERS
        if key not in known:
            what = "paper" if kind == "claims" else "recipe"
            raise ValueError(f"{where}: <!-- {kind}:{key} --> names no {what}; expected one of {list(known)}")
        rows = _paper_table(key, files) if kind == "claims" else _transfer_table(key, files)
        return match.group(1) + "\n".join(rows) + "\n" + match.group(5)

    return CLAIMS_BLOCK.sub(fill, text)


def board_table(name: str, files: dict) -> list[str]:
    """The Markdown table of the boards of real series ``name`` over seeds (``docs/results/board_NAME_cpu.json``,
    written by :mod:`ppl_models.experiments.studies.real_series`), or how to make it."""
    file = f"board_{name.replace('-', '_')}_cpu.json"
    if file not in files:
        return [
            f"Not run yet: `python -m ppl_models.experiments.studies.real_series {name} --out runs/real-{name}` "
            f"writes docs/results/{file}."
        ]
    record = files[file]
    lines = [
        "| model | kind | held-out nats / step | one-step MSE | CRPS | coverage at 80 % | flags (seeds) |",
        "|---|---|---|---|---|---|---|",
    ]
    ranked = sorted(record["summary"].items(), key=lambda item: -(item[1]["nats_per_step"]["mean"] or -math.inf))
    ranked, ranking = _unflagged_first(ranked, len(record["seeds"]))
    for model, entry in ranked:
        flags = entry["flags"] if isinstance(entry["flags"], dict) else {}
        cells = [
            model,
            entry["kind"],
            *(_spread(entry[f]) for f in ("nats_per_step", "mse", "crps", "coverage_0.8")),
            "; ".join(f"{kind} ({count} of {len(record['seeds'])})" for kind, count in flags.items()) or "-",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    seeds, seconds = record["seeds"], sum(board["seconds"] for board in record["boards"])
    fitted = sum(row.get("train_seconds") or 0.0 for board in record["boards"] for row in board["rows"])
    return [
        *lines,
        *ranking,
        *_multistep_table(record.get("multistep"), len(seeds)),
        "",
        f"Seeds {_ints(seeds)} (mean ± sd over seeds; the classical rows do not depend on the seed); "
        f"{fitted / 60:.0f} min of training and fitting in the rows (their own timings), "
        f"{seconds / 60:.0f} min of wall time in the call that wrote the file (finished rows are kept), "
        f"on {record['cores']} cores; commit {record['commit']}. File: [{file}](results/{file}).",
    ]


def _multistep_table(summary: dict | None, seeds: int) -> list[str]:
    """The multi-step table of a real series' boards over seeds (none without one): per row its mean CRPS over
    horizons and 80 % coverage, and in how many seeds its paired interval against the best classical row put it
    ahead (beats), level (tie) or behind, ranked by mean CRPS."""
    if not summary:
        return []
    references = " or ".join(summary["references"]) or "-"
    lines = [
        "",
        f"{summary['horizon']} steps ahead, {summary['forecasts']} forecasts per row and seed (up to "
        f"{summary['origins']} origins per test series), against the classical row of lowest mean CRPS "
        f"({references}):",
        "",
        "| model | kind | mean CRPS over h | coverage at 80 % | against the best classical row (seeds) | "
        "flags (seeds) |",
        "|---|---|---|---|---|---|",
    ]
    ranked = sorted(summary["models"].items(), key=lambda item: item[1]["crps_mean"]["mean"] or math.inf)
    ranked, ranking = _unflagged_first(ranked, seeds)
    for model, entry in ranked:
        verdicts = "; ".join(f"{verdict} ({count} of {seeds})" for verdict, count in entry["verdicts"].items())
        flags = "; ".join(f"{kind} ({count} of {seeds})" for kind, count in entry["flags"].items())
        cells = [
            model,
            entry["kind"],
            _spread(entry["crps_mean"]),
            _spread(entry["coverage_80_mean"]),
            verdicts or "-",
            flags or "-",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines + ranking


def _unflagged_first(ranked: list, seeds: int) -> tuple[list, list[str]]:
    """``(ranked, a note)``: the rows ``[(model, entry)]`` in their order, but the best row flagged in no seed first
    (a flagged row is never ranked first, as on each seed's board), with a sentence naming the flagged rows it
    passed; the rows unchanged and no note where the first is unflagged (or every row is flagged)."""
    flags = [entry["flags"] if isinstance(entry.get("flags"), dict) else {} for _, entry in ranked]
    first = next((i for i, kinds in enumerate(flags) if not kinds), None)
    if not first:
        return ranked, []
    passed = "; ".join(
        f"{model}: " + ", ".join(f"{kind} ({count} of {seeds})" for kind, count in kinds.items())
        for (model, _), kinds in zip(ranked[:first], flags)
    )
    note = (
        f"{ranked[first][0]} is listed first as the best row flagged in no seed; those above it are flagged ({passed})."
    )
    return [ranked[first], *ranked[:first], *ranked[first + 1 :]], ["", note]


def _spread(figure: dict) -> str:
    """``mean ± sd (n)`` of a figure summarised over seeds (``mean`` alone for one value, ``-`` for none)."""
    if figure["mean"] is None:
        return "-"
    if figure["sd"] is None or figure["sd"] < 1e-9 * max(1.0, abs(figure["mean"])):  # one value, or the same
        return f"{figure['mean']:.4g}"
    return f"{figure['mean']:.4g} ± {figure['sd']:.2g} (n={figure['n']})"


def _pages_with_blocks(page: Path) -> list[Path]:
    """The docs pages beside ``page`` that hold a claims block."""
    marks = ("<!-- claims:", "<!-- transfer:", "<!-- board:", "<!-- factors:", "<!-- speed:", "<!-- ab:")
    return sorted(p for p in page.parent.glob("*.md") if p != page and any(m in p.read_text() for m in marks))


def check(results_dir: str | Path | None = None, page: str | Path | None = None) -> list[str]:
    """Problems, one line each: the page or a claims block differs from a fresh render, a results file under
    ``docs/results/`` (any, not only those a claim reads) lacks its command or seeds. ``ppl-models reproduce
    --check`` adds the recorded commands today's code refuses
    (:func:`~ppl_models.experiments.claims.recorded_commands.stale_commands`)."""
    problems = []
    page = Path(page) if page is not None else project_root() / "docs" / "reproductions.md"
    if not page.is_file():
        problems.append(f"{page.name} is missing: run ppl-models reproduce --render")
    elif page.read_text() != render(results_dir):
        problems.append(f"{page.name} differs from a fresh render: run ppl-models reproduce --render")
    files = load_results(results_dir)
    for other in _pages_with_blocks(page):
        if other.read_text() != fill_blocks(other.read_text(), files, other.name):
            problems.append(
                f"{other.name}: its claims rows differ from a fresh render: run ppl-models reproduce --render"
            )
    for path in sorted(_results(results_dir).glob("*.json")):  # every results file, quoted by a claim or not
        data = read_results_file(path)
        problems += provenance_problems(path.name, data if isinstance(data, dict) else {})
    return problems


def listing() -> str:
    """One line per claim: name, paper, claim, and what runs it (or why it is not run)."""
    lines = []
    for name, claim in CLAIMS.items():
        how = (
            f"not run: {claim.not_run}"
            if claim.not_run
            else f"rerun by hand: {claim.manual}"
            if claim.manual
            else "runs " + ", ".join(sorted({e for _, e, _ in claim.members})) + f"; seeds {_ints(claim.seeds)}"
        )
        lines.append(f"{name:<28} [{claim.paper}] {claim.claim} ({how})")
    for recipe, transfer in TRANSFERS.items():
        sources = "; ".join(label for label, _ in transfer.sources)
        lines.append(
            f"{TRANSFER_PREFIX + recipe:<28} [recipe] {recipe} on sources it was not tuned on: {sources} "
            f"(seeds {_ints(transfer.seeds)})"
        )
    return "\n".join(lines)


def write_page(results_dir: str | Path | None = None, page: str | Path | None = None) -> Path:
    """Render the page into ``page`` (default the project's ``docs/reproductions.md``) and the claims blocks of
    the pages beside it."""
    page = Path(page) if page is not None else project_root() / "docs" / "reproductions.md"
    write_text(page, render(results_dir))
    files = load_results(results_dir)
    for other in _pages_with_blocks(page):
        text = other.read_text()
        if fill_blocks(text, files, other.name) != text:
            write_text(other, fill_blocks(text, files, other.name))
    return page

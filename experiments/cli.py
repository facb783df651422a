"""The ``ppl-models`` command line: list, train, evaluate, demo.

Examples::

    ppl-models list
    ppl-models demo
    ppl-models train lgssm-demo --set objective.gradient=\\"stop_weights\\" --run-dir runs/fisher
    ppl-models train my_experiment.toml --set train.lr=0.005 --device cpu
    ppl-models train lgssm-demo --run-dir runs/fisher --resume
    ppl-models train lgssm-demo --run-dir runs/fisher --resume --epochs 100
    ppl-models evaluate runs/fisher --set num_particles=5000
    ppl-models suite psrnn-swimmer --run-dir runs/psrnn-swimmer
    ppl-models suite pfrnn-mazes --run-dir runs/mazes --only "PF-GRU / maze 18"
    ppl-models compare GRU=runs/a PSRNN=runs/b --out runs/gru-vs-psrnn
    ppl-models forecast SMC-T=runs/smct-covid LSTM=runs/lstm-covid --out runs/covid-forecasts
    ppl-models reproduce --list                       (from a source checkout: a plug-in command)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

import ppl_models
from ppl_models.classical import CLASSICAL
from ppl_models.inference.evaluation import EVALUATION_PARTICLES
from ppl_models.inference.recalibration import RECALIBRATION_METHODS

from . import (
    board_training,
    compare,
    demo,
    forecasting,
    leaderboard,
    own_data,
    processes,
    registry,
    run_folder,
    runner,
    suites,
    supervised,
)
from .arguments import Parser, count, device_option
from .build import resolve_device
from .classical_rows import refuse_classical_folder
from .cli_messages import as_flags, data_warnings_on_one_line, from_data
from .config import apply_overrides
from .data_flags import add_data_flags, data_overrides
from .plugins import add_plugin_commands
from .tables import format_table

__all__ = ["main", "USER_ERRORS"]

DATA_HELP = (
    "your own file: .csv / .parquet in long format (one row per series and step; name the columns with "
    "--series COL, --time COL, --features A,B), .npz (x [N, T, D], mask) or a folder of .mid files; split by "
    "--split series|time (--set data.fractions=[...]) or --split-column COL; --window N cuts training "
    "windows; every other [data] key by --set data.KEY=VALUE"
)

#: what a user's input or environment causes: one line, exit status 2 (:data:`.processes.USER_ERRORS`)
USER_ERRORS = processes.USER_ERRORS


def _list(args) -> int:
    print("the collection (import from ppl_models; capabilities declared by each class):")
    for cls in ppl_models.COLLECTION:
        print(f"  {cls.__name__:<24} {cls.description}")
        print(f"  {'':<24}   can: {', '.join(sorted(cls.capabilities)) or 'none (a layer)'}")
    print("models for your own data (ppl-models train MODEL --data PATH, ppl-models leaderboard --data PATH):")
    print("  " + ", ".join(own_data.MODEL_NAMES) + " (pf-lstm, pf-gru: --set data.targets=[...] columns as y)")
    sections = (
        ("models (config name)", registry.MODELS),
        ("data sets", registry.DATASETS),
        ("objectives", registry.OBJECTIVES),
        ("experiments", registry.EXPERIMENTS),
        ("suites", suites.SUITES),
    )
    for title, entries in sections:
        print(f"{title}:")
        for name, entry in entries.items():
            print(f"  {name:<24} {entry.description}")
    return 0


def _finish(metrics: dict, run_dir) -> int:
    print(format_table(metrics))
    print(f"\nrun folder: {run_dir}")
    return 0


def _train(args) -> int:
    overrides = data_overrides(args) + list(args.set)
    overrides += [f"device={args.device!r}".replace("'", '"')] if args.device else []
    overrides += _epochs_on_resume(args)
    options = {"resume": args.resume, "change_epochs": args.epochs is not None}
    if own_data.is_model_name(args.experiment) and args.experiment not in registry.EXPERIMENTS:
        if args.data is None:
            raise ValueError(
                f"train {args.experiment}: a model name needs --data PATH (your file); or name an "
                "experiment (see ppl-models list)"
            )
        config = own_data.model_config(args.experiment, args.data, overrides)
    else:
        config = own_data.load_experiment(args.experiment, overrides, data=args.data)
    run_dir = args.run_dir or run_folder.timestamped(config["name"])
    if config.get("kind") == "supervised":
        return _train_supervised(config, run_dir, **options)
    return _finish(runner.train(config, run_dir, **options), run_dir)


def _epochs_on_resume(args) -> list[str]:
    """The ``train.epochs`` override a resumption implies: ``--epochs N``, else the run's own number of epochs
    (``--set train.epochs`` is then checked against the run's by :func:`run_folder.prepare_run_dir`)."""
    given = any(item.split("=", 1)[0].strip() == "train.epochs" for item in args.set)
    if args.epochs is not None:
        if not args.resume:
            raise ValueError(
                "--epochs changes a resumed run's length: use it with --resume (a new run takes --set train.epochs=N)"
            )
        if given:
            raise ValueError("give the number of epochs of a resumed run once: --epochs N, not --set train.epochs")
        return [f"train.epochs={args.epochs}"]
    epochs = run_folder.run_epochs(args.run_dir) if args.resume and args.run_dir and not given else None
    return [f"train.epochs={epochs}"] if isinstance(epochs, int) else []


def _train_supervised(config: dict, run_dir, resume: bool = False, change_epochs: bool = False) -> int:
    metrics = supervised.train(config, run_dir, resume=resume, change_epochs=change_epochs)
    print(supervised.format_table(metrics) + f"\n\nrun folder: {run_dir}")
    return 0


def _evaluate(args) -> int:
    overrides = apply_overrides({}, args.set)
    out = args.out or Path(args.run_dir) / "evaluations" / run_folder.timestamped("evaluate").name  # unique per process
    return _finish(runner.evaluate(args.run_dir, overrides, args.device, out=out, force=args.force), out)


def _demo(args) -> int:
    names = registry.DEMOS if args.only is None else (args.only,)
    root = args.run_dir or run_folder.timestamped("demo")
    return demo.run_demos(names, root, jobs=args.jobs or demo.default_jobs(), device=args.device, quick=args.quick)


def _leaderboard(args) -> int:
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models is not None else None
    leaderboard.run_leaderboard(
        args.data,
        args.out,
        models,
        data_overrides(args) + list(args.set),
        args.device,
        retrain=args.retrain,
        jobs=args.jobs or processes.default_jobs(),
        budget=args.budget,
        classical=_classical_names(args.classical),
    )
    print((Path(args.out) / "leaderboard.md").read_text())
    print(f"leaderboard folder: {args.out} (calibration.png, fan_chart.png, runs/)")
    return 0


def _classical_names(text: str | None) -> list[str] | None:
    """``--classical`` as a list of names (``None``: the default ones; ``none``: no classical row)."""
    if text is None:
        return None
    return [] if text.strip() == "none" else [name.strip() for name in text.split(",") if name.strip()]


def _suite(args) -> int:
    if args.suite not in suites.SUITES:
        raise ValueError(f"suite must be one of {sorted(suites.SUITES)}, got {args.suite!r}")
    root = args.run_dir or run_folder.timestamped(args.suite)
    summary = compare.run_suite(
        suites.SUITES[args.suite].members,
        root,
        data_overrides(args) + list(args.set),
        args.device,
        args.only,
        data=args.data,
    )
    print((Path(root) / "comparison.md").read_text())
    print(f"suite folder: {root} ({len(summary)} runs)")
    return 0


def _labelled_runs(items: list[str]) -> dict[str, str]:
    """``{label: folder}`` from ``LABEL=RUN_FOLDER`` arguments (split at the last ``=``: labels may hold one);
    a label given twice is refused (a dict would keep the last run only)."""
    folders = {}
    for item in items:
        label, sep, folder = item.rpartition("=")
        if not sep or not label or not folder:
            raise ValueError(f"runs must look like LABEL=RUN_FOLDER, got {item!r}")
        if label in folders:
            raise ValueError(
                f"label {label!r} is given twice ({folders[label]} and {folder}): each run needs a label of its own"
            )
        folders[label] = folder
    return folders


def _compare(args) -> int:
    compare.compare(_labelled_runs(args.runs), args.out, feature=args.feature)
    print((Path(args.out) / "comparison.md").read_text())
    return 0


def _forecast(args) -> int:
    for label, folder in _labelled_runs(args.runs).items():
        refuse_classical_folder(
            folder,
            f"run {label!r}:",
            "ppl-models backtest takes it; from Python, "
            "ppl_models.experiments.classical_rows.classical_row(folder) gives (name, data) and "
            "fitted_classical(name, data) its forecaster, whose forecast(x, mask, horizon, "
            "num_samples) draws the paths",
        )
    device = str(resolve_device(args.device or "cpu"))
    if args.beyond is not None:
        if len(args.runs) != 1:
            raise ValueError(f"--beyond forecasts one run past the end of its data, got {len(args.runs)} runs")
        unused = [
            flag
            for flag, given in (
                ("--horizon", args.horizon is not None),
                ("--observed", args.observed is not None),
                ("--em-iterations", args.em_iterations != 0),
                ("--em-sites", args.em_sites is not None),
                ("--recalibrate", args.recalibrate is not None),
                ("--recalibrate-per-step", args.recalibrate_per_step),
            )
            if given
        ]
        if unused:
            raise ValueError(
                f"{unused[0]} goes with forecasts of the test split, not with --beyond H (which forecasts "
                "H steps after each series' last one, given all of it)"
            )
        try:
            path = forecasting.forecast_beyond(
                next(iter(_labelled_runs(args.runs).values())),
                args.out,
                horizon=args.beyond,
                num_samples=args.samples,
                num_particles=args.particles,
                device=device,
                data_path=args.data,
            )
        except forecasting.HorizonTooLong as error:
            raise error.named("--beyond") from None
        print(f"wrote {path}")
        return 0
    forecasting.compare_forecasts(
        _labelled_runs(args.runs),
        args.out,
        observed=args.observed,
        horizon=args.horizon,
        num_samples=args.samples,
        num_particles=args.particles,
        em_iterations=args.em_iterations,
        em_sites=[site.strip() for site in args.em_sites.split(",")] if args.em_sites is not None else None,
        recalibrate=args.recalibrate,
        recalibrate_per_step=args.recalibrate_per_step,
        device=device,
        data_path=args.data,
    )
    print((Path(args.out) / "forecast.md").read_text())
    return 0


def _backtest(args) -> int:
    from .backtest_runs import backtest_run

    out = Path(args.out) if args.out is not None else Path(args.run_dir) / "backtest"
    backtest_run(
        args.run_dir,
        horizon=args.horizon,
        origins=args.origins,
        num_samples=args.samples,
        num_particles=args.particles,
        season=args.season,
        device=args.device,
        out=out,
    )
    print((out / "backtest.md").read_text())
    print(f"backtest folder: {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ppl-models", description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of every error")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="list models, data sets, objectives and experiments").set_defaults(func=_list)

    train = commands.add_parser("train", help="train a model (by name, with --data) or an experiment (name or TOML)")
    train.add_argument(
        "experiment",
        help="a model name with --data (its default recipe: "
        + ", ".join(own_data.MODEL_NAMES)
        + "), a registered experiment (see list) or a .toml file",
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value (TOML literal), repeatable; e.g. evaluate.num_particles=K, "
        f"the SMC estimate's particles ({EVALUATION_PARTICLES} where the config sets none), or "
        "objective.num_particles=K of the smc objective "
        f"({registry.SMC_OBJECTIVE_PARTICLES} where it sets none)",
    )
    train.add_argument("--data", metavar="PATH", help=DATA_HELP)
    add_data_flags(train)
    train.add_argument("--run-dir", help="run folder (default runs/<name>-<time>)")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --run-dir from its last checkpoint, with its saved settings",
    )
    train.add_argument(
        "--epochs",
        type=count(1),
        metavar="N",
        help="with --resume: train the run to N epochs in all instead of its own number (recorded "
        "in RUN_DIR/resume.jsonl; config.json is never rewritten)",
    )
    train.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto (overrides the config)")
    train.set_defaults(func=_train)

    evaluate = commands.add_parser("evaluate", help="re-evaluate a run folder's best checkpoint")
    evaluate.add_argument("run_dir", help="a run folder written by train or demo")
    evaluate.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an [evaluate] value of the run's config, repeatable, e.g. "
        "num_particles=5000, the SMC estimate's particles (the run's own by default: "
        f"{EVALUATION_PARTICLES} where its config set none)",
    )
    evaluate.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto")
    evaluate.add_argument(
        "--out",
        help="folder of this evaluation's outputs (default RUN_DIR/evaluations/"
        "evaluate-<time>); the run's own outputs are never overwritten",
    )
    evaluate.add_argument(
        "--force",
        action="store_true",
        help="replace an evaluation already in --out (whole, once the new one is complete)",
    )
    evaluate.set_defaults(func=_evaluate)

    suite = commands.add_parser("suite", help="train a suite of runs and compare them (see list)")
    suite.add_argument("suite", help="registered suite name (see list)")
    suite.add_argument("--run-dir", help="suite folder (default runs/<suite>-<time>); rerun to resume")
    suite.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value of every member, repeatable",
    )
    suite.add_argument("--data", metavar="PATH", help="train every member on your file instead (see train --data)")
    add_data_flags(suite)
    suite.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto")
    suite.add_argument(
        "--only",
        action="append",
        metavar="LABEL",
        help="train only this member (repeatable), e.g. to split a suite over processes sharing "
        "--run-dir; the table then covers the members finished so far",
    )
    suite.set_defaults(func=_suite)

    board = commands.add_parser(
        "leaderboard", help="train every model on your file and rank them (held-out fit, calibration, time)"
    )
    board.add_argument("--data", required=True, metavar="PATH", help=DATA_HELP)
    board.add_argument(
        "--models",
        metavar="A,B,...",
        help="comma-separated model names (default: " + ",".join(leaderboard.DEFAULT_MODELS) + ")",
    )
    board.add_argument("--out", required=True, help="folder of the board and its runs; rerun to resume")
    board.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value of every model (e.g. train.epochs=5), or of one "
        "model (MODEL:section.key=value), repeatable",
    )
    board.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto")
    board.add_argument(
        "--retrain",
        action="store_true",
        help="train again the runs in --out made on other data or with other settings (their old "
        "results are deleted); without it such runs are refused by name",
    )
    board.add_argument(
        "--jobs",
        type=count(1),
        help="models trained at once, each in its own process (default: one per core, at most 2)",
    )
    add_data_flags(board)
    board.add_argument(
        "--budget",
        type=count(1, board_training.MAX_BUDGET),
        default=board_training.DEFAULT_BUDGET,
        metavar="N",
        help="trials per model searching its settings on the validation split, the same "
        "for every model (trial 0: its recipe; default "
        f"{board_training.DEFAULT_BUDGET}, at most "
        f"{board_training.MAX_BUDGET})",
    )
    board.add_argument(
        "--classical",
        metavar="A,B|none",
        help="the classical rows (default: those of " + ",".join(CLASSICAL) + " that suit the data; "
        "none: no classical row)",
    )
    board.set_defaults(func=_leaderboard)

    comparison = commands.add_parser("compare", help="compare finished run folders (MSE vs epoch, predictions)")
    comparison.add_argument("runs", nargs="+", metavar="LABEL=RUN_FOLDER", help="run folders and their labels")
    comparison.add_argument("--out", required=True, help="folder for comparison.md and the figures")
    comparison.add_argument("--feature", type=count(0), default=0, help="feature drawn in predictions.png")
    comparison.set_defaults(func=_compare)

    ahead = commands.add_parser("forecast", help="many-steps-ahead forecasts of finished runs on their test split")
    ahead.add_argument("runs", nargs="+", metavar="LABEL=RUN_FOLDER", help="run folders and their labels")
    ahead.add_argument("--out", required=True, help="folder for forecast.md, forecast.json and forecast.png")
    ahead.add_argument(
        "--observed", type=count(1), help="steps given before forecasting (default: the data's, e.g. 40)"
    )
    ahead.add_argument("--horizon", type=count(1), help="steps to forecast (default: the rest of each sequence)")
    ahead.add_argument("--samples", type=count(2), default=1000, help="forecast paths per sequence (at least 2)")
    ahead.add_argument(
        "--particles",
        type=count(1),
        default=forecasting.FORECAST_PARTICLES,
        help=f"filter size for particle models (default {forecasting.FORECAST_PARTICLES})",
    )
    ahead.add_argument(
        "--em-iterations",
        type=count(0),
        default=0,
        help="EM steps fitting each test sequence's own covariances on its observed steps "
        "before forecasting (SMC Transformer; the paper uses 30)",
    )
    ahead.add_argument(
        "--em-sites",
        help="comma-separated covariances the EM steps fit (default all; an SMC "
        "Transformer's are q, k, v, z and, for Gaussian data, x, x_first)",
    )
    ahead.add_argument(
        "--recalibrate",
        choices=RECALIBRATION_METHODS,
        help="also report forecasts recalibrated on the validation split (see ppl_models.inference.recalibration)",
    )
    ahead.add_argument(
        "--recalibrate-per-step",
        action="store_true",
        help="fit one recalibration per step ahead (default: one for all steps; per step needs "
        "many validation sequences)",
    )
    ahead.add_argument(
        "--data",
        metavar="PATH",
        help="forecast the test split of your file instead of the runs' data "
        "(a run trained on a file keeps its columns and standardisation)",
    )
    ahead.add_argument(
        "--beyond",
        type=count(1),
        metavar="H",
        help="forecast H steps past the end of each test series of one run (for your file split by "
        "time: past the end of the file; with --data, past the end of that file, read whole as "
        "each series' history) and write OUT/beyond.csv (mean and quantiles per series, step "
        "ahead and feature, in the data's units; for 0/1 data the probability of a 1)",
    )
    ahead.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N")
    ahead.set_defaults(func=_forecast)

    rolling = commands.add_parser(
        "backtest",
        help="forecasts of a run's model or a board's classical row from many "
        "origins of each test series, judged per step ahead (CRPS, "
        "coverage, MSE, MASE; Brier score and ECE on 0/1 data)",
    )
    rolling.add_argument("run_dir", help="a finished run folder, or a leaderboard's classical row (OUT/classical/NAME)")
    rolling.add_argument(
        "--horizon",
        type=count(1),
        required=True,
        metavar="H",
        help="steps ahead of each forecast (at most the longest held-out segment of a test series)",
    )
    rolling.add_argument(
        "--origins",
        type=count(1),
        required=True,
        metavar="N",
        help="forecast origins per test series, evenly spaced over its held-out steps (at most one "
        "per held-out step: fewer are used, and said, where a series has fewer)",
    )
    rolling.add_argument("--samples", type=count(2), default=200, help="draws per forecast (at least 2)")
    rolling.add_argument(
        "--particles",
        type=count(1),
        default=forecasting.FORECAST_PARTICLES,
        help=f"filter size for particle models (default {forecasting.FORECAST_PARTICLES})",
    )
    rolling.add_argument(
        "--season",
        type=count(1),
        default=1,
        help="lag of MASE's in-sample differences (1: the naive forecast; 52: weekly data's year)",
    )
    rolling.add_argument("--out", help="folder for backtest.json and backtest.md (default RUN_DIR/backtest)")
    rolling.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto (default the run's)")
    rolling.set_defaults(func=_backtest)

    demos = commands.add_parser("demo", help="the quick demos: " + ", ".join(registry.DEMOS))
    demos.add_argument("--run-dir", help="run folder (default runs/demo-<time>)")
    demos.add_argument("--device", type=device_option, help="cpu, cuda, cuda:N or auto")
    demos.add_argument("--quick", action="store_true", help="a few epochs only (a smoke test)")
    demos.add_argument("--only", choices=registry.DEMOS, help="run one of the demos only")
    demos.add_argument(
        "--jobs", type=count(1), help="demos run at once, each in its own process (default: one per core, at most 2)"
    )
    demos.set_defaults(func=_demo)
    add_plugin_commands(commands)
    for command in commands.choices.values():  # --debug also after the command's name
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppl-models`` console script: 0 on success, 2 on a user error (one line), 130 on Ctrl-C."""
    args = build_parser().parse_args(argv)
    flags = getattr(args, "data", None) is not None and hasattr(args, "data_series")  # the data flags apply
    try:
        with warnings.catch_warnings():
            warnings.showwarning = data_warnings_on_one_line(warnings.showwarning, flags)
            return args.func(args)
    except USER_ERRORS as error:
        if args.debug:
            raise
        message = processes.one_line(error)
        message = as_flags(message) if flags and from_data(error) else message
    except RuntimeError as error:  # running out of memory is the settings' doing, not a bug
        if args.debug or not _out_of_memory(error):
            raise
        message = (
            f"out of memory ({type(error).__name__}): lower the batch size, the number of particles or "
            "samples, or the sequence length"
        )
    except KeyboardInterrupt:
        if args.debug:
            raise
        hint = getattr(args, "interrupted", _CONTINUE.get(args.command, ""))
        print(f"ppl-models: interrupted{hint}", file=sys.stderr)
        return 130
    print(f"ppl-models: error: {message}", file=sys.stderr)
    return 2


#: how each command that can be interrupted goes on, as the Ctrl-C line says it
_CONTINUE = {
    "train": " (a training run continues with --resume)",
    "leaderboard": " (run the same command again: finished runs are kept, an interrupted one resumes)",
    "suite": " (run the same command again: finished members are kept, an interrupted one resumes)",
}


def _out_of_memory(error: RuntimeError) -> bool:
    """Whether ``error`` is torch's failure to allocate memory (CUDA's ``OutOfMemoryError`` or the CPU allocator's)."""
    return isinstance(error, torch.OutOfMemoryError) or "can't allocate memory" in str(error)


if __name__ == "__main__":
    sys.exit(main())

"""What each ``ppl-models`` command does with its parsed arguments (:mod:`ppl_models.experiments.cli_parsers` builds
the parsers): ``run_<command>(args) -> exit status``."""

from __future__ import annotations

from pathlib import Path

import ppl_models

from . import (
    beyond_forecasts,
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
from .build import resolve_device
from .classical_rows import refuse_classical_folder
from .config import apply_overrides
from .data_flags import as_set_items, data_keys
from .tables import format_table

__all__ = [
    "run_list",
    "run_train",
    "run_evaluate",
    "run_suite",
    "run_leaderboard",
    "run_compare",
    "run_forecast",
    "run_backtest",
    "run_demo",
]


def run_list(args) -> int:
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


def run_train(args) -> int:
    keys = data_keys(args)  # the data flags' values, merged into [data] as they are
    overrides = list(args.set)
    overrides += [f"device={args.device!r}".replace("'", '"')] if args.device else []
    overrides += _epochs_on_resume(args)
    options = {"resume": args.resume, "change_epochs": args.epochs is not None}
    if own_data.is_model_name(args.experiment) and args.experiment not in registry.EXPERIMENTS:
        if args.data is None:
            raise ValueError(
                f"train {args.experiment}: a model name needs --data PATH (your file); or name an "
                "experiment (see ppl-models list)"
            )
        config = own_data.model_config(args.experiment, args.data, overrides, data_keys=keys)  # built once, kept
    else:
        config = own_data.load_experiment(args.experiment, overrides, data=args.data, data_keys=keys)
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


def run_evaluate(args) -> int:
    overrides = apply_overrides({}, args.set)
    out = args.out or Path(args.run_dir) / "evaluations" / run_folder.timestamped("evaluate").name  # unique per process
    return _finish(runner.evaluate(args.run_dir, overrides, args.device, out=out, force=args.force), out)


def run_demo(args) -> int:
    names = registry.DEMOS if args.only is None else (args.only,)
    root = args.run_dir or run_folder.timestamped("demo")
    return demo.run_demos(names, root, jobs=args.jobs or demo.default_jobs(), device=args.device, quick=args.quick)


def run_leaderboard(args) -> int:
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models is not None else None
    leaderboard.run_leaderboard(
        args.data,
        args.out,
        models,
        as_set_items(data_keys(args)) + list(args.set),  # the board records its settings as --set spells them
        args.device,
        retrain=args.retrain,
        jobs=args.jobs or processes.default_jobs(),
        budget=args.budget,
        classical=_classical_names(args.classical),
        horizon=args.horizon,
        origins=args.origins,
    )
    print((Path(args.out) / "leaderboard.md").read_text())
    print(f"leaderboard folder: {args.out} (calibration.png, fan_chart.png, runs/)")
    return 0


def _classical_names(text: str | None) -> list[str] | None:
    """``--classical`` as a list of names (``None``: the default ones; ``none``: no classical row)."""
    if text is None:
        return None
    return [] if text.strip() == "none" else [name.strip() for name in text.split(",") if name.strip()]


def run_suite(args) -> int:
    if args.suite not in suites.SUITES:
        raise ValueError(f"suite must be one of {sorted(suites.SUITES)}, got {args.suite!r}")
    root = args.run_dir or run_folder.timestamped(args.suite)
    summary = compare.run_suite(
        suites.SUITES[args.suite].members,
        root,
        as_set_items(data_keys(args)) + list(args.set),  # a suite shows its members' settings as --set spells them
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


def run_compare(args) -> int:
    compare.compare(_labelled_runs(args.runs), args.out, feature=args.feature)
    print((Path(args.out) / "comparison.md").read_text())
    return 0


def run_forecast(args) -> int:
    runs = _labelled_runs(args.runs)
    for label, folder in runs.items():
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
        return _forecast_beyond(args, runs, device)
    spec = forecasting.ForecastSpec(
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
    forecasting.compare_forecasts(runs, args.out, spec)
    print((Path(args.out) / "forecast.md").read_text())
    return 0


def _forecast_beyond(args, runs: dict[str, str], device: str) -> int:
    """``forecast --beyond H``: one run's forecasts past the end of its data (the options of test-split forecasts
    refused by name)."""
    if len(runs) != 1:
        raise ValueError(f"--beyond forecasts one run past the end of its data, got {len(runs)} runs")
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
        path = beyond_forecasts.forecast_beyond(
            next(iter(runs.values())),
            args.out,
            horizon=args.beyond,
            num_samples=args.samples,
            num_particles=args.particles,
            device=device,
            data_path=args.data,
        )
    except beyond_forecasts.HorizonTooLong as error:
        raise error.named("--beyond") from None
    print(f"wrote {path}")
    return 0


def run_backtest(args) -> int:
    from .backtest_runs import backtest_run, board_row

    folder = board_row(args.run_dir, args.row) if args.row is not None else Path(args.run_dir)
    out = Path(args.out) if args.out is not None else folder / "backtest"
    backtest_run(
        folder,
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

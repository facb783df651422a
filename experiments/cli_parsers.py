"""The parsers of the ``ppl-models`` commands: one function per command adds its parser, with a description, options
that name their defaults (from :mod:`ppl_models.inference.defaults` and the modules that hold them), and the command's
function (:mod:`ppl_models.experiments.cli_commands`) as ``func``."""

from __future__ import annotations

import argparse

from ppl_models.classical import CLASSICAL, DEFAULT_CLASSICAL
from ppl_models.inference.defaults import (
    BACKTEST_SAMPLES,
    EVALUATION_IWAE_PARTICLES,
    EVALUATION_PARTICLES,
    FORECAST_PARTICLES,
    FORECAST_SAMPLES,
    SMC_OBJECTIVE_PARTICLES,
    SPLIT_FRACTIONS,
)
from ppl_models.inference.recalibration import RECALIBRATION_METHODS

from . import board_training, cli_commands, leaderboard, own_data, registry
from .arguments import HelpFormatter, count, device_option
from .config import TOP_LEVEL
from .data import DATA_ENV
from .data_flags import add_data_flags

__all__ = ["COMMAND_PARSERS", "DATA_HELP"]

DATA_HELP = (
    "your own file: .csv / .parquet in long format (one row per series and step; name the columns with "
    "--series COL, --time COL, --features A,B), .npz (x [N, T, D], mask) or a folder of .mid files; split by "
    f"--split series|time (--set data.fractions=[...], default {list(SPLIT_FRACTIONS)}) or --split-column COL; "
    "--window N cuts training windows; every other [data] key by --set data.KEY=VALUE (default: none, the "
    "experiment's own data)"
)
#: what --device of a command without a run of its own falls back to
CONFIG_DEVICE = f"(default: the config's device, {TOP_LEVEL['device']} where it sets none)"


def _command(commands, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    """The parser of command ``name``: ``summary`` in the list of commands, ``summary`` and ``details`` its
    description."""
    description = f"{summary[0].upper()}{summary[1:]}." + (f" {details}" if details else "")
    return commands.add_parser(name, help=summary, description=description, formatter_class=HelpFormatter)


def _set_option(parser, metavar: str, text: str) -> None:
    parser.add_argument("--set", action="append", default=[], metavar=metavar, help=f"{text} (default: none)")


def _device_option(parser, default: str = CONFIG_DEVICE) -> None:
    """``--device``, and ``--data-dir`` (the shared data folder), of a command that reads data and runs models."""
    parser.add_argument("--device", type=device_option, help=f"cpu, cuda, cuda:N or auto {default}")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the shared data folder of the built-in data sets (default: ${DATA_ENV}, else the first shared/data "
        "in the working folder or a folder above it)",
    )


def add_list(commands) -> None:
    parser = _command(commands, "list", "list models, data sets, objectives, experiments and suites")
    parser.set_defaults(func=cli_commands.run_list)


def add_train(commands) -> None:
    train = _command(
        commands,
        "train",
        "train a model (by name, with --data) or an experiment (name or TOML)",
        "Then its best checkpoint is evaluated on the test split; the run folder holds the config, the metrics, "
        "the checkpoints and the figures.",
    )
    train.add_argument(
        "experiment",
        help="a model name with --data (its default recipe: "
        + ", ".join(own_data.MODEL_NAMES)
        + "), a registered experiment (see list) or a .toml file",
    )
    _set_option(
        train,
        "SECTION.KEY=VALUE",
        "override a config value (TOML literal), repeatable; e.g. evaluate.num_particles=K, the SMC estimate's "
        f"particles ({EVALUATION_PARTICLES} where the config sets none), evaluate.iwae_particles=K "
        f"({EVALUATION_IWAE_PARTICLES}), or objective.num_particles=K of the smc objective "
        f"({SMC_OBJECTIVE_PARTICLES} where it sets none)",
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
        help="with --resume: train the run to N epochs in all (recorded in RUN_DIR/resume.jsonl; config.json is "
        "never rewritten) (default: the run's own number)",
    )
    _device_option(train)
    train.set_defaults(func=cli_commands.run_train)


def add_evaluate(commands) -> None:
    evaluate = _command(
        commands,
        "evaluate",
        "re-evaluate a run folder's best checkpoint",
        "The outputs go to a folder of their own; the run's are never overwritten.",
    )
    evaluate.add_argument("run_dir", help="a run folder written by train or demo")
    _set_option(
        evaluate,
        "KEY=VALUE",
        "override an [evaluate] value of the run's config, repeatable, e.g. num_particles=5000, the SMC "
        f"estimate's particles (the run's own; {EVALUATION_PARTICLES} where its config set none)",
    )
    _device_option(evaluate, "(default: the run's device)")
    evaluate.add_argument(
        "--out",
        help="folder of this evaluation's outputs (default RUN_DIR/evaluations/evaluate-<time>)",
    )
    evaluate.add_argument(
        "--force", action="store_true", help="replace an evaluation already in --out (whole, once the new one is done)"
    )
    evaluate.set_defaults(func=cli_commands.run_evaluate)


def add_suite(commands) -> None:
    suite = _command(
        commands, "suite", "train a suite of runs and compare them (see list)", "A rerun into --run-dir resumes."
    )
    suite.add_argument("suite", help="registered suite name (see list)")
    suite.add_argument("--run-dir", help="suite folder (default runs/<suite>-<time>); rerun to resume")
    _set_option(suite, "SECTION.KEY=VALUE", "override a config value of every member, repeatable")
    suite.add_argument(
        "--data", metavar="PATH", help="train every member on your file instead (see train --data) (default: none)"
    )
    add_data_flags(suite)
    _device_option(suite, "(default: each member's config)")
    suite.add_argument(
        "--only",
        action="append",
        metavar="LABEL",
        help="train only this member (repeatable), e.g. to split a suite over processes sharing "
        "--run-dir; the table then covers the members finished so far (default: every member)",
    )
    suite.set_defaults(func=cli_commands.run_suite)


def add_leaderboard(commands) -> None:
    board = _command(
        commands,
        "leaderboard",
        "train every model on your file and rank them (held-out fit, calibration, time)",
        "A rerun into --out keeps the finished runs and resumes an interrupted one.",
    )
    board.add_argument("--data", required=True, metavar="PATH", help=DATA_HELP)
    board.add_argument(
        "--models",
        metavar="A,B,...",
        help="comma-separated model names (default: " + ",".join(leaderboard.DEFAULT_MODELS) + ")",
    )
    board.add_argument("--out", required=True, help="folder of the board and its runs; rerun to resume")
    _set_option(
        board,
        "SECTION.KEY=VALUE",
        "override a config value of every model (e.g. train.epochs=5), or of one model (MODEL:section.key=value), "
        "repeatable",
    )
    _device_option(board, "(default: each model's recipe, auto)")
    board.add_argument(
        "--retrain",
        action="store_true",
        help="train again the runs in --out made on other data or with other settings (their old results are "
        "deleted); without it such runs are refused by name",
    )
    board.add_argument(
        "--jobs",
        type=count(1),
        help="models trained at once, each in its own process, and the processes predicting the series of the "
        "arima, ets and arimax rows (default: one per core, at most 2)",
    )
    add_data_flags(board)
    board.add_argument(
        "--budget",
        type=count(1, board_training.MAX_BUDGET),
        default=board_training.DEFAULT_BUDGET,
        metavar="N",
        help="trials per model searching its settings on the validation split, the same for every model "
        f"(trial 0: its recipe; at most {board_training.MAX_BUDGET})",
    )
    board.add_argument(
        "--classical",
        metavar="A,B|none",
        help="the classical rows, of "
        + ",".join(CLASSICAL)
        + ",arimax (default: those of "
        + ",".join(DEFAULT_CLASSICAL)
        + " that suit the data, and arimax with --covariates; none: no classical row)",
    )
    board.add_argument(
        "--horizon",
        type=count(1),
        metavar="H",
        help="with --origins: also judge every row on forecasts of H steps ahead from the same origins of each test "
        "series, each given only the steps before it (CRPS and 80 %% coverage per step ahead, their means, a paired "
        "bootstrap interval against the best classical row); a multi-step table in leaderboard.md and "
        "leaderboard.json (default: none, one-step figures only)",
    )
    board.add_argument(
        "--origins",
        type=count(1),
        metavar="N",
        help="with --horizon: forecast origins per test series, evenly spaced over its held-out steps (fewer where "
        "a series has fewer) (default: none)",
    )
    board.set_defaults(func=cli_commands.run_leaderboard)


def add_compare(commands) -> None:
    comparison = _command(commands, "compare", "compare finished run folders (MSE vs epoch, predictions)")
    comparison.add_argument("runs", nargs="+", metavar="LABEL=RUN_FOLDER", help="run folders and their labels")
    comparison.add_argument("--out", required=True, help="folder for comparison.md and the figures")
    comparison.add_argument("--feature", type=count(0), default=0, help="feature drawn in predictions.png")
    comparison.set_defaults(func=cli_commands.run_compare)


def add_forecast(commands) -> None:
    ahead = _command(
        commands,
        "forecast",
        "many-steps-ahead forecasts of finished runs on their test split",
        "Or, with --beyond H, H steps past the end of each test series of one run.",
    )
    ahead.add_argument("runs", nargs="+", metavar="LABEL=RUN_FOLDER", help="run folders and their labels")
    ahead.add_argument("--out", required=True, help="folder for forecast.md, forecast.json and forecast.png")
    ahead.add_argument(
        "--observed", type=count(1), help="steps given before forecasting (default: the data's, e.g. 40)"
    )
    ahead.add_argument("--horizon", type=count(1), help="steps to forecast (default: the rest of each sequence)")
    ahead.add_argument(
        "--samples", type=count(2), default=FORECAST_SAMPLES, help="forecast paths per sequence (at least 2)"
    )
    ahead.add_argument("--particles", type=count(1), default=FORECAST_PARTICLES, help="filter size for particle models")
    ahead.add_argument(
        "--em-iterations",
        type=count(0),
        default=0,
        help="EM steps fitting each test sequence's own covariances on its observed steps before forecasting "
        "(SMC Transformer; the paper uses 30)",
    )
    ahead.add_argument(
        "--em-sites",
        help="comma-separated covariances the EM steps fit (default all; an SMC Transformer's are q, k, v, z "
        "and, for Gaussian data, x, x_first)",
    )
    ahead.add_argument(
        "--recalibrate",
        choices=RECALIBRATION_METHODS,
        help="also report forecasts recalibrated on the validation split (see ppl_models.inference.recalibration)",
    )
    ahead.add_argument(
        "--recalibrate-per-step",
        action="store_true",
        help="fit one recalibration per step ahead (default: one for all steps; per step needs many validation "
        "sequences)",
    )
    ahead.add_argument(
        "--data",
        metavar="PATH",
        help="forecast the test split of your file instead of the runs' data (a run trained on a file keeps its "
        "columns and standardisation) (default: none, the runs' data)",
    )
    ahead.add_argument(
        "--beyond",
        type=count(1),
        metavar="H",
        help="forecast H steps past the end of each test series of one run (for your file split by time: past the "
        "end of the file; with --data, past the end of that file, read whole as each series' history) and write "
        "OUT/beyond.csv (mean and quantiles per series, step ahead and feature, in the data's units; for 0/1 "
        "data the probability of a 1)",
    )
    _device_option(ahead, "(default: cpu)")
    ahead.set_defaults(func=cli_commands.run_forecast)


def add_backtest(commands) -> None:
    rolling = _command(
        commands,
        "backtest",
        "forecasts of a run's model or a board's classical row from many origins of each test series, judged per "
        "step ahead (CRPS, coverage, MSE, MASE; Brier score and ECE on 0/1 data)",
    )
    rolling.add_argument(
        "run_dir",
        help="a finished run folder, a leaderboard's classical row (OUT/classical/NAME), or a leaderboard folder "
        "with --row",
    )
    rolling.add_argument(
        "--row", help="the row of the leaderboard folder RUN_DIR to backtest (a model or classical row)"
    )
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
        help="forecast origins per test series, evenly spaced over its held-out steps (at most one per held-out "
        "step: fewer are used, and said, where a series has fewer)",
    )
    rolling.add_argument("--samples", type=count(2), default=BACKTEST_SAMPLES, help="draws per forecast (at least 2)")
    rolling.add_argument(
        "--particles", type=count(1), default=FORECAST_PARTICLES, help="filter size for particle models"
    )
    rolling.add_argument(
        "--season",
        type=count(1),
        default=1,
        help="lag of MASE's in-sample differences (1: the naive forecast; 52: weekly data's year)",
    )
    rolling.add_argument("--out", help="folder for backtest.json and backtest.md (default RUN_DIR/backtest)")
    _device_option(rolling, "(default: the run's device)")
    rolling.set_defaults(func=cli_commands.run_backtest)


def add_demo(commands) -> None:
    demos = _command(
        commands,
        "demo",
        "the quick demos: " + ", ".join(registry.DEMOS),
        "Each runs in its own process; its output is kept in RUN_DIR/logs.",
    )
    demos.add_argument("--run-dir", help="run folder (default runs/demo-<time>)")
    _device_option(demos, "(default: each demo's config)")
    demos.add_argument("--quick", action="store_true", help="a few epochs only (a smoke test)")
    demos.add_argument("--only", choices=registry.DEMOS, help="run one of the demos only (default: all of them)")
    demos.add_argument(
        "--jobs", type=count(1), help="demos run at once, each in its own process (default: one per core, at most 2)"
    )
    demos.set_defaults(func=cli_commands.run_demo)


#: the builders of the commands' parsers, in the order ``ppl-models --help`` lists them
COMMAND_PARSERS = (
    add_list,
    add_train,
    add_evaluate,
    add_suite,
    add_leaderboard,
    add_compare,
    add_forecast,
    add_backtest,
    add_demo,
)

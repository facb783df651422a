"""A run's gap to a known source's truth on its training sequences beside its test sequences.

The command line of :func:`ppl_models.experiments.claims.truth_gaps.split_gaps` (see there for what the gaps tell): one
JSON line per run folder.

Usage::

    python -m ppl_models.experiments.studies.truth_fit runs/hmm-gap/srnn-smooth-res_q-elbo-seed-0 [RUN ...] \\
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from ppl_models.experiments.claims.results_files import write_results

from ..claims.truth_gaps import split_gaps

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ppl_models.experiments.studies.truth_fit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="+", help="finished run folders on a known-truth source")
    parser.add_argument("--sequences", type=int, default=100, help="sequences scored per split (default 100)")
    parser.add_argument("--out", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    try:
        results = [split_gaps(run, args.sequences) for run in args.runs]
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for result in results:
        print(json.dumps(result))
    if args.out:
        write_results(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

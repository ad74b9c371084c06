"""`rnnbench compare BASE.json HEAD.json [--threshold 5%] [--alpha 0.01] [--allow-missing]`:
fail on a performance regression.

Exit 1 when a result is slower by more than the threshold and the slow-down is real (a rank
test on the raw samples, or the IQR rule for files without them), when one ran in BASE and
failed in HEAD, or when one in BASE is missing from HEAD (unless --allow-missing); 0
otherwise; 2 for a bad input or option. The rules are in `rnnbench.reports.regression`.
"""
from __future__ import annotations

from rnnbench.errors import UsageError
from rnnbench.reports.regression import (DEFAULT_ALPHA, DEFAULT_THRESHOLD, Gate, compare_runs,
                                      format_changes, gating, machine_differences,
                                      parse_threshold, samples_of)
from rnnbench.reports.load import load_file


def add_arguments(parser) -> None:
    parser.add_argument("base", metavar="BASE.json",
                        help="the earlier run (bench or pytest-benchmark JSON)")
    parser.add_argument("head", metavar="HEAD.json", help="the run to judge")
    parser.add_argument("--threshold", default=f"{DEFAULT_THRESHOLD:.0%}", metavar="PCT",
                        help="slow-down that counts as a regression, e.g. 5%% "
                             "(default %(default)s)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, metavar="P",
                        help="significance level of the rank test (default %(default)s)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="results in BASE that HEAD lacks do not fail the comparison")


def run(args) -> int:
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {args.alpha:g}")
    gate = Gate(threshold, args.alpha, args.allow_missing)
    base, head = (load_file(path) for path in (args.base, args.head))
    for path, results in ((args.base, base), (args.head, head)):
        if not results.timings:
            raise UsageError(f"{path}: no benchmark results to compare")
    changes = compare_runs(base.timings, head.timings, gate, samples_of(base), samples_of(head))
    print(format_changes(changes, gate))
    for item in base.unplaced + head.unplaced:     # never drop a result silently
        print(f"not compared: {item.source.path} {item.where}: {item.reason}")
    differences = machine_differences(base.sources[0].environment, head.sources[0].environment)
    if differences:
        print("note: BASE and HEAD ran in different environments (" + "; ".join(differences) + ")")
    return 1 if gating(changes, gate) else 0

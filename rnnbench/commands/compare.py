"""`rnnbench compare BASE.json HEAD.json [--threshold 5%]`: fail on a performance regression.

Exit 1 when a result is slower by more than the threshold and outside the runs' noise (or ran
in BASE and failed in HEAD), 0 otherwise, 2 for a bad input or threshold. The rule is in
`rnnbench.reports.compare`.
"""
from __future__ import annotations

from rnnbench.errors import UsageError
from rnnbench.reports.compare import (DEFAULT_THRESHOLD, compare_runs, format_changes, gating,
                                      machine_differences, parse_threshold)
from rnnbench.reports.load import load_file


def add_arguments(parser) -> None:
    parser.add_argument("base", metavar="BASE.json",
                        help="the earlier run (bench or pytest-benchmark JSON)")
    parser.add_argument("head", metavar="HEAD.json", help="the run to judge")
    parser.add_argument("--threshold", default=f"{DEFAULT_THRESHOLD:.0%}", metavar="PCT",
                        help="slow-down that counts as a regression, e.g. 5%% "
                             "(default %(default)s)")


def run(args) -> int:
    threshold = parse_threshold(args.threshold)
    base, head = (load_file(path) for path in (args.base, args.head))
    for path, results in ((args.base, base), (args.head, head)):
        if not results.timings:
            raise UsageError(f"{path}: no benchmark results to compare")
    changes = compare_runs(base.timings, head.timings, threshold)
    print(format_changes(changes, threshold))
    for item in base.unplaced + head.unplaced:     # never drop a result silently
        print(f"not compared: {item.source.path} {item.where}: {item.reason}")
    differences = machine_differences(base.sources[0].environment, head.sources[0].environment)
    if differences:
        print("note: BASE and HEAD ran in different environments (" + "; ".join(differences) + ")")
    return 1 if gating(changes) else 0

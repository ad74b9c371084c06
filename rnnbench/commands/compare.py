"""`rnnbench compare BASE.json HEAD.json [--threshold 5%] [--alpha 0.01] [--allow-missing]
[--unjudged fail|inconclusive]`: fail on a performance regression.

Exit 1 when a result is slower by more than the threshold and the slow-down is real (a rank
test on the raw samples, or the IQR rule for files without them), when one failed in HEAD, or
when the gate cannot judge one (its numbers do not conform in HEAD, it is missing from HEAD
unless --allow-missing, HEAD could not time it, or a run holds it twice) unless --unjudged
inconclusive; 3 (inconclusive) when nothing fails but a run was timed on a busy machine (or
samples are bimodal), so its changes are not judged; 0 otherwise; 2 for a bad input or option.
The rules are in `rnnbench.reports.regression`.
"""
from __future__ import annotations

import textwrap

from rnnbench.errors import UsageError
from rnnbench.reports.load import load_file
from rnnbench.reports.regression import (DEFAULT_ALPHA, DEFAULT_THRESHOLD, UNJUDGED_POLICIES,
                                         WIDTH, Gate, compare_runs, environment_lines,
                                         exit_code, format_changes, parse_threshold,
                                         samples_of)


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
    parser.add_argument("--unjudged", choices=UNJUDGED_POLICIES, default="fail",
                        help="what a result the gate cannot judge (non-conforming, missing, no "
                             "longer timed, duplicate) does: fail (exit 1, the default) or "
                             "make the comparison inconclusive (exit 3)")


def run(args) -> int:
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {args.alpha:g}")
    gate = Gate(threshold, args.alpha, args.allow_missing, args.unjudged)
    base, head = (load_file(path) for path in (args.base, args.head))
    for path, results in ((args.base, base), (args.head, head)):
        if not results.timings:
            raise UsageError(f"{path}: no benchmark results to compare")
    busy = [(name, source) for name, results in (("BASE", base), ("HEAD", head))
            for source in results.sources if source.busy]
    changes = compare_runs(base.timings, head.timings, gate, samples_of(base), samples_of(head),
                           busy=bool(busy))
    for name, source in busy:
        reasons = "; ".join(map(str, source.machine_check.get("reasons") or [])) or "busy"
        print(textwrap.fill(f"inconclusive: {name} ({source.path}) was timed on a busy machine "
                            f"({reasons}), so no change of a timing is judged", WIDTH,
                            subsequent_indent="  "))
    for line in environment_lines(base.sources[0].environment, head.sources[0].environment,
                                  changes):
        print(line)
    for item in base.unplaced + head.unplaced:     # never drop a result silently
        print(f"not compared: {item.source.path} {item.where}: {item.reason}")
    print(format_changes(changes, gate))
    return exit_code(changes, gate)

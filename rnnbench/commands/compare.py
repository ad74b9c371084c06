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

import dataclasses
import json
import textwrap

from rnnbench.errors import UsageError
from rnnbench.reports.load import load_file
from rnnbench.reports.regression import (DEFAULT_ALPHA, DEFAULT_THRESHOLD, EXIT_INCONCLUSIVE,
                                         UNJUDGED_POLICIES, WIDTH, Gate, compare_runs, environment_lines,
                                         exit_code, format_changes, interrupted_notes,
                                         parse_threshold, samples_of)
from rnnbench.wording import counted

EXAMPLES = """\
examples:
  rnnbench compare base/bench.json out/bench.json                 the gate at 5%
  rnnbench compare base.json head.json --threshold 10% --allow-missing
  rnnbench compare base.json head.json --json > comparison.json  the same as data

exit codes: 0 no regression, 1 a regression (or a result that broke, went missing or cannot be
judged), 3 inconclusive (nothing failed, but a busy machine's or bimodal timings were not
judged), 2 a bad file or option (one line)
"""

SCHEMA = "rnnbench.compare/1"
# The fields of a result's key (Timing.key()), as the JSON names them.
KEY_FIELDS = ("impl", "kind", "workload", "device", "dtype", "metric")


def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
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
    parser.add_argument("--json", action="store_true",
                        help="print the comparison as JSON (rnnbench.compare/1) instead of tables")


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
    notes = [f"inconclusive: {name} ({source.path}) was timed on a busy machine "
             f"({'; '.join(map(str, source.machine_check.get('reasons') or [])) or 'busy'}), "
             "so no change of a timing is judged" for name, source in busy]
    notes = [textwrap.fill(note, WIDTH, subsequent_indent="  ") for note in notes]
    notes += environment_lines(base.sources[0].environment, head.sources[0].environment, changes)
    # never drop a result silently
    not_compared = [f"{item.source.path} {item.where}: {item.reason}"
                    for item in base.unplaced + head.unplaced]
    code = exit_code(changes, gate)
    if code == 0 and head.unplaced:
        # A HEAD result that cannot be read is not judged, whatever --allow-missing allows:
        # the gate passes only what it has compared.
        code = EXIT_INCONCLUSIVE
        notes.append(textwrap.fill(
            f"inconclusive: {counted(len(head.unplaced), 'result')} of HEAD could not be read, "
            "so not judged (not compared, below)", WIDTH, subsequent_indent="  "))
    if args.json:
        # the text says these under the tables
        notes += [textwrap.fill(note, WIDTH, subsequent_indent="  ")
                  for note in interrupted_notes(changes)]
        print(json.dumps(as_json(changes, gate, code, not_compared, notes), indent=1))
        return code
    for line in notes:
        print(line)
    for item in not_compared:
        print(f"not compared: {item}")
    print(format_changes(changes, gate))
    return code


def as_json(changes: list, gate: Gate, code: int, not_compared: list[str],
            notes: list[str]) -> dict:
    """The comparison as data: the gate, its exit code, one entry per result (its key's fields,
    each Change field but the two timings, and the two medians), what was not compared, and
    the notes printed above the tables (busy machines, differing environments)."""
    entries = [{**dict(zip(KEY_FIELDS, change.key)),
                **{f.name: getattr(change, f.name) for f in dataclasses.fields(change)
                   if f.name not in ("key", "base", "head")},
                "base_median_s": change.base.median_s if change.base else None,
                "head_median_s": change.head.median_s if change.head else None}
               for change in changes]
    return {"schema": SCHEMA, "gate": dataclasses.asdict(gate), "passed": code == 0,
            "inconclusive": code == EXIT_INCONCLUSIVE, "exit_code": code, "changes": entries,
            "not_compared": not_compared, "notes": notes}

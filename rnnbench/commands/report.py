"""`rnnbench report INPUTS... --out DIR`: render results as report.md, index.html and figures.

Every input is read before anything is written: a bad input file (unreadable, not JSON, not a
results format) stops the command with a one-line message naming it and exit 2, and DIR is left
as it was, so a report never silently lacks one of the files it was asked to show. A file given
twice, or a copy of another, is read once and the report says so.
"""
from __future__ import annotations

from pathlib import Path

from rnnbench.wording import counted

DESCRIPTION = ("render conformance and benchmark results, from one machine or many, as "
               "report.md and a self-contained index.html with plots")
EXAMPLES = """\
examples:
  rnnbench report reports/latest/*.json --out site/     the files of one `rnnbench run`
  rnnbench report results/ --out site/                  every *.json under a folder, e.g. the
                                                        artifacts of several machines
  rnnbench report .asv/results --out site/              asv's history (its benchmarks.json
                                                        names the parameters)

exit codes: 0 the report was written, 2 an input that cannot be read or an --out that
cannot be written (one line; nothing is written)
"""


def add_arguments(parser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = EXAMPLES
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="conformance JSON, bench JSON, pytest-benchmark JSON, asv results "
                             "files, or folders of them, e.g. out/bench.json results/")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for report.md, index.html and figures/ (made if missing), "
                             "e.g. --out site/")


def run(args) -> int:
    from rnnbench.documents import require_writable
    from rnnbench.reports.load import load_inputs
    from rnnbench.reports.render import render_report

    require_writable(args.out, "--out", folder=True)
    out = Path(args.out)
    results = load_inputs(args.inputs)
    written = render_report(results, out)
    print(f"report: {written['index.html']}")
    print(f"        {written['report.md']}")
    print(f"from {counted(len(results.checks), 'check')}, {counted(len(results.timings), 'timing')}"
          f", {len(results.unplaced)} unplaced, {counted(len(results.machines()), 'machine')}")
    for duplicate in results.duplicates:
        print(f"note: {duplicate.path} repeats {duplicate.same_as} ({duplicate.how}): "
              "counted once")
    return 0

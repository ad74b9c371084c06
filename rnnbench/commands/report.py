"""`rnnbench report INPUTS... --out DIR`: render results as report.md, index.html and figures.

Every input is read before anything is written: a bad input file (unreadable, not JSON, not a
results format) stops the command with a one-line message naming it and exit 2, and DIR is left
as it was, so a report never silently lacks one of the files it was asked to show.
"""
from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="conformance JSON, bench JSON, pytest-benchmark JSON, asv results "
                             "files, or folders of them (e.g. an asv results folder)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for report.md, index.html and figures/")


def run(args) -> int:
    from rnnbench.reports.load import load_inputs
    from rnnbench.reports.render import render_report

    results = load_inputs(args.inputs)
    written = render_report(results, args.out)
    print(f"report: {written['index.html']}  ({len(results.checks)} checks, "
          f"{len(results.timings)} timings, {len(results.unplaced)} unplaced, "
          f"{len(results.machines())} machine(s))")
    print(f"        {written['report.md']}")
    return 0

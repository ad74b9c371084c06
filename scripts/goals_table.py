"""Bench documents of the same workloads side by side, e.g. TF32 off and on: per workload and
metric, each implementation's median and speed-up over native (95% interval) in each document.

    python scripts/goals_table.py ieee=bench-goals-cuda.json tf32=bench-goals-cuda-tf32.json

Prints one Markdown table per workload and metric (for docs/gpu.md), leaving out what no
document timed (an implementation without the workload's kind); exit 2, with one line, for a
file that is not a bench document.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Container

from tabulate import tabulate

from rnnbench.benchmarks.machine import timed_busy
from rnnbench.benchmarks.result import BenchResult, InvalidResult
from rnnbench.commands.bench import vs_native_cell
from rnnbench.documents import BASELINE, BENCH_SCHEMAS, read_json
from rnnbench.errors import UsageError
from rnnbench.reports.units import seconds


def cells(result: BenchResult | None, busy: bool) -> list[str]:
    """A result's median and speed-up cells (from a document timed on a `busy` machine or
    not); its status where it was not timed."""
    if result is None:
        return ["", ""]
    if result.status != "ok":
        return [result.status or "", "-"]
    return [seconds(result.median_s), vs_native_cell(result, busy)]


def tables(documents: dict[str, list[BenchResult]], busy: Container[str] = ()) -> str:
    """One table per (workload, metric), in the order the documents list them: a row per
    implementation, a median and a speed-up column per document (`busy`: the labels of those
    timed on a busy machine)."""
    every = [r for results in documents.values() for r in results]
    timed = {(r.workload, r.metric, r.impl) for r in every if r.status in ("ok", "failed")}
    found: dict[tuple[str, str], list[str]] = {}
    for r in every:
        if (r.workload, r.metric, r.impl) in timed:
            impls = found.setdefault((r.workload, r.metric), [])
            if r.impl not in impls:
                impls.append(r.impl)
    lookup = {label: {(r.workload, r.metric, r.impl): r for r in results}
              for label, results in documents.items()}
    headers = ["impl"] + [f"{what} ({label})" for label in documents
                          for what in ("median", f"vs {BASELINE}")]
    parts = []
    for (workload, metric), impls in found.items():
        rows = [[impl] + [cell for label in documents
                          for cell in cells(lookup[label].get((workload, metric, impl)),
                                            label in busy)]
                for impl in impls]
        parts.append(f"{workload}, {metric}:\n\n"
                     + tabulate(rows, headers, tablefmt="github", disable_numparse=True))
    return "\n\n".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="+", metavar="LABEL=FILE",
                        help="a bench document (rnnbench bench --json) and its column label")
    args = parser.parse_args(argv)
    documents, busy = {}, set()
    try:
        for item in args.documents:
            label, _, path = item.rpartition("=")
            if not label:
                raise UsageError(f"{item}: expected LABEL=FILE, e.g. tf32=bench-goals-cuda-tf32.json")
            doc = read_json(path, BENCH_SCHEMAS, "bench document")
            documents[label] = [BenchResult.from_json(r) for r in doc["results"]]
            if timed_busy(doc):
                busy.add(label)
    except (UsageError, InvalidResult) as exc:
        print(f"goals_table.py: {exc}", file=sys.stderr)
        return 2
    print(tables(documents, busy))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the repeated-run experiments (`gate_error_rates`, `aa_test`) share: options and runs.

Each runs the benchmark `--runs` times on a preset's or a file's workloads, optionally on
`--threads` threads with a `--budget`, and writes what it found with `--json`.
"""
from __future__ import annotations

import argparse

from rnnbench.errors import UsageError

DEFAULT_PRESET = "quick"


def parser(prog: str, description: str, runs: int, json_help: str) -> argparse.ArgumentParser:
    """An argument parser with the options every experiment takes; add its own to it."""
    made = argparse.ArgumentParser(prog=prog, description=description)
    made.add_argument("--runs", type=int, default=runs)
    source = made.add_mutually_exclusive_group()
    source.add_argument("--preset", default=None, help=f"a named preset (default {DEFAULT_PRESET})")
    source.add_argument("--workload", metavar="FILE", help="a workload file")
    made.add_argument("--threads", type=int)
    made.add_argument("--budget", type=float, metavar="SECONDS")
    made.add_argument("--json", metavar="PATH", help=json_help)
    return made


def workloads(args, least_runs: int) -> list:
    """The workloads `args` name, once the options every experiment takes are checked: a
    UsageError (one line) for a --json that cannot be written, too few --runs or threads."""
    from rnnbench.benchmarks.workloads import load_workloads
    from rnnbench.documents import require_writable

    if args.json:
        require_writable(args.json, "--json")
    if args.runs < least_runs:
        raise UsageError(f"--runs must be at least {least_runs}, got {args.runs}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    return load_workloads(preset=None if args.workload else args.preset or DEFAULT_PRESET,
                          path=args.workload)


def repeated_runs(impls: list, workloads: list, runs: int, *, threads: int | None = None,
                  budget_s: float | None = None, progress=None) -> list[dict]:
    """`runs` bench documents of `impls` on `workloads`, each a whole `run_benchmarks`;
    `progress(text)` is told which run starts."""
    from rnnbench.benchmarks.harness import run_benchmarks

    docs = []
    for index in range(runs):
        if progress:
            progress(f"run {index + 1}/{runs}")
        docs.append(run_benchmarks(impls, workloads, threads=threads, budget_s=budget_s))
    return docs

"""How often does `rnnbench compare` cry wolf, and how often does it catch a real slow-down?

    python -m rnnbench.benchmarks.gate_error_rates [--runs 21] [--impl eager]
        [--preset quick | --workload FILE] [--slowdowns 5,10] [--threads N] [--budget S]
        [--threshold 5%] [--alpha 0.01] [--json PATH]

The benchmark runs `--runs` times, each run timing side by side (interleaved, as `bench` does)
the implementation, copies of it slowed down by each planted fraction, and the native baseline,
on every workload of the preset that the implementation runs (forward only: the slow-down is
planted in forward). A slowed copy is a subclass whose forward spins, after the real forward,
for the given fraction of the time that forward took, so it is slower by exactly that fraction
whatever the machine does meanwhile.

Consecutive runs are then compared as the gate compares a nightly run with its baseline:
- A/A: run i-1's implementation against run i's — the same code, so every failing comparison
  is a false alarm (goal: none);
- planted: run i-1's implementation against run i's copy slowed by f, relabelled as the
  implementation — every passing comparison is a missed regression.
Each comparison fails when any of its results gates (the gate's own rule, `compare_runs`).
The rates are per comparison and per result.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from time import perf_counter

from rnnbench.benchmarks import experiments
from rnnbench.errors import UsageError

DEFAULT_RUNS = 21
DEFAULT_SLOWDOWNS = (0.05, 0.10)


def slowed(constructor: type, fraction: float) -> type:
    """A subclass of the module class `constructor` whose forward takes (1 + fraction) times as
    long: after the real forward it spins for `fraction` of the time that took."""
    if not isinstance(constructor, type):
        raise UsageError(f"{constructor!r} is not a class: a slowed copy needs one to subclass")

    def forward(self, *args, **kwargs):
        start = perf_counter()
        out = super(cls, self).forward(*args, **kwargs)
        end = perf_counter()
        until = end + (end - start) * fraction
        while perf_counter() < until:
            pass
        return out

    cls = type(f"{constructor.__name__}Slowed", (constructor,), {"forward": forward})
    return cls


def planted_name(impl_name: str, fraction: float) -> str:
    return f"{impl_name}+{fraction * 100:g}%"


def planted(impl, fraction: float):
    """`impl` with every kind slowed by `fraction`, named e.g. "eager+5%"."""
    return dataclasses.replace(impl, name=planted_name(impl.name, fraction),
                               kinds={kind: slowed(ctor, fraction) for kind, ctor in impl.kinds.items()})


def measure_runs(impl, workloads, runs: int, fractions, *, threads: int | None = None,
                 budget_s: float | None = None, progress=None) -> list[dict]:
    """`runs` bench documents, each timing native, `impl` and its slowed copies side by side."""
    from rnnbench.impls import load
    from rnnbench.documents import BASELINE

    impls = [load(BASELINE), impl, *(planted(impl, f) for f in fractions)]
    workloads = [dataclasses.replace(w, metrics=("forward",)) for w in workloads
                 if w.kind in impl.kinds]
    if not workloads:
        raise UsageError(f"{impl.name} runs none of the workloads")
    return experiments.repeated_runs(impls, workloads, runs, threads=threads, budget_s=budget_s,
                                     progress=progress)


def error_rates(docs: list[dict], impl_name: str, fractions, gate) -> dict:
    """The gate's verdicts on consecutive documents: A/A (impl against impl) and, per fraction,
    impl against its slowed copy. Counts of comparisons and of results, and which failed."""
    with tempfile.TemporaryDirectory(prefix="rnnbench-gate-") as folder:
        plain = [_only(doc, impl_name, impl_name, Path(folder) / f"aa-{i}.json")
                 for i, doc in enumerate(docs)]
        rates = {"comparisons": len(docs) - 1,
                 "aa": _rates(plain[:-1], plain[1:], gate, impl_name)}
        for fraction in fractions:
            name = planted_name(impl_name, fraction)
            heads = [_only(doc, name, impl_name, Path(folder) / f"{name}-{i}.json")
                     for i, doc in enumerate(docs)]
            rates[name] = _rates(plain[:-1], heads[1:], gate, impl_name)
    return rates


def _only(doc: dict, name: str, as_name: str, path: Path) -> Path:
    """`doc` with only `name`'s results, renamed `as_name`, and the baseline's (the gate judges
    the others relative to it), written to `path`."""
    from rnnbench.benchmarks.result import BenchResult
    from rnnbench.documents import BASELINE

    results = [BenchResult.from_json(r) for r in doc["results"]]
    kept = [dataclasses.replace(r, impl=as_name) if r.impl == name else r for r in results
            if r.impl in (name, BASELINE)]
    path.write_text(json.dumps({**doc, "results": [r.to_json() for r in kept]}))
    return path


def _rates(bases: list[Path], heads: list[Path], gate, impl_name: str) -> dict:
    """The gate's verdicts on `impl_name`'s results (native's are there as its yardstick)."""
    from rnnbench.reports.regression import compare_runs, gating, samples_of
    from rnnbench.reports.load import load_file

    failed_comparisons, flagged, compared = 0, 0, 0
    for base_path, head_path in zip(bases, heads):
        base, head = load_file(base_path), load_file(head_path)
        changes = [c for c in compare_runs(base.timings, head.timings, gate, samples_of(base),
                                           samples_of(head)) if c.key[0] == impl_name]
        failing = gating(changes, gate)
        failed_comparisons += bool(failing)
        flagged += len(failing)
        compared += sum(c.rule is not None for c in changes)
    return {"failed_comparisons": failed_comparisons, "comparisons": len(bases),
            "flagged_results": flagged, "compared_results": compared}


def render(rates: dict, impl_name: str) -> str:
    """One line per kind of comparison."""
    lines = [f"{rates['comparisons']} comparisons of consecutive runs of {impl_name}:"]
    for label, counts in rates.items():
        if label == "comparisons":
            continue
        what = "false alarms (A/A)" if label == "aa" else f"caught {label} (planted)"
        lines.append(f"  {what}: {counts['failed_comparisons']} of {counts['comparisons']} "
                     f"comparisons, {counts['flagged_results']} of {counts['compared_results']} "
                     "results")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rnnbench.impls import load
    from rnnbench.reports.regression import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Gate, parse_threshold
    from rnnbench.documents import write_json

    parser = experiments.parser("python -m rnnbench.benchmarks.gate_error_rates",
                                __doc__.splitlines()[0], DEFAULT_RUNS,
                                "write the rates and every run here")
    parser.add_argument("--impl", default="eager", help="a registered implementation (default eager)")
    parser.add_argument("--slowdowns", default=",".join(f"{f * 100:g}" for f in DEFAULT_SLOWDOWNS),
                        metavar="PCT,PCT", help="planted slow-downs in percent (default 5,10)")
    parser.add_argument("--threshold", default=f"{DEFAULT_THRESHOLD:.0%}", metavar="PCT")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    args = parser.parse_args(argv)
    try:
        workloads = experiments.workloads(args, least_runs=2)
        fractions = [parse_threshold(part) for part in args.slowdowns.split(",") if part.strip()]
        gate = Gate(parse_threshold(args.threshold), args.alpha)
        impl = load(args.impl)
        docs = measure_runs(impl, workloads, args.runs, fractions, threads=args.threads,
                            budget_s=args.budget, progress=lambda text: print(text, file=sys.stderr))
    except UsageError as exc:
        print(f"gate_error_rates: error: {exc}", file=sys.stderr)
        return 2
    rates = error_rates(docs, impl.name, fractions, gate)
    print(render(rates, impl.name))
    if args.json:
        write_json(args.json, {"impl": impl.name, "threshold": gate.threshold, "alpha": gate.alpha,
                               "rates": rates, "runs": docs})
    return 0


if __name__ == "__main__":
    sys.exit(main())

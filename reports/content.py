"""The report's content as plain data: sections of paragraphs, tables and plot references.

Both renderers (Markdown and HTML) walk the same sections, so the two files say the same thing.
Every string here is raw text, possibly from an input file; escaping is the renderers' job.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rnnbench.reports import analysis
from rnnbench.reports.model import SIZE_FIELDS, Check, Results, Timing
from rnnbench.reports.units import binary_bytes, seconds
from rnnbench.results import BASELINE, OUTCOMES

_OUTCOME_TITLES = {"passed": "passed", "failed": "failed", "not_supported": "not supported",
                   "error": "error"}
_COUNTS_NOTE = "Cells: passed / failed / not supported / error."
# Environment entries that are measurements, not settings: files differing only in these share
# an environment column (which shows them all).
_MEASURED = ("peak_gflops",)


@dataclass(frozen=True)
class Table:
    """A table of strings with a title and an optional note under the title."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass(frozen=True)
class PlotRef:
    """A place for the plot of this name (drawn only when the data supports it)."""

    name: str


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)    # str paragraphs, Table, PlotRef


def build_sections(results: Results) -> list[Section]:
    """The whole report: inputs, environments, conformance, performance, unplaced results."""
    return [_inputs(results), _environments(results), _conformance(results),
            _performance(results), _unplaced(results)]


def check_row_label(results: Results):
    """How a conformance row is named: impl, plus device and machine where they vary."""
    devices = {c.device for c in results.checks}
    machines = {c.source.machine for c in results.checks}

    def label(check: Check) -> str:
        text = check.impl
        if len(devices) > 1 and check.device:
            text += f" ({check.device})"
        if len(machines) > 1:
            text += f" @ {check.source.machine}"
        return text
    return label


# --- sections ----------------------------------------------------------------------------------

def _inputs(results: Results) -> Section:
    per_source = Counter(c.source.path for c in results.checks)
    timings = Counter(t.source.path for t in results.timings)
    unplaced = Counter(u.source.path for u in results.unplaced)
    rows = [[s.path, s.format, s.machine, str(per_source[s.path]), str(timings[s.path]),
             str(unplaced[s.path])] for s in results.sources]
    # Files found in folders that were not results at all have no Source; list them too.
    known = {s.path for s in results.sources}
    rows += [[path, "not results", "", "0", "0", str(n)] for path, n in unplaced.items()
             if path not in known]
    summary = (f"{len(results.sources)} results file(s) from {len(results.machines())} machine(s): "
               f"{len(results.checks)} conformance checks, {len(results.timings)} timings, "
               f"{len(results.unplaced)} unplaced.")
    return Section("Inputs", [summary, Table("Files", ["file", "format", "machine", "checks",
                                                       "timings", "unplaced"], rows)])


def _environments(results: Results) -> Section:
    # One column per distinct environment; files with the same settings share a column.
    columns: list[tuple[str, dict, dict]] = []      # machine, settings, everything shown
    for source in results.sources:
        settings = {k: v for k, v in source.environment.items() if k not in _MEASURED}
        match = next((c for c in columns if c[:2] == (source.machine, settings)), None)
        if match:
            match[2].update(source.environment)
        else:
            columns.append((source.machine, settings, dict(source.environment)))
    if not columns:
        return Section("Environment", ["No environment recorded."])
    names = Counter(machine for machine, _, _ in columns)
    seen: Counter = Counter()
    headers = ["key"]
    for machine, _, _ in columns:
        seen[machine] += 1
        headers.append(machine if names[machine] == 1 else f"{machine} #{seen[machine]}")
    keys = list(dict.fromkeys(k for _, _, env in columns for k in env))
    rows = [[key] + [_plain(env.get(key)) for _, _, env in columns] for key in keys]
    return Section("Environment", [Table("Environments", headers, rows)])


def _conformance(results: Results) -> Section:
    checks = results.checks
    if not any(s.format == "conformance" for s in results.sources):
        return Section("Conformance", ["No conformance results in the inputs."])
    label = check_row_label(results)
    by_impl = analysis.outcome_counts(checks, lambda c: (label(c),))
    interrupted = {label(c) for c in checks if c.source.interrupted}
    verdicts = [[name, *(str(n[o]) for o in OUTCOMES),
                 _verdict(n) + (" (interrupted: incomplete)" if name in interrupted else "")]
                for (name,), n in by_impl.items()]
    # A conformance file with no results still names its implementation: say so, never omit it.
    checked = {c.source.path for c in checks}
    verdicts += [[s.target, *("0" for _ in OUTCOMES),
                  f"could not run: {s.error}" if s.error else "no checks ran"]
                 for s in results.sources if s.format == "conformance" and s.path not in checked]
    blocks = [PlotRef("conformance"),
              Table("Verdict per implementation", ["implementation",
                    *(_OUTCOME_TITLES[o] for o in OUTCOMES), "verdict"], verdicts)]
    if checks:
        blocks += [_matrix("By kind", checks, label, lambda c: c.kind),
                   _matrix("By check category", checks, label, lambda c: c.category)]
    failing = [c for c in checks if c.outcome in ("failed", "error")]
    if failing:
        blocks.append(Table("Failing checks", ["implementation", "kind", "check", "outcome",
                                               "diagnosis", "message", "numbers"],
                            [[label(c), c.kind, c.check, c.outcome, _diagnosis(c.diagnosis),
                              c.message, _numbers(c.numbers)] for c in failing]))
    else:
        blocks.append("Every applicable check passed.")
    return Section("Conformance", blocks)


def _performance(results: Results) -> Section:
    timings = results.timings
    if not timings:
        return Section("Performance", ["No benchmark results in the inputs."])
    speedups = analysis.speedups(timings)
    # Where columns would repeat one value on every row they are left out.
    varying = {"machine": len({t.source.machine for t in timings}) > 1,
               "from": len({t.source.format for t in timings}) > 1}
    blocks: list = [f"Speed-up is {BASELINE}'s median time divided by the "
                    "implementation's, in the same run (> 1 is faster). IQR is the spread of "
                    "the repeats; % of peak is against the machine's measured GEMM peak. "
                    "Memory: rnnbench bench measures the growth during one call, asv the peak "
                    "memory of the whole benchmark process.",
                    PlotRef("speedup"), PlotRef("devices"), PlotRef("scaling")]
    headers = (["implementation"] + [name for name, shown in varying.items() if shown]
               + ["device", "dtype", "metric", "median", "IQR", f"vs {BASELINE}",
                  "GFLOP/s", "% of peak", "first call", "memory", "status"])
    for workload in dict.fromkeys(t.workload for t in timings):
        rows = [t for t in timings if t.workload == workload]
        rows.sort(key=lambda t: (t.source.machine, t.source.format, t.device, t.dtype, t.metric,
                                 t.impl != BASELINE, t.impl))
        blocks.append(Table(f"Workload {workload}", headers,
                            [_timing_row(t, speedups, varying) for t in rows],
                            _workload_note(rows)))
    return Section("Performance", blocks)


def _unplaced(results: Results) -> Section:
    if not results.unplaced:
        return Section("Unplaced results",
                       ["None: every result in the inputs is in a table above."])
    return Section("Unplaced results", [
        "Results the report could not place in a table, with the reason; nothing is dropped.",
        Table("Unplaced", ["file", "where", "reason", "content"],
              [[u.source.path, u.where, u.reason, u.content] for u in results.unplaced])])


# --- cells -------------------------------------------------------------------------------------

def _matrix(title: str, checks: list[Check], label, column) -> Table:
    counts = analysis.outcome_counts(checks, lambda c: (label(c), column(c)))
    rows = list(dict.fromkeys(label(c) for c in checks))
    cols = list(dict.fromkeys(column(c) for c in checks))
    cells = [[r] + [" / ".join(str(counts[(r, c)][o]) for o in OUTCOMES) if (r, c) in counts
                    else "" for c in cols] for r in rows]
    return Table(title, ["implementation"] + cols, cells, _COUNTS_NOTE)


def _verdict(counts: Counter) -> str:
    bad = counts["failed"] + counts["error"]
    if bad:
        return "DOES NOT CONFORM"
    return "conforms" if counts["passed"] else "nothing applicable"


def _diagnosis(diagnosis: str | None) -> str:
    if diagnosis is None:
        return ""
    try:
        from rnnbench.findings import DIAGNOSES
    except ImportError:     # reports may be rendered where the suites are not installed
        DIAGNOSES = {}
    sentence = DIAGNOSES.get(diagnosis)
    return f"{sentence} ({diagnosis})" if sentence else diagnosis


def _timing_row(t: Timing, speedups: dict, varying: dict[str, bool]) -> list[str]:
    n = t.numbers
    speedup = analysis.speedup_of(speedups, t)
    status = t.status if not t.reason else f"{t.status}: {t.reason}"
    optional = {"machine": t.source.machine, "from": t.source.format}
    return ([t.impl] + [optional[name] for name, shown in varying.items() if shown]
            + [t.device, t.dtype, t.metric, seconds(n.get("median_s")), seconds(n.get("iqr_s")),
               "" if speedup is None else f"{speedup:.2f}x",
               _fixed(n.get("gflops"), "{:.3g}"), _percent(n.get("peak_fraction")),
               seconds(n.get("first_call_s")), binary_bytes(n.get("peak_mem_bytes")), status])


def _workload_note(rows: list[Timing]) -> str:
    kinds = sorted({t.kind for t in rows if t.kind})
    sizes = {k: sorted({t.sizes[k] for t in rows if k in t.sizes}) for k in SIZE_FIELDS}
    parts = ([f"kind {', '.join(kinds)}"] if kinds else []) + [
        f"{k} {', '.join(f'{v:g}' for v in vs)}" for k, vs in sizes.items() if vs]
    return "; ".join(parts)


def _numbers(numbers: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in numbers.items())


def _plain(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _fixed(value, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


def _percent(fraction) -> str:
    return "" if fraction is None else f"{fraction * 100:.3g}%"

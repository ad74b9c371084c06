"""The report's content as plain data: sections of paragraphs, callouts, tables and plots.

Both renderers (Markdown and HTML) walk the same sections, so the two files say the same thing.
Every string here is raw text, possibly from an input file; escaping is the renderers' job.

The first section answers "who conforms, who is fastest, how sure are we" on one screen: the
warnings (busy machine, noisy timings, non-conforming numbers, repeated inputs), one row per
implementation with its verdict and its headline speed-up with the interval, and what was
measured how. The detail follows.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rnnbench.benchmarks.statistics import bimodal
from rnnbench.findings import group_failures
from rnnbench.suites.divergence import describe
from rnnbench.suites.results import cut_short, judge, summary_phrase
from rnnbench.reports import analysis, runs
from rnnbench.reports.records import SIZE_FIELDS, Check, Results, Source, Timing
from rnnbench.reports.units import binary_bytes, seconds
from rnnbench.documents import BASELINE, OUTCOMES
from rnnbench.wording import counted

_OUTCOME_TITLES = {"passed": "passed", "failed": "failed", "not_supported": "not supported",
                   "error": "error", "xfail": "known failure", "xpass": "unexpected pass"}
# Check categories as the report shows them; the ids stay as the results JSON has them. The
# category "errors" (wrong inputs must raise) would read as the outcome "error".
CATEGORY_TITLES = {"errors": "error inputs"}
# Environment entries that are measurements or times, not settings: files differing only in
# these share an environment column (which shows them all).
_MEASURED = ("peak_gflops", "date")
NAMED = 5        # how many results a warning names before it says "and N more"


@dataclass(frozen=True)
class Table:
    """A table of strings with a title and an optional note under the title."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    fit: bool = False    # on a narrow screen wrap the cells to fit, rather than scroll


@dataclass(frozen=True)
class PlotRef:
    """A place for the plot of this name (drawn only when the data supports it)."""

    name: str


@dataclass(frozen=True)
class Callout:
    """A sentence the reader must not miss: "warning" (results less reliable) or "note"."""

    level: str
    text: str


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)    # str paragraphs, Callout, Table, PlotRef


def build_sections(results: Results) -> list[Section]:
    """The whole report: the summary first, then conformance, performance, the comparison
    across runs (when there are several), the inputs, environments and unplaced results."""
    sections = [_summary(results), _conformance(results), _performance(results)]
    across = _across_runs(results)
    if across:
        sections.append(across)
    return sections + [_inputs(results), _environments(results), _unplaced(results)]


def category_title(category: str) -> str:
    return CATEGORY_TITLES.get(category, category)


def check_row_label(results: Results):
    """How a conformance row is named: impl, plus the device where devices vary, plus the run
    where an implementation was checked in several (then every row names its run)."""
    devices = {c.device for c in results.checks}
    named = runs.Runs(results)
    several_runs = _checked_more_than_once(results)

    def label(check: Check) -> str:
        text = check.impl
        if len(devices) > 1 and check.device:
            text += f" ({check.device})"
        if several_runs:
            text += f" @ {named.of(check.source)}"
        return text
    return label


def _checked_more_than_once(results: Results) -> bool:
    """Whether an implementation has several conformance runs in the inputs."""
    targets = Counter(s.target for s in results.sources if s.format == "conformance")
    return any(n > 1 for n in targets.values())


# --- the summary -------------------------------------------------------------------------------

def _summary(results: Results) -> Section:
    """The warnings, then a table per run of timings (the verdicts of the conformance runs of
    the same checkout beside the speed-ups), and one per checkout that has only conformance
    runs, in date order."""
    blocks: list = _warnings(results)
    named = runs.Runs(results)
    table = analysis.speedups(results.timings)
    note = (f"Speed-up: geometric mean of {BASELINE}'s median time over the implementation's, "
            "across the workloads and metrics timed, with its 95% interval; an interval "
            "containing 1 is within noise, not a speed-up, and a busy machine's is not "
            "judged. Fastest first.")
    conformance = [s for s in results.sources if s.format == "conformance"]
    groups = [(named.label(run), run.checkout, run) for run in named.timing_runs(results)]
    timed = {checkout for _, checkout, _ in groups}
    for checkout in dict.fromkeys(runs.run_of(s).checkout for s in
                                  sorted(conformance, key=lambda s: runs.run_of(s).order())):
        if checkout not in timed:
            machine, commit, _ = checkout
            groups.append((f"{machine} @ {commit[:8]}" if commit else machine, checkout, None))
    for title, checkout, run in groups:
        checks = [s for s in conformance if runs.run_of(s).checkout == checkout]
        impls = list(dict.fromkeys([s.target for s in checks] + [
            t.impl for t in results.timings if runs.run_of(t.source) == run]))
        rows = []
        for impl in impls:
            verdict = _conformance_summary(results, [s for s in checks if s.target == impl], named)
            speed, notes, order = _speed_summary(results, impl, run, table)
            if "DOES NOT CONFORM" in verdict and speed and impl != BASELINE:
                notes.insert(0, "fails the conformance suite")
            elif "function not checked" in verdict and speed and impl != BASELINE:
                notes.insert(0, "its function was not checked")
            rows.append((-order, [impl, verdict, speed, "; ".join(notes)]))
        rows.sort(key=lambda row: row[0])
        heading = "Who conforms, who is fastest" if run else "Who conforms"
        blocks.append(Table(heading if len(groups) == 1 else f"{heading}: {title}",
                            ["implementation", "conformance",
                             f"speed-up over {BASELINE} (95% CI)", "notes"],
                            [row for _, row in rows], note, fit=True))
        note = ""       # said once, under the first table
    if not groups:
        blocks.append("No results in the inputs.")
    blocks.append(_measured(results, named))
    return Section("Summary", blocks)


def _warnings(results: Results) -> list[Callout]:
    busy = []
    named = runs.Runs(results)
    for source in results.sources:
        if source.busy:
            reasons = "; ".join(map(str, source.machine_check.get("reasons") or [])) or "busy"
            busy.append(f"Busy machine: {named.of(source)} when timed ({reasons}). Its "
                        "speed-ups are not judged.")
        if source.format == "bench" and source.interrupted:
            busy.append(f"Interrupted: {source.path} is from a benchmark run that did not "
                        "finish; its results are incomplete.")
    # One run's CPU and GPU timings are two files that can say the same.
    found = [Callout("warning", text) for text in dict.fromkeys(busy)]
    noisy = [t for t in results.timings if t.noisy]
    if noisy:
        found.append(Callout("warning", f"Noisy: {_names(noisy)}. The spread is large, so "
                                        "the median may move that much between runs."))
    wrong = [t for t in results.timings if t.conforms is False]
    if wrong:
        found.append(Callout("warning", f"Non-conforming numbers, in no speed-up: "
                                        f"{_names(wrong)}."))
    for dup in results.duplicates:
        found.append(Callout("note", f"{dup.path} repeats {dup.same_as} ({dup.how}): "
                                     "counted once."))
    return found


def _names(timings: list[Timing]) -> str:
    names = [" ".join(p for p in (t.impl, t.workload, t.metric, t.device) if p)
             for t in timings[:NAMED]]
    more = len(timings) - NAMED
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _conformance_summary(results: Results, sources: list[Source], named: runs.Runs) -> str:
    """The verdict of an implementation's conformance runs (its files in one checkout), each
    with its device or, for runs on one device, its time when there are several."""
    if not sources:
        return "not checked"
    verdicts = [_verdict_of(results, source) for source in sources]
    if len(verdicts) == 1:
        return verdicts[0]
    devices = [str(source.settings.get("device") or "") for source in sources]
    # One run checked on several devices: each verdict named by its device, as the speed-up
    # cell names them; otherwise by when it ran.
    if len(set(devices)) == len(devices):
        pairs = sorted(zip(devices, verdicts), key=lambda pair: (pair[0] != "cpu", pair[0]))
        return "; ".join(f"{device or 'device unknown'}: {verdict}" for device, verdict in pairs)
    return "; ".join(f"{named.of(source)}: {verdict}"
                     for source, verdict in sorted(zip(sources, verdicts),
                                                   key=lambda pair: runs.run_of(pair[0]).order()))


def _verdict_of(results: Results, source: Source) -> str:
    checks = [c for c in results.checks if c.source == source]
    if not checks:
        return _unchecked([source])
    counts = Counter(c.outcome for c in checks)
    case_list = ", quick case list" if source.quick else ""
    cut = ", interrupted: incomplete" if source.interrupted else ""
    phrase = summary_phrase(judge(checks, source.interrupted))
    # A check cut by a time limit or a budget is no finding: it did not finish.
    unfinished = sum(map(cut_short, checks))
    bad = counts["failed"] + counts["error"] - unfinished
    if not bad and not unfinished:
        return (f"{phrase}{case_list}{cut} ({counted(counts['passed'], 'check')})"
                if counts["passed"] else f"nothing applicable{case_list}")
    total = counted(len(checks), "check")
    if bad:
        said = f"{bad} of {total} fail{'s' * (bad == 1)}"
        said += f", {unfinished} did not finish" if unfinished else ""
    else:
        said = f"{unfinished} of {total} did not finish"
    causes = len(group_failures(checks))
    return f"{phrase}{case_list}{cut} ({said}, {counted(causes, 'cause')})"


def _speed_summary(results: Results, impl: str, run: runs.Run | None,
                   table: dict) -> tuple[str, list[str], float]:
    """The speed-up cell, the notes, and the value that orders the rows (fastest first)."""
    mine = [t for t in results.timings if t.impl == impl and runs.run_of(t.source) == run]
    if not mine:
        return "", [], -1.0
    devices = list(dict.fromkeys(t.device for t in mine))
    cells, notes, order = [], [], -1.0
    for device in devices:
        here = [t for t in mine if t.device == device]
        prefix = f"{device}: " if len(devices) > 1 else ""
        line = analysis.headline(here, table)
        if impl == BASELINE:
            cells.append(f"{prefix}baseline")
            order = max(order, 1.0)
        elif line.ratio is not None:
            cells.append(prefix + headline_text(line))
            order = max(order, line.ratio.value)
        elif line.left_out:
            cells.append(f"{prefix}not counted: numbers do not conform")
        else:
            statuses = Counter(t.status for t in here if t.status != "ok")
            cells.append(prefix + ("not timed: " + ", ".join(
                f"{n} {s.replace('_', ' ')}" for s, n in statuses.items()) if statuses
                else f"no {BASELINE} timing to compare with"))
        if line.noisy:
            notes.append(f"{prefix}{line.noisy} of {counted(len(here), 'timing')} noisy")
        if line.left_out and line.ratio is not None:
            notes.append(f"{prefix}{counted(line.left_out, 'timing')} left out: numbers do not "
                         "conform")
        failed = sum(t.status == "failed" for t in here)
        if failed:
            notes.append(f"{prefix}{failed} failed")
    return "; ".join(cells), notes, order


def headline_text(line: analysis.Headline) -> str:
    """'1.52x faster (1.40–1.63), 9 results', and its within-noise, not-judged and
    no-interval forms."""
    ratio = line.ratio
    over = f"{line.count} result{'s' * (line.count != 1)}"
    if ratio.not_judged:
        return f"{ratio.not_judged_text}, {over}"
    if ratio.ci is None:
        return f"{ratio.value:.2f}x (no interval in the inputs), {over}"
    interval = f"{ratio.ci[0]:.2f}–{ratio.ci[1]:.2f}"
    if ratio.within_noise:
        return f"≈ {BASELINE}, within noise ({interval}), {over}"
    word = "faster" if ratio.verdict == "faster" else "slower"
    return f"{ratio.value:.2f}x {word} ({interval}), {over}"


def ratio_text(ratio: analysis.Ratio | None) -> str:
    """A speed-up in a table cell: '0.50x (0.45–0.55)', '≈ native, within noise (...)'."""
    if ratio is None:
        return ""
    if ratio.not_judged:
        return ratio.not_judged_text
    interval = f" ({ratio.ci[0]:.2f}–{ratio.ci[1]:.2f})" if ratio.ci else ""
    if ratio.within_noise:
        return f"≈ {BASELINE}, within noise{interval}"
    return f"{ratio.value:.2f}x{interval}"


def _measured(results: Results, named: runs.Runs) -> Table:
    """What was measured and how, one row per run, in date order."""
    rows = []
    for run in named.all:
        source = next(s for s in results.sources if runs.run_of(s) == run)
        if source.format == "conformance":
            case_list = "quick case list" if source.quick else "full case list"
            seed = source.settings.get("seed")
            rows.append([named.label(run), f"conformance of {source.target}",
                         case_list + ("" if seed is None else f", seed {seed}"), "", "",
                         _joined([source.environment.get("threads")]),
                         _joined([source.settings.get("device")]),
                         run.commit or "unknown", run.version or "unknown"])
        else:
            rows.append(_bench_row(named.label(run), source, results))
    return Table("What was measured, and how",
                 ["run", "measured", "preset / case list", "budget", "repeats", "threads",
                  "device", "commit", "rnnbench"], rows,
                 "Runs: machine, time (UTC) and file. Budget: timing time per implementation, "
                 "workload and metric; repeats: samples per median (fewest–most); threads: as "
                 "timed.")


def _bench_row(label: str, source: Source, results: Results) -> list[str]:
    timings = [t for t in results.timings if t.source == source]
    timed = [t for t in timings if t.status == "ok"]
    repeats = sorted({t.repeats for t in timed if t.repeats})
    threads = _joined([*(t.threads for t in timed if t.threads is not None)]
                      or [source.settings.get("threads"), source.environment.get("threads")])
    budget = source.settings.get("budget_s")
    check = source.machine_check
    machine = ""
    if check:
        machine = "; busy" if check.get("busy") else "; machine quiet"
    return [label, f"{counted(len(timings), 'timing')}, {source.format}{machine}",
            str(source.settings.get("preset") or "not recorded"),
            seconds(budget) if _is_number(budget) else "not recorded",
            (f"{repeats[0]}–{repeats[-1]}" if len(repeats) > 1 else
             str(repeats[0]) if repeats else ""), threads,
            _joined(t.device for t in timings), source.commit or "unknown",
            source.version or "unknown"]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _joined(values) -> str:
    return ", ".join(str(v) for v in dict.fromkeys(v for v in values if v not in (None, "")))


# --- conformance -------------------------------------------------------------------------------

def _conformance(results: Results) -> Section:
    named = runs.Runs(results)
    checks = named.chronological(results.checks)
    if not any(s.format == "conformance" for s in results.sources):
        return Section("Conformance", ["No conformance results in the inputs."])
    label = check_row_label(results)
    by_impl = analysis.outcome_counts(checks, lambda c: (label(c),))
    flags = {}
    for c in checks:
        flags.setdefault(label(c), set()).update(
            {"quick"} if c.source.quick else set(), {"cut"} if c.source.interrupted else set())
    outcomes = shown_outcomes(checks)
    verdicts = [[name, *(str(n[o]) for o in outcomes),
                 _verdict([c for c in checks if label(c) == name], flags[name])]
                for (name,), n in by_impl.items()]
    # A conformance file with no results still names its implementation: say so, never omit it.
    checked = {c.source.path for c in checks}
    several = _checked_more_than_once(results)
    verdicts += [[f"{s.target} @ {named.of(s)}" if several else s.target,
                  *("0" for _ in outcomes), _unchecked([s])]
                 for s in results.sources if s.format == "conformance" and s.path not in checked]
    blocks = [Table("Verdict per implementation", ["implementation",
                    *(_OUTCOME_TITLES[o] for o in outcomes), "verdict"], verdicts,
                    "Quick case list: the suite's smaller list of cases, for a fast answer; "
                    "a full run checks more."), PlotRef("conformance")]
    if checks:
        # rows in date order, columns in the order the inputs name them (as the heat-map's)
        blocks += [_matrix("By kind", checks, label, lambda c: c.kind, results.checks),
                   _matrix("By check category", checks, label,
                           lambda c: category_title(c.category), results.checks)]
    blocks += _failures(checks, label) or ["Every applicable check passed."]
    blocks += _declarations(results)
    return Section("Conformance", blocks)


def _failures(checks: list[Check], label) -> list:
    """Failed and errored checks grouped by root cause per implementation: count, example."""
    rows = []
    total = 0
    for name in dict.fromkeys(label(c) for c in checks):
        mine = [c for c in checks if label(c) == name]
        for group in group_failures(mine):
            example = group.example
            outcomes = Counter(r.outcome for r in group.results)
            cause = group.sentence + (f" ({group.diagnosis})" if group.diagnosis else "")
            rows.append([name, cause, str(group.count),
                         ", ".join(f"{n} {o}" for o, n in outcomes.items()),
                         ", ".join(group.kinds),
                         f"{example.kind} {example.check}: {example.message}"
                         + (f" (first divergence: {where})"
                            if (where := describe(example.numbers)) else "")])
            total += group.count
    if not rows:
        return []
    return [Table("Failures by cause", ["implementation", "cause", "checks", "outcomes", "kinds",
                                        "example"], rows,
                  f"{counted(total, 'failing check')} in {counted(len(rows), 'cause')}, most "
                  "fundamental first "
                  "per implementation; a later cause is often a consequence of an earlier one. "
                  "Every check is in the input JSON.")]


def _declarations(results: Results) -> list[Table]:
    conformance = [s for s in results.sources if s.format == "conformance"]
    several = _checked_more_than_once(results)
    named = runs.Runs(results)

    def name(s: Source) -> str:
        return f"{s.target} @ {named.of(s)}" if several else s.target

    blocks = []
    unsupported = [[name(s), feature, _feature_source(results, s, feature), reason]
                   for s in conformance for feature, reason in s.not_supported_features.items()]
    if unsupported:
        blocks.append(Table("Not supported", ["implementation", "feature", "source", "reason"],
                            unsupported, "Checks needing these features are reported as not "
                                         "supported, never as failed. Only a declared feature is "
                                         "excused from the drop-in verdict; one absent from a "
                                         "signature or observed (forward raised on it) is not."))
    mapped = [[name(s), key, spec] for s in conformance for key, spec in s.param_map.items()]
    if mapped:
        blocks.append(Table("Parameter names assumed", ["implementation", "module's name",
                                                         "spec's name"], mapped,
                            "The implementation's parameters were read under these names."))
    return blocks


def _feature_source(results: Results, source: Source, feature: str) -> str:
    """Where the implementation's lack of `feature` comes from, as its results say: "declared",
    "signature" or "observed" (the suites' `features.SOURCES`)."""
    for check in results.checks:
        if check.source is source and check.outcome == "not_supported":
            found = (check.numbers or {}).get("sources") or {}
            if feature in found:
                return found[feature]
    return "declared"


# --- performance -------------------------------------------------------------------------------

def _performance(results: Results) -> Section:
    timings = results.timings
    if not timings:
        return Section("Performance", ["No benchmark results in the inputs."])
    speedups = analysis.speedups(timings)
    named = runs.Runs(results)
    # Where columns would repeat one value on every row they are left out.
    varying = {"run": len(named.timing_runs(results)) > 1,
               "from": len({t.source.format for t in timings}) > 1}
    blocks: list = [f"Speed-up is {BASELINE}'s median time divided by the implementation's in "
                    "the same run (> 1 is faster), with its 95% interval where the input has "
                    "one; an interval containing 1 is within noise, and none is judged from a "
                    "busy machine or where one side's speed changed against the other's between "
                    "rounds (bimodal). Numbers that do not conform get no "
                    "speed-up. IQR is the spread of the repeats; % of peak is "
                    "against the machine's measured GEMM peak. Memory: rnnbench bench "
                    "measures the peak allocated during one call, asv the peak memory of the "
                    "whole benchmark process.",
                    PlotRef("speedup"), PlotRef("devices"), PlotRef("scaling")]
    headers = (["implementation"] + [name for name, shown in varying.items() if shown]
               + ["device", "dtype", "metric", "median", "IQR", f"vs {BASELINE}",
                  "GFLOP/s", "% of peak", "first call", "memory", "threads", "notes", "status"])
    for workload in dict.fromkeys(t.workload for t in timings):
        rows = [t for t in timings if t.workload == workload]
        rows.sort(key=lambda t: (runs.run_of(t.source).order(), t.device, t.dtype, t.metric,
                                 t.impl != BASELINE, t.impl))
        blocks.append(Table(f"Workload {workload}", headers,
                            [_timing_row(t, speedups, varying, named) for t in rows],
                            _workload_note(rows)))
    return Section("Performance", blocks)


def _timing_row(t: Timing, speedups: dict, varying: dict[str, bool],
                named: runs.Runs) -> list[str]:
    if t.impl == BASELINE and analysis.speedup_of(speedups, t) is not None:
        vs = "baseline"
    elif t.conforms is False:
        vs = "not counted: does not conform"
    else:
        vs = ratio_text(analysis.ratio_of(speedups, t))
    status = t.status.replace("_", " ") + (f": {t.reason}" if t.reason else "")
    optional = {"run": named.of(t.source), "from": t.source.format}
    return ([t.impl] + [optional[name] for name, shown in varying.items() if shown]
            + [t.device, t.dtype, t.metric, seconds(t.median_s), seconds(t.iqr_s),
               vs, _fixed(t.gflops, "{:.3g}"), _percent_of(t.peak_fraction),
               seconds(t.first_call_s), binary_bytes(t.peak_mem_bytes),
               "" if t.threads is None else f"{t.threads:g}", _timing_notes(t), status])


def _timing_notes(t: Timing) -> str:
    notes = []
    if t.noisy:
        spread = (f" (IQR {t.iqr_s / t.median_s:.0%} of the median)"
                  if t.iqr_s is not None and t.median_s else "")
        notes.append("noisy" + spread)
    if bimodal(t):  # a fact of the samples; whether the pair is judged is the ratio's column
        notes.append("bimodal samples")
    if t.conforms is False:
        notes.append("NON-CONFORMING" + (f": {t.conformance_note}" if t.conformance_note else ""))
    elif t.conforms is None and t.conformance_note and t.status == "ok":
        notes.append(t.conformance_note)
    return "; ".join(notes)


def _workload_note(rows: list[Timing]) -> str:
    kinds = sorted({t.kind for t in rows if t.kind})
    sizes = {k: sorted({t.sizes[k] for t in rows if k in t.sizes}) for k in SIZE_FIELDS}
    parts = ([f"kind {', '.join(kinds)}"] if kinds else []) + [
        f"{k} {', '.join(f'{v:g}' for v in vs)}" for k, vs in sizes.items() if vs]
    return "; ".join(parts)


# --- across runs -------------------------------------------------------------------------------

def _across_runs(results: Results) -> Section | None:
    comparisons, left_out = runs.side_by_side(results)
    if not comparisons and not left_out:
        return None
    named = runs.Runs(results)
    blocks: list = ["Runs side by side, in date order. Only like is compared with like: the same "
                    "implementation, kind, workload, device, dtype and metric, measured by the "
                    "same rnnbench version; conformance on the same case list. What was left "
                    "out is listed below with the reason."]
    speedups = analysis.speedups(results.timings)
    for comparison in comparisons:
        version = comparison.version or "(version unknown)"
        if comparison.verdicts:
            rows = [[" ".join(p for p in (impl, device, "(quick)" if quick else "") if p),
                     named.of(source), _run_verdict(results, source)]
                    for (impl, device, quick), sources in comparison.verdicts.items()
                    for source in sources]
            blocks.append(Table(f"Conformance across runs (rnnbench {version})",
                                ["implementation", "run", "verdict"], rows,
                                "A row per run that checked the implementation, in date "
                                "order; verdict, passed / applicable checks."))
        if comparison.timings:
            columns = [run for run in comparison.runs
                       if any(run in row for row in comparison.timings.values())]
            rows = [[" ".join(p for p in (impl, workload, metric) if p),
                     " ".join(p for p in (device, dtype) if p)]
                    + [_run_timing(row.get(run), speedups) for run in columns]
                    for (impl, kind, workload, device, dtype, metric), row
                    in comparison.timings.items()]
            blocks.append(Table(f"Timings across runs (rnnbench {version})",
                                ["implementation, workload, metric", "device"]
                                + [named.label(run) for run in columns], rows,
                                f"Cells: median time; speed-up over {BASELINE} in that run."))
    if left_out:
        blocks.append(Table("Left out of the comparison", ["why", "how many", "for example"],
                            [[item.why, str(item.count), "; ".join(item.examples)]
                             for item in left_out]))
    return Section("Across runs", blocks)


def _unchecked(sources: list[Source]) -> str:
    """The verdict of conformance files without results: why none ran."""
    errors = [s.error for s in sources if s.error]
    return (f"could not run: {errors[0]}" if errors else
            "interrupted before any check ran" if any(s.interrupted for s in sources) else
            "no checks ran")


def _run_verdict(results: Results, source: Source) -> str:
    checks = [c for c in results.checks if c.source == source]
    if not checks:
        return _unchecked([source])
    counts = Counter(c.outcome for c in checks)
    applicable = counts["passed"] + counts["failed"] + counts["error"]
    return f"{_verdict(checks, set())}, {counts['passed']} / {applicable}"


def _run_timing(t: Timing | None, speedups: dict) -> str:
    if t is None:
        return ""
    if t.status != "ok" or t.median_s is None:
        return t.status
    if t.conforms is False:
        return f"{seconds(t.median_s)}; does not conform"
    ratio = analysis.ratio_of(speedups, t)
    if t.impl == BASELINE or ratio is None:
        return seconds(t.median_s)
    return f"{seconds(t.median_s)}; {ratio_text(ratio)}"


# --- inputs, environments, unplaced --------------------------------------------------------------

def _inputs(results: Results) -> Section:
    per_source = Counter(c.source.path for c in results.checks)
    timings = Counter(t.source.path for t in results.timings)
    unplaced = Counter(u.source.path for u in results.unplaced)
    named = runs.Runs(results)
    rows = [[s.path, s.format, named.of(s), str(per_source[s.path]),
             str(timings[s.path]), str(unplaced[s.path])] for s in results.sources]
    # Files found in folders that were not results at all have no Source; list them too.
    known = {s.path for s in results.sources}
    rows += [[path, "not results", "", "0", "0", str(n)] for path, n in unplaced.items()
             if path not in known]
    summary = (f"{counted(len(results.sources), 'results file')} from "
               f"{counted(len(results.machines()), 'machine')}: "
               f"{counted(len(results.checks), 'conformance check')}, "
               f"{counted(len(results.timings), 'timing')}, {len(results.unplaced)} unplaced.")
    blocks: list = [summary, Table("Files", ["file", "format", "run", "checks", "timings",
                                             "unplaced"], rows)]
    if results.duplicates:
        blocks.append(Table("Repeated inputs, counted once", ["file", "repeats", "how"],
                            [[d.path, d.same_as, d.how] for d in results.duplicates]))
    return Section("Inputs", blocks)


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
    rows = [[key] + [_cell(env.get(key)) for _, _, env in columns] for key in keys]
    blocks: list = [Table("Environments", headers, rows)]
    checks = [(s, s.machine_check) for s in results.sources if s.machine_check]
    named = runs.Runs(results)
    if checks:
        blocks.append(Table("Machine checks before timing",
                            ["run", "file", "busy", "cores", "load average", "others' CPU",
                             "steal", "GEMM peak (median, library, IQR)", "reasons"],
                            [[named.of(s), s.path, "yes" if c.get("busy") else "no",
                              _cell(c.get("cores")), _cell_list(c.get("load_avg")),
                              _percent_of(c.get("others_fraction")),
                              _percent_of(c.get("steal_fraction")), _peak(c),
                              "; ".join(map(str, c.get("reasons") or []))]
                             for s, c in checks]))
    return Section("Environment", blocks)


def _unplaced(results: Results) -> Section:
    if not results.unplaced:
        return Section("Unplaced results",
                       ["None: every result in the inputs is in a table above."])
    return Section("Unplaced results", [
        "Results the report could not place in a table, with the reason; nothing is dropped.",
        Table("Unplaced", ["file", "where", "reason", "content"],
              [[u.source.path, u.where, u.reason, u.content] for u in results.unplaced])])


# --- cells -------------------------------------------------------------------------------------

def _matrix(title: str, checks: list[Check], label, column, order: list[Check]) -> Table:
    counts = analysis.outcome_counts(checks, lambda c: (label(c), column(c)))
    rows = list(dict.fromkeys(label(c) for c in checks))
    cols = list(dict.fromkeys(column(c) for c in order))
    outcomes = shown_outcomes(checks)
    cells = [[r] + [" / ".join(str(counts[(r, c)][o]) for o in outcomes) if (r, c) in counts
                    else "" for c in cols] for r in rows]
    note = "Cells: " + " / ".join(_OUTCOME_TITLES[o] for o in outcomes) + "."
    return Table(title, ["implementation"] + cols, cells, note)


def shown_outcomes(checks: list[Check]) -> list[str]:
    """The four outcomes of every run, and xfail / xpass where known failures were declared."""
    present = {c.outcome for c in checks}
    return [o for o in OUTCOMES if o in ("passed", "failed", "not_supported", "error") or o in present]


def _verdict(checks: list[Check], flags: set[str]) -> str:
    counts = Counter(c.outcome for c in checks)
    if counts["failed"] + counts["error"]:
        text = summary_phrase(judge(checks, "cut" in flags))
    else:
        text = "conforms" if counts["passed"] else "nothing applicable"
    if "quick" in flags:
        text += " (quick case list)"
    if "cut" in flags:
        text += " (interrupted: incomplete)"
    return text


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _percent_of(fraction) -> str:
    """0.773 -> '77.3%': three significant digits, as the report's other numbers."""
    return "" if fraction is None else f"{fraction * 100:.3g}%"


def _cell_list(values) -> str:
    return ", ".join(map(_cell, values)) if isinstance(values, list) else _cell(values)


def _peak(check: dict) -> str:
    median, iqr = check.get("peak_gflops_median"), check.get("peak_gflops_iqr")
    if median is None:
        return ""
    details = [str(check["peak_library"])] if check.get("peak_library") else []
    details += [f"IQR {iqr:.3g}"] if iqr is not None else []
    return f"{median:.4g} GFLOP/s" + (f" ({', '.join(details)})" if details else "")


def _fixed(value, pattern: str) -> str:
    return "" if value is None else pattern.format(value)



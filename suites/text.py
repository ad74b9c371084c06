"""Conformance results as text: the findings first, then a table per kind, then the verdict.

Works on a `ConformanceRun` (`ConformanceRun.from_json` reads one back from its JSON file), so
it renders a run just made and a file alike. The failures are grouped by root cause (`rnnbench.findings`), most
fundamental first, one line each with how many checks it explains and one example; then what was
not supported and why, once per feature; then a command that reruns the top finding's example
alone with its details:

    Findings, most fundamental first:
     1. sequence processed in the wrong time order [time_reversed]: 8 checks
        e.g. forward/single-layer: output differs from the reference (max abs 1.5e+00, ...)
             first divergence: layer 0, forward direction, timestep 0
    Not supported (skipped, not failed):
       num_layers: the constructor takes no `num_layers` (120 checks)
    Rerun the first finding alone:
      rnnbench conform my_rnn.py:MyRNN --kind rnn --check forward/single-layer --verbose
"""
from __future__ import annotations

import shlex
import textwrap

import numpy as np
from tabulate import tabulate

from rnnbench.findings import DIAGNOSES, group_failures, strip_addresses, unsupported_features
from rnnbench.printable import printable_data
from rnnbench.suites.divergence import describe
from rnnbench.suites.results import CheckResult, ConformanceRun
from rnnbench.wording import counted, shorten

# Worst first: a group of results shows its worst outcome.
SEVERITY = ("error", "failed", "xpass", "xfail", "not_supported", "passed")
LABELS = {"failed": "FAILED", "error": "ERROR", "not_supported": "NOT SUPPORTED", "passed": "passed",
          "xfail": "xfail", "xpass": "XPASS"}
TALLY = {"passed": "passed", "failed": "failed", "not_supported": "not supported", "error": "error",
         "xfail": "known failures", "xpass": "passed though listed as known failures"}
WIDTH = 100  # columns of everything printed
SHOWN_FINDINGS = 10


def finding(result: CheckResult, indent: str = "") -> list[str]:
    """A failed or errored result as lines: the message, where it diverges, the diagnosis."""
    lines = [f"{indent}{LABELS[result.outcome]} {result.check}: {result.message}"]
    where = describe(result.numbers)
    if where:
        lines.append(f"{indent}  first divergence: {where}")
    if result.diagnosis:
        lines.append(f"{indent}  diagnosis: {DIAGNOSES.get(result.diagnosis, '')} "
                     f"[{result.diagnosis}]")
    return lines


def findings(doc: ConformanceRun) -> list[str]:
    """The root causes, most fundamental first, with a command that reruns the first alone."""
    groups = group_failures(doc.results)
    if not groups:
        return []
    several_kinds = len({r.kind for r in doc.results}) > 1
    lines = ["Findings, most fundamental first:"]
    for number, group in enumerate(groups[:SHOWN_FINDINGS], 1):
        kinds = f" ({', '.join(group.kinds)})" if several_kinds else ""
        tag = f" [{group.diagnosis}]" if group.diagnosis else ""
        lines += _wrapped(f"{group.sentence}{tag}: {counted(group.count, 'check')}{kinds}",
                          f"{number:2d}. ", "    ")
        example = group.example
        lines += _wrapped(f"e.g. {example.check}: {strip_addresses(example.message)}",
                          "    ", "         ")
        where = describe(example.numbers)
        if where:
            lines.append(f"         first divergence: {where}")
    if len(groups) > SHOWN_FINDINGS:
        lines.append(f"    ... and {len(groups) - SHOWN_FINDINGS} more causes (every result is in --json)")
    command = rerun_command(doc, groups[0].example)
    if command:
        lines += ["Rerun the first finding alone, with its inputs and numbers:",
                  *_continued(command, "  ")]
    return lines


def _continued(command: str, indent: str) -> list[str]:
    """A shell command in lines of at most WIDTH columns, continued with a backslash, so that
    it can be pasted as it is; a word is never cut."""
    lines, line = [], indent
    for word in shlex.split(command):
        word = shlex.quote(word)
        if line.strip() and len(line) + 1 + len(word) + 2 > WIDTH:
            lines.append(line + " \\")
            line = indent + "    "
        line += ("" if not line.strip() else " ") + word
    return lines + [line]


def rerun_command(doc: ConformanceRun, result: CheckResult) -> str | None:
    """The command that reruns `result`'s check alone, as this run was asked for (its case,
    seed, parameter map, declared features, known failures, time limit, device); None when
    this run is already that one."""
    drawn = result.numbers.get("case")  # a fuzz finding: its minimal case
    if (drawn and doc.case == drawn) or (not drawn and doc.checks == result.check):
        return None
    if drawn:
        selection = ["--case", drawn]
    else:
        selection = (["--case", doc.case] if doc.case else []) + ["--check", result.check]
    options = doc.options
    words = ["rnnbench", "conform", doc.target, "--kind", result.kind, *selection]
    for flag, value in (("--device", doc.device if doc.device != "cpu" else None),
                        ("--seed", doc.seed or None),
                        ("--param-map", ",".join(f"{k}={v}" for k, v in
                                                 (options.get("param_map") or {}).items())),
                        ("--unsupported", ",".join(options.get("unsupported") or ())),
                        ("--known-failures", options.get("known_failures_file")),
                        ("--timeout", options.get("timeout")),
                        ("--require", doc.require if doc.require != "drop-in" else None)):
        if value:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join([*words, "--verbose"])


def not_supported(doc: ConformanceRun) -> list[str]:
    """What was skipped, once per feature, with the reason."""
    skipped = unsupported_features(doc.results)
    if not skipped:
        return []
    lines = ["Not supported (these checks were skipped, not failed):"]
    for feature, entry in skipped.items():
        reason = f": {entry['reason']}" if entry["reason"] else ""
        lines += _wrapped(f"{feature}{reason} ({counted(entry['checks'], 'check')})", "   ",
                          "     ")
    return lines


def known_lines(doc: ConformanceRun) -> list[str]:
    """The known failures that passed (their entries can go) and the entries that matched
    nothing."""
    lines = [f"XPASS {r.kind}/{r.check}: {r.message}" for r in doc.results if r.outcome == "xpass"]
    lines += [f"warning: known failure {pattern!r} matches no check of this run"
              for pattern in doc.stale_known_failures]
    return lines


def kind_table(results: list[CheckResult], verbose: bool = False) -> str:
    """One kind's results: a row per check (its cases summed up), or per result if `verbose`."""
    if verbose:
        rows = [[r.check, LABELS[r.outcome], strip_addresses(r.message)] for r in results]
        return _fitted(rows, ["check", "outcome", "message"])
    groups: dict[str, list[CheckResult]] = {}
    for result in results:
        groups.setdefault(result.name, []).append(result)
    rows = []
    for name, group in groups.items():
        worst = min(group, key=lambda r: SEVERITY.index(r.outcome))
        passed = sum(r.outcome == "passed" for r in group)
        message = "" if worst.outcome == "passed" else f"{worst.case}: {worst.message}"
        rows.append([name, f"{passed}/{len(group)}", LABELS[worst.outcome],
                     strip_addresses(message)])
    return _fitted(rows, ["check", "passed", "outcome", "first problem"])


def details(result: CheckResult) -> list[str]:
    """One result in full: the case's configuration and input shapes, the message, and where
    the numbers were compared, the expected and actual values side by side."""
    lines = finding(result)
    if result.numbers.get("raised_at"):
        lines.append(f"  raised at: {result.numbers['raised_at']} (the last frame in your code)")
    setup = result.numbers.get("setup") or {}
    if "config" in setup:
        batch = "none (unbatched)" if setup["batch"] is None else setup["batch"]
        steps = "" if setup["steps"] is None else f", {setup['steps']} steps"
        lines.append(f"  config: {setup['config']}; batch {batch}{steps}")
        lines.append("  inputs: " + ", ".join(f"{name} {tuple(shape)}"
                                              for name, shape in setup["inputs"].items())
                     + ("" if "h0" in setup["inputs"] else " (initial state omitted)"))
        if "lengths" in setup:
            lines.append(f"  packed: pack_padded_sequence(input, lengths={setup['lengths']}, "
                         f"enforce_sorted={setup['enforce_sorted']})")
    numbers = result.numbers
    if "expected" in numbers and "actual" in numbers:
        at = ", ".join(map(str, numbers.get("at", [])))
        lines.append(f"  {numbers.get('name', 'value')}[{at}, :{len(numbers['expected'])}]:")
        lines += _values("    expected ", numbers["expected"])
        lines += _values("    actual   ", numbers["actual"])
    # a long message, configuration or list of inputs continues, indented, on the next lines
    return [part for line in lines for part in
            _wrapped(line, "", " " * (len(line) - len(line.lstrip()) + 4))]


def report(doc: ConformanceRun, verbose: bool = False) -> str:
    """The whole run: findings, what was not supported, a table per kind, the verdict. Text
    that came from the implementation is shown `printable`."""
    doc = ConformanceRun.from_json(printable_data(doc.to_json()))
    blocks = [block for block in ("\n".join(findings(doc)), "\n".join(not_supported(doc)),
                                  "\n".join(known_lines(doc))) if block]
    by_kind: dict[str, list[CheckResult]] = {}
    for result in doc.results:
        by_kind.setdefault(result.kind, []).append(result)
    for kind, results in by_kind.items():
        blocks.append(f"== {doc.target} · {kind} ==\n{kind_table(results, verbose)}")
    if verbose:
        problems = [r for r in doc.results if r.outcome in ("failed", "error")]
        blocks += ["\n".join(details(r)) for r in problems]
    blocks.append("\n".join(levels(doc) + [verdict(doc)]))
    return "\n\n".join(blocks)


LEVEL_TITLES = {"numerics": "computes the reference's function",
                "drop-in": "drop-in replacement for the contract's module"}
STATE_WORDS = {"conforms": "yes", "does not conform": "no", "incomplete": "incomplete",
               "not checked": "not checked"}
SHOWN_REASONS = 4


def levels(doc: ConformanceRun) -> list[str]:
    """Both levels' verdicts, each with why not, and which one sets the exit code."""
    other = "numerics" if doc.require == "drop-in" else "drop-in"
    lines = [f"Verdict (the exit code follows {doc.require}; --require {other} for the other):"]
    for level, judged in doc.verdicts.items():
        passed = f" ({judged.passed} check{'s' * (judged.passed != 1)} passed)" if judged.passed else ""
        lines.append(f"  {LEVEL_TITLES[level]}: {STATE_WORDS[judged.state]}"
                     + (passed if judged.state == "conforms" else ""))
        for reason in judged.reasons[:SHOWN_REASONS]:
            lines += _wrapped(strip_addresses(reason), "    - ", "      ")
        if len(judged.reasons) > SHOWN_REASONS:
            lines.append(f"    ... and {len(judged.reasons) - SHOWN_REASONS} more")
    return lines


RUN_WORDS = {"conforms": "PASSED", "does not conform": "FAILED", "incomplete": "INCOMPLETE",
             "not checked": "NOT CHECKED"}


def verdict(doc: ConformanceRun) -> str:
    """One line: PASSED, FAILED, INCOMPLETE or NOT CHECKED at the required level, the counts,
    the time."""
    counts = doc.summary
    word = "INTERRUPTED" if doc.interrupted else RUN_WORDS[doc.verdicts[doc.require].state]
    tally = ", ".join(f"{counts.get(outcome, 0)} {name}" for outcome, name in TALLY.items()
                      if outcome in ("passed", "failed", "not_supported", "error") or counts.get(outcome))
    quick = ", quick case list" if doc.quick else ""
    return "\n".join(_wrapped(f"{word}: {doc.target} ({counted(len(doc.results), 'check')}"
                              f"{quick}: {tally}; {doc.duration_s:.1f} s)", "", "  "))


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    """`text` in lines of at most WIDTH columns."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first]


def _values(prefix: str, values) -> list[str]:
    """`prefix` and the values as an array, its rows continued under the first within WIDTH."""
    return (prefix + np.array2string(np.asarray(values, dtype=float), precision=6, separator=", ",
                                     max_line_width=WIDTH, prefix=prefix)).splitlines()


def _fitted(rows: list[list[str]], headers: list[str]) -> str:
    """A table within WIDTH columns: its last column (a message) shortened at a word to the room
    the other columns leave."""
    # tabulate makes a column as wide as its widest cell, and its header plus two
    widths = [max(len(header) + 2, *map(len, cells))
              for header, *cells in zip(*(row[:-1] for row in [headers, *rows]))]
    room = max(WIDTH - sum(widths) - 2 * len(widths), len(headers[-1]) + 2)
    return tabulate([[*row[:-1], shorten(row[-1], room)] for row in rows], headers=headers,
                    disable_numparse=True)

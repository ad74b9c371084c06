"""Conformance results as text: the findings first, then a table per kind, then the verdict.

Works on the rnnbench.conformance/1 document (results as dicts), so it renders a run just made
and a JSON file alike. The failures are grouped by root cause (`rnnbench.findings`), most
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

# Worst first: a group of results shows its worst outcome.
SEVERITY = ("error", "failed", "xpass", "xfail", "not_supported", "passed")
LABELS = {"failed": "FAILED", "error": "ERROR", "not_supported": "NOT SUPPORTED", "passed": "passed",
          "xfail": "xfail", "xpass": "XPASS"}
TALLY = {"passed": "passed", "failed": "failed", "not_supported": "not supported", "error": "error",
         "xfail": "known failures", "xpass": "passed though listed as known failures"}
MESSAGE_WIDTH = 60
WIDTH = 100  # columns of the findings and what was not supported
SHOWN_FINDINGS = 10


def finding(result: dict, indent: str = "") -> list[str]:
    """A failed or errored result as lines: the message, where it diverges, the diagnosis."""
    lines = [f"{indent}{LABELS[result['outcome']]} {result['check']}: {result['message']}"]
    where = describe(result.get("numbers") or {})
    if where:
        lines.append(f"{indent}  first divergence: {where}")
    if result.get("diagnosis"):
        lines.append(f"{indent}  diagnosis: {DIAGNOSES.get(result['diagnosis'], '')} "
                     f"[{result['diagnosis']}]")
    return lines


def findings(doc: dict) -> list[str]:
    """The root causes, most fundamental first, with a command that reruns the first alone."""
    groups = group_failures(doc["results"])
    if not groups:
        return []
    several_kinds = len({r["kind"] for r in doc["results"]}) > 1
    lines = ["Findings, most fundamental first:"]
    for number, group in enumerate(groups[:SHOWN_FINDINGS], 1):
        kinds = f" ({', '.join(group.kinds)})" if several_kinds else ""
        tag = f" [{group.diagnosis}]" if group.diagnosis else ""
        checks = f"{group.count} check{'s' * (group.count != 1)}"
        lines.append(f"{number:2d}. {_short(group.sentence, 70)}{tag}: {checks}{kinds}")
        example = group.example
        lines += _wrapped(f"e.g. {example['check']}: {strip_addresses(example['message'])}",
                          "    ", "         ")
        where = describe(example.get("numbers") or {})
        if where:
            lines.append(f"         first divergence: {where}")
    if len(groups) > SHOWN_FINDINGS:
        lines.append(f"    ... and {len(groups) - SHOWN_FINDINGS} more causes (every result is in --json)")
    top = groups[0].example
    drawn = (top.get("numbers") or {}).get("case")  # a fuzz finding: its minimal case
    selection = f"--case {shlex.quote(drawn)}" if drawn else f"--check {top['check']}"
    lines += ["Rerun the first finding alone, with its inputs and numbers:",
              f"  rnnbench conform {shlex.quote(doc['target'])} --kind {top['kind']} "
              f"{selection} --verbose"]
    return lines


def not_supported(doc: dict) -> list[str]:
    """What was skipped, once per feature, with the reason."""
    skipped = unsupported_features(doc["results"])
    if not skipped:
        return []
    lines = ["Not supported (these checks were skipped, not failed):"]
    for feature, entry in skipped.items():
        reason = f": {entry['reason']}" if entry["reason"] else ""
        count = f"{entry['checks']} check{'s' * (entry['checks'] != 1)}"
        lines += _wrapped(f"{feature}{reason} ({count})", "   ", "     ")
    return lines


def known_lines(doc: dict) -> list[str]:
    """The known failures that passed (their entries can go) and the entries that matched
    nothing."""
    lines = [f"XPASS {r['kind']}/{r['check']}: {r['message']}" for r in doc["results"]
             if r["outcome"] == "xpass"]
    lines += [f"warning: known failure {pattern!r} matches no check of this run"
              for pattern in doc.get("stale_known_failures", [])]
    return lines


def kind_table(results: list[dict], verbose: bool = False) -> str:
    """One kind's results: a row per check (its cases summed up), or per result if `verbose`."""
    if verbose:
        rows = [[r["check"], LABELS[r["outcome"]], _short(strip_addresses(r["message"]))]
                for r in results]
        return tabulate(rows, headers=["check", "outcome", "message"])
    groups: dict[str, list[dict]] = {}
    for result in results:
        groups.setdefault(result["check"].split("/")[0], []).append(result)
    rows = []
    for name, group in groups.items():
        worst = min(group, key=lambda r: SEVERITY.index(r["outcome"]))
        passed = sum(r["outcome"] == "passed" for r in group)
        message = "" if worst["outcome"] == "passed" else f"{worst['case']}: {worst['message']}"
        rows.append([name, f"{passed}/{len(group)}", LABELS[worst["outcome"]],
                     _short(strip_addresses(message))])
    return tabulate(rows, headers=["check", "passed", "outcome", "first problem"])


def details(result: dict) -> list[str]:
    """One result in full: the case's configuration and input shapes, the message, and where
    the numbers were compared, the expected and actual values side by side."""
    lines = finding(result)
    setup = (result.get("numbers") or {}).get("setup") or {}
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
    numbers = result.get("numbers") or {}
    if "expected" in numbers and "actual" in numbers:
        at = ", ".join(map(str, numbers.get("at", [])))
        lines.append(f"  {numbers.get('name', 'value')}[{at}, :{len(numbers['expected'])}]:")
        lines.append(f"    expected {_values(numbers['expected'])}")
        lines.append(f"    actual   {_values(numbers['actual'])}")
    return lines


def report(doc: dict, verbose: bool = False) -> str:
    """The whole run: findings, what was not supported, a table per kind, the verdict. Text
    that came from the implementation is shown `printable`."""
    doc = printable_data(doc)
    blocks = [block for block in ("\n".join(findings(doc)), "\n".join(not_supported(doc)),
                                  "\n".join(known_lines(doc))) if block]
    by_kind: dict[str, list[dict]] = {}
    for result in doc["results"]:
        by_kind.setdefault(result["kind"], []).append(result)
    for kind, results in by_kind.items():
        blocks.append(f"== {doc['target']} · {kind} ==\n{kind_table(results, verbose)}")
    if verbose:
        problems = [r for r in doc["results"] if r["outcome"] in ("failed", "error")]
        blocks += ["\n".join(details(r)) for r in problems]
    blocks.append(verdict(doc))
    return "\n\n".join(blocks)


def verdict(doc: dict) -> str:
    """One line: PASSED, FAILED, INCOMPLETE (nothing failed, but checks timed out or were cut
    by a budget: not judged) or INTERRUPTED, the counts, the time."""
    counts = doc["summary"]
    ok = counts["failed"] == 0 and counts["error"] == 0 and not doc.get("interrupted")
    word = ("INTERRUPTED" if doc.get("interrupted") else "PASSED" if ok
            else "INCOMPLETE" if only_cut(doc) else "FAILED")
    tally = ", ".join(f"{counts.get(outcome, 0)} {name}" for outcome, name in TALLY.items()
                      if outcome in ("passed", "failed", "not_supported", "error") or counts.get(outcome))
    quick = ", quick case list" if doc.get("quick") else ""
    cut = f" ({doc['cut']} timed out or cut by a budget)" if word == "INCOMPLETE" else ""
    return (f"{word}: {doc['target']} ({len(doc['results'])} checks{quick}: {tally}{cut}; "
            f"{doc['duration_s']:.1f} s)")


def only_cut(doc: dict) -> bool:
    """Whether every result that did not pass was cut (timed out or not run for a budget), so
    that the run is incomplete rather than failed."""
    counts = doc["summary"]
    cut = doc.get("cut") or 0
    return bool(doc.get("incomplete")) and counts["failed"] == 0 and counts["error"] == cut


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    """`text` in lines of at most WIDTH columns."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first]


def _values(values) -> str:
    return np.array2string(np.asarray(values, dtype=float), precision=6, separator=", ",
                           max_line_width=200)


def _short(text: str, width: int = MESSAGE_WIDTH) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."

"""Conformance results as text: a table per kind, each failure with its numbers, the verdict.

Works on the rnnbench.conformance/1 document (results as dicts), so it renders a run just made
and a JSON file alike. A failure reads like a finding:

    FAILED forward/two-layer-bidirectional: h_n differs from the reference (max abs 1.3e+00, tol 2.1e-06)
      first divergence: layer 0, reverse direction, timestep 5
      diagnosis: reverse direction not reversed in time [reverse_not_reversed]
"""
from __future__ import annotations

from collections import Counter

from tabulate import tabulate

from rnnbench.findings import DIAGNOSES
from rnnbench.suites.divergence import describe

# Worst first: a group of results shows its worst outcome.
SEVERITY = ("error", "failed", "not_supported", "passed")
LABELS = {"failed": "FAILED", "error": "ERROR", "not_supported": "NOT SUPPORTED", "passed": "passed"}
TALLY = {"passed": "passed", "failed": "failed", "not_supported": "not supported", "error": "errors"}
MESSAGE_WIDTH = 70


def finding(result: dict) -> list[str]:
    """A failed or errored result as lines: the message, where it diverges, the diagnosis."""
    lines = [f"{LABELS[result['outcome']]} {result['check']}: {result['message']}"]
    where = describe(result.get("numbers") or {})
    if where:
        lines.append(f"  first divergence: {where}")
    if result.get("diagnosis"):
        lines.append(f"  diagnosis: {DIAGNOSES[result['diagnosis']]} [{result['diagnosis']}]")
    return lines


def kind_table(results: list[dict], verbose: bool = False) -> str:
    """One kind's results: a row per check (its cases summed up), or per result if `verbose`."""
    if verbose:
        rows = [[r["check"], LABELS[r["outcome"]], _short(r["message"])] for r in results]
        return tabulate(rows, headers=["check", "outcome", "message"])
    groups: dict[str, list[dict]] = {}
    for result in results:
        groups.setdefault(result["check"].split("/")[0], []).append(result)
    rows = []
    for name, group in groups.items():
        worst = min(group, key=lambda r: SEVERITY.index(r["outcome"]))
        passed = sum(r["outcome"] == "passed" for r in group)
        message = "" if worst["outcome"] == "passed" else f"{worst['case']}: {worst['message']}"
        rows.append([name, group[0]["category"], f"{passed}/{len(group)}", LABELS[worst["outcome"]],
                     _short(message)])
    return tabulate(rows, headers=["check", "category", "passed", "outcome", "first problem"])


def report(doc: dict, verbose: bool = False, details_per_kind: int = 10) -> str:
    """The whole run: per kind a table and its failures, then the diagnoses and the verdict."""
    by_kind: dict[str, list[dict]] = {}
    for result in doc["results"]:
        by_kind.setdefault(result["kind"], []).append(result)
    blocks = []
    for kind, results in by_kind.items():
        lines = [f"== {doc['target']} · {kind} ==", kind_table(results, verbose)]
        problems = [r for r in results if r["outcome"] in ("failed", "error")]
        for result in problems[:details_per_kind]:
            lines.extend(finding(result))
        if len(problems) > details_per_kind:
            lines.append(f"... and {len(problems) - details_per_kind} more (every result is in --json)")
        blocks.append("\n".join(lines))
    diagnoses = Counter(r["diagnosis"] for r in doc["results"] if r.get("diagnosis"))
    if diagnoses:
        blocks.append("diagnoses:\n" + "\n".join(
            f"  {DIAGNOSES[d]} [{d}]: {n} check{'s' * (n != 1)}" for d, n in diagnoses.most_common()))
    blocks.append(verdict(doc))
    return "\n\n".join(blocks)


def verdict(doc: dict) -> str:
    """One line: PASSED or FAILED, the counts, the time."""
    counts = doc["summary"]
    ok = counts["failed"] == 0 and counts["error"] == 0 and not doc.get("interrupted")
    word = "INTERRUPTED" if doc.get("interrupted") else ("PASSED" if ok else "FAILED")
    tally = ", ".join(f"{counts[outcome]} {word}" for outcome, word in TALLY.items())
    return f"{word}: {doc['target']} ({len(doc['results'])} checks: {tally}; {doc['duration_s']:.1f} s)"


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_WIDTH else text[:MESSAGE_WIDTH - 3] + "..."

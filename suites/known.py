"""Known failures as data: a downstream project keeps its CI green while it tracks a known bug.

An implementation carries `known_failures` (check pattern -> reason), or the user names a file
with `--known-failures FILE`: one pattern per line, a reason after `#`, blank lines and lines
starting with `#` ignored:

    gru/forward/two-layer-bidirectional   # reverse direction fixed in 2.1
    error-h0-batch-1/*                    # we broadcast h0 on purpose

A pattern matches a check id ("forward/single-layer") or "kind/id", shell-style. A failed or
errored check it matches reports `xfail`; a passed one `xpass` (the entry can go); an entry that
matches no check of the run is warned about, as array-api-tests' --xfails-file does.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from pathlib import Path

from rnnbench.errors import UsageError


def read_file(path: str | Path) -> dict[str, str]:
    """The known failures in `path` (pattern -> reason); UsageError naming the file."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--known-failures {path}: cannot read it ({exc.__class__.__name__})") from None
    known = {}
    for line in lines:
        pattern, _, reason = line.partition("#")
        if pattern.strip():
            known[pattern.split()[0]] = reason.strip() or "known failure"
    return known


def matching(known: Mapping[str, str], kind: str, check: str) -> str | None:
    """The pattern of `known` that matches this check, if any."""
    return next((pattern for pattern in known
                 if fnmatch.fnmatchcase(check, pattern) or fnmatch.fnmatchcase(f"{kind}/{check}", pattern)),
                None)


def mark(result, known: Mapping[str, str]) -> None:
    """Turn a result a known-failure entry matches into xfail (failed or errored) or xpass."""
    pattern = matching(known, result.kind, result.check) if known else None
    if pattern is None or result.outcome not in ("passed", "failed", "error"):
        return
    reason = known[pattern]
    if result.outcome == "passed":
        result.outcome, result.message = "xpass", f"listed as a known failure ({reason}) but passed"
    else:
        result.outcome, result.message = "xfail", f"known failure ({reason}): {result.message}"


def stale(known: Mapping[str, str], results: Iterable) -> list[str]:
    """The entries that match none of the results' checks."""
    results = list(results)
    return [pattern for pattern in known
            if not any(matching({pattern: ""}, r.kind, r.check) for r in results)]

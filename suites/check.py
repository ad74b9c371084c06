"""A row of the check catalogue: one check, what it examines, which cases it runs on.

A check is a generic function of (subject, case) that returns numbers when the implementation
passed and raises `Finding` when it did not; it knows nothing about any one implementation. Its
id on a case is "<name>/<case name>", e.g. "forward/two-layer-bidirectional"; with the kind it
is unique and stable across runs. `dtype`, `backward` and `features` say which features the check
needs, so an implementation that lacks them gets "not_supported" instead of a failure.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def every(case) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One check on the cases of `table` (one kind's) it applies to. `group`: what a case's
    `only` names it by (default: `name`); `quick_rows` / `rows`: how many of those cases a
    --quick run / every run takes (None: all)."""

    name: str
    category: str
    function: Callable
    table: tuple
    applies: Callable = every
    dtype: str = "float32"
    backward: bool = False
    features: tuple[str, ...] = ()  # call features the check needs whatever the case
    quick_rows: int | None = None
    rows: int | None = None
    group: str | None = None
    calls: bool = True  # whether it calls forward (else the case's call features do not apply)

    def id(self, case) -> str:
        return f"{self.name}/{case.name}"

    def cases(self, quick: bool = False) -> list:
        """The cases this check runs on, in a --quick run or not."""
        chosen = [case for case in self.table if (case.quick or not quick)
                  and case.runs(self.group or self.name) and self.applies(case)]
        limit = self.quick_rows if quick and self.quick_rows is not None else self.rows
        return chosen if limit is None else chosen[:limit]

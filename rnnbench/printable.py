"""Text from outside made safe to print and render: control characters are shown, not obeyed.

An implementation's exception message, a name in a results file, a workload file's labels may
hold terminal escape sequences (clear the screen, set the window title), a carriage return that
overwrites the line it is on, or Unicode's invisible direction overrides. `printable` writes each
such character as its Python escape (`\\x1b`, `\\r`, `\\u202e`), so that it is seen and does
nothing; tabs and newlines stay. `printable_data` does the same to every string (keys too) in a
JSON-like value. Everything rnnbench prints or renders from user code goes through one of them:
conform's and bench's text, the progress lines, error messages, and the report's inputs.
"""
from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional marks and overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every control character but tab and newline written as its escape."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match) -> str:
    return repr(match.group())[1:-1]


def printable_data(value):
    """A copy of a JSON-like value (dicts, lists, strings, numbers) with every string, keys
    included, made `printable`. Iterative, so that nesting as deep as a JSON parser allows
    cannot exhaust the stack."""
    root = [value]
    pending = [(root, 0)]
    while pending:
        container, key = pending.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = printable(item)
        elif isinstance(item, dict):
            copy = {printable(k) if isinstance(k, str) else k: v for k, v in item.items()}
            container[key] = copy
            pending.extend((copy, k) for k in copy)
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            container[key] = copy
            pending.extend((copy, i) for i in range(len(copy)))
    return root[0]

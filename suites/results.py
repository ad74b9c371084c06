"""What a check produces: a `CheckResult`, and the two exceptions a check raises to end early.

A check function returns a dict of numbers when the implementation passed, raises `Finding` when
it found a conformance failure (with a message, maybe a diagnosis id, and numbers), or
`NotSupported` when the implementation cannot be asked this question. The runner turns all three,
and anything else that escapes (an "error"), into a `CheckResult`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


@dataclass
class CheckResult:
    """The outcome of one check on one case of one kind.

    `check` is the stable id "<check name>/<case name>" (e.g. "forward/two-layer-bidirectional");
    `numbers` holds what was measured (max_abs, max_rel, tol, excess, and where a numeric failure
    first diverges: layer, direction, timestep, parameter).
    """

    check: str
    category: str
    kind: str
    case: str
    outcome: str
    message: str = ""
    diagnosis: str | None = None
    numbers: dict = field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CheckResult":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


class Finding(Exception):
    """A conformance failure: what is wrong (one line), its diagnosis id if recognised, numbers."""

    def __init__(self, message: str, diagnosis: str | None = None, **numbers):
        super().__init__(message)
        self.message = message
        self.diagnosis = diagnosis
        self.numbers = numbers


class NotSupported(Exception):
    """The implementation declares a feature this check needs unsupported."""

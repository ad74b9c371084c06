"""What a benchmark produces: a `BenchResult`, one implementation on one workload, one metric.

The fields are the keys of a result in the `rnnbench.bench/2` document, in its order:
`to_json` writes exactly that, and `from_json` reads it back (and the fewer keys of bench/1),
rejecting what it cannot place with a one-line `InvalidResult`. The harness makes these, and
every reader (the bench and run commands, the report, the regression gate) reads them.

`vs_native` is the one definition of a speed-up over the baseline. This module imports nothing
from the timing code, so the report can read results without torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from rnnbench.documents import NOT_SELECTED, STATUSES

# The verdicts on a speed-up (rnnbench.benchmarks.statistics gives them): by its interval, or
# no claim at all because the machine was busy or the samples bimodal.
RATIO_VERDICTS = ("faster", "slower", "within_noise", "not_judged")
# A result timed ("ok") must carry at least one of these numbers.
MEASURED = ("median_s", "iqr_s", "repeats", "gflops", "peak_fraction", "first_call_s",
            "tokens_per_s", "peak_mem_bytes", "threads")
_REQUIRED = ("impl", "workload", "metric")
_TEXT = ("kind", "device", "dtype")
_OPTIONAL_TEXT = ("status", "reason", "conformance_note", "vs_native_verdict")
_COUNTS = ("threads", "batch", "steps", "repeats", "number")
_NUMBERS = ("median_s", "iqr_s", "first_call_s", "flops", "flops_no_input_gemm", "gflops",
            "gflops_no_input_gemm", "peak_gflops", "peak_fraction", "vs_native", "tokens_per_s",
            "peak_mem_bytes")
# Seconds per call outside this range are no measurement (a call takes more than a picosecond
# and less than a million seconds), and would overflow a plot's log axis or divide by zero.
SECONDS_RANGE = (1e-12, 1e6)
_SECONDS = ("median_s", "first_call_s")     # iqr_s may be 0; samples_s are checked one by one


class InvalidResult(ValueError):
    """A result that cannot be read; the message (one line) says why."""


@dataclass(kw_only=True)
class BenchResult:
    """One implementation timed (or not) on one workload, one metric.

    Timing fields stay None (`samples_s`, `warnings` empty, `repeats` 0) unless `status` is
    "ok". The document's "conventions" say how each number was measured.
    """

    impl: str
    kind: str = ""
    workload: str
    device: str = ""            # "cpu" or "cuda"
    dtype: str = ""
    threads: int | None = None  # torch's intra-op thread count while timed
    batch: int | None = None
    steps: int | None = None
    metric: str                 # "forward", "forward_backward" or "train_step"
    # "ok" (timed), "unavailable", "not_supported" or "failed"; None only while being measured.
    status: str | None = None
    reason: str | None = None   # why it is not "ok"
    # The forward pre-check against the reference: True, False, or None (not checked: the note
    # says why); a result that does not conform gets no speed-up.
    conforms: bool | None = None
    conformance_note: str | None = None
    median_s: float | None = None       # seconds per call
    iqr_s: float | None = None
    samples_s: list[float] = field(default_factory=list)   # every sample, in the order taken
    noisy: bool | None = None           # iqr_s large against median_s
    bimodal: bool | None = None         # the samples fall into two clusters
    repeats: int = 0                    # how many samples
    number: int | None = None           # calls per sample
    first_call_s: float | None = None   # the first call on a fresh module (compilation, ...)
    flops: float | None = None
    flops_no_input_gemm: float | None = None
    gflops: float | None = None
    gflops_no_input_gemm: float | None = None
    peak_gflops: float | None = None    # the measured fp32 GEMM peak at this device and threads
    peak_fraction: float | None = None  # gflops / peak_gflops (float32 workloads)
    vs_native: float | None = None      # see `vs_native`
    vs_native_ci: tuple[float, float] | None = None    # its 95% interval from the samples
    vs_native_verdict: str | None = None               # one of RATIO_VERDICTS
    tokens_per_s: float | None = None
    peak_mem_bytes: int | None = None   # the most bytes allocated at once during one call
    solver: dict | None = None          # the implicit solver's statistics from the last call
    warnings: list[str] = field(default_factory=list)  # first lines of the warnings raised

    def to_json(self) -> dict:
        """The result as the bench document holds it."""
        data = {f.name: getattr(self, f.name) for f in fields(BenchResult)}
        data["samples_s"] = list(self.samples_s)
        data["warnings"] = list(self.warnings)
        if self.vs_native_ci is not None:
            data["vs_native_ci"] = list(self.vs_native_ci)
        return data

    @classmethod
    def from_json(cls, data, **extra):
        """The result a bench document's entry describes (bench/2, or bench/1's fewer keys;
        keys it does not know are ignored). `extra` goes to the constructor of a subclass.

        InvalidResult (one line) for a missing impl, workload or metric, an unknown status, a
        timed result without a number, a field of the wrong type, a negative number, or a time
        outside SECONDS_RANGE. Judgements that are malformed (an interval, a verdict, the noisy,
        bimodal or conforms flags) are not believed: None.
        """
        if not isinstance(data, dict):
            raise InvalidResult("not an object")
        values = {name: _required_text(data, name) for name in _REQUIRED}
        values.update({name: _text(data, name) or "" for name in _TEXT})
        values.update({name: _text(data, name) for name in _OPTIONAL_TEXT})
        values["status"] = values["status"] or "ok"
        if values["status"] not in (*STATUSES, NOT_SELECTED):
            raise InvalidResult(f"unknown status {values['status']!r} (known: {', '.join(STATUSES)})")
        # The counts (threads, repeats) are written for every result: they measure nothing.
        if values["status"] == "ok" and not any(_is_number(data.get(name)) for name in MEASURED
                                                if name not in _COUNTS):
            raise InvalidResult("status ok but no numbers (median_s, ...)")
        values.update({name: _count(data, name) for name in _COUNTS})
        values["repeats"] = values["repeats"] or 0
        values.update({name: _number(data, name) for name in _NUMBERS})
        for name in _SECONDS:
            _checked(values[name], lambda v: v is None or _is_seconds(v), name, _SECONDS_TEXT)
        _checked(values["iqr_s"], lambda v: v is None or v == 0 or _is_seconds(v), "iqr_s",
                 f"0 or {_SECONDS_TEXT}")
        negative = next((name for name in _NUMBERS if (values[name] or 0) < 0), None)
        if negative:
            raise InvalidResult(f"{negative!r} is {_short(values[negative])}, not a number >= 0")
        values["samples_s"] = [_checked(v, _is_seconds, "samples_s", f"a list of {_SECONDS_TEXT}")
                               for v in _checked(data.get("samples_s") or [], _is_list,
                                                 "samples_s", "a list of numbers")]
        values["warnings"] = [_checked(v, _is_text, "warnings", "a list of strings")
                              for v in _checked(data.get("warnings") or [], _is_list,
                                                "warnings", "a list of strings")]
        values["solver"] = _checked(data.get("solver"), lambda v: v is None or isinstance(v, dict),
                                    "solver", "an object")
        values["vs_native_ci"] = _interval(data.get("vs_native_ci"))
        if values["vs_native_verdict"] not in RATIO_VERDICTS:
            values["vs_native_verdict"] = None
        for name in ("noisy", "bimodal", "conforms"):
            values[name] = data[name] if isinstance(data.get(name), bool) else None
        return cls(**values, **extra)


def vs_native(result: BenchResult, baseline: BenchResult | None) -> float | None:
    """The speed-up of `result` over `baseline` (the native implementation's result on the same
    workload and metric): baseline.median_s / result.median_s, > 1 is faster. None unless both
    were timed, and None when either does not conform: a ratio to or of wrong numbers is no
    speed-up."""
    if baseline is None:
        return None
    if not all(r.status == "ok" and r.median_s and r.conforms is not False
               for r in (result, baseline)):
        return None
    return baseline.median_s / result.median_s


def _required_text(data: dict, name: str) -> str:
    value = data.get(name)
    if value is None or value == "":
        raise InvalidResult(f"no {name!r}")
    return _checked(value, _is_text, name, "a string")


def _text(data: dict, name: str) -> str | None:
    return _checked(data.get(name), lambda v: v is None or _is_text(v), name, "a string")


def _count(data: dict, name: str) -> int | None:
    value = _checked(data.get(name), lambda v: v is None or (_is_number(v) and v == int(v)),
                     name, "a whole number")
    return None if value is None else int(value)


def _number(data: dict, name: str) -> float | None:
    return _checked(data.get(name), lambda v: v is None or _is_number(v), name, "a number")


def _interval(value) -> tuple[float, float] | None:
    """An interval of a ratio: two positive numbers, low first; anything else is not believed."""
    if (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))
            and 0 < value[0] <= value[1]):
        return float(value[0]), float(value[1])
    return None


def _checked(value, test, name: str, what: str):
    if not test(value):
        raise InvalidResult(f"{name!r} is {_short(value)}, not {what}")
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_SECONDS_TEXT = f"seconds from {SECONDS_RANGE[0]:g} to {SECONDS_RANGE[1]:g}"


def _is_seconds(value) -> bool:
    return _is_number(value) and SECONDS_RANGE[0] <= value <= SECONDS_RANGE[1]


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_list(value) -> bool:
    return isinstance(value, list)


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"

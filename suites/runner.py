"""Running the checks in this process: the plan (which check on which case of which kind), one
check turned into a `CheckResult`, and `run_checks` over a whole implementation.

`rnnbench.suites.isolation.conform` runs the same plan in a child process, so that nothing an
implementation does can take the run down with it.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.errors import UsageError, one_line
from rnnbench.impls.base import FEATURES, Implementation
from rnnbench.reference.kinds import KINDS, kind_of
from rnnbench.suites import known
from rnnbench.suites.cases import Case, PackedCase
from rnnbench.suites.catalogue import checks_of, suite_kind
from rnnbench.suites.check import Check
from rnnbench.suites.features import case_missing_features, device_type, source
from rnnbench.suites.fuzz import FuzzCase, check_fuzz
from rnnbench.suites.results import CheckResult, Finding, NotSupported
from rnnbench.suites.subject import Subject


@dataclass(frozen=True)
class Item:
    """One check on one case of one kind: the unit of the plan, of a result and of a pytest item."""

    kind: str
    check: Check
    case: Case

    @property
    def id(self) -> str:
        return self.check.id(self.case)

    def describe(self) -> dict:
        """The fields a result of this item always has."""
        return {"check": self.id, "category": self.check.category, "kind": self.kind,
                "case": self.case.name}


def validate_kinds(kinds) -> None:
    """UsageError for a kind the spec does not know."""
    for kind in kinds or ():
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")


def resolve_kinds(impl: Implementation, kinds=None) -> list[str]:
    """The kinds to check, in the spec's order: `kinds` if given (each must be one `impl`
    provides), else all of `impl`'s."""
    if not kinds:
        known = [kind for kind in KINDS if kind in impl.kinds]
        if not known:  # nothing to check: a load error, not an empty verdict
            raise UsageError(f"{impl.name} provides no kind the suites know "
                             f"({', '.join(map(repr, impl.kinds)) or 'none at all'}; "
                             f"known: {', '.join(KINDS)})")
        return known
    validate_kinds(kinds)
    for kind in kinds:
        if kind not in impl.kinds:
            raise UsageError(f"{impl.name} provides no {kind!r}; it provides {', '.join(impl.kinds)}")
    return [kind for kind in KINDS if kind in kinds]


def validate_device(device: str) -> None:
    """UsageError unless `device` is "cpu", or "cuda[:N]" with CUDA available."""
    if device_type(device) == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: CUDA is not available here "
                             f"(torch {torch.__version__}, CUDA build {torch.version.cuda})")


def configured(impl: Implementation, param_map: dict | None = None,
               known_failures: dict | None = None, unsupported=()) -> Implementation:
    """`impl` with what its user says of it on the command line: a parameter map, known
    failures (added to its own), features it does not support (added to those it declares)."""
    unknown = sorted(set(unsupported) - set(FEATURES))
    if unknown:
        raise UsageError(f"--unsupported {','.join(unknown)}: not a feature (known: "
                         f"{', '.join(FEATURES)})")
    return dataclasses.replace(
        impl, param_map=param_map or impl.param_map,
        known_failures={**impl.known_failures, **(known_failures or {})},
        unsupported=impl.unsupported | frozenset(unsupported))


def require_available(impl: Implementation) -> None:
    reason = impl.unavailable_reason()
    if reason:
        raise UsageError(f"{impl.name} is not available here: {reason}")


def plan(impl: Implementation, kinds=None, quick: bool = False, checks: str | None = None,
         fuzz: int | None = None, case: Case | None = None) -> list[Item]:
    """Every (kind, check, case) to run, in a stable order; `checks` selects by a shell-style
    pattern on the check id ("forward/single-layer", "error-*") or on "kind/id". `fuzz`
    replaces the case tables by a search over `fuzz` drawn cases per kind; `case` by one given
    case (of its config's kind), run through every check of the general cases."""
    if case is not None:
        if case.kind not in impl.kinds:
            raise UsageError(f"--case: {impl.name} provides no {case.kind!r}")
        general = suite_kind(case.kind).cases
        items = [Item(case.kind, check, case) for check in checks_of(case.kind)
                 if check.table is general and check.applies(case)]
    elif fuzz is not None:
        items = [Item(kind, FUZZ, FuzzCase(suite_kind(kind).cases[0].config, fuzz))
                 for kind in resolve_kinds(impl, kinds) if suite_kind(kind).fuzz_cases]
    else:
        items = [Item(kind, check, row) for kind in resolve_kinds(impl, kinds)
                 for check in checks_of(kind) for row in check.cases(quick)]
    if checks is None:
        return items
    def matches(item: Item, pattern: str) -> bool:
        return any(fnmatch.fnmatchcase(text, pattern) for text in (item.id, f"{item.kind}/{item.id}"))

    patterns = [pattern.strip() for pattern in checks.split(",") if pattern.strip()]
    if not patterns:
        raise UsageError(f"--check {checks!r}: no pattern (ids look like forward/single-layer)")
    # one mistyped pattern among several must not quietly drop its checks
    for pattern in patterns:
        if not any(matches(item, pattern) for item in items):
            raise UsageError(f"--check {pattern}: no check matches (ids look like "
                             f"{items[0].id if items else 'forward/single-layer'}; "
                             "`rnnbench list checks` lists them)")
    return [item for item in items if any(matches(item, pattern) for pattern in patterns)]


FUZZ = Check("fuzz", "forward", check_fuzz, table=(), dtype="float64")


def run_item(impl: Implementation, item: Item, device: str = "cpu", seed: int = 0) -> CheckResult:
    """Run one item; whatever happens becomes its CheckResult."""
    import torch

    start = time.perf_counter()
    result = CheckResult(**item.describe(), outcome="passed")
    subject = Subject(impl, item.kind, device, seed, suite_kind(item.kind))
    # Features the module may refuse (unbatched input) are asked of it only where a check runs it.
    try:
        lacking = not_supported(subject, item, probe=True)
    except Exception as exc:  # reading the implementation's signatures went wrong
        result.outcome, result.message = "error", f"the check stopped: {one_line(exc)} {_where(exc)}"
        return result
    if lacking is not None:
        return lacking
    # Seeded per item, so a result does not depend on which items ran before it.
    torch.manual_seed(zlib.crc32(f"{seed}/{item.kind}/{item.id}".encode()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's "dropout with one layer" warning
            result.numbers = item.check.function(subject, item.case)
    except Finding as finding:
        result.outcome, result.message = "failed", finding.message
        result.diagnosis, result.numbers = finding.diagnosis, finding.numbers
        result.numbers["setup"] = setup(item.case)
    except NotSupported as exc:
        result.outcome, result.message = "not_supported", str(exc)
    except SystemExit as exc:
        result.outcome, result.message = "error", f"the implementation called sys.exit({exc.code!r})"
    except Exception as exc:
        result.outcome, result.message = "error", f"the check stopped: {one_line(exc)} {_where(exc)}"
    result.numbers = {name: _json_number(value) for name, value in result.numbers.items()}
    result.duration_s = time.perf_counter() - start
    known.mark(result, impl.known_failures)
    return result


def not_supported(subject: Subject, item: Item, probe: bool) -> CheckResult | None:
    """The result of `item` when the subject lacks a feature it needs, else None; found by
    asking the module as well (`probe`), or from what is declared and signatures say alone."""
    missing = case_missing_features(subject, item.case, item.check.dtype, item.check.backward,
                                    item.check.features, calls=item.check.calls, probe=probe)
    if not missing:
        return None
    return CheckResult(**item.describe(), outcome="not_supported",
                       message="; ".join(f"needs {feature}: {reason}"
                                         for feature, reason in missing.items()),
                       numbers={"features": missing, "sources": {
                           feature: source(subject, feature) for feature in missing}})


def known_lacking(impl: Implementation, items: list[Item], device: str) -> dict[int, CheckResult]:
    """The not-supported results of the items whose needs are declared unsupported or absent
    from a signature, by index: known without running the module, so that a kind given up
    after crashes still reports them as not supported rather than not run."""
    subjects = {kind: Subject(impl, kind, device, 0, suite_kind(kind))
                for kind in {item.kind for item in items}}
    lacking = {}
    for index, item in enumerate(items):
        try:
            result = not_supported(subjects[item.kind], item, probe=False)
        except Exception:  # run_item reports it
            continue
        if result is not None:
            lacking[index] = result
    return lacking


def setup(case) -> dict:
    """What a failed result records of its case, so that it can be read on its own."""
    if not isinstance(case, Case):
        return {"case": case.name}
    spec = kind_of(case.config)
    shapes = spec.io_shapes(case.config, case.batch, case.steps)
    given = ("input", *(spec.state_names(case.config) if case.h0 else ()))
    described = {"config": case.config.describe(), "batch": case.batch,
                 "steps": case.steps if spec.steps_matter else None,
                 "inputs": {name: list(shapes[name]) for name in given}}
    if isinstance(case, PackedCase):  # packed with pack_padded_sequence from these
        described.update(lengths=list(case.lengths), enforce_sorted=case.enforce_sorted)
    return described


def run_checks(impl: Implementation, kinds=None, device: str = "cpu", quick: bool = False,
               seed: int = 0, progress: Callable[[CheckResult, int, int], None] | None = None,
               **selection) -> list[CheckResult]:
    """Run every check of `impl` in this process; `progress(result, done, total)` after each.
    `selection`: `plan`'s checks, fuzz and case."""
    validate_device(device)
    require_available(impl)
    items = plan(impl, kinds, quick, **selection)
    results = []
    for item in items:
        results.append(run_item(impl, item, device, seed))
        if progress:
            progress(results[-1], len(results), len(items))
    return results


def _json_number(value):
    """A number as JSON can hold it: NumPy scalars as Python ones, inf and nan as strings;
    lists element by element."""
    if isinstance(value, (list, tuple)):
        return [_json_number(v) for v in value]
    value = value.item() if hasattr(value, "item") else value
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _where(exc: BaseException) -> str:
    """(at file.py:line) of the innermost frame, for reporting a check that stopped."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f"(at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"

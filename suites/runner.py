"""Running the checks in this process: the plan (which check on which case of which kind), one
check turned into a `CheckResult`, and `run_checks` over a whole implementation.

`rnnbench.suites.isolation.conform` runs the same plan in a child process, so that nothing an
implementation does can take the run down with it.
"""
from __future__ import annotations

import fnmatch
import math
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.errors import UsageError
from rnnbench.impls.adapt import zero_state
from rnnbench.impls.base import Implementation, required_features
from rnnbench.impls.registry import KINDS, one_line
from rnnbench.reference import io_shapes
from rnnbench.reference.numerics import state_names
from rnnbench.documents import OUTCOMES
from rnnbench.reference import KINDS as TORCH_KINDS
from rnnbench.suites import known
from rnnbench.suites.cases import CASES, Case, PackedCase
from rnnbench.suites.checks import CHECKS, Check, all_checks
from rnnbench.suites.fuzz import FuzzCase, check_fuzz
from rnnbench.suites.results import CheckResult, Finding, NotSupported
from rnnbench.suites.parammap import probe_config
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
        return [kind for kind in KINDS if kind in impl.kinds]
    validate_kinds(kinds)
    for kind in kinds:
        if kind not in impl.kinds:
            raise UsageError(f"{impl.name} provides no {kind!r}; it provides {', '.join(impl.kinds)}")
    return [kind for kind in KINDS if kind in kinds]


def device_type(device: str) -> str:
    """"cpu" or "cuda" for a device name ("cuda:1" too); UsageError for anything else."""
    kind = device.split(":")[0]
    if device in ("cpu", "cuda") or (kind == "cuda" and device[5:].isdigit()):
        return kind
    raise UsageError(f"unknown device {device!r}; use cpu or cuda")


def validate_device(device: str) -> None:
    """UsageError unless `device` is "cpu", or "cuda[:N]" with CUDA available."""
    if device_type(device) == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: CUDA is not available here "
                             f"(torch {torch.__version__}, CUDA build {torch.version.cuda})")


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
        items = [Item(case.kind, check, case) for check in CHECKS
                 if check.table is CASES and check.applies(case)]
    elif fuzz is not None:
        items = [Item(kind, FUZZ, FuzzCase(kind, fuzz)) for kind in resolve_kinds(impl, kinds)
                 if kind in TORCH_KINDS]
    else:
        items = [Item(kind, check, row) for kind in resolve_kinds(impl, kinds)
                 for check in all_checks() for row in check.cases(kind, quick)]
    if checks is None:
        return items
    chosen = [item for item in items if any(fnmatch.fnmatchcase(text, pattern)
                                            for text in (item.id, f"{item.kind}/{item.id}")
                                            for pattern in checks.split(","))]
    if not chosen:
        raise UsageError(f"--check {checks}: no check matches (ids look like "
                         f"{items[0].id if items else 'forward/single-layer'}; "
                         "`rnnbench list checks` lists them)")
    return chosen


FUZZ = Check("fuzz", "forward", check_fuzz, table=(), dtype="float64", backward=True)


def case_missing_features(impl: Implementation, kind: str, case, dtype: str, device: str,
                          backward: bool, check_features=(), probe_unbatched: bool = True
                          ) -> dict[str, str]:
    """The features running `case` this way needs that `impl` lacks, with the reasons."""
    reasons = unsupported(impl, kind, device, probe_unbatched=probe_unbatched and not case.batched,
                          probe_packed=probe_unbatched and "packed" in case.needs)
    how = {"batched": case.batched, "dtype": dtype, "device": device_type(device),
           "backward": backward, "extra": tuple(check_features) + tuple(case.needs)}
    missing = impl.missing_features(case.config, **how)
    missing += [f for f in required_features(case.config, **how) if f in reasons and f not in missing]
    return {feature: reasons[feature] for feature in missing}


def run_item(impl: Implementation, item: Item, device: str = "cpu", seed: int = 0) -> CheckResult:
    """Run one item; whatever happens becomes its CheckResult."""
    import torch

    start = time.perf_counter()
    result = CheckResult(**item.describe(), outcome="passed")
    # Whether unbatched input is supported is asked of the module only where a check runs it.
    missing = case_missing_features(impl, item.kind, item.case, item.check.dtype, device,
                                    item.check.backward, item.check.features,
                                    probe_unbatched=item.check.category not in ("construction", "init"))
    if missing:
        result.outcome = "not_supported"
        result.message = "; ".join(f"needs {feature}: {reason}" for feature, reason in missing.items())
        result.numbers = {"features": missing}
        return result
    # Seeded per item, so a result does not depend on which items ran before it.
    torch.manual_seed(zlib.crc32(f"{seed}/{item.kind}/{item.id}".encode()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's "dropout with one layer" warning
            result.numbers = item.check.function(Subject(impl, item.kind, device, seed), item.case)
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


def setup(case) -> dict:
    """What a failed result records of its case, so that it can be read on its own."""
    if not isinstance(case, Case):
        return {"case": case.name}
    shapes = io_shapes(case.config, case.batch, case.steps)
    given = ("input", *(state_names(case.config) if case.h0 else ()))
    described = {"config": case.config.describe(), "batch": case.batch,
                 "steps": None if case.config.is_cell else case.steps,
                 "inputs": {name: list(shapes[name]) for name in given}}
    if isinstance(case, PackedCase):  # packed with pack_padded_sequence from these
        described.update(lengths=list(case.lengths), enforce_sorted=case.enforce_sorted)
    return described


# (constructor, kind, device, probe) -> the features found unsupported by trying them (see
# `probe` and `probe_packed`).
_PROBED: dict[tuple, dict[str, str]] = {}


def unsupported(impl: Implementation, kind: str, device: str,
                probe_unbatched: bool = False, probe_packed: bool = False) -> dict[str, str]:
    """Every feature `kind` of `impl` lacks, with the reason: declared, read off its signatures,
    or, when `probe_unbatched` / `probe_packed`, found by `probe` / `probe_packed` (once per
    process)."""
    key = (impl.kinds.get(kind), kind, device)
    found = {}
    for wanted, function in ((probe_unbatched, probe), (probe_packed, probe_packed_input)):
        if wanted and key + (function.__name__,) not in _PROBED:
            _PROBED[key + (function.__name__,)] = function(Subject(impl, kind, device))
    for probed in ("probe", "probe_packed_input"):
        found.update(_PROBED.get(key + (probed,), {}))
    return {**found, **impl.unsupported_reasons(kind)}


def probe(subject: Subject) -> dict[str, str]:
    """Features a module refuses loudly: unbatched input (the one part of torch.nn's contract no
    constructor argument announces) is not supported when forward raises on it while the same
    module runs batched input, asked the same way (the state omitted, or zeros where omitting
    it fails). A module that returns something for unbatched input is judged on it like any
    other."""
    import torch

    if "unbatched" in subject.impl.unsupported_reasons(subject.kind):
        return {}
    cfg = probe_config(subject.kind)
    batched, unbatched = (torch.zeros(io_shapes(cfg, batch, 4)["input"]) for batch in (2, None))
    error = _refused(subject, cfg, batched, unbatched, unbatched)
    if error is None:
        return {}
    return {"unbatched": f"forward raised {one_line(error)} on unbatched input "
                         f"{tuple(unbatched.shape)}"}


def probe_packed_input(subject: Subject) -> dict[str, str]:
    """Variable-length input is not supported when forward raises on a PackedSequence while the
    same module runs the same sequences as a plain batch, asked the same way (see `probe`). A
    module that returns something for it is judged on it like any other."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence

    if subject.kind not in TORCH_KINDS or subject.kind.endswith("_cell"):
        return {}
    if "packed" in subject.impl.unsupported_reasons(subject.kind):
        return {}
    cfg = probe_config(subject.kind)
    x = torch.zeros(io_shapes(cfg, 2, 4)["input"])
    packed = pack_padded_sequence(x, torch.tensor([4, 2]), enforce_sorted=False)
    error = _refused(subject, cfg, x, packed, x)
    return {} if error is None else {"packed": f"forward raised {one_line(error)} on a PackedSequence"}


def _refused(subject: Subject, cfg, plain, other, other_state_like) -> Exception | None:
    """What forward raised on `other` where a fresh module of `cfg` ran `plain` asked the same
    way: with the state omitted, or else with zeros (shaped for `plain`, and for
    `other_state_like` on the second call). None when it ran both, or ran neither (or could not
    be built): the checks then say how."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = subject.construct(cfg)
        except Exception:
            return None
        for state in (lambda x: None, lambda x: zero_state(cfg, x)):
            try:
                _forward(module, plain, state(plain))
            except Exception:
                continue
            try:
                _forward(module, other, state(other_state_like))
            except Exception as exc:
                return exc
            return None
    return None


def _forward(module, x, hx):
    return module(x) if hx is None else module(x, hx)


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


def count_outcomes(results: list[CheckResult]) -> dict[str, int]:
    """Counts per outcome, every outcome present."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for result in results:
        counts[result.outcome] += 1
    return counts


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

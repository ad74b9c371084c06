"""Speed only for what conforms: one cheap forward comparison before an implementation is timed.

Before a workload is timed, every implementation runs one forward pass on the workload's own
configuration at a small batch and length (at most PRECHECK_BATCH and PRECHECK_STEPS), in the
workload's dtype (or the one dtype the kind's checks run in), compared with the float64
reference by the conformance suite's own forward check, with the kind's suite record, so it
applies exactly the suite's tolerance policy and diagnoses. It runs in the grad mode the workload times first (no_grad when
the workload times `forward`), so compiled implementations build the graph the timing reuses.

It runs without an initial state, as the timed calls do. The verdict is `conforms`: True, False (the numbers are wrong: the implementation is still
timed, but its results never count as a speed-up), or None (not checked), with a one-line
`note` saying why not, or why not checked. A workload that wraps the module (an embedding, a
classifier head) is checked on the recurrent module alone.
"""
from __future__ import annotations

import contextlib
import warnings
import zlib
from dataclasses import dataclass

import torch

from rnnbench.benchmarks.workloads import Workload
from rnnbench.impls.base import Implementation
from rnnbench.errors import one_line

PRECHECK_BATCH = 3
# 20 steps: a chunk of 16 and one of 4 in compile's chunking, so every compiled path is run.
PRECHECK_STEPS = 20


@dataclass(frozen=True)
class Conformance:
    """The pre-check's verdict on one implementation for one workload."""

    conforms: bool | None
    note: str = ""


def forward_conformance(impl: Implementation, workload: Workload, device: str = "cpu",
                        seed: int = 0) -> Conformance:
    """Compare one forward pass of `impl` on `workload`'s configuration with the reference."""
    from rnnbench.suites.cases import Case
    from rnnbench.suites.catalogue import suite_kind
    from rnnbench.suites.check_numerics import check_forward
    from rnnbench.suites.results import NOT_RUN, Finding, NotSupported
    from rnnbench.suites.subject import Subject

    cfg = workload.config
    suite = suite_kind(workload.kind)
    dtype = suite.dtypes[0] if len(suite.dtypes) == 1 else workload.dtype
    # No initial state, as the timed calls pass none: the same code path is checked (and
    # compiled implementations build the graphs the timing then reuses).
    case = Case(f"{workload.name}-precheck", cfg, min(workload.batch, PRECHECK_BATCH),
                min(workload.steps, PRECHECK_STEPS), h0=False)
    missing = impl.missing_features(cfg, dtype=dtype, device=torch.device(device).type)
    if missing:
        return Conformance(None, f"not checked: needs {', '.join(missing)}, which "
                                 f"{impl.name} declares unsupported")
    torch.manual_seed(zlib.crc32(f"{seed}/{workload.name}".encode()))
    grad_mode = torch.no_grad() if "forward" in workload.metrics else contextlib.nullcontext()
    try:
        with grad_mode, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # One call: a second (the suite's check for state kept between calls) is no
            # part of what the timing needs.
            check_forward(Subject(impl, workload.kind, device, seed, suite), case, dtype,
                          again=False)
    except Finding as finding:
        if any(finding.numbers.get(flag) is False for flag in NOT_RUN):
            # The conformance suite's remedy is its --param-map option; bench and run take the
            # map from the Implementation.
            return Conformance(False, "its parameters could not be matched to the spec's, so its "
                               "numbers were not compared and it gets no speed-up: "
                               + finding.message.replace("with --param-map KEY=NAME,...",
                                                         "with an Implementation's param_map"))
        return Conformance(False, finding.message + _diagnosis(finding.diagnosis))
    except NotSupported as exc:
        return Conformance(None, f"not checked: {exc}")
    except Exception as exc:  # the check itself could not run: say so, never guess a verdict
        return Conformance(None, f"not checked: the check stopped: {one_line(exc)}")
    return Conformance(True)


def _diagnosis(diagnosis: str | None) -> str:
    if not diagnosis:
        return ""
    from rnnbench.findings import DIAGNOSES

    return f" ({DIAGNOSES.get(diagnosis, diagnosis)})"
